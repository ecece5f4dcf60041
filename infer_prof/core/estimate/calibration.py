"""Fitting the estimate's achieved shares and per-step overhead to measured throughputs.

Pure: no I/O. The prediction is passed in as a function, so the fit knows nothing of models or
GPUs: given samples (each with a measured output tokens/s per GPU) and
``predict(factors, sample) -> predicted output tokens/s per GPU``, :func:`fit_factors` finds the
:class:`StepFactors` of one architecture family that minimise

    J(f) = mean_s ( ln(predicted_s(f) / measured_s) )^2  +  sum_k w_k x ( ln(f_k / f0_k) )^2

over the fitted factors ``k`` (:data:`FITTED`: ``mbu``, ``mbu_kv``, ``mfu_decode``,
``mfu_prefill``, ``step_overhead_ms``, ``allreduce_efficiency``, ``allreduce_latency_us``,
``layer_overhead_us``, ``fp4_weight_only_share``, ``sequence_overhead_us``), each
held within :data:`BOUNDS`. The first term is the
squared log error (a 2x over- and a 2x under-prediction cost the same); the second, with a small
weight ``w_k`` (default 0.01, or the factor's own in :attr:`Search.pulls`), pulls a factor the
data cannot see (say ``mfu_prefill`` where every sample is decode-bound) back to its starting
value ``f0`` instead of letting it wander to a bound.

The search is a bounded coordinate (pattern) search in log space: each factor in turn is
multiplied by ``exp(+-step)``; a move is kept when it lowers ``J``; when no factor moves, the
step halves, down to ``min_step``. Deterministic; about ``iterations x 2 x len(FITTED)``
evaluations of ``J``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import msgspec

from infer_prof.core.estimate.factors import StepFactors

T = TypeVar("T")

FITTED: tuple[str, ...] = ("mbu", "mbu_kv", "mfu_decode", "mfu_prefill", "step_overhead_ms",
                           "allreduce_efficiency", "allreduce_latency_us", "layer_overhead_us",
                           "fp4_weight_only_share", "sequence_overhead_us")
"""The factors a fit moves: every field of :class:`StepFactors` but ``family`` and ``source``."""

BOUNDS: dict[str, tuple[float, float]] = {
    "mbu": (0.2, 1.0),
    "mbu_kv": (0.1, 1.0),
    "mfu_decode": (0.05, 1.0),
    "mfu_prefill": (0.1, 1.0),
    "step_overhead_ms": (0.02, 30.0),
    "allreduce_efficiency": (0.1, 1.0),
    "allreduce_latency_us": (1.0, 200.0),
    "layer_overhead_us": (0.5, 500.0),
    "fp4_weight_only_share": (0.3, 1.0),
    "sequence_overhead_us": (0.5, 500.0),
}
"""Each fitted factor's allowed range: shares in (0, 1], the overhead in milliseconds, the
all-reduce call's fixed cost, a layer's and a sequence's in microseconds (a time at 0 starts the
search at its lower bound)."""


class FitResult(msgspec.Struct, frozen=True, kw_only=True):
    """A fit's outcome: the factors, how many samples, and the error before and after.

    ``rms_log_error_*``: sqrt(mean (ln(predicted / measured))^2) with the starting and the
    fitted factors; ``median_abs_error_pct_*``: median |predicted / measured - 1| x 100."""

    factors: StepFactors
    samples: int
    rms_log_error_before: float
    rms_log_error_after: float
    median_abs_error_pct_before: float
    median_abs_error_pct_after: float


def _log_errors(factors: StepFactors, samples: Sequence[T],
                predict: Callable[[StepFactors, T], float],
                measured: Callable[[T], float]) -> list[float]:
    out = []
    for s in samples:
        p = predict(factors, s)
        out.append(math.log(max(p, 1e-9) / measured(s)))
    return out


def objective(factors: StepFactors, start: StepFactors, samples: Sequence[T],
              predict: Callable[[StepFactors, T], float], measured: Callable[[T], float],
              prior_weight: float, fitted: Sequence[str] = FITTED,
              pulls: Mapping[str, float] | None = None) -> float:
    """``J(f)`` of the module docstring: mean squared log error plus the pull to ``start``,
    ``prior_weight`` for each factor ``pulls`` does not name."""
    errs = _log_errors(factors, samples, predict, measured)
    fit = sum(e * e for e in errs) / len(errs)
    weight = pulls or {}
    pull = sum(weight.get(k, prior_weight) * math.log(getattr(factors, k) / getattr(start, k)) ** 2
               for k in fitted)
    return fit + pull


def _clamp(name: str, value: float) -> float:
    lo, hi = BOUNDS[name]
    return min(hi, max(lo, value))


class Search(msgspec.Struct, frozen=True, kw_only=True):
    """How :func:`fit_factors` searches: which factors it moves (``fitted``), the pull to the
    start (``prior_weight``, ``w_k`` of the module docstring; ``pulls``: a factor's own, as
    ``(name, weight)`` pairs), the first log step and the smallest (``step``, ``min_step``), and
    at most ``iterations`` rounds."""

    fitted: tuple[str, ...] = FITTED
    prior_weight: float = 0.01
    pulls: tuple[tuple[str, float], ...] = ()
    step: float = 0.5
    min_step: float = 0.01
    iterations: int = 400


def fit_factors(samples: Sequence[T], predict: Callable[[StepFactors, T], float],
                measured: Callable[[T], float], start: StepFactors, *, source: str,
                search: Search = Search()) -> FitResult:
    """Fit the factors named in ``search.fitted`` (default :data:`FITTED`) of ``start`` to
    ``samples`` (module docstring for the objective); the others keep ``start``'s values.

    ``measured(s)``: the measured output tokens/s per GPU of sample ``s`` (> 0);
    ``predict(f, s)``: the predicted figure with factors ``f``. The result's factors carry
    ``source``. Raises ValueError when there are no samples or ``search.fitted`` names a
    factor :data:`BOUNDS` does not."""
    fitted, prior_weight, step = search.fitted, search.prior_weight, search.step
    if not samples:
        raise ValueError("fit_factors needs at least one sample")
    if unknown := [k for k in fitted if k not in BOUNDS]:
        raise ValueError(f"no bounds for {unknown}; fit some of {list(BOUNDS)}")
    start = msgspec.structs.replace(
        start, **{k: _clamp(k, getattr(start, k)) for k in fitted})

    def cost(f: StepFactors) -> float:
        return objective(f, start, samples, predict, measured, prior_weight, fitted,
                         dict(search.pulls))

    best, best_cost = start, cost(start)
    for _ in range(search.iterations):
        if step < search.min_step:
            break
        moved = False
        for name in fitted:
            for sign in (1.0, -1.0):
                value = _clamp(name, getattr(best, name) * math.exp(sign * step))
                if value == getattr(best, name):
                    continue
                trial = msgspec.structs.replace(best, **{name: value})
                c = cost(trial)
                if c < best_cost - 1e-12:
                    best, best_cost, moved = trial, c, True
                    break
        if not moved:
            step /= 2.0
    found = msgspec.structs.replace(best, source=source)
    before = _log_errors(start, samples, predict, measured)
    after = _log_errors(found, samples, predict, measured)
    return FitResult(
        factors=found,
        samples=len(samples),
        rms_log_error_before=math.sqrt(sum(e * e for e in before) / len(before)),
        rms_log_error_after=math.sqrt(sum(e * e for e in after) / len(after)),
        median_abs_error_pct_before=statistics.median(abs(math.exp(e) - 1) * 100 for e in before),
        median_abs_error_pct_after=statistics.median(abs(math.exp(e) - 1) * 100 for e in after),
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation between the
    sorted values (numpy's default); ValueError when empty."""
    if not values:
        raise ValueError("percentile of no values")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
