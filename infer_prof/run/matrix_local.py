"""The matrix here, one cell after another: each cell an ordinary ``infer-prof run`` on this
machine (:func:`infer_prof.run.matrix_cell.run_cell_here`, its progress shown live), a cell whose
GPU type is not this machine's skipped with the reason."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from infer_prof.core.planning.matrix import Matrix
from infer_prof.results.matrix_sections import Placement
from infer_prof.run.matrix_cell import run_cell_here
from infer_prof.run.matrix_plan import CellPlan
from infer_prof.run.matrix_record import CellOutcome, LostAttempt, save_cell, save_lost_cell

INTERRUPTED = "interrupted: the matrix driver was stopped (Ctrl-C or SIGTERM)"


def run_here(matrix: Matrix, plans: dict[int, CellPlan], results_dir: Path,
             history: str | Path | None, say: Callable[[str], None],
             live: bool = True) -> list[CellOutcome]:
    """Run every cell here in order and write each home; stop at Ctrl-C (the running cell's
    measured points are kept, marked interrupted; the cells after it are not started) and
    re-raise KeyboardInterrupt."""
    outcomes: list[CellOutcome] = []
    n = len(matrix.cells)
    placement = Placement(where="here")
    for cell in matrix.cells:
        pp = plans[cell.index].pipeline
        if pp > 1:
            outcomes.append(CellOutcome(cell, "skipped", f"needs {pp} nodes (pipeline "
                                        "parallel): run it with --ray", placement=placement))
            say(f"[{cell.index}/{n}] {cell.cell_id}: skipped: {outcomes[-1].reason}")
            continue
        say(f"[{cell.index}/{n}] {cell.cell_id}: starting here" if cell.gpu == "cpu" else
            f"[{cell.index}/{n}] {cell.cell_id}: checking this machine's GPU, then starting")
        submitted = time.time()
        run = run_cell_here(cell, capture=not live, require_gpu=True,
                            node=msgspec.to_builtins(placement))
        outcome = save_cell(run, matrix, results_dir, history, 1, placement, submitted)
        if run.interrupted and outcome.status != "incomplete":
            outcome = save_lost_cell(cell, matrix, results_dir, history, LostAttempt(
                1, placement, INTERRUPTED, "cancelled", submitted, run.started_at))
        outcomes.append(outcome)
        for path in outcome.result_paths:  # (the paths run printed were its private folder's)
            say(f"[{cell.index}/{n}] result: {path}")
        if run.interrupted:
            say(f"[{cell.index}/{n}] {cell.cell_id}: {INTERRUPTED}")
            raise KeyboardInterrupt
        say(f"[{cell.index}/{n}] {cell.cell_id}: {outcome.status}"
            + (f": {outcome.reason}" if outcome.reason else "")
            + (f" ({run.finished_at - run.started_at:.1f} s)" if not run.refused else ""))
    return outcomes
