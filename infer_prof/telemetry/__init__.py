"""Telemetry gathered beside the load: GPU counters from NVML, the server's Prometheus /metrics."""

from infer_prof.core.measurement.nvml import decode_clock_event_reasons
from infer_prof.telemetry.nvml import NvmlSampler
from infer_prof.telemetry.prometheus import MetricsScraper, parse_prometheus_text

__all__ = ["MetricsScraper", "NvmlSampler", "decode_clock_event_reasons", "parse_prometheus_text"]
