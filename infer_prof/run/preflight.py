"""Checks made before vLLM starts: which weights it loads, and whether the run can end.

Both print their verdict as one line on stderr and raise
:class:`~infer_prof.run.config.ConfigError` (exit 2, one line) when the run must not start.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from infer_prof.catalog.models import ResolvedModel
from infer_prof.catalog.weights import choose_weights
from infer_prof.config.run_groups import EngineConfig
from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.planning.duration import (
    LIMIT_S,
    DeviceSpeed,
    Estimate,
    PointLoad,
    cpu_speed,
    estimate_run,
    gpu_speed,
    human_duration,
)
from infer_prof.core.planning.memory import (
    checkpoint_bytes,
    checkpoint_precision,
    routed_expert_bytes,
)
from infer_prof.core.planning.plan_result import Plan
from infer_prof.core.planning.weights import WeightDecision
from infer_prof.core.workload.workloads import Workload, warmup_seconds
from infer_prof.run.config import ConfigError, RunConfig
from infer_prof.run.warmup import OPEN_LOOP_STEADY_WARMUP
from infer_prof.servers.cpu_split import allowed_cpus, plan_cpu_split


def say(line: str) -> None:
    """One line on stderr (shown even with --no-progress: it says what the run does)."""
    print(line, file=sys.stderr, flush=True)


def prepare_weights(
    engine: EngineConfig, model: ResolvedModel
) -> tuple[ResolvedModel, WeightDecision]:
    """Decide the weights (:func:`infer_prof.catalog.weights.choose_weights`), say what was chosen,
    and return the model (pointing at a cache snapshot, or a cached config for a hub id) the run
    goes on with and the decision (its ``load_format`` is ``dummy`` when random weights were
    chosen: the run's, :attr:`infer_prof.run.planning.RunPlan.load_format`)."""
    decision = choose_weights(model, engine.load_format, engine.require_weights)
    if decision.error:
        raise ConfigError(decision.error)
    if decision.notice:
        say(decision.notice)
    if decision.engine_path:
        folder = Path(decision.engine_path)
        spec = model.spec
        if spec is None and (folder / "config.json").exists():
            config = json.loads((folder / "config.json").read_text())
            spec = ModelSpec.from_config(config, name=model.name, hub_id=model.hub_id)
        has_tok = model.has_tokenizer and any(
            (folder / f).exists() for f in ("tokenizer.json", "tokenizer.model", "vocab.json")
        )
        model = replace(model, path=str(folder), spec=spec, has_tokenizer=has_tok)
    return model, decision


def device_speed(
    on_gpu: bool, gpu: GpuSpec | None, gpus: int, precision: str | None
) -> DeviceSpeed | None:
    """The device vLLM will run on: this machine's GPUs (catalog figures for ``precision``), or
    the CPU cores vLLM-CPU is given (:mod:`infer_prof.servers.cpu_split`). None for a GPU
    missing from the catalog (nothing to estimate with)."""
    if not on_gpu:  # the cores vLLM-CPU gets: all allowed but the client's (cpu_split)
        allowed = allowed_cpus()
        split, _ = plan_cpu_split(allowed, os.environ)
        return cpu_speed(len(split.engine) if split else len(allowed) or os.cpu_count() or 1)
    if gpu is None:
        return None
    peak = gpu.fp8_tflops if precision == "fp8" and gpu.fp8_tflops else None
    peak = peak or gpu.bf16_tflops or gpu.fp16_tflops
    return gpu_speed(gpu.key, gpus, gpu.memory_bandwidth_gbps, peak)


def point_loads(points: Sequence[Workload], timeout_s: float) -> list[PointLoad]:
    """The load points as :func:`~infer_prof.core.planning.duration.estimate_run` sees them: the
    warm-up adds its requests (``requests``: ``warmup_requests``; ``steady``: one wave of the closed
    loop's streams, or the open loop's fixed few) or its seconds (``"30s"``)."""
    out = []
    for w in points:
        a = w.arrival
        warm_s = warmup_seconds(w.warmup) or 0.0
        if w.warmup == "requests":
            warm_n = w.warmup_requests
        elif warm_s:
            warm_n = 0
        elif a.mode == "closed":  # steady: one wave, every stream finishes one request
            warm_n = a.concurrency or 1
        else:
            warm_n = OPEN_LOOP_STEADY_WARMUP
        n = None if w.num_requests is None else w.num_requests + warm_n
        out.append(
            PointLoad(
                requests=n,
                input_len=w.input_len.mean(),
                output_len=w.output_len.mean(),
                concurrency=a.concurrency if a.mode == "closed" else None,
                rate=a.rate if a.mode == "open" and a.rate not in (None, float("inf")) else None,
                max_concurrency=a.max_concurrency if a.mode == "open" else None,
                duration_s=w.duration_s,
                timeout_s=timeout_s,
                warmup_s=warm_s,
            )
        )
    return out


def estimate(
    model: ResolvedModel,
    points: Sequence[Workload],
    the_plan: Plan | None,
    device: DeviceSpeed,
    timeout_s: float,
) -> Estimate | None:
    """The run's estimated duration (None when the architecture is unknown)."""
    return estimate_loads(model, point_loads(points, timeout_s), the_plan, device)


def estimate_loads(
    model: ResolvedModel, loads: Sequence[PointLoad], the_plan: Plan | None, device: DeviceSpeed
) -> Estimate | None:
    """:func:`estimate` of load points given as the duration planner sees them (None when
    the architecture is unknown)."""
    spec = model.spec
    if spec is None:
        return None
    mem = the_plan.memory if the_plan else None
    weight_bytes = float(mem.weights_bytes_total) if mem else float(checkpoint_bytes(spec))
    precision = mem.precision if mem else checkpoint_precision(spec)
    if precision == "int8" and spec.moe is None:
        precision = "bf16"  # sized as 16-bit: INT8_DENSE_NOTE
    return estimate_run(
        spec,
        weight_bytes,
        spec.kv_cache_bytes_per_token(2.0),
        device,
        loads,
        max_sequences=mem.max_sequences if mem and mem.max_sequences > 0 else None,
        routed_expert_bytes=float(routed_expert_bytes(spec, precision)),
    )


def check_duration(
    cfg: RunConfig,
    model: ResolvedModel,
    points: Sequence[Workload],
    the_plan: Plan | None,
    device: DeviceSpeed | None,
) -> Estimate | None:
    """Estimate the run and refuse it (ConfigError) above :data:`LIMIT_S` unless ``--yes``.

    Only a vLLM this run launches is estimated (not an endpoint, not the synthetic server).
    tiny-llama (the CPU default and the CI model) is never refused. With ``--duration`` the limit
    is that duration plus the per-request timeout when that is longer than an hour: the user
    asked for it. ``--find-max`` is estimated on its first point only. A run inside the limit is
    still refused when even its fastest request would outlast the per-request timeout
    (``Estimate.fastest_request_s``: a run bound by time, such as a frontier's points, that would
    end with every request timed out).
    """
    if cfg.engine.endpoint or device is None or cfg.engine.server != "vllm":
        return None  # the estimate models vLLM on this device; other servers set their speed
    rounds = cfg.load.repeat  # --repeat N: every point N times
    est = estimate(model, points[:1] if cfg.load.find_max else list(points) * rounds, the_plan,
                   device, cfg.load.timeout_s)
    if est is None:
        return None
    if cfg.load.repeat_relaunch:  # a start-up per round
        est = replace(est, startup_s=est.startup_s * rounds,
                      total_s=est.total_s + est.startup_s * (rounds - 1))
    asked = max((w.duration_s or 0.0 for w in points), default=0.0)
    limit = max(LIMIT_S, asked * len(points) * rounds + cfg.load.timeout_s if asked else LIMIT_S)
    line = (
        f"{model.name}: estimated run time {human_duration(est.total_s)} on {device.name} "
        f"(start-up {human_duration(est.startup_s)}, prefill {human_duration(est.prefill_s)}, "
        f"decode {human_duration(est.decode_s)}; "
        f"~{est.single_stream_tokens_per_s:.3g} tok/s for one stream)"
    )
    if not (cfg.load.yes or model.source == "tiny"):
        if est.total_s > limit:
            n = sum(w.num_requests or 0 for w in points)
            raise ConfigError(
                f"{line}: above the {limit / 3600:.3g} h limit, not started. Ways out: a smaller "
                f"model (--model tiny-llama), fewer requests (now {n}: --num-requests), a GPU, "
                "or --yes to go ahead"
            )
        if est.fastest_request_s > cfg.load.timeout_s:
            raise ConfigError(
                f"{model.name}: a request is estimated to take at least "
                f"{human_duration(est.fastest_request_s)} on {device.name} "
                f"(~{est.single_stream_tokens_per_s:.3g} tok/s for one stream), above the "
                f"per-request timeout of {human_duration(cfg.load.timeout_s)}: every request "
                "would time out, nothing would be measured. Ways out: a smaller model (--model "
                "tiny-llama), a shorter --output-len, a GPU, a longer --timeout, or --yes to go "
                "ahead")
    if est.total_s > 600:
        say(line)
    return est
