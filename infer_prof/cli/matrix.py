"""``infer-prof matrix FILE``: a comparison matrix (models x GPU types x engine configurations x
workloads), here one cell after another or on a Ray cluster (``--ray``), one table at the end."""

from __future__ import annotations

import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from infer_prof.cli.common import fail
from infer_prof.cli.compare import _table
from infer_prof.cli.declared import declared_command
from infer_prof.config.options import Opt
from infer_prof.core.planning.matrix import cell_run_args
from infer_prof.core.planning.multinode import placement_bundles
from infer_prof.results.comparison_rows import comparison_table
from infer_prof.results.document import decode_result
from infer_prof.run.config import ConfigError


def _where_here(cells: Any) -> dict[int, str]:
    from infer_prof.run.matrix_cell import gpu_mismatch, node_facts

    facts = node_facts()
    out = {}
    for c in cells:
        why = gpu_mismatch(c, facts, require_gpu=True)
        out[c.index] = f"skip: {why}" if why else "here"
    return out


def _dry_run(matrix: Any, plans: Any, where: dict[int, str], types: dict[str, str]) -> None:
    console = Console(width=200)
    console.print(f"matrix {matrix.name} ({matrix.source}): {len(matrix.cells)} cells; nothing "
                  "started")
    for c in matrix.cells:
        p = plans[c.index]
        console.print(f"[{c.index}] {c.cell_id}  ->  {where[c.index]}")
        console.print(f"      plan: {p.verdict}")
        if p.pipeline > 1 and p.parallelism is not None:
            accel = "accelerator_type:" + types.get(c.gpu, c.gpu)
            bundles = placement_bundles(p.parallelism.tensor, p.pipeline, accel)
            console.print(f"      placement group (PACK): {bundles}")
        args = " ".join(cell_run_args(c, "RESULTS", p.pipeline))
        console.print(f"      infer-prof run {args}", markup=False)


def _sigterm_as_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@dataclass(frozen=True)
class MatrixOptions:
    """The options of ``infer-prof matrix``, each declared once
    (:mod:`infer_prof.cli.declared`)."""

    file: Annotated[str, Opt(
        (),
        ("The matrix file (TOML): models, gpus, concurrency, input_len, output_len, "
        "num_requests; [[engines]], [[workloads]]."), positional=True)]
    ray_address: Annotated[str | None, Opt(
        ("--ray",),
        ("Run the cells on this Ray cluster (ADDRESS, e.g. 10.0.0.1:6379, or auto), each "
        "on a node of its GPU type. Needs pip install 'infer-prof[ray]'."))] = None
    dry_run: Annotated[bool, Opt(
        ("--dry-run",),
        ("Print the cells, where each would run and the planner's verdict; start "
        "nothing."))] = False
    results_dir: Annotated[str, Opt(
        ("--results-dir",),
        "Folder for result files.")] = "results"
    history_db: Annotated[str | None, Opt(
        ("--history", "--history-db"),
        ("History to record each cell's results in (sqlite:///PATH, a path, or "
        "postgresql://...); default $INFER_PROF_HISTORY, else <results "
        "dir>/history.sqlite."))] = None
    no_history: Annotated[bool, Opt(
        ("--no-history",),
        "Do not record in a history.")] = False


def matrix(o: MatrixOptions) -> None:
    """Run a comparison matrix: each cell an ordinary `infer-prof run`, here or on Ray."""
    from infer_prof.results import history_database
    from infer_prof.run.matrix_file import read_matrix
    from infer_prof.run.matrix_plan import plan_cell

    try:
        matrix = read_matrix(o.file)
        plans = {c.index: plan_cell(c, matrix) for c in matrix.cells}
    except ConfigError as exc:
        fail(str(exc))
    if matrix.frontier and not o.ray_address:
        from infer_prof import __version__
        from infer_prof.run.matrix_cell import supports_frontier

        if not supports_frontier():
            fail(f"{matrix.source}: frontier: frontier = true needs infer-prof run --frontier, "
                 f"which this infer-prof ({__version__}) does not have")
    history: str | Path | None = None
    if not o.no_history:
        history = history_database.resolve(o.history_db, Path(o.results_dir) / "history.sqlite")
        try:
            history_database.parse_location(history)
        except history_database.HistoryError as exc:
            fail(str(exc))
    ray: Any = None
    types: dict[str, str] = {}
    if o.ray_address:
        from infer_prof.run.matrix_ray import check_cluster, check_reachable, import_ray

        if (Path.cwd() / "infer_prof" / "__init__.py").is_file():
            # Ray puts the driver's working directory first on every worker's sys.path
            sys.stderr.write(f"warning: {Path.cwd()} holds an infer_prof package, which Ray "
                             "puts first on every node's path: the nodes run this copy, not "
                             "their own install; run matrix --ray from another folder\n")
        try:
            ray = import_ray()
            check_reachable(o.ray_address)
            ray.init(address=o.ray_address, log_to_driver=False, logging_level="ERROR")
            types = check_cluster(ray, matrix, plans)
        except ConfigError as exc:
            fail(str(exc))
        except ConnectionError as exc:
            fail(f"--ray {o.ray_address}: cannot connect to the Ray cluster: {exc}")
        where = {c.index: f"Ray: {plans[c.index].gpus} GPU x accelerator_type:{types[c.gpu]}"
                 for c in matrix.cells}
    else:
        where = _where_here(matrix.cells)
    if o.dry_run:
        _dry_run(matrix, plans, where, types)
        return
    _run(matrix, plans, ray, types, Path(o.results_dir), history)


matrix_command = declared_command(MatrixOptions, matrix)


def _run(matrix: Any, plans: Any, ray: Any, types: dict[str, str], results_dir: Path,
         history: str | Path | None) -> None:
    from infer_prof.run.matrix_local import run_here
    from infer_prof.run.matrix_ray import run_on_ray
    from infer_prof.run.matrix_record import write_summary

    def say(line: str) -> None:  # one line each, never wrapped: scripts read them
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    started = time.monotonic()
    outcomes: list[Any] = []
    interrupted = False
    old = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        if ray is not None:
            outcomes = run_on_ray(ray, matrix, plans, types, results_dir, history, say)
        else:
            outcomes = run_here(matrix, plans, results_dir, history, say)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        signal.signal(signal.SIGTERM, old)
    wall = time.monotonic() - started
    summary = write_summary(matrix, outcomes, results_dir, stamp, wall,
                            "ray" if ray is not None else "here")
    docs = [d for o in outcomes for d in o.results]
    if docs:
        rows, best = comparison_table([decode_result(d) for d in docs])
        console = Console()
        if not console.is_terminal:
            console = Console(width=400)
        console.print(_table(rows, best))
    for o in outcomes:
        if o.status not in ("done",):
            say(f"{o.cell.cell_id} (attempt {o.attempt}): {o.status}: {o.reason}")
        for e in o.history_errors:
            say(f"warning: {o.cell.cell_id}: not recorded in the history: {e}")
    say(f"matrix: {summary} ({wall:.1f} s wall)")
    if interrupted:
        raise typer.Exit(130)
    if any(o.status in ("incomplete", "failed", "cancelled") for o in outcomes
           if not _retried_ok(o, outcomes)):
        raise typer.Exit(3)


def _retried_ok(o: Any, outcomes: list[Any]) -> bool:
    """Whether a later attempt of the same cell finished."""
    return any(x.cell.index == o.cell.index and x.attempt > o.attempt and x.status == "done"
               for x in outcomes)

