"""Summaries of sampled time series: window selection, means, maxima, integrals, counter increases.

Pure: no I/O. A series is two parallel lists, times ``t_s`` (seconds, increasing) and values
(float or ``None`` where a sample could not be read). ``None`` means "not measured" and is never
treated as 0: every function here skips it, and returns ``None`` when nothing measured is left.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

Value = float | int | None
T = TypeVar("T")


def _known(v: Value) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def window_indices(t_s: Sequence[float], start_s: float | None, end_s: float | None) -> list[int]:
    """Indices ``i`` with ``start_s <= t_s[i] <= end_s`` (both ends inclusive).

    A ``None`` bound is open: ``start_s=None`` takes every sample up to ``end_s``.
    """
    return [
        i
        for i, t in enumerate(t_s)
        if (start_s is None or t >= start_s) and (end_s is None or t <= end_s)
    ]


def take(values: Sequence[T], indices: Sequence[int]) -> list[T]:
    """``[values[i] for i in indices]``."""
    return [values[i] for i in indices]


def maximum(values: Sequence[Value]) -> float | None:
    """Largest measured value; ``None`` when no value was measured."""
    known = [v for v in values if _known(v)]
    return max(known) if known else None  # type: ignore[type-var]


def mean(values: Sequence[Value]) -> float | None:
    """Arithmetic mean of the measured values, ``sum(v) / n``; ``None`` when none was measured."""
    known = [float(v) for v in values if _known(v)]  # type: ignore[arg-type]
    return sum(known) / len(known) if known else None


def trapezoid(t_s: Sequence[float], values: Sequence[Value]) -> float | None:
    """Trapezoid-rule integral of ``values`` over ``t_s`` (value unit x seconds).

    ``sum((t[i+1] - t[i]) * (v[i] + v[i+1]) / 2)`` over consecutive *measured* points: an
    unmeasured sample between two measured ones is bridged by the straight line between them.
    ``None`` when fewer than two points were measured.
    """
    pts = [(float(t), float(v)) for t, v in zip(t_s, values, strict=True) if _known(v)]  # type: ignore[arg-type]
    if len(pts) < 2:
        return None
    pairs = zip(pts, pts[1:], strict=False)
    return sum((t1 - t0) * (v0 + v1) / 2.0 for (t0, v0), (t1, v1) in pairs)


def time_weighted_mean(t_s: Sequence[float], values: Sequence[Value]) -> float | None:
    """Time-weighted mean: ``trapezoid(t, v) / (t_last - t_first)`` over the measured points.

    Samples need not be evenly spaced (window-boundary samples usually are not). With one
    measured point, or all measured points at the same instant, the arithmetic mean; ``None``
    when nothing was measured. For power in W this is the mean power, and
    ``mean * duration == trapezoid`` exactly.
    """
    pts = [(float(t), float(v)) for t, v in zip(t_s, values, strict=True) if _known(v)]  # type: ignore[arg-type]
    if not pts:
        return None
    span = pts[-1][0] - pts[0][0]
    if span <= 0:
        return sum(v for _, v in pts) / len(pts)
    area = trapezoid([t for t, _ in pts], [v for _, v in pts])
    assert area is not None
    return area / span


def busy_mean(t_s: Sequence[float], values: Sequence[Value]) -> float | None:
    """Time-weighted mean of a gauge over the part of the window in which it was above 0.

    Each measured sample stands for the time from halfway to its previous measured sample to
    halfway to its next one (the first and last for half a gap on one side); the mean is
    ``sum(w_i x v_i) / sum(w_i)`` over the samples with ``v_i > 0``. For the running-requests
    gauge this is the batch an engine step ran with: idle stretches (gauge 0), where no step
    runs, are left out, while :func:`time_weighted_mean` averages them in. Samples
    ``[1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1]`` 1 s apart: ``time_weighted_mean`` 0.9, ``busy_mean``
    1.0. With all weights 0 (one sample) the plain mean of the positive samples; ``None`` when
    no measured sample is above 0.
    """
    pts = [(float(t), float(v)) for t, v in zip(t_s, values, strict=True) if _known(v)]  # type: ignore[arg-type]
    num = den = 0.0
    positive: list[float] = []
    for i, (t, v) in enumerate(pts):
        if v <= 0:
            continue
        positive.append(v)
        left = (t - pts[i - 1][0]) / 2.0 if i > 0 else 0.0
        right = (pts[i + 1][0] - t) / 2.0 if i + 1 < len(pts) else 0.0
        num += (left + right) * v
        den += left + right
    if not positive:
        return None
    return num / den if den > 0 else sum(positive) / len(positive)


def counter_increase(values: Sequence[Value]) -> float | None:
    """Increase of a monotonic counter over a run of samples, tolerant of resets.

    ``sum(max-step)`` where a step ``v[i] - v[i-1] >= 0`` counts as is, and a decrease means the
    counter restarted from 0, so the step counts as ``v[i]`` (Prometheus ``increase()`` semantics).
    Unmeasured samples in the middle are skipped. ``None`` when the first or the last sample was
    not measured: the increase over the whole window is then unknown, and a partial one would
    under-state it silently.
    """
    if not values or not _known(values[0]) or not _known(values[-1]):
        return None
    total = 0.0
    prev = float(values[0])  # type: ignore[arg-type]
    for v in values[1:]:
        if not _known(v):
            continue
        cur = float(v)  # type: ignore[arg-type]
        total += cur - prev if cur >= prev else cur
        prev = cur
    return total


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``; ``None`` when either is unknown or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def joules_per_token_at_rate(
    energy_j: float | None, window_s: float | None, tokens_per_s: float | None
) -> float | None:
    """Energy per token at the run's output rate, J/token = ``(energy_j / window_s) /
    tokens_per_s``: the window's mean power over the output rate.

    Used where the rate is not simply the window's tokens over the window (a closed loop's
    rates are over its streams' mean span, see ``core.measurement.metrics.stream_span_s``): the
    window also holds tokens of warm-up requests still running, which the energy paid for. ``None``
    without each of the three.
    """
    if energy_j is None or not window_s or not tokens_per_s:
        return None
    return energy_j / window_s / tokens_per_s


def joules_per_token(energy_j: float | None, tokens: float | int | None) -> float | None:
    """Energy per token, J/token = ``energy_j / tokens``.

    ``None`` when the energy was not measured, or no token was produced (``tokens`` None or 0).
    """
    if energy_j is None or not tokens:
        return None
    return energy_j / tokens
