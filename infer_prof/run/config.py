"""What a run is given (:class:`RunConfig`) and the checks made before anything starts."""

from __future__ import annotations

from dataclasses import dataclass, field

from infer_prof.core.messages import OneLineError


class ConfigError(OneLineError):
    """Bad input found before anything started; the message is one line naming the fix."""


@dataclass
class RunConfig:
    """Everything a run is given. Field names are the CLI option names (underscored)."""

    model: str = "tiny-llama"
    # the server the run starts (a name in infer_prof.servers.registry); --endpoint: none
    server: str = "vllm"
    endpoint: str | None = None
    served_model_name: str | None = None
    api_key: str | None = None
    # "completions" (/v1/completions) or "chat" (/v1/chat/completions, text prompts only);
    # None: the workload's ``api``, else completions (see resolve_api)
    api: str | None = None
    ca_bundle: str | None = None  # https: PEM file of the CA(s) to trust instead of the system's
    insecure: bool = False  # https: no certificate verification (warned, recorded)
    workload: str | None = None
    suite: str | None = None  # a suite file (workloads/nightly.toml): many workloads and points
    scale: str | None = None  # one of the suite's [scales.*], e.g. "tiny" for CPU CI
    # None = the workload's value (or the built-in default: 16 streams, 200 requests after a
    # steady warm-up under the load itself, 128 tokens in and out)
    concurrency: list[int] | None = None
    rates: list[float] | None = None
    burstiness: float | None = None
    max_concurrency: int | None = None
    num_requests: int | None = None
    duration_s: float | None = None
    warmup_requests: int | None = None
    warmup: str | None = None  # "steady" | "requests" | "<N>s" (None: the workload's)
    warmup_stagger: bool = True  # a warm-up under the load spreads the streams' phases first
    input_len: int | None = None
    output_len: int | None = None
    slo: str | None = None
    find_max: bool = False
    min_requests: int | None = None
    min_duration_s: float | None = None
    timeout_s: float = 300.0
    seed: int | None = None
    dtype: str | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int | None = None
    enforce_eager: bool = False
    load_format: str | None = None
    require_weights: bool = False  # fail instead of profiling with random weights
    yes: bool = False  # go ahead even when the run is estimated above an hour
    quantization: str = "auto"
    kv_cache_memory_bytes: int | None = None
    kv_cache_dtype: str | None = None
    memory_budget_bytes: int | None = None
    gpu: str | None = None
    gpus: int | None = None
    price_per_hour: float | None = None
    provider: str | None = None
    prices_file: str | None = None
    spot: bool = False
    instance: str | None = None
    prices_from: str | None = None
    purchase_usd: float | None = None
    amortize_years: float = 3.0
    usd_per_kwh: float = 0.12
    history: bool = True
    history_db: str | None = None
    engine_args: list[str] = field(default_factory=list)
    server_timeout_s: float = 900.0
    output: str | None = None
    overwrite: bool = False  # --output may replace an existing file
    results_dir: str = "results"
    labels: dict[str, str] = field(default_factory=dict)
    # put in the run id and file names before the load label (several endpoints in one
    # command: the endpoint's label, see infer_prof.run.multi_endpoint)
    run_tag: str | None = None
    progress: bool = True
    telemetry_interval_s: float = 0.5
    metrics_interval_s: float = 0.5
    # load-generator processes: a positive integer, or "auto" (by the point's expected token
    # events/s; see infer_prof.run.load_points.client_processes)
    client_processes: str = "auto"
    # prompts: "token-ids" | "text" (None: token IDs, or the dataset's text with --dataset)
    prompt: str | None = None
    dataset: str | None = None  # a dataset file (infer_prof.loadgen.datasets); None: the workload's
    dataset_sample: int | None = None  # take this many entries of the dataset at random (seeded)
    trace: str | None = None  # replay this trace's arrivals and lengths (infer_prof.loadgen.traces)
    time_scale: float = 1.0  # trace gaps times this (0.5: twice as fast)
    trace_window: str | None = None  # "START:END" seconds of the trace to replay
    turns: int | None = None  # multi-turn sessions of this many turns (infer_prof.loadgen.sessions)
    think_time_s: float = 0.0  # seconds between a turn's answer and the next turn
    # --frontier: double the load until throughput plateaus (infer_prof.run.frontier_run)
    frontier: bool = False
    target_interactivity: float | None = None  # tokens/s/user to read the frontier at
    engine_sweep: str | None = None  # a TOML file or "setting=v1,v2": one frontier per config


def validate(cfg: RunConfig) -> None:
    """Reject bad option values before anything starts (raises :class:`ConfigError`)."""
    for name in ("input_len", "output_len", "num_requests", "max_concurrency", "min_requests"):
        value = getattr(cfg, name)
        if value is not None and value < 1:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} must be a positive integer, got {value}")
    for c in cfg.concurrency or []:
        if c < 1:
            raise ConfigError(f"--concurrency must be positive integers, got {c}")
    for r in cfg.rates or []:
        if not r > 0:
            raise ConfigError(f"--rate must be positive requests/s (or inf), got {r}")
    if cfg.concurrency and cfg.rates:
        raise ConfigError("give --concurrency (closed loop) or --rate (open loop), not both")
    if cfg.duration_s is not None and cfg.duration_s <= 0:
        raise ConfigError(f"--duration must be positive seconds, got {cfg.duration_s}")
    if cfg.warmup_requests is not None and cfg.warmup_requests < 0:
        raise ConfigError(f"--warmup-requests must be 0 or more, got {cfg.warmup_requests}")
    from infer_prof.servers.registry import check_server_name  # not at import: --help

    bad_server = check_server_name(cfg.server)
    if bad_server:
        raise ConfigError(bad_server)
    if cfg.endpoint is not None:
        try:
            from infer_prof.loadgen.endpoint import Endpoint  # not at import: keeps --help fast

            Endpoint.from_url(cfg.endpoint, ca_bundle=cfg.ca_bundle, insecure=cfg.insecure)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if cfg.timeout_s <= 0:
        raise ConfigError(f"--timeout must be positive seconds, got {cfg.timeout_s}")
    if cfg.prices_file is not None:  # read now: a bad file is known before any load is sent
        from infer_prof.catalog.prices import PriceFileError, load_prices

        try:
            load_prices(cfg.prices_file)
        except PriceFileError as exc:
            raise ConfigError(
                f"{exc}; fix the file, or leave out --prices to use the shipped catalog"
            ) from None
    if cfg.gpu_memory_utilization is not None and not 0 < cfg.gpu_memory_utilization <= 1:
        raise ConfigError(
            f"--gpu-memory-utilization must be within (0, 1], got {cfg.gpu_memory_utilization}"
        )
    check_client_processes(cfg.client_processes)
    if cfg.prompt is not None and cfg.prompt not in ("text", "token-ids"):
        raise ConfigError(f"--prompt must be text or token-ids, got {cfg.prompt!r}")
    if cfg.api is not None and cfg.api not in ("completions", "chat"):
        raise ConfigError(f"--api must be completions or chat, got {cfg.api!r}")
    check_api(cfg)
    if cfg.dataset_sample is not None and cfg.dataset_sample < 1:
        raise ConfigError(f"--dataset-sample must be a positive integer, got {cfg.dataset_sample}")
    if cfg.turns is not None and cfg.turns < 1:
        raise ConfigError(f"--turns must be a positive integer, got {cfg.turns}")
    if not cfg.think_time_s >= 0:
        raise ConfigError(f"--think-time must be 0 or more seconds, got {cfg.think_time_s}")
    if cfg.find_max and not cfg.slo and not cfg.workload:
        raise ConfigError("--find-max needs SLOs to meet: give --slo ttft_p99=...,tpot_p99=...")


def check_api(cfg: RunConfig) -> None:
    """The chat API takes text: refuse ``--prompt token-ids`` with it (raises ConfigError)."""
    if cfg.api == "chat" and cfg.prompt == "token-ids":
        raise ConfigError("--api chat sends text messages, not token IDs; drop --prompt "
                          "token-ids (chat uses --prompt text)")


def resolve_api(cfg: RunConfig, workload_apis: list[str | None]) -> str:
    """The API a run speaks: ``--api``, else its workloads' ``api`` (all the same), else
    ``completions``. Raises ConfigError when a suite's workloads ask for different ones."""
    if cfg.api is not None:
        return cfg.api
    asked = {a for a in workload_apis if a is not None}
    if len(asked) > 1:
        raise ConfigError(f"the workloads ask for different APIs ({', '.join(sorted(asked))}); "
                          "give --api to run them all with one")
    return asked.pop() if asked else "completions"


def check_client_processes(value: str | int) -> None:
    """``--client-processes`` must be ``auto`` or a positive integer (raises ConfigError)."""
    text = str(value).strip().lower()
    if text == "auto":
        return
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(
            f"--client-processes must be a positive integer or auto, got {str(value)!r}"
        )
