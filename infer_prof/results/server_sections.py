"""The result's sections about the server that answered and what it and its GPUs reported
(part of :class:`infer_prof.results.document.Result`): ``telemetry`` (NVML and the server's
/metrics, ``run.load``) and ``server``, written by ``run.startup`` (what was
launched or attached to: :meth:`infer_prof.servers.base.Server.describe`, the TLS handshake of
an https endpoint, the CPU split) and ``run.record.server_section`` (after the server died:
:meth:`~infer_prof.servers.base.Server.diagnosis`).

Every field has a default: an attached endpoint records no command, a launched server no model
list, and an older result lacks what was added later (None: not recorded).
"""

from __future__ import annotations

from infer_prof.results.document_base import Section


class ServerTls(Section):
    """What one TLS handshake with an https endpoint negotiated before any load
    (``loadgen.tls.preflight``): protocol version, cipher, ALPN protocol, whether the
    certificate was verified, and the settings it was checked with."""

    version: str | None = None
    cipher: str | None = None
    alpn: str | None = None
    verified: bool | None = None
    ca_bundle: str | None = None
    insecure: bool | None = None


class StartupPhase(Section):
    """One phase of the server's start-up (``servers.vllm_startup``): seconds from the launch to
    its start, and its duration (None when the start-up did not finish)."""

    name: str | None = None
    start_s: float | None = None
    duration_s: float | None = None


class ServerStartup(Section):
    """The server's start-up: total seconds to healthy, its phases, and how they were timed."""

    total_s: float | None = None
    phases: list[StartupPhase] = []
    source: str | None = None


class CpuSplit(Section):
    """The CPUs the engine and the client were pinned to (``servers.cpu_split.CpuSplit``)."""

    engine_cpus: list[int] = []
    client_cpus: list[int] = []


class Server(Section):
    """The server that answered: its ``kind`` (``vllm``, ``synthetic``, ``endpoint`` or one
    registered from outside), URL and the model name asked for; for an attached endpoint the
    models it listed and its TLS handshake; for a launched one its command, log file, seconds to
    healthy and start-up phases, the engine's name and the CPU split (or why none), the dtype
    the engine loaded and how many layers its online quantization quantized (both read in
    vLLM's log; None when it does not say: ``quantized_layers`` 0 means the weights were served
    unquantized whatever ``--quantization`` asked, and the result's ``precision`` says so);
    after it died, its exit code, the end of its log and the root cause read there."""

    kind: str | None = None
    url: str | None = None
    served_model_name: str | None = None
    models_listed: list[str] | None = None
    tls: ServerTls | None = None
    command: list[str] | None = None
    log_file: str | None = None
    startup_s: float | None = None
    startup: ServerStartup | None = None
    engine: str | None = None
    cpu_split: CpuSplit | None = None
    cpu_split_reason: str | None = None
    loaded_dtype: str | None = None
    quantized_layers: int | None = None
    exit_code: int | None = None
    log_tail: str | None = None
    root_cause: str | None = None


class TelemetryWindow(Section):
    """The measured window on the telemetry's clock: seconds from its start (``t0_ns``), and
    whether both edges were marked."""

    start_s: float | None = None
    end_s: float | None = None
    marked: bool | None = None


class GpuSummary(Section):
    """One GPU over the measured window (``core.measurement.nvml.summarize_gpu``): samples and
    the time they span (s), time-weighted means and maxima, energy from the counter and
    integrated from power (J), the clock-event reasons seen, power-capped and throttled (with
    the share of samples), None where not read."""

    samples: int | None = None
    window_s: float | None = None
    util_pct_mean: float | None = None
    util_pct_max: float | None = None
    mem_util_pct_mean: float | None = None
    mem_used_bytes_max: int | None = None
    power_w_mean: float | None = None
    power_w_max: float | None = None
    energy_j: float | None = None
    energy_j_integrated: float | None = None
    sm_clock_mhz_mean: float | None = None
    mem_clock_mhz_mean: float | None = None
    temp_c_max: float | None = None
    clock_event_reasons: list[str] | None = None
    power_capped: bool | None = None
    power_cap_fraction: float | None = None
    throttle_reasons: list[str] | None = None
    throttled: bool | None = None
    throttled_fraction: float | None = None


class GpuTotal(Section):
    """All GPUs together (``core.measurement.nvml.summarize_total``): sums of energy (J) and
    mean power (W), None unless every GPU has the figure; any GPU power-capped or throttled."""

    gpus: int | None = None
    energy_j: float | None = None
    energy_j_integrated: float | None = None
    power_w_mean: float | None = None
    power_capped: bool | None = None
    throttled: bool | None = None
    throttle_reasons: list[str] | None = None


#: One sampled series: numbers (or lists of clock-event reason names), None where not read.
SampleSeries = list[int | float | list[str] | None]


class GpuSamples(Section):
    """One GPU's NVML samples (``telemetry.nvml.NvmlSampler``): what it is, the fields it does
    not support and the reads that failed, its series by name (``t_s`` seconds from the start,
    ``util_pct``, ``power_w``, ``mem_used_bytes``, ``energy_mj``, clocks, temperature, the
    clock-event mask and reasons: one value per sample) and its summary."""

    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    memory_total_bytes: int | None = None
    power_limit_w: float | None = None
    unsupported: list[str] = []
    read_errors: dict[str, int] = {}
    last_error: str | None = None
    series: dict[str, SampleSeries] = {}
    summary: GpuSummary | None = None


class GpuTelemetry(Section):
    """NVML over the point (``telemetry.nvml.NvmlSampler.stop``): ``available`` False with a
    ``reason`` without NVML; the sampling interval (s), driver version, clock origin, the
    measured window, each GPU and all of them together."""

    available: bool | None = None
    reason: str | None = None
    interval_s: float | None = None
    driver_version: str | None = None
    t0_ns: int | None = None
    window: TelemetryWindow | None = None
    gpus: list[GpuSamples] = []
    total: GpuTotal | None = None


class ServerMetricsSummary(Section):
    """The server's /metrics over the measured window (``telemetry.prometheus.
    summarize_metrics``): gauges' maxima and time-weighted means (KV cache use as a fraction,
    requests running and waiting, running's mean while busy), counters' increases (preemptions,
    prefix-cache hits and queries in tokens, bytes read per GPU, speculative decoding's drafts,
    draft tokens and accepted tokens, in all and per draft position) and the hit rate, and with
    LoRA the adapters running (max, time-weighted mean) and waiting (max) at once; a figure the
    server does not expose or count is None (with its ``<key>_reason``, where it has one)."""

    scrapes: int | None = None
    window_s: float | None = None
    kv_cache_usage_max: float | None = None
    kv_cache_usage_max_reason: str | None = None
    kv_cache_usage_mean: float | None = None
    kv_cache_usage_mean_reason: str | None = None
    running_max: float | None = None
    running_mean: float | None = None
    running_busy_mean: float | None = None
    waiting_max: float | None = None
    waiting_mean: float | None = None
    preemptions: float | None = None
    preemptions_reason: str | None = None
    prefix_cache_hits: float | None = None
    prefix_cache_hits_reason: str | None = None
    prefix_cache_queries: float | None = None
    prefix_cache_queries_reason: str | None = None
    prefix_cache_hit_rate: float | None = None
    prefix_cache_hit_rate_reason: str | None = None
    estimated_read_bytes_per_gpu: float | None = None
    estimated_read_bytes_per_gpu_reason: str | None = None
    lora_adapters_running_max: float | None = None
    lora_adapters_running_mean: float | None = None
    lora_adapters_waiting_max: float | None = None
    spec_decode_drafts: float | None = None
    spec_decode_draft_tokens: float | None = None
    spec_decode_accepted_tokens: float | None = None
    spec_decode_accepted_per_position: list[float | None] | None = None


class ServerMetrics(Section):
    """The server's /metrics scraped over the point (``telemetry.prometheus.MetricsScraper.
    stop``): ``available`` when a scrape succeeded (else ``reason``), the URL, interval (s),
    clock origin, scrapes made and failed, the measured window, the series by name (``t_s``
    seconds from the start; gauges; counters as read), the server kind its metric names show,
    and the window's summary."""

    available: bool | None = None
    reason: str | None = None
    url: str | None = None
    interval_s: float | None = None
    t0_ns: int | None = None
    scrapes_ok: int | None = None
    scrape_errors: int | None = None
    last_error: str | None = None
    window: TelemetryWindow | None = None
    series: dict[str, list[float | None]] = {}
    server_kind: str | None = None
    summary: ServerMetricsSummary | None = None


class Telemetry(Section):
    """What the GPUs (NVML) and the server (/metrics) reported over the point."""

    gpu: GpuTelemetry | None = None
    server_metrics: ServerMetrics | None = None
