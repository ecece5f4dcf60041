"""A distribution of many samples kept in bounded memory: exact up to a cap, then a log-bucketed
histogram with a stated relative error.

Pure. Used for the client's per-read samples (read lag, event-loop lag), of which an hour at 256
streams makes about 60 million: as a list that is gigabytes, and growing.

- Up to ``exact_cap`` samples every value is kept (8 bytes each, in an ``array('d')``) and the
  summary is :func:`~infer_prof.core.measurement.stats.summarize` of them: the same figures as from
  a list.
- Past the cap the values are dropped and the summary comes from a histogram that has been
  kept beside them from the first sample (so nothing is converted at the cap): buckets
  ``(gamma^(i-1), gamma^i]`` with ``gamma = (1 + a) / (1 - a)`` (DDSketch's buckets; a =
  ``relative_error``, 0.1 % by default); a bucket's value is ``2 gamma^i / (gamma + 1)``, within
  ``a`` of every value in it (relative). Percentiles use the same linear interpolation between
  closest ranks, on those bucket values: each within ``a`` of the exact one. Count, min and max
  stay exact; mean and std are running sums (exact to floating-point rounding). Zero and
  negative values are kept (zeros counted apart, negatives in mirrored buckets).

The histogram has at most ``log(max/min) / log(gamma)`` buckets: about 12,000 for values from
1 ns to 100 s at 0.1 %, whatever the number of samples.
"""

from __future__ import annotations

import math
import operator
from array import array
from collections import Counter
from collections.abc import Sequence
from typing import Any

from infer_prof.core.measurement.stats import Distribution, summarize

DEFAULT_EXACT_CAP = 1 << 20
"""Samples kept exactly (8 MiB): about 8,000 requests of 128 tokens, one read per token."""

DEFAULT_RELATIVE_ERROR = 0.001
"""Percentiles past the exact cap are within this fraction of the exact ones (0.1 %)."""


class BoundedSamples:
    """Samples whose summary is exact up to ``exact_cap`` of them and within
    ``relative_error`` (percentiles) past it, in bounded memory (see the module docstring)."""

    def __init__(self, exact_cap: int = DEFAULT_EXACT_CAP,
                 relative_error: float = DEFAULT_RELATIVE_ERROR) -> None:
        if exact_cap < 0 or not 0.0 < relative_error < 1.0:
            raise ValueError("exact_cap >= 0 and 0 < relative_error < 1 are needed")
        self.exact_cap = exact_cap
        self.relative_error = relative_error
        self._gamma = (1.0 + relative_error) / (1.0 - relative_error)
        self._inv_log_gamma = 1.0 / math.log(self._gamma)
        self._values: array[float] | None = array("d")
        self._pos: Counter[int] = Counter()
        self._neg: Counter[int] = Counter()
        self._zeros = 0
        self.count = 0
        self.min = math.inf
        self.max = -math.inf
        self._mean = 0.0
        self._m2 = 0.0  # sum of squared deviations from the mean (Chan et al.'s merge)

    @property
    def exact(self) -> bool:
        """Whether every sample is still kept (the summary is exact)."""
        return self._values is not None

    def add_many(self, values: Sequence[float]) -> None:
        """Add a batch of samples (cost about 0.3 us a sample: keep batches of a few
        thousand, off the timing path)."""
        n = len(values)
        if not n:
            return
        self._merge_moments(n, math.fsum(values) / n, values)
        lo, hi = min(values), max(values)
        self.min, self.max = min(self.min, lo), max(self.max, hi)
        inv = self._inv_log_gamma
        ceil, log = math.ceil, math.log
        if lo > 0:
            self._pos.update([ceil(log(v) * inv) for v in values])
        else:
            for v in values:
                if v > 0:
                    self._pos[ceil(log(v) * inv)] += 1
                elif v < 0:
                    self._neg[ceil(log(-v) * inv)] += 1
                else:
                    self._zeros += 1
        self.count += n
        if self._values is not None:
            if len(self._values) + n <= self.exact_cap:
                self._values.extend(values)
            else:
                self._values = None  # past the cap: the histogram alone

    def _merge_moments(self, n: int, mean: float, values: Sequence[float]) -> None:
        # the batch's own squared deviations: sum(v^2) - n mean^2 (a batch is a few thousand
        # samples of one metric; the batches then merge exactly as Chan et al.)
        m2 = max(0.0, math.fsum(map(operator.mul, values, values)) - n * mean * mean)
        total = self.count + n
        delta = mean - self._mean
        self._mean += delta * n / total
        self._m2 += m2 + delta * delta * self.count * n / total

    def merge(self, other: BoundedSamples) -> None:
        """Add ``other``'s samples (another worker's): exact while both are and the cap
        holds them all; the histograms must share the relative error."""
        if other.count == 0:
            return
        if other.relative_error != self.relative_error:
            raise ValueError("cannot merge histograms of different relative errors")
        total = self.count + other.count
        delta = other._mean - self._mean
        self._mean += delta * other.count / total
        self._m2 += other._m2 + delta * delta * self.count * other.count / total
        self._pos.update(other._pos)
        self._neg.update(other._neg)
        self._zeros += other._zeros
        self.min, self.max = min(self.min, other.min), max(self.max, other.max)
        self.count = total
        if (self._values is not None and other._values is not None
                and len(self._values) + len(other._values) <= self.exact_cap):
            self._values.extend(other._values)
        else:
            self._values = None

    def _bucket_value(self, i: int) -> float:
        return 2.0 * self._gamma ** i / (self._gamma + 1.0)

    def _ranked(self) -> list[tuple[float, int]]:
        """(bucket value, count) in increasing value order."""
        out = [(-self._bucket_value(i), c) for i, c in sorted(self._neg.items(), reverse=True)]
        if self._zeros:
            out.append((0.0, self._zeros))
        out += [(self._bucket_value(i), c) for i, c in sorted(self._pos.items())]
        return out

    def _quantile(self, ranked: list[tuple[float, int]], q: float) -> float:
        """Linear interpolation between closest ranks (as :mod:`infer_prof.core.measurement.stats`),
        each rank's value its bucket's, clamped to the exact min and max."""
        h = (self.count - 1) * q / 100.0
        lo = math.floor(h)
        hi = min(lo + 1, self.count - 1)
        x_lo, x_hi = self._at_rank(ranked, lo), self._at_rank(ranked, hi)
        v = x_lo + (h - lo) * (x_hi - x_lo)
        return min(max(v, self.min), self.max)

    @staticmethod
    def _at_rank(ranked: list[tuple[float, int]], k: int) -> float:
        seen = 0
        for value, c in ranked:
            seen += c
            if k < seen:
                return value
        return ranked[-1][0]

    def summary(self, scale: float = 1.0) -> Distribution | None:
        """The distribution of the samples times ``scale`` (a unit conversion); None without
        samples. Exact (:func:`~infer_prof.core.measurement.stats.summarize`) while
        :attr:`exact`."""
        if self.count == 0:
            return None
        if self._values is not None:
            return summarize([v * scale for v in self._values] if scale != 1.0
                             else self._values)
        ranked = self._ranked()
        return Distribution(
            count=self.count,
            mean=self._mean * scale,
            p50=self._quantile(ranked, 50) * scale,
            p90=self._quantile(ranked, 90) * scale,
            p99=self._quantile(ranked, 99) * scale,
            max=self.max * scale,
            min=self.min * scale,
            std=math.sqrt(max(0.0, self._m2 / self.count)) * scale,
        )

    def summary_dict(self, scale: float = 1.0) -> dict[str, Any] | None:
        """:meth:`summary` as a dict; None without samples."""
        d = self.summary(scale)
        return None if d is None else d.to_dict()

    def method(self) -> dict[str, Any]:
        """How the summary was made: ``exact`` (bool), and past the cap the histogram's
        ``relative_error`` (of the percentiles) and the ``exact_cap`` that was passed."""
        if self.exact:
            return {"exact": True}
        return {"exact": False, "relative_error": self.relative_error,
                "exact_cap": self.exact_cap}
