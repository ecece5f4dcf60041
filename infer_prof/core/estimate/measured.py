"""A user's measured runs as the estimate uses them: refitting the factors of an architecture
family on them, and setting each beside the prediction of the same configuration.

Pure: no I/O (reading result files and the history is :mod:`infer_prof.estimate.measured_runs`).

- :func:`refit`: the factors of one family fitted on its runs with
  :func:`infer_prof.core.estimate.calibration.fit_factors` (the objective the published fit
  uses: mean squared ``ln(predicted / measured)`` of output tokens/s per GPU at each run's
  concurrency, plus the pull to the start; runs repeated alike are one sample, :func:`distinct`).
  With fewer than :data:`FULL_FIT_RUNS` distinct samples only
  ``mbu`` and ``step_overhead_ms`` move (:data:`FEW_RUNS_FITTED`, what the published fit moves
  for one GPU's own factors); with more, every factor of
  :data:`~infer_prof.core.estimate.calibration.FITTED`.
- :func:`same_configuration`: whether a run measured the configuration of an estimate row (same
  model, GPU, GPU count, precision, input and output lengths).
- :func:`error_pct`: ``(predicted / measured - 1) x 100``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import msgspec

from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.estimate.calibration import FITTED, FitResult, Search, fit_factors
from infer_prof.core.estimate.deployment import Deployment
from infer_prof.core.estimate.factors import StepFactors
from infer_prof.core.estimate.frontier_model import predict_point

FULL_FIT_RUNS = 6
"""Runs a family needs before every factor is refitted (fewer: ``mbu`` and the step overhead)."""

FEW_RUNS_FITTED: tuple[str, ...] = ("mbu", "step_overhead_ms")
"""What a fit on fewer than :data:`FULL_FIT_RUNS` runs moves: the weights' share of peak
bandwidth and the fixed time a step (a handful of runs, mostly of one model, would tune the KV
and compute shares to that model)."""


@dataclass(frozen=True, kw_only=True)
class MeasuredRun:
    """One measured closed-loop run, usable to calibrate: where it was read (``source``: a file
    path or ``history:<run_id>``), its ``run_id`` and start (ISO 8601, None when not recorded),
    what ran (``arch`` the model, ``gpu`` x ``gpu_count`` at ``precision``, ``input_len`` /
    ``output_len`` tokens a request, ``concurrency`` streams), the interconnect's bidirectional
    GB/s (``link_gbps``, None: unknown; ``over_pcie`` when it is PCIe), the KV-cache dtype
    (``auto`` or ``fp8``) and what was measured:
    output tokens/s per GPU, interactivity (tokens/s per user), TTFT and TPOT medians in ms
    (None when not recorded)."""

    source: str
    run_id: str
    started_at: str | None
    arch: ModelSpec
    gpu: GpuSpec
    family: str
    gpu_count: int
    precision: str
    input_len: int
    output_len: int
    concurrency: int
    output_tok_s_per_gpu: float
    interactivity: float | None = None
    ttft_ms_p50: float | None = None
    tpot_ms_p50: float | None = None
    link_gbps: float | None = None
    over_pcie: bool = False
    kv_cache_dtype: str = "auto"


def deployment_of(run: MeasuredRun, factors: StepFactors) -> Deployment:
    """The :class:`Deployment` the run measured, predicted with ``factors``."""
    return Deployment(arch=run.arch, gpu=run.gpu, gpu_count=run.gpu_count,
                      precision=run.precision, factors=factors, link_gbps=run.link_gbps,
                      over_pcie=run.over_pcie)


def predict_run(factors: StepFactors, run: MeasuredRun) -> float:
    """Predicted output tokens/s per GPU of ``run``'s configuration at its concurrency."""
    return predict_point(deployment_of(run, factors), input_len=run.input_len,
                         output_len=run.output_len,
                         concurrency=run.concurrency).output_tok_s_per_gpu


def by_family(runs: Iterable[MeasuredRun]) -> dict[str, list[MeasuredRun]]:
    """The runs grouped by architecture family, families sorted."""
    out: dict[str, list[MeasuredRun]] = {}
    for r in runs:
        out.setdefault(r.family, []).append(r)
    return dict(sorted(out.items()))


def date_range(runs: Sequence[MeasuredRun]) -> str:
    """The days the runs started, ``2026-11-20 to 2026-11-27`` (one day: that day; none
    recorded: ``dates not recorded``)."""
    days = sorted({r.started_at[:10] for r in runs if r.started_at})
    if not days:
        return "dates not recorded"
    return days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"


def distinct(runs: Sequence[MeasuredRun]) -> list[MeasuredRun]:
    """One sample per configuration and concurrency: runs repeated alike become the first of
    them with the median of their output tokens/s per GPU (each measured configuration weighs
    the same in the fit, and a long history costs no more than its distinct points)."""
    groups: dict[tuple[object, ...], list[MeasuredRun]] = {}
    for r in runs:
        key = (r.arch.name, r.gpu.key, r.gpu_count, r.precision, r.input_len, r.output_len,
               r.concurrency)
        groups.setdefault(key, []).append(r)
    return [replace(g[0], output_tok_s_per_gpu=statistics.median(
        x.output_tok_s_per_gpu for x in g)) if len(g) > 1 else g[0] for g in groups.values()]


def moved_factors(samples: int) -> tuple[str, ...]:
    """What a fit on ``samples`` distinct points moves (module docstring)."""
    return FITTED if samples >= FULL_FIT_RUNS else FEW_RUNS_FITTED


def refit_source(runs: Sequence[MeasuredRun], where: str, start: StepFactors) -> str:
    """``refitted on N runs from WHERE, DATES (GPUs; moved FACTORS from the shipped factors
    (FAMILY), which were START's source)``."""
    moved = moved_factors(len(distinct(runs)))
    gpus = ", ".join(sorted({f"{r.gpu_count}x {r.gpu.key}" if r.gpu_count > 1 else r.gpu.key
                             for r in runs}))
    return (f"refitted on {len(runs)} run{'s' if len(runs) != 1 else ''} from {where}, "
            f"{date_range(runs)} ({gpus}; moved {', '.join(moved)} from the shipped factors "
            f"({start.family}), which were {start.source})")


def refit(runs: Sequence[MeasuredRun], start: StepFactors, where: str,
          predict: Callable[[StepFactors, MeasuredRun], float] = predict_run) -> FitResult:
    """``start`` refitted on ``runs`` (module docstring: which factors move; one sample per
    distinct configuration and concurrency, :func:`distinct`), its ``source`` saying so
    (:func:`refit_source`) and its ``family`` kept. ValueError for no runs."""
    samples = distinct(runs)
    result = fit_factors(samples, predict, lambda r: r.output_tok_s_per_gpu, start,
                         source=refit_source(runs, where, start),
                         search=Search(fitted=moved_factors(len(samples))))
    return msgspec.structs.replace(
        result, factors=msgspec.structs.replace(result.factors, family=start.family))


def same_model(a: ModelSpec, b: ModelSpec) -> bool:
    """One model: the same name (a catalog alias resolves to one), or the same hub id (an
    alias and the hub id it stands for)."""
    return a.name == b.name or (a.hub_id is not None and a.hub_id == b.hub_id)


def same_configuration(run: MeasuredRun, *, model: ModelSpec, gpu: str, gpu_count: int,
                       precision: str, lengths: tuple[int, int],
                       kv_cache_dtype: str | None = None) -> bool:
    """Whether ``run`` measured this configuration: the model (:func:`same_model`), the GPU
    (catalog key) and count, the precision, ``(input_len, output_len)`` and, when given, the
    KV-cache dtype (``auto`` or ``fp8``)."""
    return (same_model(run.arch, model) and run.gpu.key == gpu and run.gpu_count == gpu_count
            and run.precision == precision and (run.input_len, run.output_len) == lengths
            and (kv_cache_dtype is None or run.kv_cache_dtype == kv_cache_dtype))


def error_pct(predicted: float, measured: float) -> float:
    """``(predicted / measured - 1) x 100``: + when the prediction is above the measurement."""
    return (predicted / measured - 1.0) * 100.0
