"""Regression statistics: is the current run worse than the baseline, and is that real?

Pure (stdlib only, no I/O); the tests themselves (Mann-Whitney U, Student's t, Welch) are
:mod:`infer_prof.core.analysis.significance`. Two kinds of evidence are handled:

* **Per-request samples** (TTFT, TPOT, ITL, E2E latency of every request): the percent change of a
  statistic (mean, p50, p90, p99, max), a percentile-bootstrap confidence interval of that percent
  change, and a two-sided Mann-Whitney U p-value. See :func:`compare_samples`.
* **Aggregates, one value per run** (requests/s, output tokens/s, $ per 1M tokens): with two or
  more runs on each side a Welch t-test; with several baseline runs and one current run (the
  "last N nightly runs" baseline) a prediction-interval t-test; with one run on each side the
  significance is *unknown* and the decision rests on the threshold alone. See
  :func:`compare_runs`.

Decision rule, the same for both (documented once, here):

* ``change_pct = (current - baseline) / |baseline| * 100``.
* ``bad_change_pct`` is ``change_pct`` for lower-is-better metrics (latency, cost, energy) and
  ``-change_pct`` for higher-is-better ones (throughput, goodput, tokens per dollar).
* ``significant``: for samples, by default (``rule="ci"``) the bootstrap confidence interval of
  the percent change excludes 0. The CI speaks about the very statistic compared (a p99 change is
  judged by the spread of p99), which Mann-Whitney U does not: U tests whether one distribution is
  stochastically larger than the other, i.e. the bulk. Its p-value is always reported, and
  ``rule`` can be ``"mwu"`` (p < alpha), ``"both"`` (CI and p) or ``"either"``. For per-run
  values: p < alpha. ``None`` means unknown (one run on each side).
* ``crosses_threshold``: ``bad_change_pct >= threshold_pct``.
* ``regression``: significant AND crosses_threshold (unknown significance: crosses_threshold).
* ``improvement``: significant AND ``-bad_change_pct >= threshold_pct`` (same for unknown).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from infer_prof.core.analysis.significance import (
    mann_whitney_u,
    mean_var,
    t_quantile,
    t_two_sided_p,
    welch_t_test,
)
from infer_prof.core.measurement.metric_table import Better, better_for
from infer_prof.core.measurement.stats import percentile

__all__ = [
    "MetricComparison",
    "Significance",
    "bootstrap_change_ci",
    "compare_runs",
    "compare_samples",
    "direction_for",
    "percent_change",
    "percentile",
    "statistic",
    "threshold_for",
]

Direction = Better
SignificanceRule = Literal["ci", "mwu", "both", "either"]

STATISTICS = ("mean", "p50", "p90", "p95", "p99", "max", "min")

# Substrings that mark a metric where a larger value is better. Everything else (latencies,
# $ per 1M tokens, joules per token, queueing delay) is lower-is-better.
_HIGHER_IS_BETTER = (
    "throughput",
    "goodput",
    "tok_s",
    "tokens_per_dollar",
    "per_dollar",
    "requests_completed",
)

# "..._per_s", "per_second", "per_sec" as a whole word: a rate. ("ms_per_step" is not.)
_PER_SECOND = re.compile(r"per_s(ec(ond)?)?($|[._])")

DEFAULT_THRESHOLD_PCT = 5.0


@dataclass(frozen=True)
class Significance:
    """How a change in per-request samples is judged significant: the bootstrap CI of the change
    at confidence ``1 - alpha`` with ``n_boot`` replicates (deterministic for ``seed``), the
    Mann-Whitney p-value against ``alpha``, and the ``rule`` that combines them (module
    docstring)."""

    alpha: float = 0.05
    rule: SignificanceRule = "ci"
    n_boot: int = 2000
    seed: int = 0


def _pct(values: Sequence[float], q: float) -> float:
    """:func:`percentile` of a non-empty sequence (already-sorted input re-sorts in O(n))."""
    p = percentile(values, q)
    if p is None:
        raise ValueError("percentile of an empty sequence")
    return p


def statistic(values: Sequence[float], stat: str) -> float:
    """One summary statistic of ``values``: "mean", "min", "max" or "pNN" (e.g. "p99", "p99.9").

    Percentiles are :func:`infer_prof.core.measurement.stats.percentile` (linear interpolation,
    numpy's default method). Unit: that of the values. Raises ValueError for no values or a bad
    name.
    """
    if len(values) == 0:
        raise ValueError("statistic of an empty sequence")
    if stat == "mean":
        return math.fsum(values) / len(values)
    if stat == "max":
        return max(values)
    if stat == "min":
        return min(values)
    return _pct(values, _quantile_of(stat))


def _quantile_of(stat: str) -> float:
    if stat.startswith("p"):
        try:
            q = float(stat[1:])
        except ValueError:
            q = -1.0
        if 0.0 <= q <= 100.0:
            return q
    raise ValueError(f"unknown statistic {stat!r}; use mean, min, max or pNN such as p99")


def percent_change(baseline: float, current: float) -> float | None:
    """``(current - baseline) / |baseline| * 100``; None when baseline is 0 (undefined)."""
    if baseline == 0:
        return 0.0 if current == 0 else None
    return (current - baseline) / abs(baseline) * 100.0


def direction_for(name: str) -> Direction:
    """Which way is better for metric ``name``: "higher" (throughput-like) or "lower".

    A metric of the metric table (:func:`infer_prof.core.measurement.metric_table.better_for`, named
    as the history names it: ``ttft_ms.p99``, ``cost.output_tokens_per_usd``) goes its declared way.
    Any other name: higher-is-better names contain one of: throughput, goodput, tok_s,
    per_dollar, requests_completed, or a word per_s / per_sec / per_second (a rate).
    Latencies, $ per 1M tokens and joules per token are lower-is-better.
    """
    declared = better_for(name)
    if declared is not None:
        return declared
    low = name.lower()
    if any(s in low for s in _HIGHER_IS_BETTER) or _PER_SECOND.search(low):
        return "higher"
    return "lower"


def threshold_for(
    name: str, thresholds: Mapping[str, float] | None, default: float = DEFAULT_THRESHOLD_PCT
) -> float:
    """The threshold in percent for metric ``name`` from a table like ``{"ttft_p99": 10, "*": 5}``.

    Lookup order: the exact name; then glob patterns (``fnmatch``, e.g. ``"ttft_ms.*"``), the
    longest matching pattern first; then ``"*"``; then ``default``.
    """
    if not thresholds:
        return default
    if name in thresholds:
        return float(thresholds[name])
    patterns = sorted(
        (p for p in thresholds if p != "*" and any(c in p for c in "*?[")), key=len, reverse=True
    )
    for p in patterns:
        if fnmatchcase(name, p):
            return float(thresholds[p])
    if "*" in thresholds:
        return float(thresholds["*"])
    return default


# --- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricComparison:
    """The verdict on one metric. Percentages are of the baseline value.

    ``significant`` is None when unknown (one run on each side); then ``regression`` and
    ``improvement`` were decided on the threshold alone and ``note`` says so.
    """

    name: str
    statistic: str  # "mean", "p99", ... or "value" for per-run aggregates
    direction: Direction
    baseline: float
    current: float
    change_pct: float | None
    ci_low_pct: float | None
    ci_high_pct: float | None
    p_value: float | None
    significant: bool | None
    threshold_pct: float
    crosses_threshold: bool
    regression: bool
    improvement: bool
    method: str
    n_baseline: int
    n_current: int
    note: str = ""
    #: judged over runs (:mod:`infer_prof.core.analysis.run_to_run`): the run-to-run spread used
    #: (CV, %), where it came from, and the smallest worsening (%) this comparison could flag
    spread_pct: float | None = None
    spread_basis: str = ""
    detectable_pct: float | None = None
    #: ``regress --confirm``: the confirming measurement (its value, its change in %, and whether
    #: it is a regression too); the gate fails on a metric only when both are
    confirm_current: float | None = None
    confirm_change_pct: float | None = None
    confirm_regression: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields."""
        return asdict(self)


def _verdict(
    change_pct: float | None, direction: Direction, threshold_pct: float, significant: bool | None
) -> tuple[bool, bool, bool]:
    """(crosses_threshold, regression, improvement) from the rule in the module docstring."""
    if change_pct is None:
        return False, False, False
    bad = change_pct if direction == "lower" else -change_pct
    crosses = bad >= threshold_pct
    good_crosses = -bad >= threshold_pct
    sig = True if significant is None else significant
    return crosses, sig and crosses, sig and good_crosses


def bootstrap_change_ci(
    baseline: Sequence[float],
    current: Sequence[float],
    stat: str = "mean",
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap CI of the percent change of ``stat`` from baseline to current.

    Each of ``n_boot`` replicates resamples each side with replacement (its own size), computes
    ``pct_b = (stat(cur*) - stat(base*)) / |stat(base*)| * 100``; the interval is the
    ``(1 - confidence)/2`` and ``(1 + confidence)/2`` percentiles (linear) of the pct_b.
    Replicates whose baseline statistic is 0 are dropped. Deterministic for a given ``seed``.
    """
    if len(baseline) == 0 or len(current) == 0:
        raise ValueError("bootstrap needs at least one value on each side")
    if n_boot < 1:
        raise ValueError("n_boot must be at least 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be within (0, 1)")
    rng = random.Random(seed)
    base = list(baseline)
    cur = list(current)
    nb, nc = len(base), len(cur)
    choices = rng.choices
    if stat == "mean":

        def stat_of(pop: list[float], k: int) -> float:
            return math.fsum(choices(pop, k=k)) / k

    else:
        if stat not in ("min", "max"):
            _quantile_of(stat)  # validate the name once

        def stat_of(pop: list[float], k: int) -> float:
            return statistic(choices(pop, k=k), stat)

    pcts: list[float] = []
    for _ in range(n_boot):
        sb = stat_of(base, nb)
        sc = stat_of(cur, nc)
        if sb != 0:
            pcts.append((sc - sb) / abs(sb) * 100.0)
    if not pcts:
        raise ValueError("baseline statistic is 0 in every bootstrap replicate")
    pcts.sort()
    tail = (1.0 - confidence) / 2.0 * 100.0
    return _pct(pcts, tail), _pct(pcts, 100.0 - tail)


def compare_samples(
    name: str,
    baseline: Sequence[float],
    current: Sequence[float],
    *,
    stat: str = "p50",
    direction: Direction | None = None,
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    significance: Significance = Significance(),
) -> MetricComparison:
    """Compare per-request samples of one metric (e.g. TTFT in ms) between two runs.

    ``stat`` is the statistic compared ("mean", "p50", "p90", "p99", ...). The CI is at
    confidence ``1 - significance.alpha`` (:func:`bootstrap_change_ci`), the p-value is
    Mann-Whitney U (:func:`mann_whitney_u`), and ``significance.rule`` picks what makes a change
    significant (module docstring). ``direction`` defaults to :func:`direction_for` of ``name``.
    """
    alpha, rule, n_boot = significance.alpha, significance.rule, significance.n_boot
    if len(baseline) == 0 or len(current) == 0:
        side = "baseline" if len(baseline) == 0 else "current"
        raise ValueError(f"{name}: no samples on the {side} side")
    direction = direction or direction_for(name)
    b_val = statistic(baseline, stat)
    c_val = statistic(current, stat)
    change = percent_change(b_val, c_val)
    ci_low: float | None
    ci_high: float | None
    try:
        ci_low, ci_high = bootstrap_change_ci(
            baseline, current, stat, n_boot=n_boot, confidence=1.0 - alpha, seed=significance.seed
        )
    except ValueError:  # the baseline statistic is 0 in every replicate: no percent change
        ci_low = ci_high = None
    _, p = mann_whitney_u(baseline, current)
    ci_sig = ci_low is not None and ci_high is not None and (ci_low > 0.0 or ci_high < 0.0)
    p_sig = p < alpha
    significant = {
        "ci": ci_sig,
        "mwu": p_sig,
        "both": ci_sig and p_sig,
        "either": ci_sig or p_sig,
    }[rule]
    crosses, regression, improvement = _verdict(change, direction, threshold_pct, significant)
    note = "" if change is not None else "baseline value is 0: percent change undefined"
    return MetricComparison(
        name=name,
        statistic=stat,
        direction=direction,
        baseline=b_val,
        current=c_val,
        change_pct=change,
        ci_low_pct=ci_low,
        ci_high_pct=ci_high,
        p_value=p,
        significant=significant,
        threshold_pct=threshold_pct,
        crosses_threshold=crosses,
        regression=regression,
        improvement=improvement,
        method=f"bootstrap CI (B={n_boot}) + Mann-Whitney U; significant by rule {rule!r}",
        n_baseline=len(baseline),
        n_current=len(current),
        note=note,
    )


def compare_runs(
    name: str,
    baseline: Sequence[float],
    current: Sequence[float],
    *,
    direction: Direction | None = None,
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    alpha: float = 0.05,
) -> MetricComparison:
    """Compare an aggregate metric given as one value per run (e.g. output tokens/s of each run).

    The compared value is the mean over runs on each side. Significance (p < alpha) by:

    * >= 2 runs each side: Welch's t-test (:func:`welch_t_test`); the CI is the Welch interval of
      the difference of means, ``diff +- t_{1-alpha/2, df} * se``, divided by |mean baseline|
      (baseline mean treated as exact).
    * one side with 1 run, the other with n >= 2: a prediction-interval t-test of the single
      value against the others, ``t = (x - mean) / (s sqrt(1 + 1/n))``, df = n - 1. This is the
      "baseline = last N runs in the history" case.
    * 1 run each side: significance unknown (None), no CI or p-value; the verdict rests on the
      threshold alone and ``note`` says so.
    """
    if len(baseline) == 0 or len(current) == 0:
        side = "baseline" if len(baseline) == 0 else "current"
        raise ValueError(f"{name}: no runs on the {side} side")
    direction = direction or direction_for(name)
    mb, vb = mean_var(baseline)
    mc, vc = mean_var(current)
    change = percent_change(mb, mc)
    nb, nc = len(baseline), len(current)
    ci_low: float | None = None
    ci_high: float | None = None
    p: float | None = None
    significant: bool | None
    note = ""
    if nb >= 2 and nc >= 2:
        t, df, p = welch_t_test(baseline, current)
        se = math.sqrt(vb / nb + vc / nc)
        if mb != 0 and math.isfinite(df) and df > 0:
            half = t_quantile(1.0 - alpha / 2.0, df) * se
            ci_low = (mc - mb - half) / abs(mb) * 100.0
            ci_high = (mc - mb + half) / abs(mb) * 100.0
        elif mb != 0 and se == 0:
            ci_low = ci_high = change
        significant = p < alpha
        method = f"Welch t-test over runs ({nb} vs {nc})"
    elif nb == 1 and nc == 1:
        significant = None
        method = "single run each side"
        note = "one run on each side: significance unknown; decided on the threshold alone"
    else:
        many, many_var, single = (baseline, vb, mc) if nb >= 2 else (current, vc, mb)
        m = math.fsum(many) / len(many)
        s = math.sqrt(many_var)
        df = float(len(many) - 1)
        if s == 0:
            p = 1.0 if single == m else 0.0
        else:
            p = t_two_sided_p((single - m) / (s * math.sqrt(1.0 + 1.0 / len(many))), df)
        significant = p < alpha
        method = f"prediction-interval t-test, 1 run vs {len(many)} runs"
    crosses, regression, improvement = _verdict(change, direction, threshold_pct, significant)
    if change is None:
        note = "baseline value is 0: percent change undefined"
    return MetricComparison(
        name=name,
        statistic="value",
        direction=direction,
        baseline=mb,
        current=mc,
        change_pct=change,
        ci_low_pct=ci_low,
        ci_high_pct=ci_high,
        p_value=p,
        significant=significant,
        threshold_pct=threshold_pct,
        crosses_threshold=crosses,
        regression=regression,
        improvement=improvement,
        method=method,
        n_baseline=nb,
        n_current=nc,
        note=note,
    )
