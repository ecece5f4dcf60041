"""Orchestration of a run, phase by phase: plan (validate, decide what will run) -> start (or
attach to) the server -> for each load point: warm-up and measured specs (the warm-up's size
and kind: :mod:`infer_prof.run.warmup`) -> load with telemetry (a warm-up under the load
itself is the load's first seconds) -> record (result files, history) -> the quality check
(``--quality``, on the same server: :mod:`infer_prof.run.quality_phase`) -> the sweep summary.
Every exit path stops the server it started; Ctrl-C, SIGTERM and SIGHUP are handled alike
(:mod:`infer_prof.run.stopping`).
"""

from __future__ import annotations

import math
from typing import Any

from infer_prof.core.analysis.sweep import find_max_float, find_max_int
from infer_prof.core.measurement.precision import PrecisionRule
from infer_prof.core.workload.slo import format_slos
from infer_prof.core.workload.workloads import Workload
from infer_prof.report.progress import ProgressLine
from infer_prof.results.document import decode_result
from infer_prof.results.store import write_result
from infer_prof.run import quality_phase
from infer_prof.run.config import RunConfig
from infer_prof.run.engine_sweep import execute_engine_sweep
from infer_prof.run.frontier_run import (
    FrontierSpec,
    answer,
    prepare,
    run_frontier,
    suite_frontiers,
)
from infer_prof.run.load import drive_point, request_builder
from infer_prof.run.load_points import base_workload, build_specs
from infer_prof.run.planning import announce_plan, plan_run
from infer_prof.run.point_document import PointRun, build_result
from infer_prof.run.record import (
    RunOutcome,
    SweepOutcome,
    check_history,
    now,
    point_files,
    record_sweep,
    save_point,
    server_section,
)
from infer_prof.run.result_files import check_result_location
from infer_prof.run.startup import (
    RunContext,
    new_server,
    open_context,
    start_server,
)
from infer_prof.run.stopping import Stopper, stop_signals
from infer_prof.servers.base import Server


def execute(cfg: RunConfig) -> SweepOutcome:
    """Profile every load point of ``cfg`` on one server launch and write one result per point.

    Raises ConfigError on bad input (before anything starts: also an ``--output`` that exists,
    or a results folder that cannot be written), ServerStartError when the server cannot start,
    and RunInterrupted (a KeyboardInterrupt) when a stop signal came before any load was sent;
    every other event (server death, hung streams, Ctrl-C, SIGTERM, SIGHUP) is recorded in the
    point's result, marked incomplete, and ends the sweep (:mod:`infer_prof.run.stopping`).
    """
    if cfg.load.engine_sweep:  # one frontier per engine configuration, each on its own launch
        return execute_engine_sweep(cfg, execute)
    fspec: FrontierSpec | None = None
    if cfg.load.frontier:  # the levels to try, checked before anything starts
        cfg, fspec = prepare(cfg, base_workload(cfg).arrival.mode == "open")
    plan = plan_run(cfg)  # ConfigError on bad input, before anything starts
    cfg, points = plan.cfg, plan.points
    check_result_location(cfg.results)
    quality_plan = quality_phase.prepare(cfg)  # --quality: files and reference, before starting
    quality = None
    frontier: dict[str, Any] | None = None
    frontiers: list[dict[str, Any]] | None = None
    stamp = now().strftime("%Y%m%d-%H%M%S")
    server: Server | None = None
    outcomes: list[RunOutcome] = []
    progress = ProgressLine(total=None, enabled=cfg.results.progress)
    announce_plan(plan, progress)
    check_history(cfg, progress)
    search: dict[str, Any] | None = None
    with stop_signals() as stopper:
        try:
            server = new_server(plan, stamp)  # --endpoint: attached, nothing to start
            with stopper.kill_on_second(server.kill):
                endpoint, served, server_info = start_server(server, plan, progress)
            ctx = open_context(plan, endpoint, served, server, server_info)
            if quality_plan is not None:  # random weights, another model, no logprobs: now
                quality = quality_phase.before_load(quality_plan, ctx, progress.status)

            def run_at(w: Workload, rule: PrecisionRule | None) -> RunOutcome:
                return _run_point(ctx, w, True, rule)

            def stop_requested() -> bool:
                return stopper.requested

            slo_text = format_slos(plan.slos) if plan.slos else None
            with stopper.shielded(), stopper.kill_on_second(server.kill):
                if cfg.load.find_max:
                    search = _find_max(ctx, points[0], outcomes, stopper)
                elif fspec is not None and fspec.loop == "suite":
                    frontiers = suite_frontiers(
                        points, fspec, run_at, outcomes, slo_text if cfg.load.slo else None,
                        progress.status, stop_requested,
                    )
                elif fspec is not None:
                    memory = plan.plan.memory if plan.plan else None
                    frontier = run_frontier(
                        points, fspec, run_at, outcomes,
                        memory.max_sequences if memory else None, progress.status,
                        stop_requested,
                    )
                    frontier["problems"] = answer(frontier, fspec.target, slo_text)
                    if outcomes:  # the frontier run's result: its last point's file carries it
                        last = outcomes[-1]
                        doc = {**last.result, "frontier": frontier}
                        write_result(last.result_path, doc)  # held to the declared type
                        last.document = decode_result(doc)
                else:
                    for w in points:
                        if stopper.requested:  # between points: end the sweep here
                            break
                        out = _run_point(ctx, w, len(points) > 1)
                        outcomes.append(out)
                        if not out.document.complete:
                            break
                if quality_plan is not None and quality is None and outcomes \
                        and not stopper.requested:  # on the same server, after the load
                    quality = quality_phase.after_load(quality_plan, ctx, progress.status)
                if quality is not None:
                    quality_phase.attach(outcomes, quality)
        except KeyboardInterrupt:  # during server start-up: nothing measured yet
            progress.status("interrupted before any load was sent")
            raise
        finally:
            if server is not None:
                with stopper.shielded(), stopper.kill_on_second(server.kill):
                    server.stop()
        with stopper.shielded():
            swept = record_sweep(cfg, plan.model.name, stamp, outcomes, search, frontier,
                                 frontiers)
        # a signal that cut the sweep short (an interrupted point says so itself)
        cut = cfg.load.find_max or len(outcomes) < len(points)
        swept.stopped_by = stopper.signal_name if cut or not swept.complete else None
        return swept


def _run_point(
    ctx: RunContext, wl: Workload, many: bool, precision: PrecisionRule | None = None
) -> RunOutcome:
    """Drive one load point against the session's server and write its result (with a
    ``precision`` rule: measured until precise, the intervals in ``result["precision_stop"]``)."""
    cfg = ctx.cfg
    label, run_id, run_name, result_path = point_files(ctx, wl, many)
    started = now()
    progress = ProgressLine(total=wl.num_requests, duration_s=wl.duration_s,
                            enabled=cfg.results.progress)
    progress.status(
        f"load point {label}: {wl.num_requests or 'duration-bound'} requests, workload {wl.name}"
    )
    warm, measured, _ = build_specs(
        wl,
        ctx.pool,
        ctx.text,
        ctx.dataset,
        ctx.as_ids,
        ctx.trace,
        ctx.api == "chat",
        stagger=cfg.load.warmup_stagger and not ctx.sessions,
    )
    build = request_builder(ctx, run_id)
    driven = drive_point(ctx, wl, build, warm, measured, progress, precision)
    if driven.state.incomplete_reason == "interrupted":
        ctx.interrupted = True
    server_info = server_section(ctx, driven.state, driven.records)
    result = build_result(PointRun(ctx, wl, run_id, run_name, started, driven, server_info))
    return save_point(cfg, result, driven.records, result_path, progress)


def _find_max(
    ctx: RunContext, base: Workload, outcomes: list[RunOutcome], stopper: Stopper
) -> dict[str, Any]:
    """Search the highest concurrency (closed loop) or rate (open loop) that meets the SLOs."""

    def at(**override: Any) -> bool:
        stopped = ctx.interrupted or stopper.requested
        if stopped or (outcomes and not outcomes[-1].document.complete):
            raise _Stop
        out = _run_point(ctx, base.with_overrides(**override), True)
        outcomes.append(out)
        slo = out.document.slo
        return slo is not None and slo.passed and out.document.complete

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
