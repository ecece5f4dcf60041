"""Summary statistics used for every reported distribution.

Percentiles use linear interpolation between closest ranks (numpy's default ``linear`` method):
for sorted values x[0..n-1] and quantile q in [0, 100], h = (n - 1) * q / 100, and the result is
x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

PERCENTILE_METHOD = "linear interpolation between closest ranks (numpy 'linear')"


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0 <= q <= 100) by linear interpolation; None for no values."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within [0, 100], got {q}")
    if not values:
        return None
    return _percentile_of_sorted(sorted(values), q)


def _percentile_of_sorted(xs: Sequence[float], q: float) -> float:
    h = (len(xs) - 1) * q / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


@dataclass(frozen=True)
class Distribution:
    """Summary of one metric's samples, in the unit the samples were given in."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float
    min: float
    std: float

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)

    def scaled(self, factor: float) -> Distribution:
        """The same distribution with every value multiplied by ``factor`` (unit conversion)."""
        return Distribution(
            count=self.count,
            mean=self.mean * factor,
            p50=self.p50 * factor,
            p90=self.p90 * factor,
            p99=self.p99 * factor,
            max=self.max * factor,
            min=self.min * factor,
            std=self.std * factor,
        )


def summarize(values: Sequence[float]) -> Distribution | None:
    """Mean, p50, p90, p99, min, max and population std of ``values``; None when there are none.

    A metric that was never measured is None, never a distribution of zeros.
    """
    if not values:
        return None
    xs = sorted(values)
    n = len(xs)
    mean = math.fsum(xs) / n
    var = math.fsum((x - mean) ** 2 for x in xs) / n
    return Distribution(
        count=n,
        mean=mean,
        p50=_percentile_of_sorted(xs, 50),
        p90=_percentile_of_sorted(xs, 90),
        p99=_percentile_of_sorted(xs, 99),
        max=xs[-1],
        min=xs[0],
        std=math.sqrt(var),
    )


def summary_dict(values: Sequence[float], scale: float = 1.0) -> dict[str, float | int] | None:
    """:func:`summarize` of ``values`` x ``scale`` (a unit conversion) as a dict; None for none."""
    d = summarize([v * scale for v in values])
    return None if d is None else d.to_dict()
