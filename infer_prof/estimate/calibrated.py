"""The estimate calibrated by the user's own runs (``--calibrate-from``) and set beside them
(``--measured``, or the ``--calibrate-from`` runs when ``--measured`` is not given).

- :func:`calibrate`: per architecture family that is estimated and has usable runs, the
  shipped factors refitted on those runs (:func:`infer_prof.core.estimate.measured.refit`). The
  start is the shipped factors of the runs' GPU when they are all one GPU
  (:func:`infer_prof.catalog.estimate_factors.factors_for`), else of the family. The refitted
  factors serve every GPU of the family; other families keep the shipped factors and say so.
- :func:`measured_points`: the runs of one row's configuration, each beside the prediction at
  its concurrency with the row's factors.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from infer_prof.catalog.estimate_factors import factors_for, fitted_factors
from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.estimate.calibration import FitResult
from infer_prof.core.estimate.deployment import Deployment
from infer_prof.core.estimate.factors import StepFactors, default_factors, family_of
from infer_prof.core.estimate.frontier_model import predict_point
from infer_prof.core.estimate.measured import (
    MeasuredRun,
    by_family,
    error_pct,
    refit,
    same_configuration,
)
from infer_prof.estimate.document import FamilyFactors, MeasuredPoint, MeasuredSource
from infer_prof.estimate.measured_runs import MeasuredSet

OTHER_FAMILY = "on a GPU family not estimated here"


def source_of(measured: MeasuredSet, extra: dict[str, int] | None = None) -> MeasuredSource:
    """``measured`` as the document states it, with ``extra`` reasons added."""
    unusable = dict(measured.unusable)
    for why, n in (extra or {}).items():
        unusable[why] = unusable.get(why, 0) + n
    return MeasuredSource(where=measured.where, read=measured.read,
                          used=measured.read - sum(unusable.values()), unusable=unusable)


@dataclass(frozen=True)
class Calibration:
    """The refitted factors by family (``fits``), where they were fitted (``fitted_on``), and
    the runs to set beside the prediction (``compare``)."""

    fits: dict[str, FitResult] = field(default_factory=dict)
    fitted_on: MeasuredSet | None = None
    compare: MeasuredSet | None = None

    def factors_for(self, gpu: GpuSpec) -> StepFactors:
        """The family's refitted factors, else the shipped ones
        (:func:`infer_prof.catalog.estimate_factors.factors_for`)."""
        fit = self.fits.get(family_of(gpu))
        return fit.factors if fit is not None else factors_for(gpu)

    def runs_to_compare(self) -> tuple[MeasuredRun, ...]:
        """The runs set beside the prediction (none without a source)."""
        return self.compare.runs if self.compare is not None else ()

    def fit_source(self) -> MeasuredSource | None:
        """The ``--calibrate-from`` source as the document states it: runs of a family not
        estimated are counted as unusable here."""
        if self.fitted_on is None:
            return None
        other = sum(1 for r in self.fitted_on.runs if r.family not in self.fits)
        return source_of(self.fitted_on, {OTHER_FAMILY: other} if other else None)

    def families(self, gpus: Iterable[GpuSpec]) -> list[FamilyFactors]:
        """Which factors each estimated family used and where they came from."""
        out: dict[str, FamilyFactors] = {}
        for g in gpus:
            fam = family_of(g)
            if fam in out:
                continue
            fit = self.fits.get(fam)
            if fit is not None:
                runs = sum(1 for r in self.fitted_on.runs if r.family == fam
                           ) if self.fitted_on is not None else fit.samples
                out[fam] = FamilyFactors(
                    family=fam, origin="refitted", says=fit.factors.basis(), runs=runs,
                    median_abs_error_pct_before=round(fit.median_abs_error_pct_before, 1),
                    median_abs_error_pct_after=round(fit.median_abs_error_pct_after, 1))
                continue
            shipped = factors_for(g).basis()
            if self.fitted_on is not None:
                shipped += f"; no usable {fam} run in {self.fitted_on.where}"
            out[fam] = FamilyFactors(family=fam, origin="shipped", says=shipped)
        return list(out.values())


def start_factors(runs: Sequence[MeasuredRun]) -> StepFactors:
    """Where a family's refit starts: the shipped factors of the runs' GPU when they are all
    one GPU, else the family's shipped fit, else the estimate's default."""
    gpus = {r.gpu.key for r in runs}
    if len(gpus) == 1:
        return factors_for(runs[0].gpu)
    return fitted_factors().get(runs[0].family) or default_factors(runs[0].gpu)


def calibrate(fit_on: MeasuredSet | None, compare: MeasuredSet | None,
              gpus: Iterable[GpuSpec]) -> Calibration:
    """Refit the factors of each family of ``gpus`` that ``fit_on`` has runs of (module
    docstring); ``compare`` (else ``fit_on``) is set beside the prediction."""
    fits: dict[str, FitResult] = {}
    if fit_on is not None:
        wanted = {family_of(g) for g in gpus}
        for fam, runs in by_family(fit_on.runs).items():
            if fam in wanted:
                fits[fam] = refit(runs, start_factors(runs), fit_on.where)
    return Calibration(fits, fit_on, compare if compare is not None else fit_on)


def measured_points(d: Deployment, runs: Sequence[MeasuredRun], *,
                    lengths: tuple[int, int]) -> list[MeasuredPoint]:
    """The runs that measured ``d``'s configuration (:func:`same_configuration`, its KV-cache
    dtype included), each beside the prediction of ``d`` at its concurrency, lowest
    concurrency first."""
    out = []
    kv = "fp8" if d.kv_dtype_bytes == 1 else "auto"
    for r in runs:
        if not same_configuration(r, model=d.arch, gpu=d.gpu.key, gpu_count=d.gpu_count,
                                  precision=d.precision, lengths=lengths, kv_cache_dtype=kv):
            continue
        p = predict_point(d, input_len=lengths[0], output_len=lengths[1],
                          concurrency=r.concurrency)
        out.append(MeasuredPoint(
            concurrency=r.concurrency, output_tok_s_per_gpu=r.output_tok_s_per_gpu,
            interactivity=r.interactivity, ttft_ms_p50=r.ttft_ms_p50,
            tpot_ms_p50=r.tpot_ms_p50, source=r.source, run_id=r.run_id,
            predicted_output_tok_s_per_gpu=p.output_tok_s_per_gpu,
            predicted_interactivity=p.interactivity, predicted_ttft_ms_p50=p.ttft_ms_p50,
            predicted_tpot_ms_p50=p.tpot_ms_p50,
            error_pct=error_pct(p.output_tok_s_per_gpu, r.output_tok_s_per_gpu)))
    return sorted(out, key=lambda m: (m.concurrency, m.source))


def median_abs_error(points: Sequence[MeasuredPoint]) -> float | None:
    """Median |error_pct| over ``points`` (None when there are none)."""
    return statistics.median(abs(p.error_pct) for p in points) if points else None
