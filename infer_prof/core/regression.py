"""Regression statistics: is the current run worse than the baseline, and is that real?

Pure (stdlib only, no I/O). Two kinds of evidence are handled:

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

from infer_prof.core.stats import percentile

__all__ = [
    "MetricComparison",
    "bootstrap_change_ci",
    "compare_runs",
    "compare_samples",
    "direction_for",
    "mann_whitney_u",
    "percent_change",
    "percentile",
    "statistic",
    "t_quantile",
    "t_two_sided_p",
    "threshold_for",
    "welch_t_test",
]

Direction = Literal["lower", "higher"]
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


def _pct(values: Sequence[float], q: float) -> float:
    """:func:`percentile` of a non-empty sequence (already-sorted input re-sorts in O(n))."""
    p = percentile(values, q)
    if p is None:
        raise ValueError("percentile of an empty sequence")
    return p


def statistic(values: Sequence[float], stat: str) -> float:
    """One summary statistic of ``values``: "mean", "min", "max" or "pNN" (e.g. "p99", "p99.9").

    Percentiles are :func:`infer_prof.core.stats.percentile` (linear interpolation, numpy's
    default method). Unit: that of the values. Raises ValueError for no values or a bad name.
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

    Higher-is-better names contain one of: throughput, goodput, tok_s, per_dollar,
    requests_completed, or a word per_s / per_sec / per_second (a rate).
    Latencies, $ per 1M tokens and joules per token are lower-is-better.
    """
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


def _norm_sf(z: float) -> float:
    """Upper tail of the standard normal: P(Z > z) = erfc(z / sqrt 2) / 2."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test; returns ``(U_x, p_value)``.

    ``U_x = R_x - n_x (n_x + 1) / 2`` with R_x the sum of x's ranks in the pooled sample (ties get
    their average rank). The p-value uses the normal approximation with tie correction and
    continuity correction (as scipy.stats.mannwhitneyu(method="asymptotic")):
    ``mu = n_x n_y / 2``, ``sigma^2 = n_x n_y / 12 * ((n + 1) - sum(t^3 - t) / (n (n - 1)))``
    over tie groups of size t, ``z = (max(U_x, U_y) - mu - 1/2) / sigma``,
    ``p = min(1, 2 P(Z > z))``. All values equal: p = 1.
    """
    nx, ny = len(x), len(y)
    if nx == 0 or ny == 0:
        raise ValueError("mann_whitney_u needs at least one value on each side")
    pooled = sorted([(v, 0) for v in x] + [(v, 1) for v in y])
    n = nx + ny
    rank_sum_x = 0.0
    tie_term = 0.0
    i = 0
    while i < n:
        j = i
        while j + 1 < n and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        avg_rank = (i + j) / 2.0 + 1.0
        t = j - i + 1
        if t > 1:
            tie_term += t**3 - t
        for k in range(i, j + 1):
            if pooled[k][1] == 0:
                rank_sum_x += avg_rank
        i = j + 1
    u_x = rank_sum_x - nx * (nx + 1) / 2.0
    u_y = nx * ny - u_x
    mu = nx * ny / 2.0
    var = nx * ny / 12.0 * ((n + 1) - tie_term / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return u_x, 1.0
    z = (max(u_x, u_y) - mu - 0.5) / math.sqrt(var)
    return u_x, min(1.0, 2.0 * _norm_sf(z))


# --- Student's t distribution (for Welch's test), via the regularized incomplete beta ---------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """Two-sided p-value of Student's t with ``df`` degrees of freedom: P(|T| >= |t|).

    ``= I_{df / (df + t^2)}(df / 2, 1 / 2)`` (regularized incomplete beta).
    """
    if df <= 0:
        raise ValueError("degrees of freedom must be positive")
    if math.isinf(t):
        return 0.0
    return _betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The p-quantile (0 < p < 1) of Student's t with ``df`` degrees of freedom, by bisection."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be within (0, 1)")
    if p == 0.5:
        return 0.0
    target = 2.0 * min(p, 1.0 - p)  # two-sided tail mass beyond |t|
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df) > target:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_two_sided_p(mid, df) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    t = (lo + hi) / 2.0
    return t if p > 0.5 else -t


def _mean_var(xs: Sequence[float]) -> tuple[float, float]:
    m = math.fsum(xs) / len(xs)
    v = math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1) if len(xs) > 1 else 0.0
    return m, v


def welch_t_test(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """Welch's unequal-variance t-test of mean(y) vs mean(x); returns ``(t, df, p_two_sided)``.

    ``t = (mean_y - mean_x) / sqrt(s_x^2/n_x + s_y^2/n_y)``, Welch-Satterthwaite
    ``df = (a + b)^2 / (a^2/(n_x-1) + b^2/(n_y-1))`` with a = s_x^2/n_x, b = s_y^2/n_y.
    Needs two values per side. Zero variance on both sides: p = 1 if the means are equal, else 0.
    """
    if len(x) < 2 or len(y) < 2:
        raise ValueError("welch_t_test needs at least two values on each side")
    mx, vx = _mean_var(x)
    my, vy = _mean_var(y)
    a, b = vx / len(x), vy / len(y)
    if a + b == 0:
        return (0.0, math.inf, 1.0) if mx == my else (math.copysign(math.inf, my - mx), 0.0, 0.0)
    t = (my - mx) / math.sqrt(a + b)
    df = (a + b) ** 2 / (a * a / (len(x) - 1) + b * b / (len(y) - 1))
    return t, df, t_two_sided_p(t, df)


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
    alpha: float = 0.05,
    rule: SignificanceRule = "ci",
    n_boot: int = 2000,
    seed: int = 0,
) -> MetricComparison:
    """Compare per-request samples of one metric (e.g. TTFT in ms) between two runs.

    ``stat`` is the statistic compared ("mean", "p50", "p90", "p99", ...). The CI is at
    confidence ``1 - alpha`` (:func:`bootstrap_change_ci`), the p-value is Mann-Whitney U
    (:func:`mann_whitney_u`), and ``rule`` picks what makes a change significant (module
    docstring). ``direction`` defaults to :func:`direction_for` of ``name``.
    """
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
            baseline, current, stat, n_boot=n_boot, confidence=1.0 - alpha, seed=seed
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
    mb, vb = _mean_var(baseline)
    mc, vc = _mean_var(current)
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
