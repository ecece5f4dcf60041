"""Comparing frontiers at one target: which GPU, instance or configuration is cheapest at the
speed the users need (issue 23 §4).

Pure. A :class:`Curve` is one frontier (one GPU, instance and engine configuration: its load
points and the price per GPU-hour it ran with). At a target interactivity X (tokens/s/user)
each curve is read with :func:`infer_prof.core.analysis.frontier.at_target` (Steffen interpolation
along its Pareto front, never extrapolated; a measured point exactly at X is "measured"); with SLOs,
the measured point of highest total tokens/s per GPU that meets them all
(:func:`infer_prof.core.analysis.frontier.at_slo`). With both, the SLOs first pick the points, then
the target is read along the front of those points.

Rows come cheapest first by $ per 1M output tokens (then $ per 1M total tokens, then the most
output tokens/s per GPU); a curve without a price sorts after the priced ones, and one that
does not reach the target (its front stops short of X, or no point meets the SLOs) comes last,
saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from infer_prof.core.analysis.frontier import AtTarget, FrontierPoint, at_slo, at_target, front


@dataclass(frozen=True)
class Curve:
    """One frontier to compare: ``gpu`` (e.g. ``2x H100-SXM``), ``instance`` (labels),
    ``configuration`` (precision and engine settings), its points, the price per GPU-hour
    (None without one), ``passes`` (for each point whether it met the SLOs; empty when none
    were asked) and ``source`` (``frontier``: a ``run --frontier`` result; ``sweep``: built from
    the per-point summaries of a multi-point run)."""

    gpu: str
    instance: str
    configuration: str
    points: tuple[FrontierPoint, ...]
    usd_per_gpu_hour: float | None
    source: str = "sweep"
    passes: tuple[bool, ...] = ()
    files: tuple[str, ...] = field(default=())
    #: What is wrong with points of this curve (incomplete or invalid runs), said in its row.
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class TargetRow:
    """One curve read at the target: ``at`` (None when it does not reach it) and ``note``
    (``measured at 4``, ``interpolated between 8 and 4``, ``does not reach 50 tok/s/user (front:
    12.3-40.1)``, ``front stops at 55.6 tok/s/user: ...`` when the target is slower than the
    most loaded point, ``no point meets the SLOs``)."""

    curve: Curve
    at: AtTarget | None
    note: str


def _load(c: float) -> str:
    return f"{c:g}"


def front_span(points: Sequence[FrontierPoint]) -> tuple[float, float] | None:
    """(lowest, highest) interactivity on the Pareto front; None without a front."""
    f = front(points)
    if not f:
        return None
    return float(f[0].interactivity or 0.0), float(f[-1].interactivity or 0.0)


def read_curve(curve: Curve, target: float | None, slo: bool) -> TargetRow:
    """:class:`TargetRow` of one curve at ``target`` (tokens/s/user) and/or its SLO verdicts."""
    points: Sequence[FrontierPoint] = curve.points
    if slo:
        points = [p for p, ok in zip(curve.points, curve.passes, strict=True) if ok]
        if not any(p.interactivity is not None for p in points):
            return TargetRow(curve, None, "no point meets the SLOs")
        if target is None:
            top = max((p for p in points if p.interactivity is not None),
                      key=lambda p: p.total_tok_s_per_gpu)
            best = at_slo([top], [True], curve.usd_per_gpu_hour)
            return TargetRow(curve, best,
                             f"measured at {_load(top.concurrency)}, best meeting the SLOs")
    assert target is not None
    at = at_target(points, target, curve.usd_per_gpu_hour)
    if at is None:
        span = front_span(points)
        within = " within the SLOs" if slo else ""
        if span is not None and target < span[0]:
            return TargetRow(curve, None, f"front stops at {span[0]:.1f} tok/s/user{within}: "
                                          f"load not raised until users slow to {target:g}")
        where = f"front: {span[0]:.1f}-{span[1]:.1f}" if span else "no point with a TPOT"
        return TargetRow(curve, None, f"does not reach {target:g} tok/s/user{within} ({where})")
    if at.between is not None:
        lo, hi = at.between
        return TargetRow(curve, at, f"interpolated between {_load(lo)} and {_load(hi)}")
    conc = next(p.concurrency for p in points if p.interactivity == at.interactivity)
    return TargetRow(curve, at, f"measured at {_load(conc)}")


def _sort_key(row: TargetRow) -> tuple[int, float, float, float]:
    at = row.at
    if at is None:
        return (2, 0.0, 0.0, 0.0)
    out = at.usd_per_million_output_tokens
    tot = at.usd_per_million_total_tokens
    if out is None:
        return (1, 0.0, 0.0, -at.output_tok_s_per_gpu)
    return (0, out, tot if tot is not None else 0.0, -at.output_tok_s_per_gpu)


def rows_at_target(
    curves: Sequence[Curve], target: float | None, slo: bool = False,
) -> list[TargetRow]:
    """Each curve read at ``target`` (and/or its SLOs), cheapest first (module docstring)."""
    if target is None and not slo:
        raise ValueError("give a target interactivity, SLOs, or both")
    rows = [read_curve(c, target, slo) for c in curves]
    return sorted(rows, key=_sort_key)  # stable: equal rows keep the input order
