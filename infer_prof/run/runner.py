"""Orchestration of a run, phase by phase: plan (validate, decide what will run) -> start (or
attach to) the server -> for each load point: warm-up and measured specs (the warm-up's size
and kind: :mod:`infer_prof.run.warmup`) -> load with telemetry (a warm-up under the load
itself is the load's first seconds) -> record (result files, history) -> the quality check
(``--quality``, on the same server: :mod:`infer_prof.run.quality_phase`; with it the history
rows are written after the check, with its section) -> the sweep summary.
Every exit path stops the server it started; Ctrl-C, SIGTERM and SIGHUP are handled alike
(:mod:`infer_prof.run.stopping`). With ``--repeat N`` the points run N rounds, in one launch or,
with ``--repeat-relaunch``, each round on a fresh launch (:mod:`infer_prof.run.repeats`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UNSET

from infer_prof.core.analysis.sweep import SearchResult, find_max_float, find_max_int
from infer_prof.core.measurement.precision import PrecisionRule
from infer_prof.core.workload.slo import format_slos
from infer_prof.core.workload.workloads import Workload
from infer_prof.loadgen.prepared import prepare_point
from infer_prof.report.progress import ProgressLine
from infer_prof.results.document import decode_result
from infer_prof.results.frontier_sections import Frontier
from infer_prof.results.store import write_result
from infer_prof.results.sweep_document import FindMax, Probe, SearchAnswer
from infer_prof.run import quality_phase
from infer_prof.run.config import RunConfig
from infer_prof.run.engine_sweep import execute_engine_sweep
from infer_prof.run.frontier_estimate import frontier_levels
from infer_prof.run.frontier_run import (
    FrontierSpec,
    answer,
    run_frontier,
    suite_frontiers,
)
from infer_prof.run.load import drive_point, request_builder
from infer_prof.run.load_points import SpecOptions, build_specs
from infer_prof.run.planning import RunPlan, announce_plan, history_location, plan_run
from infer_prof.run.point_document import PointRun, build_result, document_json
from infer_prof.run.point_prompts import point_salt
from infer_prof.run.prefix_cache import prepare_cache
from infer_prof.run.preflight import say
from infer_prof.run.record import (
    RunOutcome,
    SweepOutcome,
    check_history,
    now,
    point_files,
    record_in_history,
    record_sweep,
    save_point,
    server_section,
)
from infer_prof.run.repeats import RepeatPlan, record_launch_spreads
from infer_prof.run.result_files import check_result_location
from infer_prof.run.run_cost import check_cost, expected_section
from infer_prof.run.startup import (
    RunContext,
    new_server,
    open_context,
    relaunched,
    start_server,
    warn,
)
from infer_prof.run.stopping import Stopper, stop_signals
from infer_prof.servers.base import Server, ServerStartError


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
    chosen_levels: str | None = None  # --concurrency-from-estimate: how the levels were chosen
    if cfg.load.frontier:  # the levels to try (or the estimate's), before anything starts
        cfg, fspec, chosen_levels = frontier_levels(cfg)
        if chosen_levels:
            say(chosen_levels)
    plan = plan_run(cfg)  # ConfigError on bad input, before anything starts
    expected = check_cost(plan, fspec)  # the expected rented time and cost; --max-cost here
    cfg, points = plan.cfg, plan.points
    check_result_location(cfg.results)
    quality_plan = quality_phase.prepare(cfg)  # --quality: files and reference, before starting
    quality = None
    frontier: Frontier | None = None
    frontiers: list[Frontier] | None = None
    stamp = now().strftime("%Y%m%d-%H%M%S")
    launch = _Launch()  # the server of the moment
    outcomes: list[RunOutcome] = []
    progress = ProgressLine(total=None, enabled=cfg.results.progress)
    announce_plan(plan, progress)
    check_history(cfg, progress)
    search: FindMax | None = None
    repeats = RepeatPlan(cfg.load.repeat, cfg.load.repeat_relaunch)
    with stop_signals() as stopper:
        try:
            server = launch.server = new_server(plan, stamp)  # --endpoint: nothing to start
            with stopper.kill_on_second(launch.kill):
                endpoint, served, server_info = start_server(server, plan, progress)
            ctx = open_context(plan, endpoint, served, server, server_info)
            if quality_plan is not None:  # random weights, another model, no logprobs: now
                quality = quality_phase.before_load(quality_plan, ctx, progress.status)

            def run_at(w: Workload, rule: PrecisionRule | None) -> RunOutcome:
                return _run_point(ctx, w, True, rule)

            def stop_requested() -> bool:
                return stopper.requested

            slo_text = format_slos(plan.slos) if plan.slos else None
            with stopper.shielded(), stopper.kill_on_second(launch.kill):
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
                    frontier.problems = answer(frontier, fspec.target, slo_text)
                    frontier.expected_cost = expected_section(expected) if expected else None
                    frontier.levels_from_estimate = chosen_levels
                    if outcomes:  # the frontier run's result: its last point's file carries it
                        last = outcomes[-1]
                        doc = document_json(
                            msgspec.structs.replace(last.document, frontier=frontier))
                        write_result(last.result_path, doc)  # held to the declared type
                        last.document = decode_result(doc)  # as the file reads back
                else:
                    ctx = _run_rounds(plan, ctx, launch, outcomes, stopper, repeats, stamp,
                                      progress)
                if quality_plan is not None and quality is None and outcomes \
                        and not stopper.requested:  # on the same server, after the load
                    quality = quality_phase.after_load(quality_plan, ctx, progress.status)
                if quality is not None:
                    quality_phase.attach(outcomes, quality)
        except KeyboardInterrupt:  # during server start-up: nothing measured yet
            progress.status("interrupted before any load was sent")
            raise
        finally:
            if launch.server is not None:
                with stopper.shielded(), stopper.kill_on_second(launch.kill):
                    launch.server.stop()
        with stopper.shielded():
            if quality_plan is not None:  # the history row holds the quality section
                for out in outcomes:
                    record_in_history(cfg, out, progress)
            swept = record_sweep(cfg, plan.model.name, stamp, outcomes, search, frontier,
                                 frontiers, several=len(points) > 1)
            _record_spreads(plan, repeats, progress)
        # a signal that cut the sweep short (an interrupted point says so itself)
        cut = cfg.load.find_max or len(outcomes) < len(points) * repeats.count
        swept.stopped_by = stopper.signal_name if cut or not swept.complete else None
        return swept


@dataclass
class _Launch:
    """The server of the moment: ``--repeat-relaunch`` starts a new one each round."""

    server: Server | None = None

    def kill(self) -> None:
        if self.server is not None:
            self.server.kill()


def _run_rounds(
    plan: RunPlan,
    ctx: RunContext,
    launch: _Launch,
    outcomes: list[RunOutcome],
    stopper: Stopper,
    repeats: RepeatPlan,
    stamp: str,
    progress: ProgressLine,
) -> RunContext:
    """The run's points, ``--repeat`` rounds of them (one round without it); with
    ``--repeat-relaunch`` the server is stopped and started afresh before each round after
    the first. Ends early at a stop signal or a point that did not complete. Returns the
    context of the server that ran the last round."""
    points = plan.points
    many = len(points) > 1 or repeats.active
    for index in range(repeats.count):
        if index and repeats.relaunch:  # a fresh launch for each round
            if stopper.requested or not outcomes[-1].document.complete:
                return ctx
            if launch.server is not None:
                launch.server.stop()
            server = launch.server = new_server(plan, stamp)
            try:
                endpoint, served, server_info = start_server(server, plan, progress)
            except ServerStartError:  # exit 1, the earlier repeats kept
                warn(progress, f"warning: the server did not start again for repeat "
                     f"{index + 1}; written: " + " ".join(str(o.result_path) for o in outcomes))
                raise
            ctx = relaunched(ctx, endpoint, served, server, server_info)
        if not _run_round(ctx, points, many, outcomes, stopper, (repeats, index)):
            return ctx
    return ctx


def _run_round(
    ctx: RunContext,
    points: list[Workload],
    many: bool,
    outcomes: list[RunOutcome],
    stopper: Stopper,
    repeat: tuple[RepeatPlan, int],
) -> bool:
    """Run every point once (one round of ``--repeat``), appending each outcome; False when
    the run must end here (a stop signal, or a point that did not complete)."""
    for i, w in enumerate(points):
        if stopper.requested:  # between points: end the sweep here
            return False
        out = _run_point(ctx, w, many, repeat=(*repeat, i))
        outcomes.append(out)
        if not out.document.complete:
            return False
    return True


def _record_spreads(plan: RunPlan, repeats: RepeatPlan, progress: ProgressLine) -> None:
    """``--repeat-relaunch`` with the history on: store each metric's launch-to-launch CV
    (:func:`infer_prof.run.repeats.record_launch_spreads`); a failure is one warning line."""
    results = plan.cfg.results
    db = history_location(results) if results.history else None
    for problem in record_launch_spreads(repeats, db):
        warn(progress, f"warning: {problem}")


def _run_point(
    ctx: RunContext,
    wl: Workload,
    many: bool,
    precision: PrecisionRule | None = None,
    repeat: tuple[RepeatPlan, int, int] | None = None,
) -> RunOutcome:
    """Drive one load point against the session's server and write its result (with a
    ``precision`` rule: measured until precise, the intervals in ``result["precision_stop"]``;
    with ``repeat`` = (the run's repeats, round, point): its ``repeats`` section)."""
    cfg = ctx.cfg
    label, run_id, run_name, result_path = point_files(
        ctx, wl, many, repeat[1] + 1 if repeat and repeat[0].active else None)
    started = now()
    progress = ProgressLine(total=wl.num_requests, duration_s=wl.duration_s,
                            enabled=cfg.results.progress)
    progress.status(
        f"load point {label}: {wl.num_requests or 'duration-bound'} requests, workload {wl.name}"
    )
    salt = ctx.point_salt = point_salt(ctx.points_started)  # no two points share a prompt
    ctx.points_started += 1
    warm, measured, _ = build_specs(
        wl,
        ctx.pool,
        ctx.text,
        ctx.dataset,
        ctx.as_ids,
        ctx.trace,
        ctx.api == "chat",
        SpecOptions(stagger=cfg.load.warmup_stagger and not ctx.sessions, salt=salt),
    )
    if ctx.lora is not None:  # each request's adapter, by its index (--lora-mix)
        lora = ctx.lora  # a counted warm-up stays a list, a continuous one lazy
        warm = list(lora.assign(warm)) if isinstance(warm, list) else lora.assign(warm)
        measured = lora.assign(measured)
    build = request_builder(ctx, run_id)
    if not ctx.sessions:  # every request's bytes before the load (a session's turns: as they come)
        warm, measured = prepare_point(wl, warm, measured, build)
    cache = prepare_cache(ctx, wl, salt, progress)  # --prefix-cache: before any request
    driven = drive_point(ctx, wl, build, warm, measured, progress, precision)
    if driven.state.incomplete_reason == "interrupted":
        ctx.interrupted = True
    served_by = server_section(ctx, driven.state, driven.records)
    result = build_result(PointRun(ctx, wl, run_id, run_name, started, driven, served_by,
                                   cache))
    if repeat is not None:
        result = repeat[0].section(repeat[2], repeat[1], result)
    out = save_point(cfg, result, driven.records, result_path, progress)
    if repeat is not None:
        repeat[0].done(repeat[2], out.document)
    return out


def _find_max(
    ctx: RunContext, base: Workload, outcomes: list[RunOutcome], stopper: Stopper
) -> FindMax:
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
            found: SearchResult[int] | SearchResult[float] = find_max_int(
                lambda c: at(concurrency=c), start=start, ceiling=ceiling)
            load = "concurrency"
        else:
            start_rate = base.arrival.rate if base.arrival.rate not in (None, math.inf) else 1.0
            found = find_max_float(lambda r: at(rate=r), start=float(start_rate))
            load = "rate"
    except _Stop:
        return FindMax(load=None, result=None, reason="stopped: a point did not complete")
    return FindMax(load=load, result=search_answer(found), reason=UNSET)


def search_answer(found: SearchResult[int] | SearchResult[float]) -> SearchAnswer:
    """The find-max search's answer as the sweep file's section: the highest load that met the
    SLOs, the lowest that did not (streams, or requests/s), every probe and why it ended."""
    return SearchAnswer(
        best=found.best,
        first_fail=found.first_fail,
        probes=[Probe(load=load, passed=ok) for load, ok in found.probes],
        reason=found.reason,
    )


class _Stop(Exception):
    pass
