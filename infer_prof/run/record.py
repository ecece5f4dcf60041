"""Recording a run: each load point's files (its result document is built by
:mod:`infer_prof.run.point_document`), its row in the history, the client figures read off the
records, and the sweep summary over the points.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET

from infer_prof.core.analysis.sweep import find_knee
from infer_prof.core.measurement.distribution_record import p50_of, p99_of
from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.measurement.stats import summary_dict
from infer_prof.core.workload.workloads import Workload
from infer_prof.report.progress import ProgressLine
from infer_prof.results import history_database
from infer_prof.results.document import Result
from infer_prof.results.failed_run import engine_dead
from infer_prof.results.frontier_sections import Frontier
from infer_prof.results.load_sections import LoadMode
from infer_prof.results.loading import record_result
from infer_prof.results.run_ids import new_run_id
from infer_prof.results.schema import SCHEMA_VERSION
from infer_prof.results.server_sections import Server
from infer_prof.results.store import (
    check_result_type,
    make_run_name,
    result_paths,
    safe_name,
    write_file,
    write_new_file,
)
from infer_prof.results.sweep_document import FindMax, Sweep, SweepRow, decode_sweep
from infer_prof.results.sweep_document import Knee as SweepKnee
from infer_prof.run import result_files
from infer_prof.run.config import RunConfig
from infer_prof.run.load_points import point_label
from infer_prof.run.planning import history_location
from infer_prof.run.point_document import document_json, now
from infer_prof.run.point_state import PointState
from infer_prof.run.startup import RunContext, warn


@dataclass
class RunOutcome:
    """One load point's outcome (:func:`infer_prof.run.runner.execute`): its typed result
    document and where it was written."""

    document: Result
    result_path: Path
    requests_path: Path
    history_error: str | None = None  # why the run is not in the history (result still written)
    write_error: str | None = None  # why the files are not where asked (and where they are)

    @property
    def result(self) -> dict[str, Any]:
        """The document as the JSON its result file holds (:func:`document_json`)."""
        return document_json(self.document)


@dataclass
class SweepOutcome:
    """Everything :func:`infer_prof.run.runner.execute` produced: one outcome per load point,
    in run order, and the sweep summary (curve, knee, find-max) when there was more than one
    point."""

    points: list[RunOutcome]
    sweep: Sweep | None = None
    sweep_path: Path | None = None
    stopped_by: str | None = None  # the stop signal that ended the run (SIGTERM, ...), if any

    @property
    def complete(self) -> bool:
        return all(p.document.complete for p in self.points)

    @property
    def write_errors(self) -> list[str]:
        """Why points' files are not where asked, each naming where they are instead."""
        return [p.write_error for p in self.points if p.write_error]

    @property
    def history_errors(self) -> list[str]:
        """Why points could not be recorded in the history (their result files are written)."""
        return [p.history_error for p in self.points if p.history_error]


def check_history(cfg: RunConfig, progress: ProgressLine) -> None:
    """With --history, check now that the history can be written (a warning if not, not
    after an hour of measuring; the run goes on regardless)."""
    if cfg.results.history:
        try:
            history_database.check(history_location(cfg.results))
        except history_database.HistoryError as exc:
            warn(progress, f"warning: {exc} (the run goes on; its result files are written)")


def point_files(
    ctx: RunContext, wl: Workload, many: bool, repeat: int | None = None
) -> tuple[str, str, str, Path]:
    """A load point's label, run ID (a new UUIDv7), readable run name and result file (as
    asked: the file is created exclusively at the end, :func:`save_point`, so a name another
    run took meanwhile becomes ``-2``; ``--output`` with ``many`` points gets the label
    appended). ``repeat`` (1-based, ``--repeat``) ends the label with ``-r<repeat>``."""
    cfg = ctx.cfg
    label = point_label(wl) if wl.name == "custom" else f"{wl.name}-{point_label(wl)}"
    if repeat is not None:
        label = f"{label}-r{repeat}"
    if cfg.results.run_tag:  # several endpoints in one command: the endpoint's label
        label = f"{cfg.results.run_tag}-{label}"
    run_name = make_run_name(now().strftime("%Y%m%d-%H%M%S"), ctx.model.name, label)
    output = cfg.results.output
    if output and many:
        out = Path(output)
        output = str(out.with_name(f"{out.stem}-{label}{out.suffix or '.json'}"))
    result_path, _ = result_paths(output, Path(cfg.results.results_dir), run_name)
    return label, new_run_id(), run_name, result_path


def server_section(ctx: RunContext, state: PointState,
                   records: Sequence[RequestRecord] = ()) -> Server:
    """The point's ``server`` section (:class:`~infer_prof.results.server_sections.Server`): the
    session's, plus the exit code, log tail and root cause when the server died (which marks
    the point incomplete in ``state``) or its engine did (a request failed with vLLM's
    engine-dead answer, ``failed_run.ENGINE_DEAD``, while the API server may still be up)."""
    server = ctx.server
    server_info = dict(ctx.server_info)  # the server's description (servers.base), as run
    if server is not None:
        if server.poll() is not None:
            state.incomplete_reason = state.incomplete_reason or "server_died"
            server_info.update(server.diagnosis())  # exit_code, log_tail, root_cause
        elif engine_dead(r.error_detail for r in records if r.error):
            server_info.update(server.diagnosis())
    return msgspec.convert(server_info, Server)


def save_point(
    cfg: RunConfig,
    result: Result,
    records: list[RequestRecord],
    result_path: Path,
    progress: ProgressLine,
) -> RunOutcome:
    """Write the point's result and requests files (:func:`result_files.write_point`: created
    exclusively, atomically, in a temporary folder when the results folder fails) and, with
    --history, record it there (:func:`record_in_history`), except with --quality: then the
    runner records it once the quality check has written its section. The outcome says where
    the files are, and why the run is not in the history or not where asked."""
    doc = document_json(result)
    written = result_files.write_point(cfg.results, doc, records, result_path)
    if written.error:
        warn(progress, f"warning: {written.error}")
    result = msgspec.structs.replace(result, requests_file=doc.get("requests_file"))
    outcome = RunOutcome(result, written.result_path, written.requests_path, None, written.error)
    if not cfg.load.quality:
        record_in_history(cfg, outcome, progress)
    return outcome


def record_in_history(cfg: RunConfig, outcome: RunOutcome, progress: ProgressLine) -> None:
    """With --history, record the point's result as its file now holds it; a failure is a
    warning and ``outcome.history_error`` (the result file is written)."""
    if not cfg.results.history:
        return
    try:
        record_result(history_location(cfg.results), outcome.result, outcome.result_path)
    except (OSError, history_database.HistoryError) as exc:
        outcome.history_error = str(exc)
        warn(progress, f"warning: not recorded in the history: {exc}")


def relabel_server_died(records: list[RequestRecord]) -> None:
    """After the server died, the connection errors it caused are failures of kind
    ``server_died`` (the original kind is kept in ``error_detail``)."""
    for r in records:
        if r.error in (
            "connection_closed",
            "connection_error",
            "connect_failed",
            "cancelled",
            "protocol_error",
            "truncated",
        ):
            r.error_detail = f"{r.error}: {r.error_detail}"
            r.error = "server_died"


def record_health(records: list[RequestRecord]) -> dict[str, Any]:
    """The client figures read off the records: timestamp source(s) and client queue time."""
    queue = [
        r.send_ns - r.scheduled_ns
        for r in records
        if r.send_ns is not None and r.scheduled_ns is not None
    ]
    sources = sorted({r.timestamp_source for r in records})
    return {
        "timestamp_source": sources[0] if len(sources) == 1 else sources,
        "queue_ms": dist_ms(queue),
    }


def sweep_row(outcome: RunOutcome) -> SweepRow:
    """One point's row of the sweep: its file, workload and load (streams of a closed loop,
    requests/s of an open one), rates, latency percentiles (ms), the frontier's axes, goodput
    and verdicts (None where not measured)."""
    r = outcome.document
    s, load = r.summary, r.load
    return SweepRow(
        result_file=outcome.result_path.name,
        workload=r.workload.name if r.workload else None,
        mode=load.mode if load else None,
        load=None if load is None else (load.concurrency if load.mode == "closed" else load.rate),
        request_throughput=s.request_throughput,
        output_throughput=s.output_throughput,
        ttft_p50_ms=p50_of(s.ttft_ms),
        ttft_p99_ms=p99_of(s.ttft_ms),
        tpot_p50_ms=p50_of(s.tpot_ms),
        tpot_p99_ms=p99_of(s.tpot_ms),
        interactivity_tok_s_user=s.interactivity_tok_s_user,
        total_tok_s_per_gpu=s.total_tok_s_per_gpu,
        usd_per_million_output_tokens=s.usd_per_million_output_tokens,
        e2e_p50_ms=p50_of(s.e2e_ms),
        goodput=r.slo.goodput if r.slo else None,
        slo_passed=r.slo.passed if r.slo else None,
        valid=r.validity.valid if r.validity else None,
        complete=r.complete,
    )


def sweep_knees(rows: Sequence[SweepRow]) -> list[SweepKnee]:
    """The knee of each workload's curve per loop mode (a suite holds several; rate inf is no
    point on a curve): the first point whose TPOT p50 exceeds 1.5 x the lowest load's
    (``core.analysis.sweep.find_knee``), with its row in ``rows``."""
    curves: dict[tuple[str | None, LoadMode | None], list[tuple[int, float]]] = {}
    for i, row in enumerate(rows):
        if row.load is not None and row.load != math.inf:
            curves.setdefault((row.workload, row.mode), []).append((i, float(row.load)))
    knees = []
    for (workload, mode), points in curves.items():
        knee = find_knee([(load, rows[i].tpot_p50_ms) for i, load in points])
        if knee is not None:
            knees.append(SweepKnee(
                index=knee.index, load=knee.load, tpot_p50_ms=knee.tpot_p50_ms,
                baseline_ms=knee.baseline_ms, threshold_ms=knee.threshold_ms,
                row=points[knee.index][0], workload=workload, mode=mode))
    return knees


def sweep_summary(outcomes: list[RunOutcome], search: FindMax | None) -> Sweep:
    """The curve over load points: one row per point (:func:`sweep_row`), the knees
    (:func:`sweep_knees`) and the find-max answer when one was searched, as the sweep file's
    type (:class:`infer_prof.results.sweep_document.Sweep`; no frontier yet: left out)."""
    rows = [sweep_row(o) for o in outcomes]
    return Sweep(
        schema_version=SCHEMA_VERSION,
        kind="infer-prof.sweep",
        points=rows,
        knees=sweep_knees(rows),
        knee_rule="first point whose TPOT p50 exceeds 1.5 x the lowest load's",
        find_max=search,
        frontier=UNSET,
        frontiers=UNSET,
        engine_sweep=UNSET,
    )


def record_sweep(
    cfg: RunConfig,
    model_name: str,
    stamp: str,
    outcomes: list[RunOutcome],
    search: FindMax | None,
    frontier: Frontier | None = None,
    frontiers: list[Frontier] | None = None,
    several: bool = True,
) -> SweepOutcome:
    """The execution's outcome; with several points, --find-max or --frontier, the sweep
    summary (with ``frontier``: :mod:`infer_prof.run.frontier_run`) written to ``--output``
    when given (the run's file: the points' files are ``<output stem>-<label>.json`` beside
    it, :func:`point_files`), else to ``<results dir>/<stamp>-<model>[-<tag>].sweep.json``.
    ``several``: the run has more than one load point (one point repeated, ``--repeat``, is
    no sweep)."""
    results_dir = Path(cfg.results.results_dir)
    many = several and len(outcomes) > 1
    if not (many or cfg.load.find_max or frontier is not None or frontiers):
        return SweepOutcome(outcomes)
    summary = sweep_summary(outcomes, search)
    summary.frontier = frontier
    if frontiers is not None:  # --frontier --suite: one per member
        summary.frontiers = frontiers
    sweep = msgspec.to_builtins(summary)
    check_result_type(sweep)  # held to its declared type (Sweep) before it is written
    tag = f"-{cfg.results.run_tag}" if cfg.results.run_tag else ""
    name = f"{stamp}-{safe_name(model_name)}{tag}.sweep"
    text = json.dumps(sweep, indent=2, default=str) + "\n"
    if cfg.results.output:  # checked before the run started: absent, or --overwrite
        sweep_path, _ = result_paths(cfg.results.output, results_dir, name)
        if cfg.results.overwrite:
            write_file(sweep_path, text)
        else:  # taken meanwhile: the next free name (-2), never another run's file replaced
            sweep_path = write_new_file(sweep_path, text)
    else:
        sweep_path = write_new_file(results_dir / f"{name}.json", text)
    return SweepOutcome(outcomes, decode_sweep(sweep), sweep_path)


def dist_ms(values_ns: Sequence[int | float]) -> dict[str, Any] | None:
    """The summary (:func:`summary_dict`) of nanosecond values, in ms."""
    return summary_dict(values_ns, 1e-6)
