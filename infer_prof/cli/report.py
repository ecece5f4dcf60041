"""``infer-prof report``: one self-contained HTML report over result files (and PNG plots)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from infer_prof.cli.common import fail
from infer_prof.results import history, history_database
from infer_prof.results.loading import expand_paths, history_result
from infer_prof.results.schema import ResultFileError

if TYPE_CHECKING:  # the report modules are imported by the command: --help stays fast
    from infer_prof.report.run_data import RunData


def _from_history(spec: str, db: str | Path) -> list[RunData]:
    """``history:RUN_ID`` (that run) or ``history:N`` (the newest N runs) from the history."""
    from infer_prof.report.run_data import RunData

    sel = spec.split(":", 1)[1].strip()
    if not sel:
        fail(f"{spec!r}: write history:RUN_ID or history:N (the newest N runs)")
    ids = [r.run_id for r in history.list_runs(db, limit=int(sel))] if sel.isdigit() else [sel]
    if not ids:
        fail(f"{spec}: no runs recorded in {history_database.describe(db)}")
    out = []
    for rid in ids:
        kept = history_result(db, rid)
        if kept is None:
            fail(
                f"{spec}: {history_database.describe(db)} holds no result file of run {rid!r} (not "
                "recorded, or recorded before the history kept result files)"
            )
        result, records = kept
        note = None if records is not None else "per-request records not kept in the history"
        out.append(RunData(result, f"history:{rid}", records, note))
    return out


def report_command(
    results: list[str] = typer.Argument(
        ...,
        help="Result JSON files, folders of them, or glob patterns (quote them); history:RUN_ID "
        "or history:N (the newest N runs) read runs from --history.",
    ),
    output: Path = typer.Option(
        Path("report.html"), "--output", "-o", help="The HTML file to write."
    ),
    png_dir: Path | None = typer.Option(
        None,
        "--png-dir",
        help="Also write every plot as a PNG into this folder (needs Chromium: "
        "apt-get install -y chromium).",
    ),
    title: str = typer.Option("infer-prof report", "--title", help="The report's heading."),
    history_db: str = typer.Option(
        None,
        "--history",
        help="The history that history:... arguments read: sqlite:///PATH (or a path) or "
        "postgresql://USER@HOST:PORT/DB. Default: $INFER_PROF_HISTORY, else "
        f"{history_database.DEFAULT_HELP}.",
    ),
    target_interactivity: float = typer.Option(
        None, "--target-interactivity",
        help="Tokens/s per user to mark on the frontier charts, with a table of every frontier "
        "read at it (cheapest first).",
    ),
) -> None:
    """Write one self-contained HTML report (no network needed to view it): summary table,
    latency CDFs, throughput/latency against load for sweeps, cost per 1M tokens by GPU, and
    telemetry over time. Runs appear ordered by GPU, model and load."""
    from infer_prof.report.chromium import PngError, render_pngs
    from infer_prof.report.html import build_report
    from infer_prof.report.run_data import load_run, run_order

    from_history = [r for r in results if r.startswith("history:")]
    files = [r for r in results if not r.startswith("history:")]
    try:
        runs = [load_run(p) for p in expand_paths(files)] if files else []
        if from_history:
            db = history_database.resolve(history_db)
            for spec in from_history:
                runs.extend(_from_history(spec, db))
    except (ResultFileError, history_database.HistoryError) as exc:
        fail(str(exc))
    if output.is_dir():
        fail(f"--output {output} is a folder; name the HTML file to write")
    runs.sort(key=run_order)
    if target_interactivity is not None and not (
            math.isfinite(target_interactivity) and target_interactivity > 0):
        fail(f"--target-interactivity {target_interactivity:g}: give tokens/s per user > 0")
    report = build_report(runs, title=title, target_interactivity=target_interactivity)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(report.html, encoding="utf-8")
    typer.echo(f"report: {output} ({len(runs)} runs, {len(report.plots)} plots)")
    for run in runs:
        if run.records_note:
            typer.echo(f"note: {run.source}: {run.records_note}", err=True)
    if png_dir is not None:
        try:
            pngs = render_pngs(report.plots, png_dir)
        except PngError as exc:
            fail(str(exc), code=1)
        typer.echo(f"png: {len(pngs)} plots in {png_dir}")
