"""The console view of ``run --repeat N``: for each repeated point, one row per metric with its
mean ± sample SD across the repeats, the CV, the Student-t interval of the mean, and each
repeat's value (the figures of the result's ``repeats`` section,
:mod:`infer_prof.results.repeat_sections`)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from infer_prof.core.analysis.repeats import REPEAT_COLUMNS, metric_name
from infer_prof.results.document import Result


def _n(x: float | None, digits: int) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}"


def closing_results(results: Sequence[Result]) -> list[Result]:
    """Of ``results`` (in run order), the last one of each repeat group that holds the
    group's statistics: one per repeated point."""
    last: dict[str, Result] = {}
    for r in results:
        rep = r.repeats
        if rep is not None and rep.group is not None and rep.metrics:
            last[rep.group] = r
    return list(last.values())


def repeat_table(result: Result) -> Table | None:
    """The table of ``result``'s ``repeats`` statistics; None when it holds none."""
    rep = result.repeats
    if rep is None or not rep.metrics:
        return None
    conf = rep.confidence or 0.95
    n = len(rep.run_ids)
    where = "between launches" if rep.relaunch else "in one launch"
    cfg = result.config
    title = (f"across {n} of {rep.count} repeats ({where}): "
             f"{result.model.name if result.model else cfg.model}  "
             f"concurrency {cfg.concurrency}")
    t = Table(title=title, title_justify="left",
              caption=f"± sample SD (n-1); CI: Student t, {n - 1} dof, of the mean",
              caption_justify="left")
    t.add_column("metric")
    for head in ("mean", "± SD", "CV", f"{100 * conf:g} % CI", "per repeat"):
        t.add_column(head, justify="right")
    for col in REPEAT_COLUMNS:
        m = rep.metrics.get(metric_name(col.path))
        if m is None:
            continue
        s = m.stats(conf)
        d = col.digits
        ci = "n/a" if s.low is None or s.high is None else f"{s.low:,.{d}f}-{s.high:,.{d}f}"
        t.add_row(
            f"{col.label} ms" if col.metric.kind == "latency" and col.stat else col.label,
            _n(s.mean, d),
            _n(s.sd, d),
            "n/a" if s.cv is None else f"{100 * s.cv:.1f} %",
            ci,
            " ".join(f"{v:,.{d}f}" for v in s.values),
        )
    return t


def print_repeats(results: Sequence[Result], console: Console | None = None) -> None:
    """Print :func:`repeat_table` for each repeated point of ``results`` (to stderr by
    default)."""
    console = console or Console(stderr=True)
    for r in closing_results(results):
        table = repeat_table(r)
        if table is not None:
            console.print(table)
