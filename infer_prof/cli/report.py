"""``infer-prof report``: one self-contained HTML report over result files (and PNG plots)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from infer_prof.cli.common import fail
from infer_prof.cli.declared import declared_command
from infer_prof.config.options import Opt
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


@dataclass(frozen=True)
class ReportOptions:
    """The options of ``infer-prof report``, each declared once
    (:mod:`infer_prof.cli.declared`)."""

    results: Annotated[list[str], Opt(
        (),
        ("Result JSON files, folders of them, or glob patterns (quote them); "
        "history:RUN_ID or history:N (the newest N runs) read runs from --history."),
        positional=True)]
    output: Annotated[Path, Opt(
        ("--output", "-o"),
        "The HTML file to write.")] = Path("report.html")
    png_dir: Annotated[Path | None, Opt(
        ("--png-dir",),
        ("Also write every plot as a PNG into this folder (needs Chromium: apt-get "
        "install -y chromium)."))] = None
    title: Annotated[str, Opt(
        ("--title",),
        "The report's heading.")] = "infer-prof report"
    history_db: Annotated[str | None, Opt(
        ("--history",),
        ("The history that history:... arguments read: sqlite:///PATH (or a path) or "
        "postgresql://USER@HOST:PORT/DB. Default: $INFER_PROF_HISTORY, else "
        f"{history_database.DEFAULT_HELP}."))] = None
    target_interactivity: Annotated[float | None, Opt(
        ("--target-interactivity",),
        ("Tokens/s per user to mark on the frontier charts, with a table of every "
        "frontier read at it (cheapest first)."))] = None
    predicted: Annotated[Path | None, Opt(
        ("--predicted",),
        ("An infer-prof estimate --json file: its predicted frontiers drawn dashed beside "
        "the measured ones."))] = None


def report(o: ReportOptions) -> None:
    """Write one self-contained HTML report (no network needed to view it): summary table,
    latency CDFs, throughput/latency against load for sweeps, cost per 1M tokens by GPU, and
    telemetry over time. Runs appear ordered by GPU, model and load."""
    from infer_prof.report.chromium import PngError, render_pngs
    from infer_prof.report.html import build_report
    from infer_prof.report.run_data import load_run, run_order

    from_history = [r for r in o.results if r.startswith("history:")]
    files = [r for r in o.results if not r.startswith("history:")]
    try:
        runs = [load_run(p) for p in expand_paths(files)] if files else []
        if from_history:
            db = history_database.resolve(o.history_db)
            for spec in from_history:
                runs.extend(_from_history(spec, db))
    except (ResultFileError, history_database.HistoryError) as exc:
        fail(str(exc))
    if o.output.is_dir():
        fail(f"--output {o.output} is a folder; name the HTML file to write")
    runs.sort(key=run_order)
    if o.target_interactivity is not None and not (
            math.isfinite(o.target_interactivity) and o.target_interactivity > 0):
        fail(f"--target-interactivity {o.target_interactivity:g}: give tokens/s per user > 0")
    predicted = []
    if o.predicted is not None:
        from infer_prof.estimate.curves import EstimateFileError, load_estimate, predicted_curves

        try:
            predicted = predicted_curves(load_estimate(o.predicted))
        except EstimateFileError as exc:
            fail(str(exc))
    report = build_report(runs, title=o.title, target_interactivity=o.target_interactivity,
                          predicted=predicted)
    o.output.parent.mkdir(parents=True, exist_ok=True)
    o.output.write_text(report.html, encoding="utf-8")
    typer.echo(f"report: {o.output} ({len(runs)} runs, {len(report.plots)} plots)")
    for run in runs:
        if run.records_note:
            typer.echo(f"note: {run.source}: {run.records_note}", err=True)
    if o.png_dir is not None:
        try:
            pngs = render_pngs(report.plots, o.png_dir)
        except PngError as exc:
            fail(str(exc), code=1)
        typer.echo(f"png: {len(pngs)} plots in {o.png_dir}")


report_command = declared_command(ReportOptions, report)
