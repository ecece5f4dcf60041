"""infer-prof: an LLM inference throughput profiler for vLLM and OpenAI-compatible servers."""

__version__ = "0.1.0"
