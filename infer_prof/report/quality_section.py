"""The report's quality section (``run --quality``, docs/quality.md): accuracy against $ per 1M
output tokens, a point per run, one series (colour) per precision, so that what a cheaper
precision costs in answers is read beside what it saves; the floor a run was held to
(``--min-quality`` x its reference's accuracy) is a dashed line; a table under the chart gives
each run's accuracy with its interval, perplexity, KL against its reference and the floor.

Only runs whose ``quality`` section is ``measured`` are drawn; a report with none has no
section (quality was not asked for, or not measured: the runs' own sections say why).
"""

from __future__ import annotations

from collections.abc import Sequence

from infer_prof.core.analysis.comparison import labels_text
from infer_prof.report.html_fragments import cell, esc, figure
from infer_prof.report.plots import line_chart
from infer_prof.report.run_data import RunData, cost_per_million
from infer_prof.report.svg import Axis, Marks, Plot, Series
from infer_prof.results.identity import precision_of
from infer_prof.results.quality_sections import Quality


def _measured(runs: Sequence[RunData]) -> list[tuple[RunData, Quality]]:
    out = []
    for r in runs:
        q = r.result.quality
        if q is not None and q.status == "measured" and q.accuracy is not None:
            out.append((r, q))
    return out


def _series_name(run: RunData) -> str:
    """The run's precision, with its labels when it has any (two configurations at one
    precision stay apart)."""
    labels = labels_text(run.result.labels or run.result.config.labels)
    return precision_of(run.result) + (f" · {labels}" if labels else "")


def _floors(measured: Sequence[tuple[RunData, Quality]]) -> list[tuple[float, str]]:
    """The floors the runs were held to, as accuracies (``min_quality`` x the reference's)."""
    seen: dict[float, str] = {}
    for _, q in measured:
        ref = q.reference
        if q.min_quality is not None and ref is not None and ref.accuracy is not None:
            seen[q.min_quality * ref.accuracy] = (f"floor {q.min_quality:g} × reference "
                                                  f"{ref.accuracy:.1%}")
    return sorted(seen.items())


def accuracy_cost_chart(measured: Sequence[tuple[RunData, Quality]]) -> Plot:
    """The scatter: x $ per 1M output tokens (None: not drawn), y accuracy."""
    names = list(dict.fromkeys(_series_name(r) for r, _ in measured))
    series = []
    for name in names:
        points = [(cost_per_million(r.result), q.accuracy) for r, q in measured
                  if _series_name(r) == name]
        series.append(Series(name, [x for x, _ in points], [y for _, y in points],
                             markers=True, line=False))
    return line_chart(
        "accuracy_vs_cost", "Accuracy against cost per 1M output tokens", series,
        Axis("USD per 1M output tokens", zero=True), Axis("accuracy (share of task items)",
                                                          lo=0.0, hi=1.0),
        marks=Marks(hlines=_floors(measured)),
    )


def _row(run: RunData, q: Quality) -> str:
    ref = q.reference
    interval = (f"[{q.accuracy_low:.1%}, {q.accuracy_high:.1%}]"
                if q.accuracy_low is not None and q.accuracy_high is not None else "")
    floor = ("" if q.below_floor is None else
             ("BELOW " if q.below_floor else "meets ") + f"{q.min_quality:g}")
    return (f"<tr><td>{esc(_series_name(run))}</td><td>{esc(run.result.run_id)}</td>"
            f"{cell(q.accuracy)}<td>{esc(interval)}</td>{cell(q.perplexity)}"
            f"{cell(ref.mean_kl if ref else None)}{cell(ref.quality_share if ref else None)}"
            f"<td>{esc(floor)}</td>{cell(cost_per_million(run.result))}</tr>")


def quality_section(runs: Sequence[RunData], plots: list[Plot]) -> str:
    """The section (empty text when no run measured quality)."""
    measured = _measured(runs)
    if not measured:
        return ""
    plot = accuracy_cost_chart(measured)
    plots.append(plot)
    unpriced = sum(1 for r, _ in measured if cost_per_million(r.result) is None)
    head = ("<tr><th>precision</th><th>run</th><th>accuracy</th><th>95 % Wilson</th>"
            "<th>perplexity</th><th>KL vs reference (nats/token)</th>"
            "<th>share of reference</th><th>floor</th><th>$/1M output tokens</th></tr>")
    return (
        '<section id="quality"><h2>Quality against cost</h2>'
        '<p class="note">Accuracy: the share of the task file\'s items answered right at '
        "temperature 0, on the endpoint measured, after its load (docs/quality.md). A point per "
        "run, a colour per precision; dashed: the floor a run was held to."
        + (f" {unpriced} run(s) without a price are in the table, not on the chart."
           if unpriced else "")
        + f'</p><div class="plots">{figure(plot)}</div>'
        f'<div class="table-wrap"><table><thead>{head}</thead><tbody>'
        + "".join(_row(r, q) for r, q in measured)
        + "</tbody></table></div></section>"
    )
