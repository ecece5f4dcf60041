"""Markdown: the comparison table and the regression-gate summary (for PRs and CI pages)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infer_prof.core.analysis.comparison import (
    COLUMNS,
    METRIC_COLUMNS,
    format_cell,
    format_interval,
)
from infer_prof.core.analysis.regression import MetricComparison
from infer_prof.core.analysis.run_to_run import format_pct


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def compare_markdown(rows: Sequence[Mapping[str, Any]], best: Mapping[str, set[int]]) -> str:
    """A GitHub-flavoured Markdown table of compare rows; each column's best value in bold."""
    header = "| " + " | ".join(_cell(c.header) for c in COLUMNS) + " |"
    align = "|" + "|".join("---:" if c.better or c.key == "concurrency" else "---" for c in COLUMNS)
    lines = [header, align + "|"]
    for i, row in enumerate(rows):
        cells = []
        for c in COLUMNS:
            text = _cell(format_cell(c, row))
            cells.append(f"**{text}**" if i in best.get(c.key, set()) else text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + _interval_lines(rows)) + "\n"


def _interval_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Below the table, for the runs of repeats (mean ±SD in the table): each metric's 95 %
    Student-t interval of the mean and its CV."""
    repeated = [r for r in rows if r.get("repeats")]
    if not repeated:
        return []
    cols = [c for c in METRIC_COLUMNS if any(format_interval(c, r) for r in repeated)]
    lines = ["", "Across repeats (mean ±SD above): 95 % interval of the mean (CV)", "",
             "| run | repeats | " + " | ".join(_cell(c.header) for c in cols) + " |",
             "|---|---:|" + "---:|" * len(cols)]
    for r in repeated:
        cells = [_cell(format_interval(c, r)) for c in cols]
        lines.append(f"| {_cell(str(r.get('run_id', '')))} | {r['repeats']} | "
                     + " | ".join(cells) + " |")
    return lines


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.2f}%"


def regress_markdown(
    comparisons: Sequence[MetricComparison],
    verdicts: Sequence[str],
    baseline_desc: str,
    current_desc: str,
    notes: Sequence[str] = (),
) -> str:
    """A Markdown summary of the gate: a headline, then one table row per metric (with the
    confirming rerun's value and change when there was one, the run-to-run spread it was judged
    against and the smallest change it could see), then what the gate could not see."""
    n_reg = sum(1 for c in comparisons if c.regression)
    head = f"**{n_reg} regression{'s' if n_reg != 1 else ''}**" if n_reg else "**No regression**"
    lines = [
        "## infer-prof regression gate",
        "",
        f"{head} in {len(comparisons)} metrics.",
        "",
        f"- baseline: {baseline_desc}",
        f"- current: {current_desc}",
        *(f"- {n}" for n in notes),
        "",
    ]
    rerun = any(c.confirm_current is not None for c in comparisons)
    heads = ["metric", "baseline", "current", "change"]
    if rerun:
        heads += ["rerun", "rerun change"]
    heads += ["interval of change", "p", "run-to-run spread", "can see", "threshold", "verdict"]
    lines += ["| " + " | ".join(heads) + " |",
              "|---|" + "---:|" * (len(heads) - 2) + "---|"]
    for c, v in zip(comparisons, verdicts, strict=True):
        ci = (
            f"[{format_pct(c.ci_low_pct, True)}, {format_pct(c.ci_high_pct, True)}]"
            if c.ci_low_pct is not None and c.ci_high_pct is not None
            else "n/a"
        )
        p = "n/a" if c.p_value is None else f"{c.p_value:.3g}"
        verdict = f"**{v}**" if c.regression else v
        cells = [c.name, f"{c.baseline:.4g}", f"{c.current:.4g}", _pct(c.change_pct)]
        if rerun:
            cells += ["n/a" if c.confirm_current is None else f"{c.confirm_current:.4g}",
                      _pct(c.confirm_change_pct)]
        spread = "n/a" if c.spread_pct is None else f"±{c.spread_pct:.1f}%"
        if c.spread_basis:
            spread += f" ({c.spread_basis})"
        can_see = (
            "n/a" if c.detectable_pct is None
            else "≥ " + format_pct(max(c.detectable_pct, c.threshold_pct))
        )
        cells += [ci, p, _cell(spread), can_see, f"{c.threshold_pct:g}%", verdict]
        lines.append("| " + " | ".join(cells) + " |")
    blind = [c.note for c in comparisons
             if c.detectable_pct is not None and c.detectable_pct > c.threshold_pct]
    if blind:
        lines += ["", "What this gate cannot see:", "", *(f"- {_cell(n)}" for n in blind)]
    return "\n".join(lines) + "\n"
