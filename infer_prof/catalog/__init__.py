"""What is profiled and what it costs: models, GPUs, prices, workloads, and their shipped data."""
