"""``infer-prof compare --target-interactivity X`` / ``--slo``: frontiers side by side, cheapest
first at the speed the users need (docs/frontier.md)."""

from __future__ import annotations

import csv
import io
import json
import math
import sys

import msgspec
import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infer_prof.cli.common import fail
from infer_prof.core.analysis.frontier_compare import TargetRow, rows_at_target
from infer_prof.core.workload.slo import SloError, format_slos, parse_slos
from infer_prof.report.console import fmt_value
from infer_prof.results import history_database
from infer_prof.results.document import Result
from infer_prof.results.frontier_curves import (
    curves_from_results,
    differing_workloads,
    results_from_history,
)
from infer_prof.results.loading import load_typed_results
from infer_prof.results.schema import ResultFileError

#: (key, header, decimals) of the table's columns, in order; keys as in the JSON rows.
COLUMNS = (
    ("gpu", "GPU", None),
    ("instance", "instance", None),
    ("configuration", "configuration", None),
    ("usd_per_million_output_tokens", "$/1M out", 4),
    ("usd_per_million_total_tokens", "$/1M total", 4),
    ("output_tok_s_per_gpu", "out tok/s/GPU", 1),
    ("total_tok_s_per_gpu", "tot tok/s/GPU", 1),
    ("interactivity", "tok/s/user", 1),
    ("note", "read", None),
)


class FrontierAtTarget(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One frontier read at the target, as the comparison prints it (a JSON row; the table's
    :data:`COLUMNS`): the GPU, instance and configuration; $ per 1M output and total tokens
    (USD, None without a price), output and total tokens/s per GPU and the interactivity
    (tokens/s per user) at the target, whether they were interpolated and between which loads
    (None when the curve does not reach it); the note (with the points not ok, if any), whether
    it reaches the target, the curve's source, its problems, the price (USD per GPU-hour), the
    number of points and their files."""

    gpu: str
    instance: str
    configuration: str
    usd_per_million_output_tokens: float | None
    usd_per_million_total_tokens: float | None
    output_tok_s_per_gpu: float | None
    total_tok_s_per_gpu: float | None
    interactivity: float | None
    interpolated: bool | None
    between: list[float] | None
    note: str
    reaches: bool
    source: str
    problems: list[str]
    usd_per_gpu_hour: float | None
    points: int
    files: list[str]


def flat_row(row: TargetRow) -> FrontierAtTarget:
    """One row (:class:`FrontierAtTarget`) of a curve read at the target."""
    c, at = row.curve, row.at
    note = row.note
    if c.problems:  # a point whose numbers do not hold is said in the row
        note += f" [{len(c.problems)} point(s) not ok: " + "; ".join(c.problems) + "]"
    return FrontierAtTarget(
        gpu=c.gpu,
        instance=c.instance,
        configuration=c.configuration,
        usd_per_million_output_tokens=at.usd_per_million_output_tokens if at else None,
        usd_per_million_total_tokens=at.usd_per_million_total_tokens if at else None,
        output_tok_s_per_gpu=at.output_tok_s_per_gpu if at else None,
        total_tok_s_per_gpu=at.total_tok_s_per_gpu if at else None,
        interactivity=at.interactivity if at else None,
        interpolated=at.interpolated if at else None,
        between=list(at.between) if at and at.between is not None else None,
        note=note,
        reaches=at is not None,
        source=c.source,
        problems=list(c.problems),
        usd_per_gpu_hour=c.usd_per_gpu_hour,
        points=len(c.points),
        files=list(c.files),
    )


def _table(rows: list[FrontierAtTarget], title: str) -> Table:
    t = Table(box=box.SIMPLE_HEAVY, title=title, title_justify="left",
              caption="cheapest first; $ per 1M tokens at each GPU's price per hour; n/a: no "
                      "price", caption_justify="left")
    for _key, header, digits in COLUMNS:
        t.add_column(header, justify="left" if digits is None else "right", no_wrap=True)
    for row in rows:
        cells = []
        for key, _, digits in COLUMNS:
            v = getattr(row, key)
            text = escape(fmt_value(v, digits) if digits is not None else str(v or ""))
            if key == "note" and not row.reaches:
                text = f"[bold red]{text}[/bold red]"
            cells.append(text)
        t.add_row(*cells)
    return t


def _csv(rows: list[FrontierAtTarget]) -> str:
    buf = io.StringIO()
    keys = [k for k, _, _ in COLUMNS] + ["interpolated", "between", "source", "usd_per_gpu_hour"]
    w = csv.writer(buf)
    w.writerow(keys)
    for row in rows:
        w.writerow(["" if getattr(row, k) is None else
                    (" ".join(f"{x:g}" for x in row.between or []) if k == "between"
                     else getattr(row, k))
                    for k in keys])
    return buf.getvalue()


def _markdown(rows: list[FrontierAtTarget], title: str) -> str:
    lines = [f"**{title}**", "", "| " + " | ".join(h for _, h, _ in COLUMNS) + " |",
             "|" + "|".join("---" if d is None else "---:" for _, _, d in COLUMNS) + "|"]
    for row in rows:
        cells = [fmt_value(getattr(row, k), d) if d is not None else str(getattr(row, k) or "")
                 for k, _, d in COLUMNS]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _load(
    results: list[str], history_db: str | None, model: str | None,
) -> list[tuple[str, Result]]:
    loaded: list[tuple[str, Result]] = []
    if results:
        try:
            loaded += [(str(p), r) for p, r in load_typed_results(results)]
        except ResultFileError as exc:
            fail(str(exc))
    if history_db is not None:
        try:
            kept, missing = results_from_history(history_database.parse_location(history_db),
                                                 model)
        except (history_database.HistoryError, ResultFileError) as exc:
            fail(str(exc))
        if missing:
            typer.echo(f"warning: {missing} run(s) in the history keep no result document "
                       "(recorded before it kept them): left out", err=True)
        loaded += kept
    elif model is not None:
        fail("--model filters the history: give --history too")
    if not loaded:
        fail("nothing to compare: name result files (a sweep's per-point results, or a "
             "run --frontier result) or give --history")
    return loaded


def compare_frontiers(
    results: list[str],
    output_format: str,
    force: bool,
    target: float | None,
    slo_text: str | None,
    history_db: str | None,
    model: str | None,
) -> None:
    """The frontier comparison (module docstring): checks its input (exit 2), prints the rows
    cheapest first, and exits 2 when no frontier reaches the target (or meets the SLOs)."""
    if target is not None and not (math.isfinite(target) and target > 0):
        fail(f"--target-interactivity {target:g}: give tokens/s per user > 0, e.g. 20")
    slos = None
    if slo_text is not None:
        try:
            slos = parse_slos(slo_text)
        except SloError as exc:
            fail(f"--slo: {exc}")
    loaded = _load(results, history_db, model)
    diff = differing_workloads(loaded)
    if diff:
        listing = "; ".join(f"{k}: {sorted({json.dumps(v, default=str) for v in vals})}"
                            for k, vals in diff.items())
        if not force:
            fail(f"these runs measured different things ({listing}); one target compares one "
                 "model and workload: use --force to compare them anyway")
        typer.echo(f"warning: comparing runs of different workloads: {listing}", err=True)
    curves = curves_from_results(loaded, slos)
    if not curves:
        fail("no result has a throughput to place on a frontier")
    rows = [flat_row(r) for r in rows_at_target(curves, target, slo=bool(slos))]
    parts = [f"at {target:g} tokens/s/user"] if target is not None else []
    if slos:
        parts.append(f"meeting {format_slos(slos)}")
    title = f"{len(curves)} frontier(s) " + ", ".join(parts)
    if output_format == "json":
        typer.echo(json.dumps({"target_interactivity": target,
                               "slo": format_slos(slos) if slos else None,
                               "rows": msgspec.to_builtins(rows)},
                              indent=2, default=str))
    elif output_format == "csv":
        sys.stdout.write(_csv(rows))
    elif output_format == "markdown":
        sys.stdout.write(_markdown(rows, title))
    else:
        console = Console()
        if not console.is_terminal:
            console = Console(width=400)
        console.print(_table(rows, title))
    if not any(r.reaches for r in rows):
        what = f"{target:g} tokens/s/user" if target is not None else "the SLOs"
        fail(f"no frontier reaches {what}" + (" within the SLOs" if slos and target else "")
             + ": " + "; ".join(f"{r.gpu} {r.configuration}: {r.note}" for r in rows))
