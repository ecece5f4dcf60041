"""Servers the profiler drives: a vLLM server it starts itself, or an endpoint already running."""
