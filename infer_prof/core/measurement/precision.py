"""When a load point is measured well enough: confidence intervals while the load runs.

Pure: timestamps (integer ns on one monotonic clock) and token counts in, intervals out. The
driver calls :meth:`PrecisionTracker.add_tokens` / :meth:`PrecisionTracker.add_request` as
streams deliver tokens and requests complete, and :meth:`PrecisionTracker.check` between
completions; the point stops sending new measured requests once :meth:`check` says done.

A point is *precise* when, at 95 % confidence, both

- its **output throughput** (tokens/s) and
- its **TPOT p50** (ms)

lie within ``±rel_half_width`` (default 2 %) of their estimates, after a floor of completed
requests and seconds; a ceiling of requests and seconds ends it regardless (then ``reached`` is
False and the interval says how close it got).

Output throughput: batch means (Law & Kelton, *Simulation Modeling and Analysis*, ch. 9). The
window from the first measured send ``t0`` to ``now`` is cut into ``batches`` equal slices; each
slice's rate is the output tokens that *arrived* in it (every token-carrying chunk, at its
arrival time, of every request in flight: warm-up and cool-down requests still running carry
the same load) divided by its length. Consecutive tokens of a closed loop are strongly
correlated (one decode step serves every stream), so a per-token or per-request standard error
would be far too narrow; slices much longer than the correlation time are close to
independent, and their mean's Student-t interval is ``mean ± t(0.975, k-1) x s / sqrt(k)``.
With ``k = 10`` slices ``t = 2.262``. Tokens are counted on arrival, not at their request's
end, so a slice is not lumpy with whole requests (a 128-token request would otherwise land in
one slice).

TPOT p50: the distribution-free order-statistic interval for the median (Conover, *Practical
Nonparametric Statistics*, 3.2): with ``n`` sorted values, ranks
``l = floor(n/2 - 1.96 sqrt(n)/2)`` and ``u = ceil(n/2 + 1.96 sqrt(n)/2)`` (1-based) bound the
median with at least 95 % confidence for any continuous distribution (the binomial(n, 1/2)
count below the median, in its normal approximation). Chosen over a bootstrap because it is
exact without resampling, deterministic (no random draws in a measurement), and costs one
sorted insert per request. It treats requests as independent; TPOTs of requests that shared
decode steps are positively correlated, so the interval is a lower bound on the true one, the
reason the throughput side (which sees every decode step) uses batch means.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

#: Student-t 0.975 quantiles by degrees of freedom (the batch counts allowed: 5, 10, 20, 30).
T_975 = {4: 2.776, 9: 2.262, 19: 2.093, 29: 2.045}

Z_975 = 1.959964


@dataclass(frozen=True)
class PrecisionRule:
    """When a point stops: ``rel_half_width`` (0.02 = ±2 %) at 95 % confidence on output
    throughput and TPOT p50, after at least ``min_requests`` completed measured requests and
    ``min_seconds``; at most ``max_requests`` or ``max_seconds`` regardless. ``batches``: slices
    of the window for the throughput's batch means (5, 10, 20 or 30); ``bin_ms``: the token
    arrival histogram's resolution."""

    rel_half_width: float = 0.02
    min_requests: int = 20
    min_seconds: float = 5.0
    max_requests: int = 5000
    max_seconds: float = 30.0
    batches: int = 10
    bin_ms: float = 20.0
    # an open loop's throughput is its offered rate (below saturation) plus the Poisson noise
    # of its arrivals, not a property of the server to pin down (±2 % of a 16/s Poisson stream
    # takes ~800 s): there only TPOT p50 must be precise, the throughput interval is recorded
    require_throughput: bool = True

    def __post_init__(self) -> None:
        if self.batches - 1 not in T_975:
            raise ValueError(f"batches must be one of {sorted(d + 1 for d in T_975)}")
        if not 0 < self.rel_half_width < 1:
            raise ValueError(f"rel_half_width must be within (0, 1), got {self.rel_half_width}")
        if self.min_seconds > self.max_seconds or self.min_requests > self.max_requests:
            raise ValueError("the floor must not exceed the ceiling")


@dataclass(frozen=True)
class Interval:
    """An estimate and its 95 % interval ``[low, high]``; ``rel_half_width`` is
    ``max(estimate - low, high - estimate) / estimate`` (None when not yet known)."""

    estimate: float | None
    low: float | None
    high: float | None

    @property
    def rel_half_width(self) -> float | None:
        if self.estimate is None or self.low is None or self.high is None or self.estimate <= 0:
            return None
        return max(self.estimate - self.low, self.high - self.estimate) / self.estimate

    def to_dict(self) -> dict[str, Any]:
        rel = self.rel_half_width
        return {
            "estimate": _r(self.estimate),
            "low": _r(self.low),
            "high": _r(self.high),
            "rel_half_width": None if rel is None else round(rel, 5),
        }


def batch_means_interval(values: list[float]) -> Interval:
    """Mean and 95 % Student-t interval of batch values (``len(values) - 1`` must be a key of
    :data:`T_975`): ``mean ± t x s / sqrt(k)``, ``s`` the sample standard deviation."""
    k = len(values)
    if k - 1 not in T_975:
        raise ValueError(f"need 5, 10, 20 or 30 batches, got {k}")
    mean = sum(values) / k
    var = sum((v - mean) ** 2 for v in values) / (k - 1)
    half = T_975[k - 1] * math.sqrt(var / k)
    return Interval(mean, mean - half, mean + half)


def median_interval(sorted_values: list[float]) -> Interval:
    """The median and its distribution-free 95 % order-statistic interval (module docstring):
    ``[x_(l), x_(u)]`` with ``l = floor(n/2 - 1.96 sqrt(n)/2)``, ``u = ceil(n/2 + 1.96
    sqrt(n)/2)``, 1-based, clamped to ``[1, n]``. Fewer than 6 values: no interval."""
    n = len(sorted_values)
    if n == 0:
        return Interval(None, None, None)
    mid = n // 2
    med = (sorted_values[mid] if n % 2 else (sorted_values[mid - 1] + sorted_values[mid]) / 2)
    if n < 6:
        return Interval(med, None, None)
    half = Z_975 * math.sqrt(n) / 2
    lo = max(1, math.floor(n / 2 - half))
    hi = min(n, math.ceil(n / 2 + half))
    return Interval(med, sorted_values[lo - 1], sorted_values[hi - 1])


@dataclass
class PrecisionTracker:
    """Running state of one point's precision (see the module docstring). ``t0_ns``: the
    measured window's start (the first :meth:`check`, when measuring begins, if not given)."""

    rule: PrecisionRule = field(default_factory=PrecisionRule)
    t0_ns: int | None = None
    requests: int = 0
    stopped_by: str | None = None  # "precision" | "max_requests" | "max_seconds"
    _bins: dict[int, int] = field(default_factory=dict)
    _tpot_ms: list[float] = field(default_factory=list)
    _elapsed_ns: int = 0

    def start(self, t0_ns: int) -> None:
        """The measured window begins at ``t0_ns`` (earlier tokens are not counted)."""
        if self.t0_ns is None:
            self.t0_ns = t0_ns

    def add_tokens(self, arrival_ns: int, tokens: int) -> None:
        """``tokens`` output tokens arrived at ``arrival_ns`` (any request, warm-up included)."""
        if self.t0_ns is None or arrival_ns < self.t0_ns or tokens <= 0:
            return
        b = int((arrival_ns - self.t0_ns) // (self.rule.bin_ms * 1e6))
        self._bins[b] = self._bins.get(b, 0) + tokens

    def add_request(self, tpot_ms: float | None) -> None:
        """A measured request completed (its TPOT in ms, None when it had <= 1 token)."""
        self.requests += 1
        if tpot_ms is not None:
            bisect.insort(self._tpot_ms, tpot_ms)

    def throughput(self, now_ns: int) -> Interval:
        """Output tokens/s over ``[t0, now]`` and its batch-means interval (None until the
        window holds ``batches`` whole bins)."""
        if self.t0_ns is None:
            return Interval(None, None, None)
        bin_ns = self.rule.bin_ms * 1e6
        whole = int((now_ns - self.t0_ns) // bin_ns)  # bins entirely in the past
        k = self.rule.batches
        per = whole // k
        if per < 1:
            return Interval(None, None, None)
        first = whole - per * k  # the oldest partial batch is left out
        seconds = per * bin_ns / 1e9
        rates = [
            sum(self._bins.get(first + j * per + i, 0) for i in range(per)) / seconds
            for j in range(k)
        ]
        return batch_means_interval(rates)

    def tpot_p50(self) -> Interval:
        """TPOT p50 (ms) of the measured requests completed so far, with its interval."""
        return median_interval(self._tpot_ms)

    def check(self, now_ns: int) -> bool:
        """Whether the point has measured enough at ``now_ns`` (and why: ``stopped_by``)."""
        if self.stopped_by is not None:
            return True
        self.start(now_ns)
        assert self.t0_ns is not None
        self._elapsed_ns = now_ns - self.t0_ns
        r = self.rule
        elapsed_s = self._elapsed_ns / 1e9
        if self.requests >= r.max_requests:
            self.stopped_by = "max_requests"
        elif elapsed_s >= r.max_seconds:
            self.stopped_by = "max_seconds"
        elif self.requests >= r.min_requests and elapsed_s >= r.min_seconds:
            tp = self.throughput(now_ns).rel_half_width if r.require_throughput else 0.0
            tpot = self.tpot_p50().rel_half_width
            if tp is not None and tpot is not None and max(tp, tpot) <= r.rel_half_width:
                self.stopped_by = "precision"
        return self.stopped_by is not None

    def to_dict(self, now_ns: int | None = None) -> dict[str, Any]:
        """The point's ``precision`` block: the rule, why it stopped, the requests it took, and
        both intervals as of ``now_ns`` (default: the last :meth:`check`)."""
        at = now_ns if now_ns is not None else (self.t0_ns or 0) + self._elapsed_ns
        r = self.rule
        return {
            "method": "batch means (output tokens by arrival time) + order-statistic median",
            "target_rel_half_width": r.rel_half_width,
            "confidence": 0.95,
            "floor": {"requests": r.min_requests, "seconds": r.min_seconds},
            "ceiling": {"requests": r.max_requests, "seconds": r.max_seconds},
            "batches": r.batches,
            "throughput_required": r.require_throughput,
            "stopped_by": self.stopped_by,
            "reached": self.stopped_by == "precision",
            "requests": self.requests,
            "seconds": round(self._elapsed_ns / 1e9, 3),
            "output_throughput": self.throughput(at).to_dict(),
            "tpot_p50_ms": self.tpot_p50().to_dict(),
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
