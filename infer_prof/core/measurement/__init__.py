"""What a run measured and how it is summarized: per-request metrics, the metric table, statistics,
the stream's shape, validity, warm-up, precision while running, client accuracy, server counters and
sampled series. Pure."""
