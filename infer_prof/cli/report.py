"""``infer-prof report``: one self-contained HTML report over result files (and PNG plots)."""

from __future__ import annotations

from pathlib import Path

import typer

from infer_prof.cli.common import fail
from infer_prof.report.html import build_report, load_run, run_order
from infer_prof.report.plots import PngError, render_pngs
from infer_prof.results_io import expand_paths
from infer_prof.schema import ResultFileError


def report_command(
    results: list[str] = typer.Argument(
        ..., help="Result JSON files, folders of them, or glob patterns (quote them)."
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
) -> None:
    """Write one self-contained HTML report (no network needed to view it): summary table,
    latency CDFs, throughput/latency against load for sweeps, cost per 1M tokens by GPU, and
    telemetry over time. Runs appear ordered by GPU, model and load."""
    try:
        runs = [load_run(p) for p in expand_paths(results)]
    except ResultFileError as exc:
        fail(str(exc))
    if output.is_dir():
        fail(f"--output {output} is a folder; name the HTML file to write")
    runs.sort(key=run_order)
    report = build_report(runs, title=title)
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
