"""``infer-prof history``: recorded runs, one metric's trend with its change points, and
``history import`` / ``history export`` of result files."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from infer_prof.cli.common import fail
from infer_prof.cli.declared import declared_callback
from infer_prof.config.options import Opt
from infer_prof.core.analysis.changepoint import ChangePoint, detect_changepoints
from infer_prof.core.analysis.regression import direction_for
from infer_prof.core.measurement.metric_table import columns_at
from infer_prof.report.console import fmt_value
from infer_prof.results import history, history_database
from infer_prof.results.identity import config_fingerprint
from infer_prof.results.loading import expand_paths, export_run, record_result
from infer_prof.results.schema import ResultFileError, load_result, load_typed_result

DEFAULT_DB = history_database.DEFAULT_HELP
HISTORY_HELP = (
    "The history: sqlite:///PATH (or a path) or postgresql://USER@HOST:PORT/DB (password: "
    f"PGPASSWORD or ~/.pgpass). Default: $INFER_PROF_HISTORY, else {DEFAULT_DB}."
)
#: The filters ``history`` and ``history export`` share.
ModelFilter = Annotated[str | None, Opt(("--model", "-m"), "Only runs of this model.")]
LabelFilter = Annotated[str | None, Opt(("--label",), "Only runs with this label (KEY=VALUE).")]

history_app = typer.Typer(
    help="List recorded runs, or show one metric's trend for one configuration; import and "
    "export result files.",
)

#: (header, metric name, decimals) of the key metrics in the run list: the metric table's
#: ``history`` place, named as the history names them (``|``: alternative spellings).
KEY_METRICS = tuple((c.label, c.history_name, c.digits) for c in columns_at("history"))
#: The quality check's (``run --quality``): shown in the table only where a listed run has one.
_QUALITY_NAMES = {c.history_name for c in columns_at("history", "quality")}


def _metric(metrics: dict[str, float], name: str) -> float | None:
    """``metrics[name]``; ``name`` may list alternatives separated by ``|`` (first present)."""
    for alt in name.split("|"):
        if alt in metrics:
            return metrics[alt]
    return None


def _console() -> Console:
    """The terminal's console, or a wide one for a pipe or file (columns never squeezed)."""
    console = Console()
    return console if console.is_terminal else Console(width=400)


def _time(started_at: str) -> str:
    """``2024-05-01T02:00:00.000000Z`` -> ``2024-05-01 02:00:00Z``."""
    return started_at[:19].replace("T", " ") + "Z"


def _run_dict(r: history.RunRecord) -> dict[str, Any]:
    m = r.metrics()
    return {
        "run_id": r.run_id,
        "run_name": r.run_name,
        "started_at": r.started_at,
        "fingerprint": r.config_fingerprint,
        "model": r.model,
        "gpu": r.gpu,
        "precision": r.precision,
        "concurrency": r.concurrency,
        "workload": r.workload,
        "labels": r.labels,
        "git_rev": r.git_rev,
        "complete": r.complete,
        "result_path": r.result_path,
        "metrics": {name.split("|")[0]: _metric(m, name) for _, name, _ in KEY_METRICS},
    }


def _list_table(runs: list[history.RunRecord], db: str | Path) -> Table:
    t = Table(
        box=box.SIMPLE_HEAVY,
        title=f"{len(runs)} run(s) in {history_database.describe(db)}, newest first",
    )
    for h in ("time (UTC)", "run", "model", "GPU", "conc."):
        t.add_column(h, justify="right" if h == "conc." else "left")
    measured = [r.metrics() for r in runs]
    shown = [k for k in KEY_METRICS
             if k[1] not in _QUALITY_NAMES or any(_metric(m, k[1]) is not None for m in measured)]
    for h, _, _ in shown:
        t.add_column(h, justify="right")
    t.add_column("config")
    t.add_column("labels")
    for r, m in zip(runs, measured, strict=True):
        t.add_row(
            _time(r.started_at),
            _run_cell(r),
            r.model or "",
            r.gpu or "",
            fmt_value(r.concurrency),
            *(fmt_value(_metric(m, name), d) for _, name, d in shown),
            r.config_fingerprint,
            ",".join(f"{k}={v}" for k, v in sorted(r.labels.items())),
        )
    return t


def _run_cell(r: history.RunRecord) -> str:
    """The run's readable name, the last 8 hex digits of its unique ID when it has one (two runs
    of the same second share a name), and whether it is incomplete."""
    short = f" {r.run_id[-8:]}" if r.run_id != r.run_name else ""
    return r.run_name + short + ("" if r.complete else " (incomplete)")


def _pick_fingerprint(db: str | Path, model: str | None, label: str | None) -> str:
    runs = history.list_runs(db, model=model, label=label, limit=0)
    if not runs:
        fail(f"no recorded runs in {history_database.describe(db)} match; nothing to trend")
    counts = Counter(r.config_fingerprint for r in runs)
    if len(counts) == 1:
        return next(iter(counts))
    example = {r.config_fingerprint: r for r in runs}
    listing = "\n".join(
        f"  {fp}: {n} run(s), {example[fp].model}, {example[fp].gpu}, "
        f"concurrency {example[fp].concurrency}"
        for fp, n in counts.most_common()
    )
    fail(
        f"--metric needs one configuration; these runs hold {len(counts)}:\n{listing}\n"
        "pick one with --fingerprint F or --config RESULT"
    )


def trend(
    db: str | Path, fingerprint: str, metric: str, *, penalty_factor: float, min_change_pct: float
) -> tuple[list[tuple[str, str, float]], list[ChangePoint]]:
    """The series (oldest first) of one metric for one configuration and its change points."""
    series = history.metric_series(db, fingerprint, metric)
    points = detect_changepoints(
        [v for _, _, v in series], penalty_factor=penalty_factor, min_change_pct=min_change_pct
    )
    return series, points


def _location(value: str | None, ctx: typer.Context | None = None) -> str | Path:
    """``--history`` of this command, else of ``infer-prof history``, else the environment or
    the default; a bad URL is a one-line error."""
    if value is None and ctx is not None and isinstance(ctx.obj, dict):
        value = ctx.obj.get("history")
    db = history_database.resolve(value)
    try:
        history_database.parse_location(db)
    except history_database.HistoryError as exc:
        fail(str(exc))
    return db


@dataclass(frozen=True)
class HistoryOptions:
    """The options of ``infer-prof history``, each declared once
    (:mod:`infer_prof.cli.declared`)."""

    db_option: Annotated[str | None, Opt(
        ("--history", "--db"),
        HISTORY_HELP)] = None
    model: ModelFilter = None
    label: LabelFilter = None
    limit: Annotated[int, Opt(
        ("--limit",),
        "List at most this many runs (0: all).")] = 50
    metric: Annotated[str | None, Opt(
        ("--metric",),
        ("Show this metric's trend (e.g. output_throughput, ttft_ms.p99) for one "
        "configuration, with change points."))] = None
    fingerprint: Annotated[str | None, Opt(
        ("--fingerprint",),
        "The configuration for --metric (see the config column).")] = None
    config: Annotated[Path | None, Opt(
        ("--config",),
        "The configuration for --metric: that of this result file.")] = None
    penalty_factor: Annotated[float, Opt(
        ("--penalty-factor",),
        "Change-point penalty, in noise variances x ln(n).")] = 6.0
    min_change: Annotated[float, Opt(
        ("--min-change",),
        "Ignore change points smaller than this many percent.")] = 1.0
    json_output: Annotated[bool, Opt(
        ("--json",),
        "Print JSON instead of a table.")] = False


def history_callback(ctx: typer.Context, o: HistoryOptions) -> None:
    """List recorded runs, or show one metric's trend for one configuration."""
    ctx.obj = {"history": o.db_option}
    if ctx.invoked_subcommand is not None:
        return
    db = _location(o.db_option)
    try:
        _history(db, o)
    except history_database.HistoryError as exc:
        fail(str(exc))


history_command = history_app.callback(invoke_without_command=True)(
    declared_callback(HistoryOptions, history_callback))


def _history(db: str | Path, o: HistoryOptions) -> None:
    """The run list, or with ``--metric`` one metric's trend with its change points."""
    model, label, metric, fingerprint = o.model, o.label, o.metric, o.fingerprint
    if label is not None and not label.strip():
        fail("--label needs KEY=VALUE or KEY")
    if metric is None:
        if fingerprint is not None or o.config is not None:
            fail("--fingerprint / --config choose the configuration of a --metric trend")
        runs = history.list_runs(db, model=model, fingerprint=None, label=label, limit=o.limit)
        if o.json_output:
            typer.echo(json.dumps([_run_dict(r) for r in runs], indent=2))
        elif not runs:
            typer.echo(
                f"no runs recorded in {history_database.describe(db)}"
                + (" match" if model or label else "")
            )
        else:
            _console().print(_list_table(runs, db))
        return

    if fingerprint is not None and o.config is not None:
        fail("give --fingerprint or --config, not both")
    if o.config is not None:
        try:
            fingerprint = config_fingerprint(load_typed_result(o.config))
        except ResultFileError as exc:
            fail(str(exc))
    if fingerprint is None:
        fingerprint = _pick_fingerprint(db, model, label)
    series, points = trend(
        db, fingerprint, metric, penalty_factor=o.penalty_factor, min_change_pct=o.min_change
    )
    if not series:
        known = history.metric_names(db, fingerprint)
        if not known:
            fail(
                f"no recorded runs of configuration {fingerprint} in "
                f"{history_database.describe(db)}"
            )
        fail(
            f"no values of {metric!r} for configuration {fingerprint}; recorded metrics: "
            + ", ".join(known)
        )
    direction = direction_for(metric)
    at = {p.index: p for p in points}
    if o.json_output:
        payload = {
            "fingerprint": fingerprint,
            "metric": metric,
            "better": direction,
            "points": [
                {"started_at": t, "run_id": rid, "value": v, "change_point": i in at}
                for i, (t, rid, v) in enumerate(series)
            ],
            "change_points": [
                {**p.to_dict(), "run_id": series[p.index][1], "started_at": series[p.index][0]}
                for p in points
            ],
        }
        typer.echo(json.dumps(payload, indent=2))
        return
    t = Table(
        box=box.SIMPLE_HEAVY,
        title=f"{metric} ({direction} is better), configuration {fingerprint}, oldest first",
    )
    for h in ("time (UTC)", "run id", metric, "change point"):
        t.add_column(h, justify="right" if h == metric else "left")
    for i, (ts, rid, v) in enumerate(series):
        mark = ""
        if i in at:
            p = at[i]
            worse = p.change_pct is not None and ((p.change_pct > 0) == (direction == "lower"))
            pct = "n/a" if p.change_pct is None else f"{p.change_pct:+.1f}%"
            mark = (
                f"{'[bold red]' if worse else '[green]'}<< {pct} "
                f"({p.before_mean:.4g} -> {p.after_mean:.4g}, {'worse' if worse else 'better'})"
                f"{'[/bold red]' if worse else '[/green]'}"
            )
        t.add_row(_time(ts), rid, f"{v:,.4g}", mark)
    console = _console()
    console.print(t)
    if points:
        console.print(f"{len(points)} change point(s) in {len(series)} runs", highlight=False)
    else:
        console.print(f"no change point in {len(series)} runs", highlight=False)


@dataclass(frozen=True)
class ImportOptions:
    """The options of ``infer-prof history import``, each declared once
    (:mod:`infer_prof.cli.declared`)."""

    paths: Annotated[list[str], Opt(
        (),
        "Result JSON files, folders of them, or glob patterns (quote them).", positional=True)]
    db_option: Annotated[str | None, Opt(
        ("--history",),
        HISTORY_HELP)] = None


def import_(ctx: typer.Context, o: ImportOptions) -> None:
    """Record existing result files (with their per-request records) in the history. A run
    already recorded is replaced by the same run: importing twice stores it once."""
    db = _location(o.db_option, ctx)
    try:
        files = expand_paths(o.paths)
        loaded = [(p, load_result(p)) for p in files]
    except ResultFileError as exc:
        fail(str(exc))
    try:
        known = history.get_runs(db, [str(r["run_id"]) for _, r in loaded if r.get("run_id")])
        for p, r in loaded:
            if not r.get("run_id") or not r.get("started_at"):
                fail(f"{p} lacks run_id or started_at; it cannot be recorded")
            record_result(db, r, p)
    except history_database.HistoryError as exc:
        fail(str(exc))
    again = f" ({len(known)} already recorded: replaced, not duplicated)" if known else ""
    typer.echo(f"imported {len(loaded)} run(s) into {history_database.describe(db)}{again}")


import_command = history_app.command("import")(declared_callback(ImportOptions, import_))


@dataclass(frozen=True)
class ExportOptions:
    """The options of ``infer-prof history export``, each declared once
    (:mod:`infer_prof.cli.declared`)."""

    output: Annotated[Path, Opt(
        ("--output", "-o"),
        "The folder to write <run name>.json and its requests file to.")]
    db_option: Annotated[str | None, Opt(
        ("--history",),
        HISTORY_HELP)] = None
    model: ModelFilter = None
    label: LabelFilter = None
    fingerprint: Annotated[str | None, Opt(
        ("--fingerprint",),
        "Only runs of this configuration.")] = None
    run_id: Annotated[list[str] | None, Opt(
        ("--run-id",),
        "Only this run: its ID or its readable name (repeatable).")] = None
    limit: Annotated[int, Opt(
        ("--limit",),
        "At most this many runs, newest first (0: all).")] = 0


def export(ctx: typer.Context, o: ExportOptions) -> None:
    """Write recorded runs back out as result files (the result JSON as it was written, and its
    per-request records), e.g. to feed `infer-prof report` or `compare` on another machine."""
    db = _location(o.db_option, ctx)
    if o.output.exists() and not o.output.is_dir():
        fail(f"--output {o.output} is a file; name a folder")
    if o.label is not None and not o.label.strip():
        fail("--label needs KEY=VALUE or KEY")
    try:
        runs = history.list_runs(
            db, model=o.model, label=o.label, fingerprint=o.fingerprint,
            limit=0 if o.run_id else o.limit,
        )
        if o.run_id:
            # a run's ID, or its readable name (every run of that name)
            missing = sorted(set(o.run_id) - {r.run_id for r in runs} - {r.run_name for r in runs})
            if missing:
                fail(f"not recorded in {history_database.describe(db)}: {', '.join(missing)}")
            runs = [r for r in runs if r.run_id in set(o.run_id) or r.run_name in set(o.run_id)]
        written, with_records, without = 0, 0, []
        names: set[str] = set()
        for r in runs:
            files = history.load_files(db, r.run_id)
            if files is None:
                without.append(r.run_id)
                continue
            # the file name the run wrote (unique where it ran), else its readable name; two
            # runs of one name from different machines get their IDs' ends
            name = Path(r.result_path).stem if r.result_path else r.run_name
            if name in names:
                name = f"{name}-{r.run_id[-8:]}"
            names.add(name)
            _, req = export_run(files, o.output, name)
            written += 1
            with_records += req is not None
    except history_database.HistoryError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write to {o.output}: {exc.strerror}")
    typer.echo(f"exported {written} run(s) to {o.output} ({with_records} with per-request records)")
    if without:
        shown = ", ".join(without[:5]) + (", ..." if len(without) > 5 else "")
        typer.echo(
            f"note: {len(without)} run(s) were recorded before the history kept result files "
            f"(only their summaries are stored): {shown}",
            err=True,
        )


export_command = history_app.command("export")(declared_callback(ExportOptions, export))
