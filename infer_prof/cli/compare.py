"""``infer-prof compare``: one table, a row per run, the best value of each column marked."""

from __future__ import annotations

import csv
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from infer_prof.cli.common import fail
from infer_prof.cli.compare_frontiers import compare_frontiers
from infer_prof.cli.declared import declared_command
from infer_prof.config.options import Opt, Range
from infer_prof.core.analysis.comparison import (
    COLUMNS,
    METRIC_COLUMNS,
    format_cell,
    format_interval,
)
from infer_prof.core.measurement.metric_table import columns_at
from infer_prof.core.measurement.prefix_hits import mixed_hit_rates
from infer_prof.report.adapter_table import (
    adapter_rows,
    comparison_adapter_csv,
    comparison_adapter_markdown,
    comparison_adapter_rows,
    comparison_adapter_table,
)
from infer_prof.report.markdown import compare_markdown
from infer_prof.results.comparison_rows import comparison_table
from infer_prof.results.document import Result
from infer_prof.results.identity import PLACEMENT_FIELDS, differing_fields, readable_name
from infer_prof.results.loading import load_typed_results
from infer_prof.results.schema import ResultFileError

if TYPE_CHECKING:
    from infer_prof.cli.compare_tiers import TierTable

FORMATS = ("table", "markdown", "csv", "json", "adapters-csv")
"""``--format``'s values; ``adapters-csv`` is the per-adapter table of runs over LoRA adapters."""


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


#: Columns the console table shows only where some run has a value (the metric table's
#: ``when_measured``): the quality check, the server state, a reasoning model's.
_OPTIONAL_KEYS = {c.key for c in columns_at("compare")
                  if c.metric.shows["compare"].when_measured}


def _table(rows: list[dict[str, Any]], best: dict[str, set[int]]) -> Table:
    repeated = any(row.get("repeats") for row in rows)
    caption = "* best in its column" + (
        "; a run of repeats shows the mean ±SD across them (intervals below)" if repeated else "")
    t = Table(box=box.SIMPLE_HEAVY, caption=caption, caption_justify="left")
    # the quality check's, the server state's and a reasoning model's columns only where a run
    # measured them (JSON and CSV keep every column)
    columns = [c for c in COLUMNS
               if c.key not in _OPTIONAL_KEYS or any(row.get(c.key) is not None for row in rows)]
    for c in columns:
        t.add_column(
            c.header,
            justify="right" if c.better or c.key == "concurrency" else "left",
            no_wrap=True,
        )
    for i, row in enumerate(rows):
        cells = []
        for c in columns:
            text = escape(format_cell(c, row))
            if c.key == "status" and text != "ok":
                text = f"[bold red]{text}[/bold red]"  # a run whose numbers do not hold
            cells.append(f"[bold]{text}*[/bold]" if i in best.get(c.key, set()) else text)
        t.add_row(*cells)
    return t


def _natural_width(table: Table) -> int:
    """The characters ``table`` takes when nothing is squeezed (its widest rendering)."""
    wide = Console(width=10_000)
    return Measurement.get(wide, wide.options, table).maximum


def _interval_table(rows: list[dict[str, Any]]) -> Table | None:
    """The runs of repeats: each metric's Student-t 95 % interval of the mean across them and
    its CV (None when no row is such a run)."""
    repeated = [row for row in rows if row.get("repeats")]
    if not repeated:
        return None
    cols = [c for c in METRIC_COLUMNS if any(format_interval(c, r) for r in repeated)]
    t = Table(box=box.SIMPLE_HEAVY, title="across repeats: 95 % interval of the mean (CV)",
              title_justify="left")
    for head in ("run", "repeats", *(c.header for c in cols)):
        t.add_column(head, no_wrap=True)
    for row in repeated:
        where = "launches" if row.get("repeats_relaunch") else "in one launch"
        t.add_row(escape(str(row.get("run_id", ""))), f"{row['repeats']} ({where})",
                  *(escape(format_interval(c, row)) for c in cols))
    return t


@dataclass(frozen=True)
class CompareOptions:
    """The options of ``infer-prof compare``, each declared once
    (:mod:`infer_prof.cli.declared`)."""

    results: Annotated[list[str] | None, Opt(
        (),
        ("Result files, folders of them, or glob patterns (quote them: "
        "'results/*.json')."), positional=True)] = None
    output_format: Annotated[str, Opt(
        ("--format", "-f"),
        ("table, markdown, csv or json; adapters-csv: one line per run and LoRA adapter "
         "(each adapter's share, requests, TTFT/TPOT p50/p99 and output tokens/s).")
        )] = "table"
    force: Annotated[bool, Opt(
        ("--force",),
        "Compare even when the runs' workload or settings differ (they are listed).")] = False
    target_interactivity: Annotated[float | None, Opt(
        ("--target-interactivity",),
        ("Tokens/s each user sees (1000 / TPOT p50 in ms): one row per GPU, instance and "
        "configuration, cheapest first, read off each frontier at this speed "
        "(docs/frontier.md)."))] = None
    slo: Annotated[str | None, Opt(
        ("--slo",),
        ("With the frontier comparison: only points meeting these, e.g. "
        "ttft_p99=2000,tpot_p99=50 (ms); alone, each frontier's best point meeting "
        "them."))] = None
    history_db: Annotated[str | None, Opt(
        ("--history",),
        ("Compare frontiers from this history (sqlite:///PATH, a path, or "
        "postgresql://...) instead of, or besides, result files; with "
        "--target-interactivity or --slo."))] = None
    model: Annotated[str | None, Opt(
        ("--model",),
        "With --history: only this model's runs.")] = None
    tiers: Annotated[bool, Opt(
        ("--tiers",),
        ("Also cost each run per 1M output tokens on-demand, spot and owned (cheapest "
        "instance of its GPU; seed purchase price)."))] = False
    prices_from: Annotated[str | None, Opt(
        ("--prices-from",),
        "With --tiers: a folder of SkyPilot catalogs to price from.")] = None
    rank_by_cost: Annotated[bool, Opt(
        ("--rank-by-cost",),
        ("Order the runs by $/1M output tokens, cheapest first, among those meeting the quality "
        "floor; the others (below it, quality not measured, no price) are listed apart "
        "(docs/quality.md)."))] = False
    min_quality: Annotated[float | None, Opt(
        ("--min-quality",),
        ("The quality floor: a share of the reference's accuracy (0.99): the run's recorded "
        "--quality-reference, else the most accurate compared run of the same model and task "
        "file. Runs under it are marked BELOW."),
        range=Range("a share in (0, 1]", low=0, high=1, low_open=True))] = None


def compare(o: CompareOptions) -> None:
    """Compare runs side by side: GPU, label, throughput, latency percentiles, cost, energy
    (and, for runs over LoRA adapters, each adapter's figures).

    With --target-interactivity or --slo: compare frontiers (GPUs, instances, configurations)
    by what a million tokens costs at the speed the users need."""
    if o.output_format not in FORMATS:
        fail(f"--format {o.output_format!r} is not one of {', '.join(FORMATS)}")
    ranked = o.rank_by_cost or o.min_quality is not None
    if ranked and (o.target_interactivity is not None or o.slo is not None or o.tiers):
        fail("--rank-by-cost and --min-quality rank result files by their own cost; leave out "
             "--target-interactivity, --slo and --tiers")
    if o.output_format == "adapters-csv" and (
            ranked or o.tiers or o.target_interactivity is not None or o.slo is not None):
        fail("--format adapters-csv lists result files' LoRA adapters; leave out "
             "--target-interactivity, --slo, --tiers, --rank-by-cost and --min-quality")
    if o.target_interactivity is not None or o.slo is not None:
        compare_frontiers(o.results or [], o.output_format, o.force, o.target_interactivity, o.slo,
                          o.history_db, o.model)
        return
    if o.history_db is not None or o.model is not None:
        fail("--history and --model go with --target-interactivity or --slo (a frontier "
             "comparison); to compare result files, name them")
    if not o.results:
        fail("name result files, folders or glob patterns to compare")
    runs = _comparable_runs(o.results, o.force)
    rows, best = comparison_table([r.result for r in runs.loaded])
    for row, name in zip(rows, runs.names, strict=True):
        row["run_id"] = name
    _warn_about_status(runs)
    if ranked:
        from infer_prof.cli.compare_quality import print_ranked

        print_ranked(o.output_format, rows, [str(x.path) for x in runs.loaded], o.min_quality,
                     o.rank_by_cost)
        return
    tier_costs = _tiers([r.result for r in runs.loaded], o.prices_from) if o.tiers else None
    _print_comparison(o.output_format, rows, best, runs, tier_costs)


compare_command = declared_command(CompareOptions, compare)


@dataclass(frozen=True)
class _Loaded:
    path: Path
    result: Result


@dataclass(frozen=True)
class _Runs:
    """The runs to compare, in the order named: each result, its readable name, and the
    settings that differ between them (``{field: [value per run]}``)."""

    loaded: list[_Loaded]
    names: list[str]
    diff: dict[str, list[Any]]


def _comparable_runs(specs: list[str], force: bool) -> _Runs:
    """Load the named results; refuse (exit 2) runs whose settings differ in more than where
    they ran, unless ``force`` (then warn, listing the differences)."""
    try:
        loaded = [_Loaded(p, r) for p, r in load_typed_results(specs)]
    except ResultFileError as exc:
        fail(str(exc))
    names = [readable_name(x.result) or x.path.stem for x in loaded]
    diff = differing_fields([x.result for x in loaded], ignore=PLACEMENT_FIELDS)
    if diff:
        listing = describe_differences(diff, names)
        if not force:
            fail(
                "these runs differ in more than where they ran, so their numbers are not "
                f"comparable:\n{listing}\nuse --force to compare them anyway"
            )
        typer.echo(f"warning: comparing runs whose settings differ:\n{listing}", err=True)
    mixed = mixed_hit_rates(names, [x.result.summary.prefix_cache_hit_rate for x in loaded])
    if mixed:
        typer.echo(f"warning: {mixed}", err=True)
    return _Runs(loaded, names, diff)


def _warn_about_status(runs: _Runs) -> None:
    """On stderr: the runs that stopped early, and those whose numbers do not hold."""
    pairs = list(zip(runs.names, runs.loaded, strict=True))
    incomplete = [n for n, x in pairs if not x.result.complete]
    if incomplete:
        typer.echo(f"warning: incomplete runs: {', '.join(incomplete)}", err=True)
    invalid = [n for n, x in pairs if x.result.validity is not None and not x.result.validity.valid]
    if invalid:
        typer.echo(f"warning: invalid runs: {', '.join(invalid)} (see the status column)", err=True)


def _print_comparison(output_format: str, rows: list[dict[str, Any]], best: dict[str, set[int]],
                      runs: _Runs, tier_costs: TierTable | None) -> None:
    """The table in ``output_format`` on stdout (with the tier costs for ``json`` and
    ``table`` when asked for)."""
    paths = [str(x.path) for x in runs.loaded]
    adapters = comparison_adapter_rows([x.result for x in runs.loaded], runs.names)
    if output_format == "json":
        payload = {
            "columns": [{"key": c.key, "header": c.header, "better": c.better} for c in COLUMNS],
            "rows": [{**row, "path": paths[i]} for i, row in enumerate(rows)],
            "best": {k: sorted(v) for k, v in best.items()},
            "differing_fields": runs.diff,
        }
        if adapters:  # runs over LoRA adapters: each run's figures per adapter
            payload["adapters"] = msgspec.to_builtins(adapters)
        if tier_costs is not None:
            payload["tiers"] = {"market": tier_costs.market.to_dict(),
                                "runs": msgspec.to_builtins(tier_costs.runs)}
        typer.echo(json.dumps(payload, indent=2, default=str))
    elif output_format == "csv":
        sys.stdout.write(_csv(rows, best, paths))
    elif output_format == "adapters-csv":
        if not adapters:
            fail("none of these runs served LoRA adapters (runs made with --lora-modules and "
                 "--lora-mix have them); for the runs' own figures use --format csv")
        sys.stdout.write(comparison_adapter_csv(
            [(row, str(x.path)) for x, name in zip(runs.loaded, runs.names, strict=True)
             for row in adapter_rows(x.result, name)]))
    elif output_format == "markdown":
        sys.stdout.write(compare_markdown(rows, best) + comparison_adapter_markdown(adapters))
    else:
        table = _table(rows, best)
        console = Console()
        if not console.is_terminal:  # a pipe or file: never squeeze or wrap the columns
            console = Console(width=max(400, _natural_width(table)))
        console.print(table)
        per_adapter = comparison_adapter_table(adapters)
        if per_adapter is not None:
            console.print(per_adapter)
        intervals = _interval_table(rows)
        if intervals is not None:
            console.print(intervals)
        if tier_costs is not None:
            from infer_prof.cli.compare_tiers import print_tiers

            print_tiers(console, runs.names, tier_costs)


def _tiers(results: list[Result], prices_from: str | None) -> TierTable:
    """``compare --tiers``: each run's cost per tier (infer_prof.cli.compare_tiers)."""
    from infer_prof.cli.compare_tiers import tiers_for

    return tiers_for(results, prices_from)
