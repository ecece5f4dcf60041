"""Load sweeps: parsing load lists, finding the knee, searching for the highest passing load.

Pure. A sweep runs one measurement per load point (a concurrency or a request rate) on one server
launch. This module decides which points and reads the curve; running them is the runner's job.

- :func:`parse_concurrency_list` / :func:`parse_rate_list`: ``"1,8,32,128"`` and
  ``"1,2,4,inf"``, sorted ascending without duplicates (a curve is read in load order).
- :func:`find_knee`: the first point, in load order, whose TPOT p50 exceeds ``factor`` (1.5) times
  the TPOT p50 at the lowest load: where adding load starts to cost every user latency.
- :func:`find_max_int` / :func:`find_max_float`: the highest load for which a caller-supplied
  ``passes(load) -> bool`` holds (e.g. "meets every SLO"), assuming it is monotone (passes up to
  some load, fails beyond). Exponential growth from a start value until the first failure (or a
  ceiling), then bisection between the last pass and the first fail down to a resolution. Each
  load is evaluated at most once; the probe order is returned, so a report can show every run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T", int, float)


class SweepError(ValueError):
    """A malformed load list or search setting; the message names it."""


def parse_concurrency_list(text: str, option: str = "--concurrency") -> list[int]:
    """``"1,8,32,128"`` -> ``[1, 8, 32, 128]``: positive integers, sorted, duplicates dropped."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise SweepError(f"{option} {text!r} is empty; give e.g. 1,8,32,128")
    out: set[int] = set()
    for p in parts:
        try:
            v = int(p)
        except ValueError:
            raise SweepError(f"{option} {text!r}: {p!r} is not a whole number; give e.g. "
                             "1,8,32,128") from None
        if v < 1:
            raise SweepError(f"{option} {text!r}: every level must be >= 1, got {v}")
        out.add(v)
    return sorted(out)


def parse_rate_list(text: str, option: str = "--rate") -> list[float]:
    """``"1,2,4,inf"`` -> ``[1.0, 2.0, 4.0, inf]``: requests/s > 0 (``inf``: all at once),
    sorted, duplicates dropped."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise SweepError(f"{option} {text!r} is empty; give e.g. 1,2,4,inf")
    out: set[float] = set()
    for p in parts:
        try:
            v = float(p)
        except ValueError:
            raise SweepError(f"{option} {text!r}: {p!r} is not a number of requests/s; give "
                             "e.g. 1,2,4,inf") from None
        if math.isnan(v) or v <= 0 or v == -math.inf:
            raise SweepError(f"{option} {text!r}: every rate must be > 0 requests/s (or inf), "
                             f"got {p}")
        out.add(v)
    return sorted(out)


@dataclass(frozen=True)
class Knee:
    """Where the curve bends: ``index`` into the points given, in load order."""

    index: int
    load: float
    tpot_p50_ms: float
    baseline_ms: float  # TPOT p50 at the lowest load with a value
    threshold_ms: float  # factor * baseline

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "load": self.load,
            "tpot_p50_ms": self.tpot_p50_ms,
            "baseline_ms": self.baseline_ms,
            "threshold_ms": self.threshold_ms,
        }


def find_knee(
    points: Sequence[tuple[float, float | None]], factor: float = 1.5
) -> Knee | None:
    """The first point whose TPOT p50 is above ``factor`` x the lowest load's TPOT p50.

    ``points`` are ``(load, tpot_p50_ms)``; a ``None`` value (TPOT not measured there) is
    skipped, and the baseline is the value at the lowest load that has one. Points are read in
    load order whatever order they are given in; ``index`` refers to the given order. None when
    no point passes the threshold or fewer than two have a value.
    """
    if not factor > 1:
        raise SweepError(f"knee factor must be > 1, got {factor}")
    order = sorted(range(len(points)), key=lambda i: points[i][0])
    valued = [i for i in order if points[i][1] is not None]
    if len(valued) < 2:
        return None
    base = points[valued[0]][1]
    assert base is not None
    threshold = factor * base
    for i in valued[1:]:
        v = points[i][1]
        assert v is not None
        if v > threshold:
            return Knee(i, points[i][0], v, base, threshold)
    return None


@dataclass
class SearchResult(Generic[T]):
    """The outcome of a find-max search."""

    best: T | None  # highest load that passed; None when even the start failed
    first_fail: T | None  # lowest load that failed; None when the ceiling passed
    probes: list[tuple[T, bool]] = field(default_factory=list)  # (load, passed), in run order
    reason: str = ""


class _Memo(Generic[T]):
    def __init__(self, passes: Callable[[T], bool], max_probes: int) -> None:
        self.passes: Callable[[T], bool] = passes
        self.seen: dict[T, bool] = {}
        self.probes: list[tuple[T, bool]] = []
        self.max_probes = max_probes

    def __call__(self, x: T) -> bool:
        if x not in self.seen:
            if len(self.probes) >= self.max_probes:
                raise _OutOfProbes
            ok = bool(self.passes(x))
            self.seen[x] = ok
            self.probes.append((x, ok))
        return self.seen[x]


class _OutOfProbes(Exception):
    pass


def find_max_int(
    passes: Callable[[int], bool],
    *,
    start: int = 1,
    ceiling: int = 4096,
    resolution: int = 1,
    growth: float = 2.0,
    max_probes: int = 32,
) -> SearchResult[int]:
    """The highest integer load in ``[start, ceiling]`` for which ``passes`` holds.

    Probes ``start, start*growth, ...`` (rounded up, capped at ``ceiling``) until one fails, then
    bisects between the last pass ``lo`` and first fail ``hi`` until ``hi - lo <= resolution``.
    The answer is within ``resolution`` of the true boundary for a monotone ``passes``.
    ``max_probes`` bounds the number of runs; when it is hit the best so far is returned and
    ``reason`` says so.
    """
    if start < 1 or ceiling < start or resolution < 1 or growth <= 1 or max_probes < 1:
        raise SweepError("find-max needs 1 <= start <= ceiling, resolution >= 1, growth > 1, "
                         "max_probes >= 1")
    memo: _Memo[int] = _Memo(passes, max_probes)
    lo: int | None = None
    hi: int | None = None
    try:
        x = start
        while True:
            if memo(x):
                lo = x
                if x >= ceiling:
                    break
                x = min(ceiling, max(x + 1, math.ceil(x * growth)))
            else:
                hi = x
                break
        if lo is None:
            return SearchResult(None, hi, memo.probes, f"the lowest load {start} fails")
        while hi is not None and hi - lo > resolution:
            mid = (lo + hi) // 2
            if memo(mid):
                lo = mid
            else:
                hi = mid
    except _OutOfProbes:
        return SearchResult(lo, hi, memo.probes, f"stopped after {max_probes} probes")
    if hi is None:
        return SearchResult(lo, None, memo.probes, f"the ceiling {ceiling} passes")
    return SearchResult(lo, hi, memo.probes, f"boundary between {lo} (pass) and {hi} (fail)")


def find_max_float(
    passes: Callable[[float], bool],
    *,
    start: float = 1.0,
    ceiling: float = 1024.0,
    resolution: float = 0.05,
    growth: float = 2.0,
    max_probes: int = 32,
) -> SearchResult[float]:
    """The highest rate (requests/s) in ``[start, ceiling]`` for which ``passes`` holds.

    As :func:`find_max_int`, with a *relative* resolution: bisection (geometric midpoint, since
    rates span orders of magnitude) stops when ``hi / lo - 1 <= resolution`` (0.05: the answer is
    within 5% of the boundary). Probed rates are rounded to 4 significant digits so that they
    read well in a report.
    """
    if not (0 < start <= ceiling and math.isfinite(ceiling)) or resolution <= 0 or growth <= 1:
        raise SweepError("find-max needs 0 < start <= ceiling (finite), resolution > 0, "
                         "growth > 1")
    if max_probes < 1:
        raise SweepError("find-max needs max_probes >= 1")
    memo: _Memo[float] = _Memo(passes, max_probes)
    lo: float | None = None
    hi: float | None = None
    try:
        x = start
        while True:
            if memo(x):
                lo = x
                if x >= ceiling:
                    break
                x = min(ceiling, _round_sig(x * growth))
            else:
                hi = x
                break
        if lo is None:
            return SearchResult(None, hi, memo.probes, f"the lowest rate {start:g} fails")
        while hi is not None and hi / lo - 1 > resolution:
            mid = _round_sig(math.sqrt(lo * hi))
            if not lo < mid < hi:
                break
            if memo(mid):
                lo = mid
            else:
                hi = mid
    except _OutOfProbes:
        return SearchResult(lo, hi, memo.probes, f"stopped after {max_probes} probes")
    if hi is None:
        return SearchResult(lo, None, memo.probes, f"the ceiling {ceiling:g} passes")
    return SearchResult(lo, hi, memo.probes, f"boundary between {lo:g} (pass) and {hi:g} (fail)")


def _round_sig(x: float, digits: int = 4) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))
