"""Confidence intervals of a task accuracy and of the difference between two.

- :func:`wilson_interval`: the Wilson score interval of a binomial proportion ``k/n``
  (Wilson 1927; better than the normal approximation near 0 and 1 and for small ``n``):
  centre ``(p + z²/2n) / (1 + z²/n)``, half-width ``z·sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n)``.
- :func:`paired_bootstrap_difference`: the difference of two accuracies on the same items
  (``mean(a) - mean(b)``), with a percentile bootstrap interval over items resampled with
  replacement, the pair of outcomes of one item kept together (the items are the unit of
  variation; the two runs answer the same items).
- :func:`newcombe_difference`: the difference ``k1/n1 - k2/n2`` of two independent accuracies
  (no item-by-item outcomes to pair) with Newcombe's hybrid score interval (Newcombe 1998,
  method 10): from the two Wilson intervals ``[l1, u1]``, ``[l2, u2]``, ``low = d -
  sqrt((p1 - l1)² + (u2 - p2)²)``, ``high = d + sqrt((u1 - p1)² + (p2 - l2)²)``.
- :func:`z_for`: the two-sided normal quantile of a level (0.95 -> 1.96).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

#: The two-sided 95 % normal quantile.
Z_95 = 1.959963984540054


@dataclass(frozen=True)
class Interval:
    """A value and its interval ``[low, high]`` at ``level`` (0.95: 95 %), by ``method``."""

    value: float
    low: float
    high: float
    level: float
    method: str


def wilson_interval(k: int, n: int, z: float = Z_95) -> Interval:
    """The accuracy ``k/n`` with its Wilson score interval at the level of ``z`` (95 % by
    default). ``n`` must be at least 1."""
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    level = math.erf(z / math.sqrt(2))
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), round(level, 4),
                    "Wilson score")


def paired_bootstrap_difference(
    a: Sequence[bool], b: Sequence[bool], resamples: int = 2000, level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """``mean(a) - mean(b)`` (accuracy of ``a`` minus that of ``b``, items paired by index) with
    its percentile bootstrap interval at ``level``: ``resamples`` resamplings of the items with
    replacement (seeded: the same inputs give the same interval)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"need two equally long non-empty outcome lists, got {len(a)}, {len(b)}")
    n = len(a)
    diffs = [int(x) - int(y) for x, y in zip(a, b, strict=True)]
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    low = means[min(resamples - 1, int(math.floor(tail * resamples)))]
    high = means[min(resamples - 1, int(math.ceil((1 - tail) * resamples)) - 1)]
    return Interval(sum(diffs) / n, low, high, level, f"paired bootstrap, {resamples} resamples")


def z_for(level: float) -> float:
    """The two-sided standard normal quantile of ``level`` (0 < level < 1): 0.95 -> 1.960,
    0.99 -> 2.576."""
    return NormalDist().inv_cdf(0.5 + level / 2)


def newcombe_difference(k1: int, n1: int, k2: int, n2: int, level: float = 0.95) -> Interval:
    """``k1/n1 - k2/n2`` (two independent accuracies) with Newcombe's hybrid score interval at
    ``level`` (see the module). ``n1`` and ``n2`` must be at least 1."""
    z = z_for(level)
    a, b = wilson_interval(k1, n1, z), wilson_interval(k2, n2, z)
    d = a.value - b.value
    low = d - math.sqrt((a.value - a.low) ** 2 + (b.high - b.value) ** 2)
    high = d + math.sqrt((a.high - a.value) ** 2 + (b.value - b.low) ** 2)
    return Interval(d, low, high, level, "Newcombe hybrid score (independent samples)")
