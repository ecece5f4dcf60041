"""Orchestration of one run: validate -> start (or attach to) the server -> warm up ->
load with telemetry -> summary -> result file. Every exit path stops the server it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import random
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from infer_prof.core.gpuspec import GpuSpec
from infer_prof.core.metrics import RequestRecord, summarize_run
from infer_prof.core.planner import Plan, PlanError, normalize_precision, plan
from infer_prof.core.stats import summarize
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
from infer_prof.loadgen.prompts import TokenPool, make_prompt
from infer_prof.models import ModelError, ResolvedModel, alias_config_dir, resolve_model
from infer_prof.report.progress import ProgressLine
from infer_prof.schema import RESULT_KIND, SCHEMA_VERSION
from infer_prof.servers.http_get import http_get, served_model_names
from infer_prof.servers.vllm_server import ServerStartError, VllmServer, log_tail
from infer_prof.store import make_run_id, result_paths, write_requests, write_result
from infer_prof.telemetry.nvml import NvmlSampler
from infer_prof.telemetry.prometheus import MetricsScraper

CPU_DEFAULT_KV_CACHE_BYTES = 512 * 1024 * 1024


class ConfigError(ValueError):
    """Bad input found before anything started; the message is one line naming the fix."""


@dataclass
class RunConfig:
    """Everything a run is given. Field names are the CLI option names (underscored)."""

    model: str = "tiny-llama"
    endpoint: str | None = None
    served_model_name: str | None = None
    api_key: str | None = None
    concurrency: int = 16
    num_requests: int | None = 200
    duration_s: float | None = None
    warmup_requests: int = 8
    input_len: int = 128
    output_len: int = 128
    timeout_s: float = 300.0
    seed: int = 0
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


def validate(cfg: RunConfig, model: ResolvedModel | None) -> None:
    """Reject bad input before anything starts (raises :class:`ConfigError`)."""
    for name in ("concurrency", "input_len", "output_len"):
        value = getattr(cfg, name)
        if value is None or value < 1:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} must be a positive integer, got {value}")
    if cfg.num_requests is not None and cfg.num_requests < 1:
        raise ConfigError(f"--num-requests must be a positive integer, got {cfg.num_requests}")
    if cfg.duration_s is not None and cfg.duration_s <= 0:
        raise ConfigError(f"--duration must be positive seconds, got {cfg.duration_s}")
    if cfg.warmup_requests < 0:
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
    context = cfg.max_model_len or (
        model.spec.max_position_embeddings if model and model.spec else None
    )
    if context is not None and cfg.input_len + cfg.output_len > context:
        raise ConfigError(
            f"--input-len {cfg.input_len} + --output-len {cfg.output_len} = "
            f"{cfg.input_len + cfg.output_len} tokens exceeds the model's context of {context}; "
            "shorten them or raise --max-model-len"
        )


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
    cfg: RunConfig, model: ResolvedModel, on_gpu: bool, plan_args: dict[str, Any] | None = None
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
        merged["max_model_len"] = min(
            model.spec.max_position_embeddings, max(2048, cfg.input_len + cfg.output_len)
        )
    if "kv_cache_memory_bytes" not in merged and not on_gpu:
        # On CPU vLLM reserves a fraction of the node's memory unless told an explicit KV size;
        # size it for the load: concurrency x (input + output) tokens, with 50% headroom.
        need = 0
        if model.spec is not None:
            tokens = cfg.concurrency * (cfg.input_len + cfg.output_len)
            need = int(tokens * model.spec.kv_cache_bytes_per_token(2.0) * 1.5)
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
    cfg: RunConfig, model: ResolvedModel, gpu: GpuSpec | None, gpus: int
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
            concurrency=cfg.concurrency,
            input_len=cfg.input_len,
            output_len=cfg.output_len,
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


def _specs(cfg: RunConfig, pool: TokenPool) -> tuple[list[RequestSpec], Iterator[RequestSpec]]:
    rng = random.Random(cfg.seed)
    warm = [
        RequestSpec(
            -1 - i,
            make_prompt(pool, cfg.input_len, rng),
            cfg.input_len,
            cfg.output_len,
            warmup=True,
        )
        for i in range(cfg.warmup_requests)
    ]

    def measured() -> Iterator[RequestSpec]:
        i = 0
        while cfg.num_requests is None or i < cfg.num_requests:
            yield RequestSpec(
                i, make_prompt(pool, cfg.input_len, rng), cfg.input_len, cfg.output_len
            )
            i += 1

    return warm, measured()


async def _lag_probe(samples: list[float], interval_s: float = 0.01) -> None:
    """Measure the event loop's own lag: how late a ``sleep(interval)`` wakes up (ms)."""
    while True:
        t0 = time.perf_counter()
        await asyncio.sleep(interval_s)
        samples.append(max(0.0, (time.perf_counter() - t0 - interval_s) * 1000.0))


def execute(cfg: RunConfig) -> RunOutcome:
    """Run one profile end to end and write its result. Raises ConfigError on bad input
    (before anything starts) and ServerStartError when the server cannot start; every other
    event (server death, hung streams, Ctrl-C) is recorded in the result, marked incomplete."""
    validate(cfg, None)
    try:
        model = resolve_model(cfg.model)
    except ModelError as exc:
        raise ConfigError(str(exc)) from None
    validate(cfg, model)
    gpu, gpu_count, gpu_how = resolve_gpu(cfg)
    the_plan, no_plan_reason = make_plan(cfg, model, gpu, gpu_count)

    started = _now()
    run_id = make_run_id(started.strftime("%Y%m%d-%H%M%S"), model.name, cfg.concurrency)
    result_path, requests_path = result_paths(cfg.output, Path(cfg.results_dir), run_id)
    progress = ProgressLine(total=cfg.num_requests, duration_s=cfg.duration_s, enabled=cfg.progress)
    on_gpu = has_nvidia_gpu()
    server: VllmServer | None = None
    server_info: dict[str, Any] = {"kind": "endpoint" if cfg.endpoint else "vllm"}
    records: list[RequestRecord] = []
    state: dict[str, Any] = {"incomplete_reason": None, "server_exit": None}
    client: dict[str, Any] = {}
    telemetry: dict[str, Any] = {}
    engine_path = _engine_model_path(cfg, model)
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
            server_info = {
                "kind": "endpoint",
                "url": endpoint.url,
                "served_model_name": served,
                "models_listed": names,
            }
        else:
            served = cfg.served_model_name or model.name
            log_path = result_path.with_name(result_path.name[: -len(".json")] + ".server.log")
            server = VllmServer(
                model=engine_path,
                served_model_name=served,
                log_path=log_path,
                engine_args=engine_arguments(
                    cfg, model, on_gpu, the_plan.engine_args if the_plan else None
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
        pool = _token_pool(model, engine_path)
        warm, measured = _specs(cfg, pool)

        def build(spec: RequestSpec) -> bytes:
            return build_completion_request(
                endpoint, served, spec.prompt, spec.max_tokens, request_id=f"{run_id}-{spec.index}"
            )

        counters = LiveCounters()
        sampler = NvmlSampler(interval_s=cfg.telemetry_interval_s)
        scraper = MetricsScraper(endpoint.url, interval_s=cfg.metrics_interval_s)
        sampler.start()
        scraper.start()
        try:
            _drive(
                cfg,
                endpoint,
                build,
                warm,
                measured,
                counters,
                records,
                server,
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
    except KeyboardInterrupt:
        state["incomplete_reason"] = state["incomplete_reason"] or "interrupted"
    finally:
        if server is not None:
            code = server.poll()
            if code is not None and state["incomplete_reason"] is None and records:
                state["incomplete_reason"] = "server_died"
            server.stop()
            if code is not None:
                state["server_exit"] = code

    if server is not None:
        server_info["exit_code"] = state["server_exit"]
        if state["server_exit"] is not None:
            server_info["log_tail"] = log_tail(server.log_path)
    summary = summarize_run(records)
    sdict = summary.to_dict()
    gpu_tel = telemetry.get("gpu")
    energy = energy_block(gpu_tel, sdict)
    metrics_summary = (telemetry.get("server_metrics") or {}).get("summary") or {}
    mean_batch = metrics_summary.get("running_mean") or None
    precision = (
        the_plan.precision
        if the_plan
        else (None if cfg.quantization in ("auto", None) else cfg.quantization)
    )
    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": RESULT_KIND,
        "run_id": run_id,
        "started_at": started.isoformat(),
        "finished_at": _now().isoformat(),
        "complete": state["incomplete_reason"] is None,
        "incomplete_reason": state["incomplete_reason"],
        "config": {**asdict(cfg), "api_key": "***" if cfg.api_key else None},
        "labels": dict(cfg.labels),
        "model": {
            "name": model.name,
            "path": model.path,
            "engine_path": engine_path,
            "hub_id": model.hub_id,
            "source": model.source,
            "has_tokenizer": model.has_tokenizer,
            "spec": asdict(model.spec) if model.spec else None,
            "param_count": model.spec.param_count() if model.spec else None,
        },
        "server": server_info,
        "environment": fingerprint(),
        "summary": sdict,
        "client": client,
        "gpu": {"key": gpu.key if gpu else None, "count": gpu_count, "how": gpu_how},
        "plan": the_plan.to_dict() if the_plan else None,
        "plan_reason": no_plan_reason,
        "precision": precision or "bf16",
        "cost": cost_block(
            sdict,
            gpu,
            gpu_count,
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
            gpu_count,
            precision,
            sdict,
            mean_batch if mean_batch else float(cfg.concurrency),
            cfg.input_len,
            cfg.output_len,
        ),
        "telemetry": telemetry or None,
        "requests_file": requests_path.name,
    }
    write_requests(requests_path, records)
    write_result(result_path, result)
    return RunOutcome(result, result_path, requests_path)


def _drive(
    cfg: RunConfig,
    endpoint: Endpoint,
    build: Any,
    warm: list[RequestSpec],
    measured: Iterator[RequestSpec],
    counters: LiveCounters,
    records: list[RequestRecord],
    server: VllmServer | None,
    progress: ProgressLine,
    state: dict[str, Any],
    client: dict[str, Any],
    sampler: NvmlSampler,
    scraper: MetricsScraper,
) -> None:
    """Run the load in an event loop with a server watchdog, a lag probe, progress, and
    Ctrl-C handling (first Ctrl-C stops sending and cancels streams in flight)."""
    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover
        loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    lag: list[float] = []

    async def main() -> None:
        driver = asyncio.create_task(
            run_closed_loop(
                endpoint,
                build,
                warm,
                measured,
                ClosedLoopPlan(cfg.concurrency, cfg.timeout_s, cfg.duration_s),
                counters,
                stop,
                records,
            )
        )

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
            "dispatch_delay_ms": _dist_ms(queue),
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


def _dist_ms(values_ns: list[int]) -> dict[str, Any] | None:
    d = summarize([v / 1e6 for v in values_ns])
    return d.to_dict() if d else None
