"""The regression gate's quality verdicts (``infer-prof regress``), beside the speed and cost
metrics of :mod:`infer_prof.results.gate`, as :class:`MetricComparison` rows so that the table,
``--json``, ``--markdown`` and ``--junit`` carry them like any metric:

- ``quality.floor``: the current run's ``quality`` section is marked ``below_floor`` (its
  accuracy a share of its ``--quality-reference``'s under its ``--min-quality``): a regression,
  baseline = the floor, current = the share.
- ``quality.accuracy``: the current run's accuracy against the baseline's, on the same task file
  (same SHA-256): the difference with its interval at ``level`` (1 - the gate's alpha: 99 % by
  default): the paired bootstrap over items when both runs kept their item-by-item outcomes
  (same items, same order), else Newcombe's interval of two independent accuracies
  (:mod:`infer_prof.core.quality.intervals`). A regression when the whole interval is below 0
  (a drop beyond what the item count leaves to chance), an improvement when it is above.

Of several runs a side, the last with a measured quality section is judged. A side without one
gives no verdict (a note says why when only one side has it).
"""

from __future__ import annotations

from collections.abc import Sequence

from infer_prof.core.analysis.regression import MetricComparison
from infer_prof.core.quality.intervals import (
    Interval,
    newcombe_difference,
    paired_bootstrap_difference,
)
from infer_prof.results.gate import RunData
from infer_prof.results.quality_sections import Quality


def _measured(runs: Sequence[RunData]) -> tuple[RunData, Quality] | None:
    """The last run with a measured quality section (accuracy and item count known)."""
    for r in reversed(runs):
        q = r.result.quality if r.result is not None else None
        if q is not None and q.status == "measured" and q.accuracy is not None and q.items:
            return r, q
    return None


def floor_comparison(run: RunData, q: Quality) -> MetricComparison | None:
    """``quality.floor`` for a run whose section records a floor and its share (None
    otherwise)."""
    share = q.reference.quality_share if q.reference is not None else None
    if q.min_quality is None or share is None or q.below_floor is None:
        return None
    ref = q.reference.result if q.reference is not None else "its reference"
    below = bool(q.below_floor)
    return MetricComparison(
        name="quality.floor", statistic="share of the reference's accuracy",
        direction="higher", baseline=q.min_quality, current=share,
        change_pct=100.0 * (share - q.min_quality) / q.min_quality, ci_low_pct=None,
        ci_high_pct=None, p_value=None, significant=None, threshold_pct=0.0,
        crosses_threshold=below, regression=below, improvement=False,
        method="the run's own --min-quality against its --quality-reference",
        n_baseline=1, n_current=1,
        note=(f"{run.source}: accuracy {share:.3f} of {ref}'s, "
              f"{'BELOW' if below else 'meets'} the floor {q.min_quality:g} (--min-quality)"),
    )


def accuracy_difference(base: Quality, cur: Quality, level: float) -> Interval:
    """Accuracy here minus the baseline's with its interval at ``level`` (see the module)."""
    paired = (len(base.outcomes) == len(cur.outcomes) == cur.items == base.items)
    if paired:
        return paired_bootstrap_difference([o.correct for o in cur.outcomes],
                                           [o.correct for o in base.outcomes], level=level)
    assert base.items and cur.items
    k_cur = cur.correct if cur.correct is not None else round((cur.accuracy or 0) * cur.items)
    k_base = base.correct if base.correct is not None else round((base.accuracy or 0) * base.items)
    return newcombe_difference(k_cur, cur.items, k_base, base.items, level)


def accuracy_comparison(base: Quality, cur: Quality, level: float) -> MetricComparison:
    """``quality.accuracy``: the current accuracy against the baseline's (see the module)."""
    assert base.accuracy is not None and cur.accuracy is not None
    d = accuracy_difference(base, cur, level)
    b = base.accuracy
    pct = (lambda x: 100.0 * x / b) if b > 0 else (lambda x: None)  # noqa: E731
    drop, rise = d.high < 0, d.low > 0
    return MetricComparison(
        name="quality.accuracy", statistic="share of task items", direction="higher",
        baseline=b, current=cur.accuracy, change_pct=pct(d.value), ci_low_pct=pct(d.low),
        ci_high_pct=pct(d.high), p_value=None, significant=drop or rise, threshold_pct=0.0,
        crosses_threshold=d.value < 0, regression=drop, improvement=rise,
        method=f"{d.method}, {100 * level:g} % interval over the items",
        n_baseline=base.items or 0, n_current=cur.items or 0,
        note=(f"accuracy {b:.1%} -> {cur.accuracy:.1%}: {d.value:+.1%} "
              f"[{d.low:+.1%}, {d.high:+.1%}]; "
              + ("a drop beyond chance over the items" if drop else
                 "a rise beyond chance over the items" if rise else
                 "within what the item count leaves to chance")),
    )


def quality_comparisons(base: Sequence[RunData], cur: Sequence[RunData], level: float,
                        notes: list[str]) -> list[MetricComparison]:
    """The quality verdicts of one group (see the module); ``notes`` gets why one is missing."""
    out: list[MetricComparison] = []
    here, there = _measured(cur), _measured(base)
    if here is not None:
        floor = floor_comparison(*here)
        if floor is not None:
            out.append(floor)
    if here is None and there is not None:
        notes.append("quality: the baseline measured it, the current run did not: not gated")
    elif here is not None and there is not None:
        if here[1].tasks_sha256 != there[1].tasks_sha256:
            notes.append("quality: the runs checked different task files: accuracy not gated")
        else:
            out.append(accuracy_comparison(there[1], here[1], level))
    return out
