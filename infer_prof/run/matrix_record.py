"""Writing a matrix cell's results home: each load point's result document (with a ``matrix``
section: the matrix, the cell, the attempt and where it ran), its per-request records, its row in
the history, and the matrix summary file listing every cell's outcome.

A cell that never came back (its node lost, the driver interrupted) is recorded too: a result
document with ``complete: false`` and the reason, so the history and ``compare`` show it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from infer_prof import __version__
from infer_prof.core.planning.matrix import Cell, Matrix
from infer_prof.results import history_database
from infer_prof.results.document_base import Obj
from infer_prof.results.loading import record_result
from infer_prof.results.matrix_sections import MatrixSection, NodeFacts, Placement
from infer_prof.results.matrix_summary import (
    MATRIX_SUMMARY_KIND,
    CellAttempt,
    CellStatus,
    MatrixSummary,
)
from infer_prof.results.schema import RESULT_KIND, SCHEMA_VERSION
from infer_prof.results.store import safe_name, write_file, write_result
from infer_prof.run.matrix_cell import CellRun


@dataclass
class CellOutcome:
    """One attempt at a cell as the driver recorded it."""

    cell: Cell
    status: CellStatus
    reason: str | None = None
    attempt: int = 1
    placement: Placement = field(default_factory=Placement)  # node, IP, accelerator type
    result_paths: list[Path] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    submitted_at: float | None = None  # driver's wall clock (s)
    started_at: float | None = None  # node's wall clock (s)
    finished_at: float | None = None
    history_errors: list[str] = field(default_factory=list)

    def record(self) -> CellAttempt:
        """The outcome as the matrix summary file lists it."""
        start_delay = (None if self.started_at is None or self.submitted_at is None
                       else round(self.started_at - self.submitted_at, 3))
        duration = (None if self.started_at is None or self.finished_at is None
                    else round(self.finished_at - self.started_at, 3))
        return CellAttempt(cell=self.cell.record(), status=self.status, reason=self.reason,
                           attempt=self.attempt, placement=self.placement,
                           results=[str(p) for p in self.result_paths],
                           submit_to_start_s=start_delay, duration_s=duration,
                           history_errors=list(self.history_errors))

    def to_dict(self) -> dict[str, Any]:
        """:meth:`record` as JSON types."""
        return dict(msgspec.to_builtins(self.record()))


def _section(matrix: Matrix, cell: Cell, attempt: int, placement: Placement) -> Obj:
    """The result's ``matrix`` section (:class:`MatrixSection`) as JSON values."""
    section = MatrixSection(name=matrix.name, file=matrix.source, cell=cell.record(),
                            attempt=attempt, placement=placement)
    out: Obj = msgspec.to_builtins(section)
    return out


def _tag(cell: Cell, attempt: int) -> str:
    parts = [cell.gpu] + [p for p in (cell.engine.name, cell.workload.name) if p != "default"]
    if attempt > 1:
        parts.append(f"attempt{attempt}")
    return safe_name("-".join(parts))


def _free_id(results_dir: Path, run_id: str) -> str:
    out, n = run_id, 1
    while (results_dir / f"{out}.json").exists():
        n += 1
        out = f"{run_id}-{n}"
    return out


def _record(doc: dict[str, Any], path: Path, history: str | Path | None,
            outcome: CellOutcome) -> None:
    outcome.result_paths.append(path)
    outcome.results.append(doc)
    if history is None:
        return
    try:
        record_result(history, doc, path)
    except (OSError, history_database.HistoryError) as exc:
        outcome.history_errors.append(str(exc))


def save_cell(run: CellRun, matrix: Matrix, results_dir: Path, history: str | Path | None,
              attempt: int, placement: Placement, submitted_at: float | None
              ) -> CellOutcome:
    """Write a finished cell's result files (run ids made unique per cell: the GPU, engine and
    workload appended) and record each in ``history`` (None: not recorded)."""
    placement = msgspec.structs.replace(placement, node=msgspec.convert(run.node, NodeFacts))
    outcome = CellOutcome(run.cell, "done", attempt=attempt, placement=placement,
                          submitted_at=submitted_at, started_at=run.started_at,
                          finished_at=run.finished_at)
    if run.refused:
        outcome.status, outcome.reason = "skipped", run.refused
        return outcome
    section = _section(matrix, run.cell, attempt, placement)
    for _name, doc, requests in run.results:
        run_id = _free_id(results_dir, f"{doc['run_id']}-{_tag(run.cell, attempt)}")
        doc = {**doc, "run_id": run_id, "matrix": section}
        path = results_dir / f"{run_id}.json"
        if requests is not None:
            doc["requests_file"] = f"{run_id}.requests.jsonl"
            write_file(results_dir / doc["requests_file"], requests)
        write_result(path, doc)
        _record(doc, path, history, outcome)
    bad = [d for d in outcome.results if not d.get("complete", False)]
    if bad:
        outcome.status, outcome.reason = "incomplete", str(bad[0].get("incomplete_reason"))
    elif not run.results:
        outcome.status = "failed"
        tail = run.stderr_tail.strip().splitlines()
        outcome.reason = (f"run exited {run.returncode}: "
                          + (tail[-1] if tail else "no output"))
    return outcome


@dataclass(frozen=True)
class LostAttempt:
    """An attempt at a cell that never came back: its number (from 1), where it was placed,
    its ``status`` (``incomplete``, ``failed``, ``cancelled``) and ``reason``, and when it was
    submitted and started (Unix seconds; None when it never was)."""

    attempt: int
    placement: Placement
    reason: str
    status: CellStatus
    submitted_at: float | None
    started_at: float | None


def save_lost_cell(cell: Cell, matrix: Matrix, results_dir: Path, history: str | Path | None,
                   lost: LostAttempt) -> CellOutcome:
    """Record a cell that never came back (node lost, interrupted): one result document with
    ``complete: false`` and ``lost.reason``, in the results folder and the history."""
    attempt, placement, reason = lost.attempt, lost.placement, lost.reason
    outcome = CellOutcome(cell, lost.status, reason, attempt, placement,
                          submitted_at=lost.submitted_at, started_at=lost.started_at)
    now = dt.datetime.now(dt.UTC)
    run_id = _free_id(results_dir, f"{now:%Y%m%d-%H%M%S}-{safe_name(cell.model)}-"
                      f"{_tag(cell, attempt)}")
    doc: dict[str, Any] = {
        "kind": RESULT_KIND, "schema_version": SCHEMA_VERSION, "run_id": run_id,
        "started_at": now.isoformat(), "complete": False, "incomplete_reason": reason,
        "model": {"name": cell.model},
        "config": {"model": cell.model, "gpu": None if cell.gpu == "cpu" else cell.gpu,
                   "concurrency": (cell.workload.concurrency[0]
                                   if len(cell.workload.concurrency) == 1 else None),
                   "labels": {"matrix_cell": cell.cell_id}},
        "gpu": {"key": None if cell.gpu == "cpu" else cell.gpu},
        "summary": {}, "environment": {"infer_prof": __version__},
        "matrix": _section(matrix, cell, attempt, placement),
    }
    path = results_dir / f"{run_id}.json"
    write_result(path, doc)
    _record(doc, path, history, outcome)
    return outcome


def write_summary(matrix: Matrix, outcomes: list[CellOutcome], results_dir: Path,
                  stamp: str, wall_s: float, mode: Literal["here", "ray"]) -> Path:
    """The matrix summary (:class:`MatrixSummary`): every attempt at every cell, its status and
    files, and the wall time of the whole matrix; ``<results dir>/<stamp>-<name>.matrix.json``."""
    path = results_dir / f"{stamp}-{safe_name(matrix.name)}.matrix.json"
    summary = MatrixSummary(kind=MATRIX_SUMMARY_KIND, name=matrix.name, file=matrix.source,
                            mode=mode, wall_s=round(wall_s, 3),
                            cells=[o.record() for o in outcomes])
    write_result(path, msgspec.to_builtins(summary))
    return path
