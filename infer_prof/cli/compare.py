"""``infer-prof compare``: one table, a row per run, the best value of each column marked."""

from __future__ import annotations

import csv
import io
import json
import sys
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infer_prof.cli.common import fail
from infer_prof.cli.compare_frontiers import compare_frontiers
from infer_prof.core.comparison import COLUMNS, comparison_table, format_value
from infer_prof.report.markdown import compare_markdown
from infer_prof.results.loading import PLACEMENT_FIELDS, differing_fields, load_results
from infer_prof.results.schema import ResultFileError

FORMATS = ("table", "markdown", "csv", "json")


def describe_differences(diff: dict[str, list[Any]], names: list[str]) -> str:
    """``field: value (run), value (run); ...`` for an error message, one field per line."""
    lines = []
    for key, values in diff.items():
        shown = ", ".join(
            f"{json.dumps(v, default=str)} ({n})" for v, n in zip(values, names, strict=True)
        )
        lines.append(f"  {key}: {shown}")
    return "\n".join(lines)


def _csv(rows: list[dict[str, Any]], best: dict[str, set[int]], paths: list[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([c.key for c in COLUMNS] + ["best_in", "run_id", "path"])
    for i, row in enumerate(rows):
        best_in = ";".join(k for k, idx in best.items() if i in idx)
        cells = ["" if row.get(c.key) is None else row.get(c.key) for c in COLUMNS]
        w.writerow([*cells, best_in, row.get("run_id", ""), paths[i]])
    return buf.getvalue()


def _table(rows: list[dict[str, Any]], best: dict[str, set[int]]) -> Table:
    t = Table(box=box.SIMPLE_HEAVY, caption="* best in its column", caption_justify="left")
    for c in COLUMNS:
        t.add_column(
            c.header,
            justify="right" if c.better or c.key == "concurrency" else "left",
            no_wrap=True,
        )
    for i, row in enumerate(rows):
        cells = []
        for c in COLUMNS:
            text = escape(format_value(c, row.get(c.key)))
            if c.key == "status" and text != "ok":
                text = f"[bold red]{text}[/bold red]"  # a run whose numbers do not hold
            cells.append(f"[bold]{text}*[/bold]" if i in best.get(c.key, set()) else text)
        t.add_row(*cells)
    return t


def compare_command(
    results: list[str] = typer.Argument(
        None, help="Result files, folders of them, or glob patterns (quote them: 'results/*.json')."
    ),
    output_format: str = typer.Option(
        "table", "--format", "-f", help="table, markdown, csv or json."
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Compare even when the runs' workload or settings differ (they are listed).",
    ),
    target_interactivity: float = typer.Option(
        None, "--target-interactivity",
        help="Tokens/s each user sees (1000 / TPOT p50 in ms): one row per GPU, instance and "
        "configuration, cheapest first, read off each frontier at this speed (docs/frontier.md).",
    ),
    slo: str = typer.Option(
        None, "--slo",
        help="With the frontier comparison: only points meeting these, e.g. "
        "ttft_p99=2000,tpot_p99=50 (ms); alone, each frontier's best point meeting them.",
    ),
    history_db: str = typer.Option(
        None, "--history",
        help="Compare frontiers from this history (sqlite:///PATH, a path, or postgresql://...) "
        "instead of, or besides, result files; with --target-interactivity or --slo.",
    ),
    model: str = typer.Option(None, "--model", help="With --history: only this model's runs."),
) -> None:
    """Compare runs side by side: GPU, label, throughput, latency percentiles, cost, energy.

    With --target-interactivity or --slo: compare frontiers (GPUs, instances, configurations)
    by what a million tokens costs at the speed the users need."""
    if output_format not in FORMATS:
        fail(f"--format {output_format!r} is not one of {', '.join(FORMATS)}")
    if target_interactivity is not None or slo is not None:
        compare_frontiers(results or [], output_format, force, target_interactivity, slo,
                          history_db, model)
        return
    if history_db is not None or model is not None:
        fail("--history and --model go with --target-interactivity or --slo (a frontier "
             "comparison); to compare result files, name them")
    if not results:
        fail("name result files, folders or glob patterns to compare")
    try:
        loaded = load_results(results)
    except ResultFileError as exc:
        fail(str(exc))
    dicts = [r for _, r in loaded]
    names = [str(r.get("run_id") or p.stem) for p, r in loaded]
    diff = differing_fields(dicts, ignore=PLACEMENT_FIELDS)
    if diff:
        listing = describe_differences(diff, names)
        if not force:
            fail(
                "these runs differ in more than where they ran, so their numbers are not "
                f"comparable:\n{listing}\nuse --force to compare them anyway"
            )
        typer.echo(f"warning: comparing runs whose settings differ:\n{listing}", err=True)
    rows, best = comparison_table(dicts)
    for row, name in zip(rows, names, strict=True):
        row["run_id"] = name
    incomplete = [n for n, r in zip(names, dicts, strict=True) if not r.get("complete", True)]
    if incomplete:
        typer.echo(f"warning: incomplete runs: {', '.join(incomplete)}", err=True)
    invalid = [
        n
        for n, r in zip(names, dicts, strict=True)
        if (r.get("validity") or {}).get("valid") is False
    ]
    if invalid:
        typer.echo(f"warning: invalid runs: {', '.join(invalid)} (see the status column)", err=True)
    paths = [str(p) for p, _ in loaded]
    if output_format == "json":
        payload = {
            "columns": [{"key": c.key, "header": c.header, "better": c.better} for c in COLUMNS],
            "rows": [{**row, "path": paths[i]} for i, row in enumerate(rows)],
            "best": {k: sorted(v) for k, v in best.items()},
            "differing_fields": diff,
        }
        typer.echo(json.dumps(payload, indent=2, default=str))
    elif output_format == "csv":
        sys.stdout.write(_csv(rows, best, paths))
    elif output_format == "markdown":
        sys.stdout.write(compare_markdown(rows, best))
    else:
        console = Console()
        if not console.is_terminal:
            console = Console(width=400)  # a pipe or file: never squeeze or wrap the columns
        console.print(_table(rows, best))
