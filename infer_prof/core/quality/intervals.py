"""Confidence intervals of a task accuracy and of the difference between two.

- :func:`wilson_interval`: the Wilson score interval of a binomial proportion ``k/n``
  (Wilson 1927; better than the normal approximation near 0 and 1 and for small ``n``):
  centre ``(p + z²/2n) / (1 + z²/n)``, half-width ``z·sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n)``.
- :func:`paired_bootstrap_difference`: the difference of two accuracies on the same items
  (``mean(a) - mean(b)``), with a percentile bootstrap interval over items resampled with
  replacement, the pair of outcomes of one item kept together (the items are the unit of
  variation; the two runs answer the same items).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

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
