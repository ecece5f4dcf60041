"""Start-up of a run: start its server (the one ``--server`` names, through
:mod:`infer_prof.servers.registry`; or attach to an endpoint, checking its TLS and the models it
serves), wait until it is healthy, and open the :class:`RunContext` the load points
share. The caller stops the server it started, on every exit path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from infer_prof.catalog.models import ResolvedModel
from infer_prof.config.run_groups import EngineConfig
from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.planning.duration import Estimate
from infer_prof.core.planning.planner import Plan
from infer_prof.core.planning.weights import WeightDecision
from infer_prof.core.workload.slo import Slo
from infer_prof.loadgen.datasets import Dataset
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.loadgen.prompts import TokenPool
from infer_prof.loadgen.sessions import SessionPlan
from infer_prof.loadgen.text_prompts import TextPromptMaker
from infer_prof.loadgen.traces import Trace
from infer_prof.report.progress import ProgressLine, StartupLine
from infer_prof.results.engine_sections import DurationEstimate
from infer_prof.results.model_sections import WeightsUsed
from infer_prof.results.store import make_run_name, result_paths, write_new_file
from infer_prof.run.config import Api, ConfigError, RunConfig
from infer_prof.run.endpoint_check import list_models
from infer_prof.run.engine_setup import launch_settings, planned_engine_version
from infer_prof.run.load_points import dataset_ids, point_label, token_pool
from infer_prof.run.lora_setup import LoraRun, check_served
from infer_prof.run.planning import RunPlan
from infer_prof.run.reasoning_setup import parser_choice
from infer_prof.servers.base import LaunchSpec, Server, ServerStartError
from infer_prof.servers.cpu_split import allowed_cpus, pin_this_process, plan_cpu_split
from infer_prof.servers.http_get import http_get
from infer_prof.servers.registry import attach, make_server


def warn(progress: ProgressLine, message: str) -> None:
    """A warning: on the progress line when it is shown, else one line on stderr."""
    if progress.enabled:
        progress.status(message)
    else:
        with contextlib.suppress(OSError, ValueError):  # a terminal that is gone (SIGHUP)
            print(message, file=sys.stderr, flush=True)


@dataclass
class RunContext:
    """What the points of one execution share: the model, the server, the prompt pool. (A
    *session* is a multi-turn conversation, :attr:`sessions`; this is the run's context.)"""

    cfg: RunConfig
    model: ResolvedModel
    engine_path: str
    endpoint: Endpoint
    served: str
    server: Server | None  # the server this run launched (None: attached to an endpoint)
    server_info: dict[str, Any]
    pool: TokenPool
    gpu: GpuSpec | None
    gpu_count: int
    gpu_how: str
    plan: Plan | None
    plan_reason: str | None
    slos: list[Slo]
    api: Api  # the API the run speaks (the plan's: --api, else its workloads')
    load_format: str | None  # what vLLM loads (the plan's: dummy when no weights are at hand)
    interrupted: bool = False
    weights: WeightsUsed | None = None  # the weights decision (model.weights in the result)
    estimate: DurationEstimate | None = None  # the duration estimate made before starting
    text: TextPromptMaker | None = None  # --prompt text: exact-length text prompts
    dataset: Dataset | None = None  # --dataset: the prompts come from it
    as_ids: Callable[[str], list[int]] | None = None  # dataset text -> token IDs (token-ids)
    trace: Trace | None = None  # --trace: the arrival schedule and lengths replayed
    sessions: SessionPlan | None = None  # --turns: multi-turn sessions
    points_started: int = 0  # load points begun on this launch (each one's prompts its own)
    point_salt: str = ""  # the salt of the current point's prompt seeds (run.point_prompts)
    said_cache_refused: bool = False  # the line that the prefix cache's reset was refused

    lora: LoraRun | None = None  # --lora-modules / --lora-mix: the adapters each request asks


def attach_endpoint(
    engine: EngineConfig, model: ResolvedModel, progress: ProgressLine
) -> tuple[Endpoint, str, dict[str, Any]]:
    """Attach to ``--endpoint``: check its TLS, list the models it serves. Returns the
    endpoint, the model name to ask for, and the result's ``server`` section."""
    assert engine.endpoint is not None
    endpoint = Endpoint.from_url(
        engine.endpoint,
        engine.api_key,
        ca_bundle=engine.ca_bundle,
        insecure=engine.insecure,
    )
    tls_info = check_tls(endpoint, progress)  # exit 2 on a certificate error, before load
    names = list_models(endpoint, engine.api_key)  # one line and exit 1 or 4 when it cannot
    served = engine.served_model_name or (names[0] if names else model.name)
    server_info: dict[str, Any] = {
        "kind": "endpoint",
        "url": endpoint.url,
        "served_model_name": served,
        "models_listed": names,
        "tls": tls_info,
    }
    return endpoint, served, server_info


def new_server(plan: RunPlan, stamp: str) -> Server:
    """The run's server, not started: ``--endpoint``'s (attached: nothing to start), else the
    one ``--server`` names (:mod:`infer_prof.servers.registry`) with the engine settings of the
    plan and the options given, its log beside the first point's result file."""
    cfg, model, points = plan.cfg, plan.model, plan.points
    if cfg.engine.endpoint:
        return attach(cfg.engine.endpoint, cfg.engine.api_key)
    served = cfg.engine.served_model_name or model.name
    first_name = make_run_name(stamp, model.name, point_label(points[0]))
    first_path, _ = result_paths(cfg.results.output, Path(cfg.results.results_dir), first_name)
    # created now, exclusively: runs started together never share (append to) one log
    log_path = write_new_file(
        first_path.with_name(first_path.name[: -len(".json")] + ".server.log"), b""
    )
    settings = launch_settings(
        cfg.engine,
        model,
        plan.on_gpu,
        plan.plan.settings if plan.plan else None,
        max_seq_len=plan.longest,
        kv_tokens=plan.plan_conc * (plan.mean_in + plan.mean_out),
        load_format=plan.load_format,
        sequences=plan.plan_conc,
    )
    spec = LaunchSpec(
        model=plan.engine_path,
        served_model_name=served,
        log_path=log_path,
        settings=settings,
        extra_args=tuple(cfg.engine.engine_args),
        on_gpu=plan.on_gpu,
        tokenizer=model.has_tokenizer,
        enforce_eager=cfg.engine.enforce_eager,
        engine_version=planned_engine_version(plan.plan),
        speculative_config=cfg.engine.speculative_config,
        reasoning_parser=parser_choice(cfg.engine, model).parser,
        lora_adapters=plan.lora.adapters if plan.lora else (),
    )
    return make_server(cfg.engine.server, spec)


def start_server(
    server: Server, plan: RunPlan, progress: ProgressLine
) -> tuple[Endpoint, str, dict[str, Any]]:
    """Start ``server`` (on CPU, on its share of the cores; this process pinned to the rest)
    and wait until it is healthy; for an attached one, check its TLS and the models it lists
    (:func:`attach_endpoint`). Returns its endpoint, the model name to ask for, and the
    result's ``server`` section."""
    cfg, model, on_gpu = plan.cfg, plan.model, plan.on_gpu
    if not server.launched:
        return attach_endpoint(cfg.engine, model, progress)
    served = cfg.engine.served_model_name or model.name
    split, no_split = (None, "GPU") if on_gpu else plan_cpu_split(allowed_cpus(), os.environ)
    if split is not None:
        server.use_cpus(split)
    server.start()
    described = server.describe(None)
    if split is not None:
        pin_this_process(split.client)
        progress.status(split.describe())
    progress.status(
        f"starting {server.label} ({'GPU' if on_gpu else 'CPU'}) for {model.name}; "
        f"log: {described.get('log_file')}"
    )
    shown = StartupLine(live=cfg.results.progress, name=server.label)
    shown.phase("starting", 0.0)
    try:
        startup_s = server.wait_healthy(
            cfg.engine.server_timeout_s,
            on_wait=shown.tick,
            on_phase=lambda c: shown.phase(c.phase, c.at_s),
        )
    finally:
        shown.finish()
    described = server.describe(startup_s)
    if described.get("quantized_layers") == 0 and cfg.engine.quantization not in (None, "auto"):
        warn(progress, f"warning: vLLM quantized 0 layers for --quantization "
             f"{cfg.engine.quantization} (its log: 'Quantizing 0 layers of types:'): the weights "
             f"are served at {described.get('loaded_dtype') or 'their own dtype'}, and the "
             "result records that precision")
    phases = (described.get("startup") or {}).get("phases") or []
    progress.status(
        f"server healthy after {startup_s:.1f} s at {server.url} ("
        + ", ".join(f"{p['name']} {p['duration_s']:.1f} s" for p in phases)
        + ")"
    )
    endpoint = Endpoint.from_url(server.url)
    server_info: dict[str, Any] = {
        "kind": server.kind,
        "url": server.url,
        "served_model_name": served,
        **described,
        "cpu_split": split.to_dict() if split else None,
        "cpu_split_reason": None if split or on_gpu else no_split,
    }
    return endpoint, served, server_info


def open_context(
    plan: RunPlan,
    endpoint: Endpoint,
    served: str,
    server: Server | None,
    server_info: dict[str, Any],
) -> RunContext:
    """The context the points share, once the server answers: the plan's choices, the
    server (kept only when this run launched it: an attached endpoint's death is seen as
    refused connections), the LoRA adapters checked against the server's listing (ConfigError,
    exit 2, for one it does not list) and the prompt pool (the tokenizer is loaded here)."""
    cfg, engine_path, dataset = plan.cfg, plan.engine_path, plan.dataset
    weights, estimate = plan.weights, plan.estimate
    lora = check_served(plan.lora, endpoint, cfg.engine.api_key) if plan.lora else None
    return RunContext(
        cfg=cfg,
        model=plan.model,
        engine_path=engine_path,
        endpoint=endpoint,
        served=served,
        server=server if server is not None and server.launched else None,
        server_info=server_info,
        pool=token_pool(plan.model, engine_path),
        gpu=plan.gpu,
        gpu_count=plan.gpu_count,
        gpu_how=plan.gpu_how,
        plan=plan.plan,
        plan_reason=plan.plan_reason,
        slos=plan.slos,
        api=plan.api,
        load_format=plan.load_format,
        weights=weights_section(weights) if weights else None,
        estimate=estimate_section(estimate) if estimate else None,
        text=plan.text,
        dataset=dataset,
        as_ids=dataset_ids(cfg, engine_path, dataset, plan.api),
        trace=plan.trace,
        sessions=plan.sessions,
        lora=lora,
    )


def weights_section(decision: WeightDecision) -> WeightsUsed:
    """The result's ``model.weights``: real or random weights, where they came from, the load
    format vLLM gets, why, and the folder loaded instead of the model's own."""
    return WeightsUsed(weights=decision.weights, origin=decision.origin,
                       load_format=decision.load_format, reason=decision.reason,
                       engine_path=decision.engine_path)


def estimate_section(estimate: Estimate) -> DurationEstimate:
    """The result's ``duration_estimate`` (seconds, tokens/s; the device and the assumptions
    it used), as the result file holds it: whole numbers in float fields as floats."""
    return msgspec.convert(estimate.to_dict(), DurationEstimate)


def relaunched(
    ctx: RunContext,
    endpoint: Endpoint,
    served: str,
    server: Server,
    server_info: dict[str, Any],
) -> RunContext:
    """``ctx`` on a server started afresh (``run --repeat-relaunch``): the new server, its
    endpoint and ``server`` section, its LoRA adapters checked again (ConfigError for one it
    does not list); the plan, prompts and tokenizer stay."""
    lora = ctx.lora and check_served(ctx.lora.as_plan(), endpoint, ctx.cfg.engine.api_key)
    return dataclasses.replace(ctx, endpoint=endpoint, served=served,
                               server=server if server.launched else None,
                               server_info=server_info, lora=lora)


def check_tls(endpoint: Endpoint, progress: ProgressLine) -> dict[str, Any] | None:
    """For an https endpoint: one TLS handshake before any load (raises ConfigError, exit 2,
    with one line naming the host and the reason); warns when verification is off. Returns
    what was negotiated (recorded with the server), None for http."""
    if endpoint.tls is None:
        return None
    from infer_prof.loadgen.tls import TlsError, preflight

    if endpoint.tls.insecure:
        warn(
            progress,
            f"warning: --insecure: the TLS certificate of {endpoint.host} is not "
            "verified (recorded in the result)",
        )
    try:
        return preflight(endpoint.host, endpoint.port, endpoint.tls)
    except TlsError as exc:
        raise ConfigError(str(exc)) from None
    except ConnectionError as exc:  # not there at all: a start failure, as for http
        raise ServerStartError(f"endpoint {endpoint.url}: {exc}") from None


def healthy(endpoint: Endpoint) -> bool:
    """Whether the endpoint answers GET /health with 200 within 2 s."""
    try:
        return http_get(f"{endpoint.url}/health", 2.0, None, endpoint.ssl_context())[0] == 200
    except OSError:
        return False
