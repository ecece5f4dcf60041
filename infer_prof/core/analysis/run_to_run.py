"""Judging a change against the spread between runs: the run is the unit of replication.

Pure (stdlib only, no I/O). The gate's question is whether the current run(s) of a configuration
are worse than its baseline run(s) by more than runs of one configuration differ from each other
(a new engine launch, its memory placement, its clocks, the closed loop's phases). How well one
run measured its own requests (a bootstrap over its requests) does not answer it: two launches of
one configuration differ by far more than that interval (issue 36).

**Model.** One run's value of a metric (its TPOT p50, its output tokens/s) is
``x = mu * exp(e)`` with ``e ~ Normal(0, sigma^2)`` independent between runs: the run-to-run
spread is multiplicative, and ``sigma`` is the standard deviation of ``ln x`` between runs. It
relates to the coefficient of variation (CV = stdev / mean) by ``CV = sqrt(exp(sigma^2) - 1)``
(``sigma ~ CV`` for small spreads; :func:`cv_of_sigma`, :func:`sigma_of_cv`).

**The test.** Baseline runs ``x_1..x_N``, current runs ``y_1..y_M`` (usually M = 1), logs
``a_i = ln x_i``, ``b_j = ln y_j``. The change is ``d = mean(b) - mean(a)`` (a ratio of geometric
means, shown as ``(exp(d) - 1) * 100`` %). Its noise is ``se = s * sqrt(1/N + 1/M)``, where the
spread ``s`` (:class:`Spread`) is one of

* **measured here**: the pooled standard deviation of the logs over the runs of both sides,
  ``s^2 = (sum (a_i - mean a)^2 + sum (b_j - mean b)^2) / (N - 1 + M - 1)`` with
  ``df = N + M - 2``, pooled (:func:`pool`) with a launch spread measured earlier
  (``run --repeat-relaunch``) when the history holds one:
  ``s^2 = (df_1 s_1^2 + df_2 s_2^2) / (df_1 + df_2)``, ``df = df_1 + df_2``, where a launch
  spread of CV ``c`` on ``n`` runs is ``(sigma_of_cv(c), n - 1)``;
* **measured earlier** only (one run a side): the launch spread, ``df = n - 1``;
* **assumed** (one run a side, nothing measured): a stated CV, ``df = inf``.

A metric is *significantly worse* when ``d`` in its bad direction exceeds
``h = q * se`` with ``q`` the one-sided ``1 - alpha_m`` quantile of Student's t with ``df``
degrees of freedom (the normal's for ``df = inf``): the prediction-interval t-test of a new run
against the history (M = 1), the two-sample t-test for M >= 2. Every metric of one gate is held
to ``alpha_m = alpha / m`` for the ``m`` metrics judged (Bonferroni), so that identical runs
fail the whole gate with probability at most ``alpha`` (default 1 %) under the model, however the
metrics are correlated.

**What it can see.** ``h`` as a percent change, ``(exp(h) - 1) * 100`` (worse for a lower-is-
better metric) or ``(1 - exp(-h)) * 100`` (worse for a higher-is-better one), is the smallest
change this comparison could flag (:func:`detectable_pct`); a change of exactly that size is
flagged half the time, and one of ``(q + 1.645) * se`` 95 % of the time. Together with the
threshold (a change must also be at least ``threshold_pct`` to count), the gate sees changes of
``max(threshold, detectable)`` and below that it is blind: the verdict says so
(:func:`sensitivity_note`).

Why the mean and standard deviation of the logs rather than a median and MAD: with 3 to 14
runs the MAD is a poor estimate of the spread (about 37 % efficiency) with no exact reference
distribution, while the t-test's false-alarm rate is exact under the model. An outlier night in
the baseline widens ``s`` (fewer alarms, never more) and the verdict shows that spread, so a gate
made blind by it is visible.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from infer_prof.core.analysis.significance import t_quantile, t_two_sided_p

__all__ = [
    "Spread",
    "RunJudgement",
    "cv_of_sigma",
    "detectable_pct",
    "format_pct",
    "judge",
    "normal_quantile",
    "pool",
    "pooled_log_spread",
    "sensitivity_note",
    "sigma_of_cv",
]

DEFAULT_ALPHA = 0.01


@dataclass(frozen=True)
class Spread:
    """A run-to-run spread: ``sigma`` the stdev of ln(value) between runs, on ``df`` degrees of
    freedom (``math.inf`` for an assumed one), with ``basis``, a phrase saying where it came from
    ("measured between 7 runs here", "assumed")."""

    sigma: float
    df: float
    basis: str

    @property
    def cv_pct(self) -> float:
        """The spread as a coefficient of variation, in %."""
        return cv_of_sigma(self.sigma) * 100.0

    @property
    def assumed(self) -> bool:
        """True when nothing measured it (``df`` infinite)."""
        return math.isinf(self.df)


def sigma_of_cv(cv: float) -> float:
    """The log-scale stdev of a log-normal with coefficient of variation ``cv`` (a fraction):
    ``sqrt(ln(1 + cv^2))``."""
    if cv < 0 or not math.isfinite(cv):
        raise ValueError(f"a coefficient of variation is a finite fraction >= 0, got {cv!r}")
    return math.sqrt(math.log1p(cv * cv))


def cv_of_sigma(sigma: float) -> float:
    """The coefficient of variation (a fraction) of a log-normal with log-scale stdev ``sigma``:
    ``sqrt(exp(sigma^2) - 1)``."""
    return math.sqrt(math.expm1(sigma * sigma))


def normal_quantile(p: float) -> float:
    """The standard normal's quantile at ``p`` in (0, 1) (Acklam's rational approximation
    refined by one Newton step on ``erfc``: error below 1e-12)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be within (0, 1)")
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02,
         1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02,
         6.680131188771972e01, -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00,
         -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00,
         3.754408661907416e00)
    lo = 0.02425
    if p < lo:
        q = math.sqrt(-2 * math.log(p))
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    elif p > 1 - lo:
        q = math.sqrt(-2 * math.log(1 - p))
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    else:
        q = p - 0.5
        r = q * q
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / (
            ((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    e = 0.5 * math.erfc(-x / math.sqrt(2)) - p
    u = e * math.sqrt(2 * math.pi) * math.exp(x * x / 2)
    return x - u / (1 + x * u / 2)


@functools.lru_cache(maxsize=256)
def _quantile(p: float, df: float) -> float:
    """Student's t quantile at ``p`` with ``df`` degrees of freedom (the normal's for inf)."""
    return normal_quantile(p) if math.isinf(df) else t_quantile(p, df)


def pooled_log_spread(sides: Sequence[Sequence[float]]) -> tuple[float, int]:
    """``(s, df)``: the pooled stdev of ln(value) within each side (each side a list of per-run
    values > 0), ``s^2 = sum over sides of sum (ln x - mean ln x)^2 / df``,
    ``df = sum over sides of (n - 1)``. ``(0.0, 0)`` when no side has two runs."""
    ss = 0.0
    df = 0
    for side in sides:
        if len(side) < 2:
            continue
        logs = [math.log(v) for v in side]
        m = math.fsum(logs) / len(logs)
        ss += math.fsum((v - m) ** 2 for v in logs)
        df += len(logs) - 1
    return (math.sqrt(ss / df), df) if df else (0.0, 0)


def pool(a: Spread, b: Spread) -> Spread:
    """Two measured spreads of one quantity pooled: ``s^2 = (df_a s_a^2 + df_b s_b^2) /
    (df_a + df_b)`` on ``df_a + df_b`` degrees of freedom (both finite), bases joined."""
    df = a.df + b.df
    sigma = math.sqrt((a.df * a.sigma**2 + b.df * b.sigma**2) / df)
    return Spread(sigma, df, f"{a.basis}, pooled with {b.basis}")


@dataclass(frozen=True)
class RunJudgement:
    """One metric judged over runs (module docstring): ``baseline``/``current`` the geometric
    means of each side's per-run values; ``change_pct`` ``(exp(d) - 1) * 100``; the interval
    ``[ci_low_pct, ci_high_pct]`` is ``(exp(d -+ h) - 1) * 100`` (confidence ``1 - 2 alpha_m``);
    ``p_value`` one-sided, in the direction the value moved; ``significant`` when
    ``p_value < alpha_m``; ``detectable_pct`` :func:`detectable_pct`."""

    baseline: float
    current: float
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float
    p_value: float
    significant: bool
    worse: bool
    detectable_pct: float
    spread: Spread
    alpha_m: float
    n_baseline: int
    n_current: int


def detectable_pct(half_width: float, direction: str) -> float:
    """The smallest worsening, in %, that a comparison with log-scale half-width ``h`` flags:
    ``(exp(h) - 1) * 100`` when lower is better (a rise), ``(1 - exp(-h)) * 100`` when higher is
    better (a drop)."""
    return math.expm1(half_width) * 100.0 if direction == "lower" else -math.expm1(
        -half_width) * 100.0


def _t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (the normal for inf)."""
    if math.isinf(df):
        return 0.5 * math.erfc(t / math.sqrt(2.0))
    p2 = t_two_sided_p(abs(t), df)
    return p2 / 2.0 if t >= 0 else 1.0 - p2 / 2.0


def judge(
    baseline: Sequence[float],
    current: Sequence[float],
    *,
    direction: str,
    prior: Spread | None = None,
    assumed_cv: float = 0.02,
    alpha_m: float = DEFAULT_ALPHA,
) -> RunJudgement:
    """Judge per-run values of one metric (module docstring): ``baseline`` and ``current`` are
    one value per run (> 0; e.g. each run's TPOT p50 in ms), ``direction`` "lower" or "higher"
    (which way is better), ``prior`` a launch spread measured earlier (pooled with what the runs
    here show; used alone when they show nothing), ``assumed_cv`` the CV (a fraction) assumed
    when nothing is measured, ``alpha_m`` this metric's one-sided false-alarm rate. Raises
    ValueError for an empty side or a value <= 0."""
    if not baseline or not current:
        raise ValueError("judging over runs needs at least one run on each side")
    if min(*baseline, *current) <= 0 or not all(map(math.isfinite, (*baseline, *current))):
        raise ValueError("judging over runs needs finite values > 0")
    nb, nc = len(baseline), len(current)
    mb = math.fsum(math.log(v) for v in baseline) / nb
    mc = math.fsum(math.log(v) for v in current) / nc
    d = mc - mb
    s, df = pooled_log_spread([baseline, current])
    n_used = sum(n for n in (nb, nc) if n >= 2)  # a side of one run shows no spread
    here = Spread(s, df, f"measured between {n_used} runs here") if df else None
    if here is not None and prior is not None:
        spread = pool(here, prior)
    elif here is not None:
        spread = here
    elif prior is not None:
        spread = prior
    else:
        spread = Spread(sigma_of_cv(assumed_cv), math.inf, "assumed (not measured)")
    se = spread.sigma * math.sqrt(1.0 / nb + 1.0 / nc)
    h = _quantile(1.0 - alpha_m, spread.df) * se
    p = _t_sf(abs(d) / se, spread.df) if se > 0 else (0.5 if d == 0 else 0.0)
    bad = d if direction == "lower" else -d
    return RunJudgement(
        baseline=math.exp(mb),
        current=math.exp(mc),
        change_pct=math.expm1(d) * 100.0,
        ci_low_pct=math.expm1(d - h) * 100.0,
        ci_high_pct=math.expm1(d + h) * 100.0,
        p_value=p,
        significant=p < alpha_m and d != 0,
        worse=bad > 0,
        detectable_pct=detectable_pct(h, direction),
        spread=spread,
        alpha_m=alpha_m,
        n_baseline=nb,
        n_current=nc,
    )


#: Beyond this worsening (%) a limit is shown as "> 1000 %": nothing a gate could act on.
BLIND_PCT = 1000.0


def format_pct(value: float, signed: bool = False) -> str:
    """A percentage for a verdict, ``"> 1000 %"``-style beyond :data:`BLIND_PCT` either way (a
    t quantile on 1 degree of freedom makes astronomic limits)."""
    if value > BLIND_PCT:
        return f"> {'+' if signed else ''}{BLIND_PCT:.0f} %"
    if value < -BLIND_PCT:
        return f"< -{BLIND_PCT:.0f} %"
    return f"{value:+.1f} %" if signed else f"{value:.0f} %"


def sensitivity_note(
    label: str,
    spread: Spread,
    detectable: float,
    threshold_pct: float,
    against: str,
    direction: str = "lower",
) -> str:
    """One line on what a verdict could see, e.g. ``"TPOT p50: ±12.0 % between runs (measured
    between 8 runs here); changes below 41 % are below what this history can detect"``
    (``against``: "this history", "this baseline"). When the threshold is the larger limit:
    ``"...; it can detect changes of 5 % (the threshold) and more"``; when the limit is beyond
    a 99 % drop (``direction`` "higher") or a :data:`BLIND_PCT` rise: ``"...; this history
    cannot detect any change (too few runs or too much spread)"``."""
    head = f"{label}: ±{spread.cv_pct:.1f} % between runs ({spread.basis})"
    if detectable > BLIND_PCT or (direction == "higher" and detectable >= 99.0):
        return f"{head}; {against} cannot detect any change (too few runs or too much spread)"
    if detectable > threshold_pct:
        return f"{head}; changes below {detectable:.0f} % are below what {against} can detect"
    return f"{head}; {against} can detect changes of {threshold_pct:g} % (the threshold) and more"
