"""Two-sample significance tests, stdlib only: Mann-Whitney U (normal approximation with tie and
continuity correction), Student's t distribution (two-sided p-value and quantile, via the
regularized incomplete beta) and Welch's unequal-variance t-test. Pure; what a "significant"
change means for the regression gate is :mod:`infer_prof.core.analysis.regression`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


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


def mean_var(xs: Sequence[float]) -> tuple[float, float]:
    """``(mean, sample variance)`` of ``xs`` (variance with n - 1; 0.0 for a single value)."""
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
    mx, vx = mean_var(x)
    my, vy = mean_var(y)
    a, b = vx / len(x), vy / len(y)
    if a + b == 0:
        return (0.0, math.inf, 1.0) if mx == my else (math.copysign(math.inf, my - mx), 0.0, 0.0)
    t = (my - mx) / math.sqrt(a + b)
    df = (a + b) ** 2 / (a * a / (len(x) - 1) + b * b / (len(y) - 1))
    return t, df, t_two_sided_p(t, df)
