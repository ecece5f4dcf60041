"""Planning a run: from the configuration to what will run, before anything starts: the model
and its weights, the load points, the prompts' source (dataset, trace, sessions), the SLOs, the
GPU, the engine plan and the duration estimate. Bad input raises ConfigError here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from infer_prof.catalog.models import ModelError, ResolvedModel, resolve_model
from infer_prof.config.run_groups import ResultsConfig
from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.planning.duration import Estimate
from infer_prof.core.planning.lora_memory import LoraSlots
from infer_prof.core.planning.planner import Plan
from infer_prof.core.planning.weights import WeightDecision
from infer_prof.core.workload.slo import Slo, SloError, parse_slos, slos_from_mapping
from infer_prof.core.workload.workloads import Workload
from infer_prof.loadgen.datasets import Dataset
from infer_prof.loadgen.sessions import SessionPlan
from infer_prof.loadgen.text_prompts import TextPromptMaker
from infer_prof.loadgen.traces import Trace
from infer_prof.report.progress import ProgressLine
from infer_prof.results import history_database
from infer_prof.run.config import Api, ConfigError, RunConfig, check_api, resolve_api, validate
from infer_prof.run.engine_setup import PlannedLoad, engine_model_path, make_plan, resolve_gpu
from infer_prof.run.environment import has_nvidia_gpu
from infer_prof.run.load_points import (
    attach_dataset,
    attach_trace,
    base_workload,
    check_chat_template,
    check_context,
    load_points,
    point_concurrency,
    suite_points,
    text_maker,
)
from infer_prof.run.lora_setup import LoraPlan, plan_lora
from infer_prof.run.preflight import check_duration, device_speed, prepare_weights
from infer_prof.run.session_setup import attach_sessions

HISTORY_DB = "history.sqlite"


def history_location(results: ResultsConfig) -> str | Path:
    """Where a run is recorded: ``--history``, else ``$INFER_PROF_HISTORY``, else
    ``<results dir>/history.sqlite``."""
    return history_database.resolve(
        results.history_db, Path(results.results_dir) / HISTORY_DB
    )


@dataclass
class RunPlan:
    """What :func:`plan_run` decided: everything the later phases need, fixed before the server
    starts."""

    cfg: RunConfig  # what the user gave, as given (never rebound: decisions are the fields below)
    api: Api  # the API the run speaks: --api, else its workloads' (resolve_api)
    load_format: str | None  # what vLLM loads: --load-format, or dummy when no weights are at hand
    model: ResolvedModel
    weights: WeightDecision | None  # the weights decision (None against an endpoint)
    points: list[Workload]  # the load points, in run order
    engine_path: str  # what vLLM loads
    sessions: SessionPlan | None  # --turns: multi-turn sessions
    dataset: Dataset | None  # --dataset: the prompts come from it
    trace: Trace | None  # --trace: the arrival schedule and lengths replayed
    longest: int  # the longest sequence a request can reach (tokens): vLLM's max_model_len
    text: TextPromptMaker | None  # --prompt text: exact-length text prompts
    slos: list[Slo]
    gpu: GpuSpec | None
    gpu_count: int
    gpu_how: str
    plan_conc: int  # the highest concurrency of the points (the engine plan's batch)
    mean_in: int  # the highest mean input length of the points (tokens)
    mean_out: int  # the highest mean output length of the points (tokens)
    plan: Plan | None  # the engine plan
    plan_reason: str | None  # why there is no engine plan
    on_gpu: bool
    estimate: Estimate | None  # the duration estimate made before starting
    lora: LoraPlan | None = None  # --lora-modules / --lora-mix: the adapters and the mix


def plan_run(cfg: RunConfig) -> RunPlan:
    """Validate ``cfg`` and decide what will run (raises ConfigError on bad input, before
    anything starts; refuses a run estimated above an hour unless --yes)."""
    validate(cfg)
    lora = plan_lora(cfg)  # adapter folders and the mix: exit 2 before anything starts
    if cfg.results.history:
        try:
            history_database.parse_location(history_location(cfg.results))
        except history_database.HistoryError as exc:
            raise ConfigError(str(exc)) from None
    try:
        model = resolve_model(cfg.engine.model)
    except ModelError as exc:
        raise ConfigError(str(exc)) from None
    weights = None
    if not cfg.engine.endpoint:  # which weights vLLM loads: real ones if at hand, else random
        model, weights = prepare_weights(cfg.engine, model)
    load_format = weights.load_format if weights else cfg.engine.load_format
    if cfg.load.suite:
        points = suite_points(cfg)
        wl = points[0]
    else:
        wl = base_workload(cfg)
        points = load_points(cfg.load, wl)
    api = resolve_api(cfg.engine, [w.api for w in points])
    check_api(cfg.prompts, api)
    engine_path = engine_model_path(load_format, model)
    sessions, points = attach_sessions(cfg, model, engine_path, points, api)
    dataset, points = (
        (None, points) if sessions else attach_dataset(cfg, model, engine_path, points)
    )
    trace, points = attach_trace(cfg, model, points)
    longest = (
        dataset.longest()
        if dataset
        else trace.longest()
        if trace
        else sessions.longest(points[0].input_len, points[0].output_len)
        if sessions
        else check_context(points, cfg.engine, model)
    )
    text = text_maker(cfg, engine_path, dataset, api)
    check_chat_template(cfg.engine, engine_path, api)
    try:
        slos = parse_slos(cfg.load.slo) if cfg.load.slo else slos_from_mapping(wl.slo)
        # (a suite's members keep their own SLOs: see build_result)
    except SloError as exc:
        raise ConfigError(str(exc)) from None
    if cfg.load.find_max and not slos:
        raise ConfigError("--find-max needs SLOs to meet: give --slo ttft_p99=...,tpot_p99=...")
    gpu, gpu_count, gpu_how = resolve_gpu(cfg.engine)
    plan_conc = max(point_concurrency(w) for w in points)
    mean_in = math.ceil(max(w.input_len.mean() for w in points))
    mean_out = math.ceil(max(w.output_len.mean() for w in points))
    slots = (LoraSlots(lora.max_loras, lora.max_lora_rank)
             if lora and lora.max_loras and lora.max_lora_rank else None)
    the_plan, no_plan_reason = make_plan(
        cfg.engine, model, gpu, gpu_count, PlannedLoad(plan_conc, mean_in, mean_out), load_format,
        slots,
    )
    on_gpu = has_nvidia_gpu()
    precision = the_plan.precision if the_plan else None
    estimate = check_duration(  # refuses a run estimated above an hour (unless --yes)
        cfg, model, points, the_plan, device_speed(on_gpu, gpu, gpu_count, precision)
    )
    return RunPlan(
        cfg=cfg,
        api=api,
        load_format=load_format,
        model=model,
        weights=weights,
        points=points,
        engine_path=engine_path,
        sessions=sessions,
        dataset=dataset,
        trace=trace,
        longest=longest,
        text=text,
        slos=slos,
        gpu=gpu,
        gpu_count=gpu_count,
        gpu_how=gpu_how,
        plan_conc=plan_conc,
        mean_in=mean_in,
        mean_out=mean_out,
        plan=the_plan,
        plan_reason=no_plan_reason,
        on_gpu=on_gpu,
        estimate=estimate,
        lora=lora,
    )


def announce_plan(plan: RunPlan, progress: ProgressLine) -> None:
    """Say the engine plan (precision, device, KV cache, queueing) on the progress line."""
    the_plan = plan.plan
    if the_plan is not None:
        progress.status(
            f"plan: {the_plan.precision} on {the_plan.device}, KV cache "
            f"{the_plan.memory.kv_tokens if the_plan.memory else 0:,} tokens "
            f"({the_plan.memory_source})"
        )
        if the_plan.queue_message():
            progress.status(f"plan: {the_plan.queue_message()}")
