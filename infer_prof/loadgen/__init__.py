"""Load generation: a streaming OpenAI client timed by the kernel, and the drivers that use it."""
