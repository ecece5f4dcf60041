"""Orchestration of a run: validate -> plan -> start (or attach to) the server -> for each load
point: warm up -> load with telemetry -> summary -> result file. Every exit path stops the
server it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import math
import random
import signal
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from infer_prof.core.distributions import Fixed
from infer_prof.core.gpuspec import GpuSpec
from infer_prof.core.metrics import RequestRecord, summarize_run
from infer_prof.core.planner import Plan, PlanError, normalize_precision, plan
from infer_prof.core.slo import Slo, SloError, evaluate_slos, parse_slos, slos_from_mapping
from infer_prof.core.stats import summarize
from infer_prof.core.sweep import find_knee, find_max_float, find_max_int
from infer_prof.core.validity import ValidityRules, check_validity
from infer_prof.core.workload import (
    Arrival,
    Workload,
    WorkloadError,
    sample_requests,
    send_offsets,
)
from infer_prof.economics import CostOptions, cost_block, energy_block, roofline_block
from infer_prof.environment import fingerprint, has_nvidia_gpu, installed_vllm_version
from infer_prof.gpus import catalog as gpu_catalog
from infer_prof.gpus import detect_gpus, find_gpu
from infer_prof.loadgen.client import Endpoint, build_completion_request
from infer_prof.loadgen.closed_loop import (
    ClosedLoopPlan,
    LiveCounters,
    RequestSpec,
    run_closed_loop,
)
from infer_prof.loadgen.open_loop import OpenLoopHealth, OpenLoopPlan, run_open_loop
from infer_prof.loadgen.prompts import TokenPool, make_prompt
from infer_prof.models import ModelError, ResolvedModel, alias_config_dir, resolve_model
from infer_prof.report.progress import ProgressLine
from infer_prof.results_io import record_result
from infer_prof.schema import RESULT_KIND, SCHEMA_VERSION
from infer_prof.servers.http_get import http_get, served_model_names
from infer_prof.servers.vllm_server import ServerStartError, VllmServer, log_tail
from infer_prof.store import make_run_id, result_paths, safe_name, write_requests, write_result
from infer_prof.telemetry.nvml import NvmlSampler
from infer_prof.telemetry.prometheus import MetricsScraper
from infer_prof.workloads import WorkloadNotFoundError, expand_suite, load_workload

CPU_DEFAULT_KV_CACHE_BYTES = 512 * 1024 * 1024
HISTORY_DB = "history.sqlite"


class ConfigError(ValueError):
    """Bad input found before anything started; the message is one line naming the fix."""


@dataclass
class RunConfig:
    """Everything a run is given. Field names are the CLI option names (underscored)."""

    model: str = "tiny-llama"
    endpoint: str | None = None
    served_model_name: str | None = None
    api_key: str | None = None
    workload: str | None = None
    suite: str | None = None  # a suite file (workloads/nightly.toml): many workloads and points
    scale: str | None = None  # one of the suite's [scales.*], e.g. "tiny" for CPU CI
    # None = the workload's value (or the built-in default: 16 streams, 200 requests after 8
    # warm-up, 128 tokens in and out)
    concurrency: list[int] | None = None
    rates: list[float] | None = None
    burstiness: float | None = None
    max_concurrency: int | None = None
    num_requests: int | None = None
    duration_s: float | None = None
    warmup_requests: int | None = None
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
    quantization: str = "auto"
    kv_cache_memory_bytes: int | None = None
    memory_budget_bytes: int | None = None
    gpu: str | None = None
    gpus: int | None = None
    price_per_hour: float | None = None
    provider: str | None = None
    prices_file: str | None = None
    spot: bool = False
    purchase_usd: float | None = None
    amortize_years: float = 3.0
    usd_per_kwh: float = 0.12
    history: bool = True
    history_db: str | None = None
    engine_args: list[str] = field(default_factory=list)
    server_timeout_s: float = 900.0
    output: str | None = None
    results_dir: str = "results"
    labels: dict[str, str] = field(default_factory=dict)
    progress: bool = True
    telemetry_interval_s: float = 0.5
    metrics_interval_s: float = 0.5


@dataclass
class RunOutcome:
    """What :func:`execute` returns: the result dict and where it was written."""

    result: dict[str, Any]
    result_path: Path
    requests_path: Path


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


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
    if cfg.endpoint is not None:
        try:
            Endpoint.from_url(cfg.endpoint)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if cfg.timeout_s <= 0:
        raise ConfigError(f"--timeout must be positive seconds, got {cfg.timeout_s}")
    if cfg.gpu_memory_utilization is not None and not 0 < cfg.gpu_memory_utilization <= 1:
        raise ConfigError(
            f"--gpu-memory-utilization must be within (0, 1], got {cfg.gpu_memory_utilization}"
        )
    if cfg.find_max and not cfg.slo and not cfg.workload:
        raise ConfigError("--find-max needs SLOs to meet: give --slo ttft_p99=...,tpot_p99=...")


def _shape_overrides(cfg: RunConfig) -> dict[str, Any]:
    """The command-line values that replace a workload's fields (None keeps the field)."""
    return {
        "input_len": cfg.input_len,
        "output_len": cfg.output_len,
        "num_requests": cfg.num_requests,
        "duration_s": cfg.duration_s,
        "warmup_requests": cfg.warmup_requests,
        "seed": cfg.seed,
        "min_requests": cfg.min_requests,
        "min_duration_s": cfg.min_duration_s,
    }


def base_workload(cfg: RunConfig) -> Workload:
    """The workload file (``--workload``) or the built-in default, with the command line's
    values replacing its fields."""
    if cfg.workload:
        try:
            wl = load_workload(cfg.workload)
        except (WorkloadError, WorkloadNotFoundError) as exc:
            raise ConfigError(str(exc)) from None
    else:
        wl = Workload(
            name="custom",
            input_len=Fixed(128),
            output_len=Fixed(128),
            num_requests=200,
            warmup_requests=8,
            arrival=Arrival.closed(16),
            seed=0,
            source="command line",
        )
    try:
        return wl.with_overrides(**_shape_overrides(cfg))
    except WorkloadError as exc:
        raise ConfigError(str(exc)) from None


def load_points(cfg: RunConfig, wl: Workload) -> list[Workload]:
    """One workload per load point: ``--concurrency a,b,c`` (closed loop), ``--rate x,y``
    (open loop), or the workload's own arrival."""
    extra = {"burstiness": cfg.burstiness, "max_concurrency": cfg.max_concurrency}
    try:
        if cfg.rates:
            return [wl.with_overrides(rate=r, **extra) for r in cfg.rates]
        if cfg.concurrency:
            return [wl.with_overrides(concurrency=c) for c in cfg.concurrency]
        return [wl.with_overrides(**extra)]
    except WorkloadError as exc:
        raise ConfigError(str(exc)) from None


def suite_points(cfg: RunConfig) -> list[Workload]:
    """Every load point of a suite (``--suite``, scaled by ``--scale``), with the command
    line's request-count, seed and validity overrides applied to each."""
    if cfg.workload or cfg.concurrency or cfg.rates:
        raise ConfigError(
            "--suite brings its own workloads and load points; drop --workload, "
            "--concurrency and --rate"
        )
    try:
        runs = expand_suite(cfg.suite or "", cfg.scale)
        overrides = _shape_overrides(cfg)
        return [p.with_overrides(**overrides) for r in runs for p in r.points()]
    except (WorkloadError, WorkloadNotFoundError) as exc:
        raise ConfigError(str(exc)) from None


def check_context(points: list[Workload], cfg: RunConfig, model: ResolvedModel) -> int:
    """The longest sequence the points can ask for (input + output, tokens); raises
    ConfigError when it exceeds the model's context."""
    longest = max(w.input_len.support()[1] + w.output_len.support()[1] for w in points)
    context = cfg.max_model_len or (model.spec.max_position_embeddings if model.spec else None)
    if context is not None and longest > context:
        w = points[0]
        raise ConfigError(
            f"input ({w.input_len.support()[1]}) + output ({w.output_len.support()[1]}) = "
            f"{longest} tokens exceeds the model's context of {context}; shorten "
            "--input-len/--output-len or raise --max-model-len"
        )
    return longest


def _point_concurrency(w: Workload) -> int:
    """Streams a point can have in flight, for planning (open loop without a cap: 64)."""
    a = w.arrival
    return (a.concurrency or 1) if a.mode == "closed" else (a.max_concurrency or 64)


def _point_label(w: Workload) -> str:
    a = w.arrival
    if a.mode == "closed":
        return f"c{a.concurrency}"
    rate = "inf" if a.rate is None or a.rate == float("inf") else f"{a.rate:g}"
    return f"r{rate}"


_FLAG_NAMES = {
    "dtype": "--dtype",
    "tensor_parallel_size": "--tensor-parallel-size",
    "quantization": "--quantization",
    "load_format": "--load-format",
    "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "max_model_len": "--max-model-len",
}


def engine_arguments(
    cfg: RunConfig,
    model: ResolvedModel,
    on_gpu: bool,
    plan_args: dict[str, Any] | None = None,
    max_seq_len: int = 2048,
    kv_tokens: int = 0,
) -> list[str]:
    """The vLLM command-line arguments for this run (beyond model, host and port).

    Start from the plan's engine arguments (``--quantization auto``), then let every option the
    user gave explicitly win, then append ``--engine-arg`` values verbatim.
    """
    merged: dict[str, Any] = {k: v for k, v in (plan_args or {}).items() if k in _FLAG_NAMES}
    if merged.get("dtype") == "auto":
        del merged["dtype"]
    if merged.get("tensor_parallel_size") == 1:
        del merged["tensor_parallel_size"]
    explicit = {
        "dtype": cfg.dtype,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "gpu_memory_utilization": cfg.gpu_memory_utilization,
        "max_model_len": cfg.max_model_len,
        "load_format": cfg.load_format,
        "kv_cache_memory_bytes": cfg.kv_cache_memory_bytes,
    }
    if cfg.quantization not in ("auto", "", None) and not plan_args:
        explicit["quantization"] = cfg.quantization  # a name the planner does not know
    merged.update({k: v for k, v in explicit.items() if v is not None})
    if "max_model_len" not in merged and model.spec is not None:
        merged["max_model_len"] = min(model.spec.max_position_embeddings, max(2048, max_seq_len))
    if "kv_cache_memory_bytes" not in merged and not on_gpu:
        # On CPU vLLM reserves a fraction of the node's memory unless told an explicit KV size;
        # size it for the load: concurrency x (input + output) tokens, with 50% headroom.
        need = 0
        if model.spec is not None:
            need = int(kv_tokens * model.spec.kv_cache_bytes_per_token(2.0) * 1.5)
        merged["kv_cache_memory_bytes"] = max(CPU_DEFAULT_KV_CACHE_BYTES, need)
    args: list[str] = []
    for key, flag in _FLAG_NAMES.items():
        if key in merged:
            args += [flag, str(merged[key])]
    if cfg.enforce_eager:
        args.append("--enforce-eager")
    if not model.has_tokenizer:
        args.append("--skip-tokenizer-init")
    return args + list(cfg.engine_args)


def resolve_gpu(cfg: RunConfig) -> tuple[GpuSpec | None, int, str]:
    """The GPU this run is costed and planned for: ``--gpu`` or the detected one.

    Returns (catalog entry or None, GPU count, how it was found). The count is ``--gpus``,
    else ``--tensor-parallel-size``, else the number of detected GPUs of the first kind.
    """
    if cfg.gpu:
        try:
            spec = find_gpu(cfg.gpu)
        except ValueError as exc:
            raise ConfigError(f"--gpu: {exc}") from None
        return spec, cfg.gpus or cfg.tensor_parallel_size or 1, "--gpu"
    found = detect_gpus()
    if not found:
        return None, cfg.gpus or cfg.tensor_parallel_size or 1, "none detected"
    first = found[0]
    same = sum(1 for d in found if d.nvml_name == first.nvml_name)
    count = cfg.gpus or cfg.tensor_parallel_size or same
    return first.spec, count, f"detected ({first.nvml_name})"


def make_plan(
    cfg: RunConfig,
    model: ResolvedModel,
    gpu: GpuSpec | None,
    gpus: int,
    concurrency: int,
    input_len: int,
    output_len: int,
) -> tuple[Plan | None, str | None]:
    """Plan precision and memory for a server this run starts (``--quantization auto`` or a
    forced precision). Returns (plan, why there is none). Raises ConfigError when the model
    cannot run at all, with the planner's numbers and what would fit."""
    if cfg.endpoint:
        return None, "--endpoint: the running server's own settings apply"
    if model.spec is None:
        return None, "model architecture unknown (hub id without a local config)"
    if gpu is None and cfg.memory_budget_bytes is None:
        return None, (
            "no GPU and no --memory-budget: vLLM-CPU runs at 16-bit with a KV cache "
            "sized for the load"
        )
    try:
        precision = normalize_precision(cfg.quantization or "auto")
    except PlanError:
        return None, f"--quantization {cfg.quantization!r} passed to vLLM verbatim, not planned"
    try:
        p = plan(
            model.spec,
            gpu,
            gpus=gpus,
            concurrency=concurrency,
            input_len=input_len,
            output_len=output_len,
            gpu_memory_utilization=cfg.gpu_memory_utilization or 0.9,
            quantization=precision,
            memory_budget_bytes=cfg.memory_budget_bytes,
            vllm_version=installed_vllm_version(),
            catalog=tuple(gpu_catalog().values()),
        )
    except PlanError as exc:
        raise ConfigError(f"plan: {exc}") from None
    if not p.fits:
        why = "; ".join(c.reason for c in p.rejections) or "no precision fits"
        fix = "; ".join(p.suggestions) or "use a larger GPU or more of them"
        raise ConfigError(f"{model.name} does not fit ({why}); would fit: {fix}")
    return p, None


def _engine_model_path(cfg: RunConfig, model: ResolvedModel) -> str:
    """What vLLM loads: for an alias with dummy weights, a folder holding just its config."""
    if model.source == "alias" and (cfg.load_format or "") == "dummy":
        return str(alias_config_dir(model.name))
    return model.path


def _token_pool(model: ResolvedModel, engine_path: str) -> TokenPool:
    if model.has_tokenizer:
        with contextlib.suppress(Exception):
            return TokenPool.from_tokenizer_dir(engine_path)
    vocab = model.spec.vocab_size if model.spec else 32000
    return TokenPool.from_vocab_size(vocab)


# A duration-bound point draws this many request shapes up front (enough for hours of load at
# the rates a single server reaches; drawing is cheap, prompts are built lazily).
_DURATION_DRAWS = 200_000


def build_specs(
    wl: Workload, pool: TokenPool
) -> tuple[list[RequestSpec], Iterator[RequestSpec], int | None]:
    """Warm-up specs, a lazy iterator of measured specs, and how many measured there are
    (None when bound by duration). Lengths come from the workload's seeded draws; prompts are
    token IDs of exactly the drawn length, with a group's shared prefix where asked."""
    n_measured = wl.num_requests
    total = wl.warmup_requests + (n_measured if n_measured is not None else _DURATION_DRAWS)
    shapes = sample_requests(wl, total)
    prefixes: dict[int, list[int]] = {}
    sp = wl.shared_prefix

    def prompt(i: int, length: int, group: int | None) -> list[int]:
        rng = random.Random(f"{wl.seed}/prompt/{i}")
        prefix: list[int] = []
        if group is not None and sp.length:
            if group not in prefixes:
                prefixes[group] = make_prompt(
                    pool, sp.length, random.Random(f"{wl.seed}/prefix/{group}")
                )
            prefix = prefixes[group]
        return make_prompt(pool, length, rng, prefix)

    warm = [
        RequestSpec(-1 - i, prompt(-1 - i, inp, grp), inp, out, warmup=True)
        for i, (inp, out, grp) in enumerate(shapes[: wl.warmup_requests])
    ]

    def measured() -> Iterator[RequestSpec]:
        for i, (inp, out, grp) in enumerate(shapes[wl.warmup_requests :]):
            yield RequestSpec(i, prompt(i, inp, grp), inp, out)

    return warm, measured(), n_measured


async def _lag_probe(samples: list[float], interval_s: float = 0.01) -> None:
    """Measure the event loop's own lag: how late a ``sleep(interval)`` wakes up (ms)."""
    while True:
        t0 = time.perf_counter()
        await asyncio.sleep(interval_s)
        samples.append(max(0.0, (time.perf_counter() - t0 - interval_s) * 1000.0))


@dataclass
class SweepOutcome:
    """Everything :func:`execute` produced: one outcome per load point, in run order, and the
    sweep summary (curve, knee, find-max) when there was more than one point."""

    points: list[RunOutcome]
    sweep: dict[str, Any] | None = None
    sweep_path: Path | None = None

    @property
    def complete(self) -> bool:
        return all(p.result["complete"] for p in self.points)


@dataclass
class _Session:
    """What the points of one execution share: the model, the server, the prompt pool."""

    cfg: RunConfig
    model: ResolvedModel
    engine_path: str
    endpoint: Endpoint
    served: str
    server: VllmServer | None
    server_info: dict[str, Any]
    pool: TokenPool
    gpu: GpuSpec | None
    gpu_count: int
    gpu_how: str
    plan: Plan | None
    plan_reason: str | None
    slos: list[Slo]
    stamp: str
    interrupted: bool = False


def execute(cfg: RunConfig) -> SweepOutcome:
    """Profile every load point of ``cfg`` on one server launch and write one result per point.

    Raises ConfigError on bad input (before anything starts) and ServerStartError when the
    server cannot start; every other event (server death, hung streams, Ctrl-C) is recorded in
    the point's result, marked incomplete, and ends the sweep.
    """
    validate(cfg)
    try:
        model = resolve_model(cfg.model)
    except ModelError as exc:
        raise ConfigError(str(exc)) from None
    if cfg.suite:
        points = suite_points(cfg)
        wl = points[0]
    else:
        wl = base_workload(cfg)
        points = load_points(cfg, wl)
    longest = check_context(points, cfg, model)
    try:
        slos = parse_slos(cfg.slo) if cfg.slo else slos_from_mapping(wl.slo)
        # (a suite's members keep their own SLOs: see _run_point)
    except SloError as exc:
        raise ConfigError(str(exc)) from None
    if cfg.find_max and not slos:
        raise ConfigError("--find-max needs SLOs to meet: give --slo ttft_p99=...,tpot_p99=...")
    gpu, gpu_count, gpu_how = resolve_gpu(cfg)
    plan_conc = max(_point_concurrency(w) for w in points)
    mean_in = math.ceil(max(w.input_len.mean() for w in points))
    mean_out = math.ceil(max(w.output_len.mean() for w in points))
    the_plan, no_plan_reason = make_plan(cfg, model, gpu, gpu_count, plan_conc, mean_in, mean_out)

    stamp = _now().strftime("%Y%m%d-%H%M%S")
    results_dir = Path(cfg.results_dir)
    on_gpu = has_nvidia_gpu()
    engine_path = _engine_model_path(cfg, model)
    server: VllmServer | None = None
    outcomes: list[RunOutcome] = []
    progress = ProgressLine(total=None, enabled=cfg.progress)
    try:
        if cfg.endpoint:
            endpoint = Endpoint.from_url(cfg.endpoint, cfg.api_key)
            try:
                names = served_model_names(endpoint.url, cfg.api_key)
            except (OSError, ValueError) as exc:
                raise ServerStartError(
                    f"endpoint {endpoint.url} did not answer GET /v1/models: {exc}"
                ) from None
            served = cfg.served_model_name or (names[0] if names else model.name)
            server_info: dict[str, Any] = {
                "kind": "endpoint",
                "url": endpoint.url,
                "served_model_name": served,
                "models_listed": names,
            }
        else:
            served = cfg.served_model_name or model.name
            first_id = make_run_id(stamp, model.name, _point_label(points[0]))
            first_path, _ = result_paths(cfg.output, results_dir, first_id)
            log_path = first_path.with_name(first_path.name[: -len(".json")] + ".server.log")
            server = VllmServer(
                model=engine_path,
                served_model_name=served,
                log_path=log_path,
                engine_args=engine_arguments(
                    cfg,
                    model,
                    on_gpu,
                    the_plan.engine_args if the_plan else None,
                    max_seq_len=longest,
                    kv_tokens=plan_conc * (mean_in + mean_out),
                ),
            )
            server.start()
            progress.status(
                f"starting vLLM ({'GPU' if on_gpu else 'CPU'}) for {model.name}; log: {log_path}"
            )
            startup_s = server.wait_healthy(cfg.server_timeout_s)
            progress.status(f"server healthy after {startup_s:.1f} s at {server.url}")
            endpoint = Endpoint.from_url(server.url)
            server_info = {
                "kind": "vllm",
                "url": server.url,
                "served_model_name": served,
                "command": server.command(),
                "log_file": str(log_path),
                "startup_s": startup_s,
                "engine": "vllm" if on_gpu else "vllm-cpu",
            }
        sess = _Session(
            cfg,
            model,
            engine_path,
            endpoint,
            served,
            server,
            server_info,
            _token_pool(model, engine_path),
            gpu,
            gpu_count,
            gpu_how,
            the_plan,
            no_plan_reason,
            slos,
            stamp,
        )
        search: dict[str, Any] | None = None
        if cfg.find_max:
            search = _find_max(sess, points[0], outcomes)
        else:
            for w in points:
                out = _run_point(sess, w, len(points) > 1)
                outcomes.append(out)
                if not out.result["complete"]:
                    break
    except KeyboardInterrupt:  # during server start-up: nothing measured yet
        progress.status("interrupted before any load was sent")
        raise
    finally:
        if server is not None:
            server.stop()
    sweep, sweep_path = None, None
    if len(outcomes) > 1 or cfg.find_max:
        sweep = sweep_summary(outcomes, search)
        sweep_path = results_dir / f"{stamp}-{safe_name(model.name)}.sweep.json"
        write_result(sweep_path, sweep)
    return SweepOutcome(outcomes, sweep, sweep_path)


def _find_max(sess: _Session, base: Workload, outcomes: list[RunOutcome]) -> dict[str, Any]:
    """Search the highest concurrency (closed loop) or rate (open loop) that meets the SLOs."""

    def at(**override: Any) -> bool:
        if sess.interrupted or (outcomes and not outcomes[-1].result["complete"]):
            raise _Stop
        out = _run_point(sess, base.with_overrides(**override), True)
        outcomes.append(out)
        slo = out.result.get("slo") or {}
        return bool(slo.get("passed")) and bool(out.result["complete"])

    try:
        if base.arrival.mode == "closed":
            start = base.arrival.concurrency or 1
            # more streams than requests cannot load the server any further
            ceiling = max(start, min(4096, base.num_requests or 4096))
            found: Any = find_max_int(lambda c: at(concurrency=c), start=start, ceiling=ceiling)
            load = "concurrency"
        else:
            start_rate = base.arrival.rate if base.arrival.rate not in (None, math.inf) else 1.0
            found = find_max_float(lambda r: at(rate=r), start=float(start_rate))
            load = "rate"
    except _Stop:
        return {"load": None, "result": None, "reason": "stopped: a point did not complete"}
    return {"load": load, "result": found.to_dict()}


class _Stop(Exception):
    pass


def sweep_summary(outcomes: list[RunOutcome], search: dict[str, Any] | None) -> dict[str, Any]:
    """The curve over load points: one row per point, the knee (TPOT p50 past 1.5x its
    lowest-load value) and the find-max answer when one was searched."""
    rows = []
    for o in outcomes:
        r = o.result
        s = r["summary"]
        load = r["load"]
        rows.append(
            {
                "result_file": o.result_path.name,
                "mode": load["mode"],
                "load": load["concurrency"] if load["mode"] == "closed" else load["rate"],
                "request_throughput": s["request_throughput"],
                "output_throughput": s["output_throughput"],
                "ttft_p50_ms": (s["ttft_ms"] or {}).get("p50"),
                "ttft_p99_ms": (s["ttft_ms"] or {}).get("p99"),
                "tpot_p50_ms": (s["tpot_ms"] or {}).get("p50"),
                "tpot_p99_ms": (s["tpot_ms"] or {}).get("p99"),
                "e2e_p50_ms": (s["e2e_ms"] or {}).get("p50"),
                "goodput": (r.get("slo") or {}).get("goodput"),
                "slo_passed": (r.get("slo") or {}).get("passed"),
                "valid": (r.get("validity") or {}).get("valid"),
                "complete": r["complete"],
            }
        )
    curve = [
        (float(row["load"]), row["tpot_p50_ms"])
        for row in rows
        if row["load"] is not None and row["load"] != math.inf
    ]
    knee = find_knee(curve) if len(curve) >= 2 else None
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "infer-prof.sweep",
        "points": rows,
        "knee": knee.to_dict() if knee else None,
        "knee_rule": "first point whose TPOT p50 exceeds 1.5 x the lowest load's",
        "find_max": search,
    }


def _run_point(sess: _Session, wl: Workload, many: bool) -> RunOutcome:
    """Drive one load point against the session's server and write its result."""
    cfg = sess.cfg
    label = _point_label(wl) if wl.name == "custom" else f"{wl.name}-{_point_label(wl)}"
    run_id = make_run_id(_now().strftime("%Y%m%d-%H%M%S"), sess.model.name, label)
    taken = 1
    while (Path(cfg.results_dir) / f"{run_id}.json").exists() and not cfg.output:
        taken += 1  # two points in the same second with the same label
        run_id = make_run_id(_now().strftime("%Y%m%d-%H%M%S"), sess.model.name, f"{label}-{taken}")
    output = cfg.output
    if output and many:
        out = Path(output)
        output = str(out.with_name(f"{out.stem}-{label}{out.suffix or '.json'}"))
    result_path, requests_path = result_paths(output, Path(cfg.results_dir), run_id)
    started = _now()
    progress = ProgressLine(total=wl.num_requests, duration_s=wl.duration_s, enabled=cfg.progress)
    progress.status(
        f"load point {label}: {wl.num_requests or 'duration-bound'} requests, workload {wl.name}"
    )
    warm, measured, _ = build_specs(wl, sess.pool)

    def build(spec: RequestSpec) -> bytes:
        return build_completion_request(
            sess.endpoint,
            sess.served,
            spec.prompt,
            spec.max_tokens,
            request_id=f"{run_id}-{spec.index}",
        )

    records: list[RequestRecord] = []
    state: dict[str, Any] = {"incomplete_reason": None}
    client: dict[str, Any] = {}
    telemetry: dict[str, Any] = {}
    counters = LiveCounters()
    sampler = NvmlSampler(interval_s=cfg.telemetry_interval_s)
    scraper = MetricsScraper(sess.endpoint.url, interval_s=cfg.metrics_interval_s)
    sampler.start()
    scraper.start()
    try:
        _drive(
            sess,
            wl,
            build,
            warm,
            measured,
            counters,
            records,
            progress,
            state,
            client,
            sampler,
            scraper,
        )
    finally:
        telemetry["gpu"] = sampler.stop()
        telemetry["server_metrics"] = scraper.stop()
        progress.finish()
    if state["incomplete_reason"] == "interrupted":
        sess.interrupted = True
    server = sess.server
    server_info = dict(sess.server_info)
    if server is not None and server.poll() is not None:
        state["incomplete_reason"] = state["incomplete_reason"] or "server_died"
        server_info["exit_code"] = server.exit_code
        server_info["log_tail"] = log_tail(server.log_path)
    result = build_result(
        sess,
        wl,
        run_id,
        started,
        records,
        state,
        client,
        telemetry,
        server_info,
        requests_path.name,
    )
    write_requests(requests_path, records)
    write_result(result_path, result)
    if cfg.history:
        db = Path(cfg.history_db) if cfg.history_db else Path(cfg.results_dir) / HISTORY_DB
        try:
            record_result(db, result, result_path)
        except (OSError, sqlite3.Error) as exc:  # the result file is written; say and go on
            progress.status(f"warning: not recorded in history {db}: {exc}")
    return RunOutcome(result, result_path, requests_path)


def build_result(
    sess: _Session,
    wl: Workload,
    run_id: str,
    started: dt.datetime,
    records: list[RequestRecord],
    state: dict[str, Any],
    client: dict[str, Any],
    telemetry: dict[str, Any],
    server_info: dict[str, Any],
    requests_file: str,
) -> dict[str, Any]:
    """The result document of one load point (see :mod:`infer_prof.schema`)."""
    cfg, model, gpu = sess.cfg, sess.model, sess.gpu
    summary = summarize_run(records)
    sdict = summary.to_dict()
    energy = energy_block(telemetry.get("gpu"), sdict)
    metrics_summary = (telemetry.get("server_metrics") or {}).get("summary") or {}
    mean_batch = metrics_summary.get("running_mean") or None
    precision = (
        sess.plan.precision
        if sess.plan
        else (None if cfg.quantization in ("auto", None) else cfg.quantization)
    )
    a = wl.arrival
    slos = sess.slos if sess.cfg.slo else (slos_from_mapping(wl.slo) or sess.slos)
    slo = evaluate_slos(records, slos).to_dict() if slos else None
    validity = check_validity(
        summary.requests_completed,
        summary.duration_s,
        ValidityRules(
            min_requests=wl.min_requests if wl.min_requests is not None else 10,
            min_duration_s=wl.min_duration_s if wl.min_duration_s is not None else 5.0,
        ),
        read_lag_p99_ms=(client.get("read_lag_ms") or {}).get("p99"),
        itl_p50_ms=summary.itl_ms.p50 if summary.itl_ms else None,
        dispatch_lag_p99_ms=(client.get("dispatch_lag_ms") or {}).get("p99")
        if a.mode == "open"
        else None,
    )
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": RESULT_KIND,
        "run_id": run_id,
        "started_at": started.isoformat(),
        "finished_at": _now().isoformat(),
        "complete": state["incomplete_reason"] is None,
        "incomplete_reason": state["incomplete_reason"],
        "config": {
            **asdict(cfg),
            "api_key": "***" if cfg.api_key else None,
            # the values this point ran with (the workload's, after command-line overrides)
            "concurrency": a.concurrency if a.mode == "closed" else None,
            "rate": a.rate if a.mode == "open" else None,
            "input_len": wl.input_len.support()[1] if wl.input_len.kind == "fixed" else None,
            "output_len": wl.output_len.support()[1] if wl.output_len.kind == "fixed" else None,
            "num_requests": wl.num_requests,
            "warmup_requests": wl.warmup_requests,
        },
        "workload": wl.to_dict(),
        "load": {
            "mode": a.mode,
            "concurrency": a.concurrency if a.mode == "closed" else None,
            "rate": a.rate if a.mode == "open" else None,
            "burstiness": a.burstiness if a.mode == "open" else None,
            "max_concurrency": a.max_concurrency if a.mode == "open" else None,
        },
        "labels": dict(cfg.labels),
        "model": {
            "name": model.name,
            "path": model.path,
            "engine_path": sess.engine_path,
            "hub_id": model.hub_id,
            "source": model.source,
            "has_tokenizer": model.has_tokenizer,
            "spec": asdict(model.spec) if model.spec else None,
            "param_count": model.spec.param_count() if model.spec else None,
        },
        "server": server_info,
        "environment": fingerprint(),
        "summary": sdict,
        "slo": slo,
        "validity": validity.to_dict(),
        "client": client,
        "gpu": {"key": gpu.key if gpu else None, "count": sess.gpu_count, "how": sess.gpu_how},
        "plan": sess.plan.to_dict() if sess.plan else None,
        "plan_reason": sess.plan_reason,
        "precision": precision or "bf16",
        "cost": cost_block(
            sdict,
            gpu,
            sess.gpu_count,
            CostOptions(
                cfg.price_per_hour,
                cfg.provider,
                cfg.prices_file,
                cfg.spot,
                cfg.purchase_usd,
                cfg.amortize_years,
                cfg.usd_per_kwh,
            ),
            energy["energy_j"],
            sdict.get("duration_s"),
        ),
        "energy": energy,
        "roofline": roofline_block(
            model.spec,
            gpu,
            sess.gpu_count,
            precision,
            sdict,
            mean_batch if mean_batch else float(_point_concurrency(wl)),
            round(wl.input_len.mean()),
            round(wl.output_len.mean()),
        ),
        "telemetry": telemetry or None,
        "requests_file": requests_file,
    }


def _drive(
    sess: _Session,
    wl: Workload,
    build: Callable[[RequestSpec], bytes],
    warm: list[RequestSpec],
    measured: Iterator[RequestSpec],
    counters: LiveCounters,
    records: list[RequestRecord],
    progress: ProgressLine,
    state: dict[str, Any],
    client: dict[str, Any],
    sampler: NvmlSampler,
    scraper: MetricsScraper,
) -> None:
    """Run one point's load in an event loop with a server watchdog, a lag probe, progress,
    and Ctrl-C handling (first Ctrl-C stops sending and cancels streams in flight)."""
    cfg, server, endpoint = sess.cfg, sess.server, sess.endpoint
    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover
        loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    lag: list[float] = []
    health = OpenLoopHealth()
    a = wl.arrival

    async def main() -> None:
        if a.mode == "closed":
            coro = run_closed_loop(
                endpoint,
                build,
                warm,
                measured,
                ClosedLoopPlan(a.concurrency or 1, cfg.timeout_s, wl.duration_s),
                counters,
                stop,
                records,
            )
        else:
            n = wl.num_requests
            if n is None:
                rate = a.rate if a.rate and a.rate != math.inf else 1000.0
                n = int(rate * (wl.duration_s or 60) * 1.5) + 100
            offsets = send_offsets(wl, n) or []
            coro = run_open_loop(
                endpoint,
                build,
                warm,
                zip(measured, offsets, strict=False),
                OpenLoopPlan(cfg.timeout_s, a.max_concurrency, wl.duration_s),
                counters,
                stop,
                records,
                health,
            )
        driver = asyncio.create_task(coro)

        def interrupt() -> None:
            state["incomplete_reason"] = state["incomplete_reason"] or "interrupted"
            stop.set()
            driver.cancel()

        loop.add_signal_handler(signal.SIGINT, interrupt)
        loop.add_signal_handler(signal.SIGTERM, interrupt)

        async def watch() -> None:
            marked = False
            while not driver.done():
                if not marked and counters.phase == "measuring":
                    sampler.mark_window_start()
                    scraper.mark_window_start()
                    marked = True
                died = server is not None and server.poll() is not None
                if server is None and counters.failures.get("connect_failed"):
                    # an endpoint we do not own refuses connections: is it gone?
                    died = not await loop.run_in_executor(None, _healthy, endpoint)
                if died:
                    state["incomplete_reason"] = "server_died"
                    stop.set()
                    # give in-flight streams a moment to see the connection drop
                    await asyncio.sleep(2.0)
                    driver.cancel()
                    return
                progress.update(counters)
                await asyncio.sleep(0.1)

        probe = asyncio.create_task(_lag_probe(lag))
        watcher = asyncio.create_task(watch())
        try:
            await driver
        except asyncio.CancelledError:
            pass
        finally:
            sampler.mark_window_end()
            scraper.mark_window_end()
            probe.cancel()
            watcher.cancel()
            await asyncio.gather(probe, watcher, return_exceptions=True)
            progress.update(counters)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    if state["incomplete_reason"] == "server_died":
        for r in records:
            if r.error in (
                "connection_closed",
                "connection_error",
                "connect_failed",
                "cancelled",
                "protocol_error",
            ):
                r.error_detail = f"{r.error}: {r.error_detail}"
                r.error = "server_died"
    lag_d = summarize(lag)
    queue = [
        r.send_ns - r.scheduled_ns
        for r in records
        if r.send_ns is not None and r.scheduled_ns is not None
    ]
    sources = sorted({r.timestamp_source for r in records})
    client.update(
        {
            "timestamp_source": sources[0] if len(sources) == 1 else sources,
            "event_loop_lag_ms": lag_d.to_dict() if lag_d else None,
            "queue_ms": _dist_ms(queue),
            "dispatch_lag_ms": _dist_ms(health.dispatch_lag_ns) if a.mode == "open" else None,
            "slot_wait_ms": _dist_ms(health.slot_wait_ns) if a.mode == "open" else None,
            "not_sent": health.not_sent if a.mode == "open" else None,
            "processes": 1,
            "reads": counters.reads.reads,
            "read_lag_ms": _dist_ms(counters.reads.read_lag_ns),
        }
    )


def _healthy(endpoint: Endpoint) -> bool:
    try:
        return http_get(f"{endpoint.url}/health", timeout_s=2.0)[0] == 200
    except OSError:
        return False


def _dist_ms(values_ns: Sequence[int | float]) -> dict[str, Any] | None:
    d = summarize([v / 1e6 for v in values_ns])
    return d.to_dict() if d else None
