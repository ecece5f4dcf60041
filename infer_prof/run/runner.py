"""Orchestration of a run: validate -> plan -> start (or attach to) the server -> for each load
point: warm up -> load with telemetry -> summary -> result file. Every exit path stops the
server it started.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from infer_prof.catalog.models import ModelError, ResolvedModel, resolve_model
from infer_prof.core.api_tokens import api_block
from infer_prof.core.gpus import GpuSpec
from infer_prof.core.metrics import (
    RequestRecord,
    busy_concurrency,
    in_flight_mean,
    send_bunching,
    summarize_run,
)
from infer_prof.core.plan_result import Plan
from infer_prof.core.slo import Slo, SloError, evaluate_slos, parse_slos, slos_from_mapping
from infer_prof.core.stats import summary_dict
from infer_prof.core.sweep import find_knee, find_max_float, find_max_int
from infer_prof.core.validity import ValidityRules, check_validity, client_figures
from infer_prof.core.warmup import warmup_block
from infer_prof.core.workloads import (
    Workload,
    send_offsets,
    warmup_seconds,
)
from infer_prof.loadgen.client_health import gc_paused, loop_lag_probe
from infer_prof.loadgen.closed_loop import (
    ClosedLoopPlan,
    LiveCounters,
    RequestSpec,
    WarmupGate,
    run_closed_loop,
)
from infer_prof.loadgen.datasets import Dataset
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.loadgen.open_loop import OpenLoopHealth, OpenLoopPlan, run_open_loop
from infer_prof.loadgen.openai_requests import (
    build_chat_request,
    build_completion_request,
    chat_messages,
)
from infer_prof.loadgen.prompts import TokenPool
from infer_prof.loadgen.sessions import SessionPlan, SessionRun
from infer_prof.loadgen.stamped_reader import reader_in_use
from infer_prof.loadgen.text_prompts import TextPromptMaker
from infer_prof.loadgen.traces import Trace
from infer_prof.loadgen.worker_shared import WorkerHealth, WorkerJob
from infer_prof.loadgen.workers import WorkerPool, merge_health
from infer_prof.report.progress import ProgressLine, StartupLine
from infer_prof.results import history
from infer_prof.results.loading import record_result
from infer_prof.results.schema import RESULT_KIND, SCHEMA_VERSION
from infer_prof.results.store import (
    make_run_id,
    result_paths,
    safe_name,
    write_requests,
    write_result,
)
from infer_prof.run.config import ConfigError, RunConfig, check_api, resolve_api, validate
from infer_prof.run.economics import (
    CostOptions,
    cost_block,
    decode_batch,
    energy_block,
    roofline_block,
)
from infer_prof.run.engine_setup import engine_arguments, engine_model_path, make_plan, resolve_gpu
from infer_prof.run.environment import fingerprint, has_nvidia_gpu
from infer_prof.run.load_points import (
    attach_dataset,
    attach_trace,
    base_workload,
    build_specs,
    check_chat_template,
    check_context,
    client_processes,
    continuous_warmup,
    dataset_ids,
    load_points,
    point_concurrency,
    point_label,
    prompt_mode,
    suite_points,
    text_maker,
    token_pool,
)
from infer_prof.run.preflight import check_duration, device_speed, prepare_weights
from infer_prof.run.session_setup import attach_sessions
from infer_prof.servers.cpu_split import allowed_cpus, pin_this_process, plan_cpu_split
from infer_prof.servers.http_get import http_get, served_model_names
from infer_prof.servers.vllm_log import root_cause
from infer_prof.servers.vllm_server import ServerStartError, VllmServer, log_tail, read_log_end
from infer_prof.telemetry.nvml import NvmlSampler
from infer_prof.telemetry.prometheus import MetricsScraper, mark_not_counted

HISTORY_DB = "history.sqlite"


@dataclass
class RunOutcome:
    """What :func:`execute` returns: the result dict and where it was written."""

    result: dict[str, Any]
    result_path: Path
    requests_path: Path
    history_error: str | None = None  # why the run is not in the history (result still written)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


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

    @property
    def history_errors(self) -> list[str]:
        """Why points could not be recorded in the history (their result files are written)."""
        return [p.history_error for p in self.points if p.history_error]


def history_location(cfg: RunConfig) -> str | Path:
    """Where a run is recorded: ``--history``, else ``$INFER_PROF_HISTORY``, else
    ``<results dir>/history.sqlite``."""
    return history.resolve(cfg.history_db, Path(cfg.results_dir) / HISTORY_DB)


def _warn(progress: ProgressLine, message: str) -> None:
    if progress.enabled:
        progress.status(message)
    else:
        print(message, file=sys.stderr, flush=True)


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
    interrupted: bool = False
    weights: dict[str, Any] | None = None  # the weights decision (model.weights in the result)
    estimate: dict[str, Any] | None = None  # the duration estimate made before starting
    text: TextPromptMaker | None = None  # --prompt text: exact-length text prompts
    dataset: Dataset | None = None  # --dataset: the prompts come from it
    as_ids: Callable[[str], list[int]] | None = None  # dataset text -> token IDs (token-ids)
    trace: Trace | None = None  # --trace: the arrival schedule and lengths replayed
    sessions: SessionPlan | None = None  # --turns: multi-turn sessions


def execute(cfg: RunConfig) -> SweepOutcome:
    """Profile every load point of ``cfg`` on one server launch and write one result per point.

    Raises ConfigError on bad input (before anything starts) and ServerStartError when the
    server cannot start; every other event (server death, hung streams, Ctrl-C) is recorded in
    the point's result, marked incomplete, and ends the sweep.
    """
    validate(cfg)
    if cfg.history:
        try:
            history.parse_location(history_location(cfg))
        except history.HistoryError as exc:
            raise ConfigError(str(exc)) from None
    try:
        model = resolve_model(cfg.model)
    except ModelError as exc:
        raise ConfigError(str(exc)) from None
    weights = None
    if not cfg.endpoint:  # which weights vLLM loads: real ones if at hand, else random
        cfg, model, weights = prepare_weights(cfg, model)
    if cfg.suite:
        points = suite_points(cfg)
        wl = points[0]
    else:
        wl = base_workload(cfg)
        points = load_points(cfg, wl)
    cfg = replace(cfg, api=resolve_api(cfg, [w.api for w in points]))
    check_api(cfg)
    engine_path = engine_model_path(cfg, model)
    sessions, points = attach_sessions(cfg, model, engine_path, points)
    dataset, points = (None, points) if sessions else attach_dataset(cfg, model, engine_path,
                                                                     points)
    trace, points = attach_trace(cfg, model, points)
    longest = (dataset.longest() if dataset else trace.longest() if trace
               else sessions.longest(points[0].input_len, points[0].output_len) if sessions
               else check_context(points, cfg, model))
    text = text_maker(cfg, engine_path, dataset)
    check_chat_template(cfg, engine_path)
    try:
        slos = parse_slos(cfg.slo) if cfg.slo else slos_from_mapping(wl.slo)
        # (a suite's members keep their own SLOs: see _run_point)
    except SloError as exc:
        raise ConfigError(str(exc)) from None
    if cfg.find_max and not slos:
        raise ConfigError("--find-max needs SLOs to meet: give --slo ttft_p99=...,tpot_p99=...")
    gpu, gpu_count, gpu_how = resolve_gpu(cfg)
    plan_conc = max(point_concurrency(w) for w in points)
    mean_in = math.ceil(max(w.input_len.mean() for w in points))
    mean_out = math.ceil(max(w.output_len.mean() for w in points))
    the_plan, no_plan_reason = make_plan(cfg, model, gpu, gpu_count, plan_conc, mean_in, mean_out)
    on_gpu = has_nvidia_gpu()
    precision = the_plan.precision if the_plan else None
    estimate = check_duration(  # refuses a run estimated above an hour (unless --yes)
        cfg, model, points, the_plan, device_speed(on_gpu, gpu, gpu_count, precision)
    )

    stamp = _now().strftime("%Y%m%d-%H%M%S")
    results_dir = Path(cfg.results_dir)
    server: VllmServer | None = None
    outcomes: list[RunOutcome] = []
    progress = ProgressLine(total=None, enabled=cfg.progress)
    if the_plan is not None:
        progress.status(f"plan: {the_plan.precision} on {the_plan.device}, KV cache "
                        f"{the_plan.memory.kv_tokens if the_plan.memory else 0:,} tokens "
                        f"({the_plan.memory_source})")
        if the_plan.queue_message():
            progress.status(f"plan: {the_plan.queue_message()}")
    if cfg.history:  # say it now, not after an hour of measuring; the run goes on regardless
        try:
            history.check(history_location(cfg))
        except history.HistoryError as exc:
            _warn(progress, f"warning: {exc} (the run goes on; its result files are written)")
    try:
        if cfg.endpoint:
            endpoint = Endpoint.from_url(
                cfg.endpoint, cfg.api_key, ca_bundle=cfg.ca_bundle, insecure=cfg.insecure
            )
            tls_info = check_tls(endpoint, progress)  # exit 2 on a certificate error, before load
            try:
                names = served_model_names(endpoint.url, cfg.api_key, endpoint.ssl_context())
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
                "tls": tls_info,
            }
        else:
            served = cfg.served_model_name or model.name
            first_id = make_run_id(stamp, model.name, point_label(points[0]))
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
            split, no_split = (None, "GPU") if on_gpu else plan_cpu_split(allowed_cpus(),
                                                                           os.environ)
            if split is not None:
                server.cpus = split.engine
                server.env["VLLM_CPU_OMP_THREADS_BIND"] = split.omp_bind()
            server.start()
            if split is not None:
                pin_this_process(split.client)
                progress.status(split.describe())
            progress.status(
                f"starting vLLM ({'GPU' if on_gpu else 'CPU'}) for {model.name}; log: {log_path}"
            )
            shown = StartupLine(live=cfg.progress)
            shown.phase("starting", 0.0)
            try:
                startup_s = server.wait_healthy(
                    cfg.server_timeout_s,
                    on_wait=shown.tick,
                    on_phase=lambda c: shown.phase(c.phase, c.at_s),
                )
            finally:
                shown.finish()
            startup = server.startup.to_dict(startup_s)
            progress.status(
                f"server healthy after {startup_s:.1f} s at {server.url} ("
                + ", ".join(f"{p['name']} {p['duration_s']:.1f} s" for p in startup["phases"])
                + ")"
            )
            endpoint = Endpoint.from_url(server.url)
            server_info = {
                "kind": "vllm",
                "url": server.url,
                "served_model_name": served,
                "command": server.command(),
                "log_file": str(log_path),
                "startup_s": startup_s,
                "startup": startup,
                "engine": "vllm" if on_gpu else "vllm-cpu",
                "cpu_split": split.to_dict() if split else None,
                "cpu_split_reason": None if split or on_gpu else no_split,
            }
        sess = _Session(
            cfg,
            model,
            engine_path,
            endpoint,
            served,
            server,
            server_info,
            token_pool(model, engine_path),
            gpu,
            gpu_count,
            gpu_how,
            the_plan,
            no_plan_reason,
            slos,
            weights=weights.to_dict() if weights else None,
            estimate=estimate.to_dict() if estimate else None,
            text=text,
            dataset=dataset,
            as_ids=dataset_ids(cfg, engine_path, dataset),
            trace=trace,
            sessions=sessions,
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
        tag = f"-{cfg.run_tag}" if cfg.run_tag else ""
        sweep_path = results_dir / f"{stamp}-{safe_name(model.name)}{tag}.sweep.json"
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
                "workload": (r.get("workload") or {}).get("name"),
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
    # one curve per workload and loop mode (a suite holds several); rate inf is no point on it
    groups: dict[tuple[str, str], list[int]] = {}
    for i, row in enumerate(rows):
        if row["load"] is not None and row["load"] != math.inf:
            groups.setdefault((row["workload"], row["mode"]), []).append(i)
    knees = []
    for (workload, mode), idx in groups.items():
        knee = find_knee([(float(rows[i]["load"]), rows[i]["tpot_p50_ms"]) for i in idx])
        if knee is not None:
            knees.append(
                {**knee.to_dict(), "row": idx[knee.index], "workload": workload, "mode": mode}
            )
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "infer-prof.sweep",
        "points": rows,
        "knees": knees,
        "knee_rule": "first point whose TPOT p50 exceeds 1.5 x the lowest load's",
        "find_max": search,
    }


def _run_point(sess: _Session, wl: Workload, many: bool) -> RunOutcome:
    """Drive one load point against the session's server and write its result."""
    cfg = sess.cfg
    label = point_label(wl) if wl.name == "custom" else f"{wl.name}-{point_label(wl)}"
    if cfg.run_tag:  # several endpoints in one command: the endpoint's label
        label = f"{cfg.run_tag}-{label}"
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
    warm, measured, _ = build_specs(
        wl, sess.pool, sess.text, sess.dataset, sess.as_ids, sess.trace, cfg.api == "chat"
    )

    def build(spec: RequestSpec) -> bytes:
        if cfg.api == "chat":
            return build_chat_request(
                sess.endpoint,
                sess.served,
                chat_messages(spec.prompt),
                spec.max_tokens,
                request_id=f"{run_id}-{spec.index}",
            )
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
    scraper = MetricsScraper(
        sess.endpoint.url,
        interval_s=cfg.metrics_interval_s,
        api_key=sess.endpoint.api_key,
        context=sess.endpoint.ssl_context(),
    )
    session_run = sess.sessions.start(wl, sess.pool, sess.text) if sess.sessions else None
    state["session_run"] = session_run
    processes = 1 if session_run else client_processes(
        cfg.client_processes, wl, tls=sess.endpoint.tls is not None
    )
    try:
        if processes > 1:
            # forks the workers before this process starts the telemetry threads
            _drive_pool(
                _PooledPoint(sess, wl, processes, progress, state, sampler, scraper),
                _pool_job(sess, wl, build, warm, measured),
                records,
                client,
            )
        else:
            sampler.start()
            scraper.start()
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
                session_run,
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
        cause = root_cause(read_log_end(server.log_path))
        server_info["root_cause"] = cause.render() if cause else None
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
    history_error = None
    if cfg.history:
        db = history_location(cfg)
        try:
            record_result(db, result, result_path)
        except (OSError, history.HistoryError) as exc:  # the result file is written; say so
            history_error = str(exc)
            _warn(progress, f"warning: not recorded in the history: {exc}")
    return RunOutcome(result, result_path, requests_path, history_error)


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
    """The result document of one load point (see :mod:`infer_prof.results.schema`)."""
    cfg, model, gpu = sess.cfg, sess.model, sess.gpu
    summary = summarize_run(records)
    sdict = summary.to_dict()
    energy = energy_block(telemetry.get("gpu"), sdict)
    scraped = telemetry.get("server_metrics") or {}
    if scraped.get("summary"):  # a counter the server did not count is null, not 0
        scraped["summary"] = mark_not_counted(
            scraped["summary"],
            sess.server.command() if sess.server else None,
            sdict.get("total_output_tokens"),
        )
    metrics_summary = scraped.get("summary") or {}
    batch, batch_source = decode_batch(
        metrics_summary, busy_concurrency(records), point_concurrency(wl)
    )
    precision = (
        sess.plan.precision
        if sess.plan
        else (None if cfg.quantization in ("auto", None) else cfg.quantization)
    )
    a = wl.arrival
    slos = sess.slos if sess.cfg.slo else (slos_from_mapping(wl.slo) or sess.slos)
    slo = evaluate_slos(records, slos).to_dict() if slos else None
    figures = client_figures(client)
    validity = check_validity(
        summary.requests_completed,
        summary.duration_s,
        ValidityRules(
            min_requests=wl.min_requests if wl.min_requests is not None else 10,
            min_duration_s=wl.min_duration_s if wl.min_duration_s is not None else 5.0,
        ),
        read_lag_p99_ms=figures["read_lag_p99_ms"],
        itl_p50_ms=summary.itl_ms.p50 if summary.itl_ms else None,
        dispatch_lag_p99_ms=figures["dispatch_lag_p99_ms"] if a.mode == "open" else None,
        cpu_share_max=figures["cpu_share_max"],
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
            # where it was recorded, never with a password
            "history_db": history.describe(history_location(cfg)) if cfg.history else None,
            # the values this point ran with (the workload's, after command-line overrides)
            "concurrency": a.concurrency if a.mode == "closed" else None,
            "rate": a.rate if a.mode == "open" else None,
            "input_len": wl.input_len.support()[1] if wl.input_len.kind == "fixed" else None,
            "output_len": wl.output_len.support()[1] if wl.output_len.kind == "fixed" else None,
            "num_requests": wl.num_requests,
            "warmup_requests": wl.warmup_requests,
            "prompt": sess.sessions.settings.prompt if sess.sessions
            else prompt_mode(cfg, sess.dataset),
            "dataset": sess.dataset.to_dict() if sess.dataset else None,
            "trace": sess.trace.to_dict() if sess.trace else None,
            "sessions": sess.sessions.to_dict() if sess.sessions else None,
        },
        "sessions": state["session_run"].result(records, scraped)
        if state.get("session_run") else None,
        "trace_replay": trace_replay(sess.trace, records) if sess.trace else None,
        "api": api_block(cfg.api or "completions", records),
        "workload": wl.to_dict(),
        "load": {
            "mode": a.mode,
            "concurrency": a.concurrency if a.mode == "closed" else None,
            "rate": a.rate if a.mode == "open" else None,
            "burstiness": a.burstiness if a.mode == "open" else None,
            "max_concurrency": a.max_concurrency if a.mode == "open" else None,
            # time-weighted mean of requests in flight over the measured window (client side)
            "in_flight_mean": _round(in_flight_mean(records), 3),
            # share of send gaps < 1 ms, beside independent sends' share: streams in lock-step
            "send_bunching": send_bunching(records),
        },
        "warmup": warmup_block(wl.warmup, wl.warmup_requests, records, state.get("warmup"),
                               a.concurrency if a.mode == "closed" else None),
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
            "weights": sess.weights,
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
        "duration_estimate": sess.estimate,
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
            batch,
            round(wl.input_len.mean()),
            round(wl.output_len.mean()),
            batch_source,
        ),
        "telemetry": telemetry or None,
        "requests_file": requests_file,
    }


def _drive(
    sess: _Session,
    wl: Workload,
    build: Callable[[RequestSpec], bytes],
    warm: list[RequestSpec] | Iterator[RequestSpec],
    measured: Iterator[RequestSpec],
    counters: LiveCounters,
    records: list[RequestRecord],
    progress: ProgressLine,
    state: dict[str, Any],
    client: dict[str, Any],
    sampler: NvmlSampler,
    scraper: MetricsScraper,
    session_run: SessionRun | None = None,
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
    cpu = _ThreadCpu()  # the event loop's thread: the telemetry threads are not the client's
    a = wl.arrival
    gate = (WarmupGate(a.concurrency or 1, warmup_seconds(wl.warmup))
            if continuous_warmup(wl) and session_run is None else None)

    async def main() -> None:
        if session_run is not None:
            coro = session_run.drive(
                endpoint, build, warm,
                ClosedLoopPlan(a.concurrency or 1, cfg.timeout_s, wl.duration_s),
                counters, stop, records,
            )
        elif a.mode == "closed":
            coro = run_closed_loop(
                endpoint,
                build,
                warm,
                measured,
                ClosedLoopPlan(a.concurrency or 1, cfg.timeout_s, wl.duration_s),
                counters,
                stop,
                records,
                gate,
            )
        else:
            coro = run_open_loop(
                endpoint,
                build,
                list(warm),
                _open_arrivals(wl, measured, sess.trace),
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
                    cpu.start()
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

        probe = asyncio.create_task(loop_lag_probe(lag))
        watcher = asyncio.create_task(watch())
        try:
            await driver
        except asyncio.CancelledError:
            pass
        finally:
            sampler.mark_window_end()
            scraper.mark_window_end()
            cpu.stop()
            probe.cancel()
            watcher.cancel()
            await asyncio.gather(probe, watcher, return_exceptions=True)
            progress.update(counters)

    try:
        with gc_paused():
            loop.run_until_complete(main())
    finally:
        loop.close()
    if gate is not None:
        state["warmup"] = gate.to_dict()
    if state["incomplete_reason"] == "server_died":
        _relabel_server_died(records)
    client.update(
        {
            **_record_health(records),
            "event_loop_lag_ms": summary_dict(lag),
            "dispatch_lag_ms": _dist_ms(health.dispatch_lag_ns) if a.mode == "open" else None,
            "slot_wait_ms": _dist_ms(health.slot_wait_ns) if a.mode == "open" else None,
            "not_sent": health.not_sent if a.mode == "open" else None,
            "processes": 1,
            "reader": reader_in_use(),
            "reads": counters.reads.reads,
            "read_lag_ms": _dist_ms(counters.reads.read_lag_ns),
            **cpu.to_dict(),
        }
    )


def _open_arrivals(
    wl: Workload, measured: Iterator[RequestSpec], trace: Trace | None = None
) -> Iterator[tuple[RequestSpec, float]]:
    """The open loop's (spec, send offset s) pairs: ``num_requests`` of them, or, bound by
    duration, enough for 1.5 x the duration at the rate (1000/s when infinite) plus 100; a
    trace's own offsets when replaying one."""
    if trace is not None:
        return zip(measured, trace.offsets, strict=False)
    a = wl.arrival
    n = wl.num_requests
    if n is None:
        rate = a.rate if a.rate and a.rate != math.inf else 1000.0
        n = int(rate * (wl.duration_s or 60) * 1.5) + 100
    offsets = send_offsets(wl, n) or []
    return zip(measured, offsets, strict=False)


def trace_replay(trace: Trace, records: list[RequestRecord]) -> dict[str, Any]:
    """Achieved vs scheduled for a trace replay: the arrival rate of the sends made,
    ``(n - 1) / (last send - first send)``, against the schedule's, and each request's send lag
    (actual send - scheduled send, ms, signed: negative when sent early; ``client.dispatch_lag_ms``
    is the same figure clamped at 0)."""
    sent = sorted(r.send_ns for r in records if not r.warmup and r.send_ns is not None)
    span_s = (sent[-1] - sent[0]) / 1e9 if len(sent) > 1 else 0.0
    achieved = (len(sent) - 1) / span_s if span_s > 0 else None
    scheduled = trace.scheduled_rate()
    lags = [r.send_ns - r.scheduled_ns for r in records
            if not r.warmup and r.send_ns is not None and r.scheduled_ns is not None]
    return {
        "scheduled_requests": len(trace.offsets),
        "sent_requests": len(sent),
        "scheduled_rate": _round(scheduled, 4),
        "achieved_rate": _round(achieved, 4),
        "rate_error_pct": _round(100.0 * (achieved - scheduled) / scheduled, 3)
        if achieved is not None and scheduled else None,
        "send_lag_ms": _dist_ms(lags),
    }


def _relabel_server_died(records: list[RequestRecord]) -> None:
    """After the server died, the connection errors it caused are failures of kind
    ``server_died`` (the original kind is kept in ``error_detail``)."""
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


def _record_health(records: list[RequestRecord]) -> dict[str, Any]:
    """The client figures read off the records: timestamp source(s) and client queue time."""
    queue = [
        r.send_ns - r.scheduled_ns
        for r in records
        if r.send_ns is not None and r.scheduled_ns is not None
    ]
    sources = sorted({r.timestamp_source for r in records})
    return {
        "timestamp_source": sources[0] if len(sources) == 1 else sources,
        "queue_ms": _dist_ms(queue),
    }


@dataclass
class _ThreadCpu:
    """CPU time of the calling thread over the measured window (``time.thread_time``)."""

    cpu0: float | None = None
    wall0: float = 0.0
    cpu_s: float | None = None
    wall_s: float | None = None

    def start(self) -> None:
        self.cpu0, self.wall0 = time.thread_time(), time.perf_counter()

    def stop(self) -> None:
        if self.cpu0 is not None and self.cpu_s is None:
            self.cpu_s = time.thread_time() - self.cpu0
            self.wall_s = time.perf_counter() - self.wall0

    def to_dict(self) -> dict[str, Any]:
        """``cpu_s``, ``wall_s`` and ``cpu_share`` (CPU s per wall s; None when unmeasured)."""
        share = self.cpu_s / self.wall_s if self.cpu_s is not None and self.wall_s else None
        return {"cpu_s": self.cpu_s, "wall_s": self.wall_s, "cpu_share": share}


@dataclass
class _PooledPoint:
    """What a point driven over worker processes reports to, besides its records and client."""

    sess: _Session
    wl: Workload
    processes: int
    progress: ProgressLine
    state: dict[str, Any]
    sampler: NvmlSampler
    scraper: MetricsScraper


def _pool_job(
    sess: _Session,
    wl: Workload,
    build: Callable[[RequestSpec], bytes],
    warm: list[RequestSpec] | Iterator[RequestSpec],
    measured: Iterator[RequestSpec],
) -> WorkerJob:
    """The point as a :class:`WorkerJob`. Closed loop: a counted point's specs as a list, which
    every worker's streams claim from one shared counter (one closed loop over the list); a
    duration-bound point's lazy iterator, dealt round-robin. Open loop: the scheduled arrivals,
    dealt round-robin (a list when counted, lazily when bound by duration)."""
    cfg, a = sess.cfg, wl.arrival
    counted = wl.num_requests is not None
    if a.mode == "closed":
        specs = list(measured) if counted else measured
        return WorkerJob(
            "closed",
            sess.endpoint,
            build,
            cfg.timeout_s,
            warm,
            a.concurrency or 1,
            wl.duration_s,
            specs,
            continuous_warmup=continuous_warmup(wl),
            warmup_seconds=warmup_seconds(wl.warmup),
        )
    arrivals = _open_arrivals(wl, measured, sess.trace)
    return WorkerJob(
        "open",
        sess.endpoint,
        build,
        cfg.timeout_s,
        warm,
        arrivals=list(arrivals) if counted else arrivals,
        open_plan=OpenLoopPlan(cfg.timeout_s, a.max_concurrency, wl.duration_s),
    )


def _drive_pool(
    point: _PooledPoint,
    job: WorkerJob,
    records: list[RequestRecord],
    client: dict[str, Any],
) -> None:
    """Run one point's load over ``point.processes`` worker processes (:class:`WorkerPool`)
    with what :func:`_drive` has in-process: the server watchdog, progress, the telemetry
    window marks, and Ctrl-C/SIGTERM (the first cancels every worker's streams; every record
    measured so far is kept). Forks before starting the telemetry threads; fills ``records``
    and ``client`` (the merged health, plus each worker's under ``workers``)."""
    pool = WorkerPool(point.processes, job)
    watch = _PoolWatch(point, pool)
    sigs = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, watch.on_signal) for sig in sigs}
    try:
        pool.start()
        point.sampler.start()
        point.scraper.start()
        recs, health = pool.join(watch.poll)
        if pool.job.continuous_warmup:
            point.state["warmup"] = pool.warmup()
    except BaseException:
        pool.abort()
        raise
    finally:
        point.sampler.mark_window_end()
        point.scraper.mark_window_end()
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    records.extend(recs)
    state = point.state
    if state["incomplete_reason"] == "server_died":
        _relabel_server_died(records)
    if any(h.error for h in health) and state["incomplete_reason"] is None:
        state["incomplete_reason"] = "client_worker_failed"
    client.update(_pooled_client(records, health, point.wl.arrival.mode))


def _pooled_client(
    records: list[RequestRecord], health: list[WorkerHealth], mode: str
) -> dict[str, Any]:
    """The ``client`` section of a multi-process point: the single-process keys (pooled over
    the workers), ``cpu_s`` summed, ``wall_s`` and ``cpu_share`` of the busiest worker, and
    each worker's own health under ``workers`` (see :func:`merge_health`)."""
    merged = merge_health(health)
    is_open = mode == "open"
    busiest = max(health, key=lambda h: h.cpu_share or 0.0, default=None)
    return {
        **_record_health(records),
        "event_loop_lag_ms": merged["event_loop_lag_ms"],
        "dispatch_lag_ms": merged["dispatch_lag_ms"] if is_open else None,
        "slot_wait_ms": merged["slot_wait_ms"] if is_open else None,
        "not_sent": merged["not_sent"] if is_open else None,
        "processes": merged["processes"],
        "reader": reader_in_use(),
        "reads": merged["reads"],
        "read_lag_ms": merged["read_lag_ms"],
        "cpu_s": merged["cpu_s"],
        "wall_s": busiest.wall_s if busiest else None,
        "cpu_share": busiest.cpu_share if busiest else None,
        "workers": merged["workers"],
    }


@dataclass
class _PoolWatch:
    """The pooled point's watcher, called by :meth:`WorkerPool.join` about every 0.1 s: acts on
    Ctrl-C/SIGTERM, marks the telemetry window, watches the server, redraws the progress."""

    point: _PooledPoint
    pool: WorkerPool
    signalled: bool = False
    cancelled: bool = False
    marked: bool = False
    died_at: float | None = None

    def on_signal(self, signum: int, frame: Any) -> None:
        """Ctrl-C or SIGTERM: the point is interrupted; the next :meth:`poll` cancels the
        workers (a signal handler touches no lock the main thread may hold)."""
        state = self.point.state
        state["incomplete_reason"] = state["incomplete_reason"] or "interrupted"
        self.signalled = True

    def poll(self, c: LiveCounters) -> None:
        """One look at the workers' summed counters."""
        if self.signalled:
            self._cancel()
        if not self.marked and c.phase == "measuring":
            self.point.sampler.mark_window_start()
            self.point.scraper.mark_window_start()
            self.marked = True
        if c.phase != "done":
            self._watchdog(c)
        self.point.progress.update(c)

    def _cancel(self) -> None:
        if not self.cancelled:
            self.pool.request_stop(cancel=True)
            self.cancelled = True

    def _watchdog(self, c: LiveCounters) -> None:
        """Server gone: stop sending at once, abandon the streams in flight 2 s later (time
        for them to see the connection drop), as :func:`_drive` does."""
        if self.died_at is not None:
            if time.monotonic() - self.died_at >= 2.0:
                self._cancel()
            return
        server, endpoint = self.point.sess.server, self.point.sess.endpoint
        died = server is not None and server.poll() is not None
        if server is None and c.failures.get("connect_failed"):
            # an endpoint we do not own refuses connections: is it gone?
            died = not _healthy(endpoint)
        if died:
            self.point.state["incomplete_reason"] = "server_died"
            self.pool.request_stop()
            self.died_at = time.monotonic()


def check_tls(endpoint: Endpoint, progress: ProgressLine) -> dict[str, Any] | None:
    """For an https endpoint: one TLS handshake before any load (raises ConfigError, exit 2,
    with one line naming the host and the reason); warns when verification is off. Returns
    what was negotiated (recorded with the server), None for http."""
    if endpoint.tls is None:
        return None
    from infer_prof.loadgen.tls import TlsError, preflight

    if endpoint.tls.insecure:
        _warn(progress, f"warning: --insecure: the TLS certificate of {endpoint.host} is not "
                        "verified (recorded in the result)")
    try:
        return preflight(endpoint.host, endpoint.port, endpoint.tls)
    except TlsError as exc:
        raise ConfigError(str(exc)) from None
    except ConnectionError as exc:  # not there at all: a start failure, as for http
        raise ServerStartError(f"endpoint {endpoint.url}: {exc}") from None


def _healthy(endpoint: Endpoint) -> bool:
    try:
        return http_get(f"{endpoint.url}/health", 2.0, None, endpoint.ssl_context())[0] == 200
    except OSError:
        return False


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


def _dist_ms(values_ns: Sequence[int | float]) -> dict[str, Any] | None:
    return summary_dict(values_ns, 1e-6)
