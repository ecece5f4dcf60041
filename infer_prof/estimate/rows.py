"""One ranked row per configuration: its predicted frontier, read at the target and priced.

Where a row is read (``read_at``):

- ``target``: at ``--target-interactivity X`` (tokens/s one user sees) on the predicted Pareto
  front, interpolated between points (Steffen, never extrapolated:
  :func:`infer_prof.core.analysis.frontier.at_target`); a row whose best interactivity is
  below ``X`` "does not reach" it and has no read; a row whose every point is faster than
  ``X`` is read at its highest-throughput point (it cannot batch more: the KV limit).
- ``slo``: the point of highest total tokens/s per GPU whose predicted TTFT and TPOT meet every
  ``--slo`` (:func:`~infer_prof.core.analysis.frontier.at_slo`); the prediction has medians
  only, so each SLO is checked against the predicted median (a note says so).
- ``max-throughput``: without either, the point of highest total tokens/s per GPU.

How rows rank (by the cost at their error interval's slow end, or their central cost) is
:mod:`infer_prof.estimate.ranking`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infer_prof.core.analysis.frontier import (
    FrontierPoint,
    at_slo,
    at_target,
    make_point,
    steffen,
)
from infer_prof.core.catalog.market import InstanceQuote
from infer_prof.core.estimate.deployment import Deployment
from infer_prof.core.estimate.frontier_model import PredictedPoint, predict_frontier
from infer_prof.core.estimate.measured import MeasuredRun
from infer_prof.core.workload.slo import Slo
from infer_prof.estimate.calibrated import measured_points
from infer_prof.estimate.configs import Config
from infer_prof.estimate.document import Point, ReadAt, Row
from infer_prof.estimate.pricing import instance_of
from infer_prof.results.frontier_sections import AtTarget

SLO_METRICS = {"ttft": "ttft_ms_p50", "tpot": "tpot_ms_p50", "itl": "tpot_ms_p50"}
"""What a predicted point checks each SLO metric against (the model has medians only; ITL is
the decode step, as TPOT)."""


def slo_passes(p: PredictedPoint, slos: Sequence[Slo], output_len: int) -> bool:
    """Whether the predicted medians meet every SLO; ``e2e`` is TTFT + (O - 1) x TPOT."""
    for s in slos:
        field = SLO_METRICS.get(s.metric)
        value = (p.ttft_ms_p50 + (output_len - 1) * p.tpot_ms_p50 if field is None
                 else getattr(p, field))
        if value > s.limit_ms:
            return False
    return True


def _frontier_points(points: Sequence[PredictedPoint], usd: float | None) -> list[FrontierPoint]:
    return [make_point(p.concurrency, p.tpot_ms_p50, p.tpot_ms_p50, p.output_tok_s_per_gpu,
                       p.input_tok_s_per_gpu, 1, usd) for p in points]


def _ttft_at(points: Sequence[PredictedPoint], x: float) -> float | None:
    """Predicted TTFT (ms) at interactivity ``x``, read along the points by interactivity."""
    pts = sorted(points, key=lambda p: p.interactivity)
    xs = [p.interactivity for p in pts]
    ys = [p.ttft_ms_p50 for p in pts]
    dedup = [(a, b) for k, (a, b) in enumerate(zip(xs, ys, strict=True))
             if k == 0 or a != xs[k - 1]]
    return steffen([a for a, _ in dedup], [b for _, b in dedup], x)


def read_row(points: Sequence[PredictedPoint], usd: float | None, read_at: ReadAt,
             target: float | None, slos: Sequence[Slo], output_len: int
             ) -> tuple[AtTarget | None, float | None]:
    """(the read as a result file's ``at_target``, predicted TTFT ms there) or (None, None)."""
    fpoints = _frontier_points(points, usd)
    slowest = min(p.interactivity for p in points)
    if read_at == "target" and target is not None and target <= slowest:
        read_at = "max-throughput"  # every point is faster than the target
    if read_at == "target" and target is not None:
        hit = at_target(fpoints, target, usd)
        ttft = _ttft_at(points, target) if hit is not None else None
    else:
        passes = ([slo_passes(p, slos, output_len) for p in points] if read_at == "slo"
                  else [True] * len(points))
        hit = at_slo(fpoints, passes, usd)
        ttft = None
        if hit is not None:
            x = hit.interactivity
            ttft = min(points, key=lambda p: abs(p.interactivity - x)).ttft_ms_p50
    if hit is None:
        return None, None
    return AtTarget(
        interactivity=hit.interactivity, output_tok_s_per_gpu=hit.output_tok_s_per_gpu,
        input_tok_s_per_gpu=hit.input_tok_s_per_gpu,
        total_tok_s_per_gpu=hit.total_tok_s_per_gpu,
        usd_per_million_output_tokens=hit.usd_per_million_output_tokens,
        usd_per_million_input_tokens=hit.usd_per_million_input_tokens,
        usd_per_million_total_tokens=hit.usd_per_million_total_tokens,
        interpolated=hit.interpolated,
        between=list(hit.between) if hit.between is not None else None), ttft


@dataclass(frozen=True)
class Reading:
    """Where a row's frontier is read: the workload (``input_len`` prompt and ``output_len``
    output tokens), and ``read_at`` the target interactivity ``target`` (tokens/s per user),
    the SLOs ``slos``, or the highest throughput."""

    input_len: int
    output_len: int
    read_at: ReadAt
    target: float | None
    slos: Sequence[Slo]


def build_row(d: Deployment, config: Config, reading: Reading, *,
              quote: InstanceQuote | None, expected_error_pct: float | None,
              measured: Sequence[MeasuredRun] = ()) -> Row:
    """Predict the frontier of ``config`` deployed as ``d`` (:func:`~infer_prof.core.estimate.
    frontier_model.predict_frontier`), read it at ``reading`` (module docstring) and price it
    at ``quote``; the ``measured`` runs of this configuration are set beside the prediction
    (:func:`infer_prof.estimate.calibrated.measured_points`)."""
    g, factors, output_len = config.gpu, d.factors, reading.output_len
    points = predict_frontier(d, input_len=reading.input_len, output_len=output_len,
                              max_concurrency=config.max_concurrency)
    usd = quote.usd_per_hour if quote is not None else None
    hit, ttft = read_row(points, usd, reading.read_at, reading.target, reading.slos,
                         output_len)
    notes = list(config.notes)
    link = config.link if config.gpu_count > 1 else None
    if config.gpu_count > 1 and not all(p.allreduce_counted for p in points):
        notes.append(f"tensor-parallel all-reduce not counted: no interconnect figure for "
                     f"{config.gpu_count} x {g.key} (infer_prof/catalog/data/interconnects.json)")
    elif link is not None and link.kind == "pcie":
        notes.append(f"tensor-parallel all-reduce over PCIe ({link.link}, "
                     f"{link.bidirectional_gbps:g} GB/s both ways, "
                     f"{factors.pcie_allreduce_efficiency:.0%} of one way reached: {link.source})")
    support = config.support
    if support is not None and support.weight_only:
        notes.append(f"{config.precision} runs as {support.runs_as}")
    if quote is None:
        notes.append(f"no price for {g.key} in the market asked")
    return Row(
        gpu=g.key, gpu_name=g.name, gpu_count=config.gpu_count, precision=config.precision,
        max_concurrency=config.max_concurrency,
        points=[Point(concurrency=p.concurrency, output_tok_s_per_gpu=p.output_tok_s_per_gpu,
                      input_tok_s_per_gpu=p.input_tok_s_per_gpu,
                      total_tok_s_per_gpu=p.total_tok_s_per_gpu, interactivity=p.interactivity,
                      ttft_ms_p50=p.ttft_ms_p50, tpot_ms_p50=p.tpot_ms_p50, bound=p.bound)
                for p in points],
        at_target=hit, reaches_target=hit is not None,
        best_interactivity=max(p.interactivity for p in points),
        ttft_ms_p50=ttft,
        tpot_ms_p50=(1000.0 / hit.interactivity if hit is not None and hit.interactivity
                     else None),
        usd_per_million_output_tokens=hit.usd_per_million_output_tokens if hit else None,
        usd_per_million_input_tokens=hit.usd_per_million_input_tokens if hit else None,
        usd_per_million_total_tokens=hit.usd_per_million_total_tokens if hit else None,
        instance=instance_of(quote) if quote is not None else None,
        factors=factors, expected_error_pct=expected_error_pct, notes=notes,
        measured=measured_points(d, measured, lengths=(reading.input_len, output_len)),
        kv_cache_dtype="fp8" if config.kv_cache_dtype == "fp8" else "auto",
        dtype="float16" if support is not None and support.dtype == "float16" else "bfloat16",
        runs_as=support.runs_as if support is not None else "",
        weight_only=support.weight_only if support is not None else False,
        interconnect=link.kind if link is not None else None,
        interconnect_gbps=link.bidirectional_gbps if link is not None else None,
        lossy=list(config.lossy))
