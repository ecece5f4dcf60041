"""The estimate's factors fitted on the published measurements (``published_results.json``).

A published point is made ready to predict (:func:`prepare`: the model's architecture, the
concurrency the planner says runs at once) and predicted as ``estimate`` does (:func:`predict`).
:func:`fit_all` fits the :class:`~infer_prof.core.estimate.factors.StepFactors` on every vLLM
closed-loop point of every source, with the rules the held-out-by-source validation found
necessary (:data:`MIN_FAMILY_SOURCES`, :data:`TP_ONLY`, :data:`POOL_WEIGHT`): per architecture
family, each pulled towards the family the most sources measured as far as its own sources are
few, then per GPU with :data:`MIN_GPU_POINTS` points, pulled towards its family's; points their
GPU did not bound (:mod:`infer_prof.estimate.gpu_bound`) and hybrid models' (:func:`fitted_model`)
are left out. A family without a fit of its own is predicted with the fitted families'
precision-weighted mean (:func:`population_factors`, the ``fallback``).
``benchmarks/estimate_accuracy.py --write`` writes the result to ``estimate_factors.json``;
``benchmarks/estimate_loso.py`` refits it with each source held out (:func:`fit_cases` on the
other sources' cases).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache

import msgspec

from infer_prof.catalog.estimate_factors import MIN_FAMILY_SOURCES, carried_over, factors_for
from infer_prof.catalog.gpus import catalog
from infer_prof.catalog.interconnects import tp_link
from infer_prof.catalog.models import resolve_model
from infer_prof.catalog.published_results import PublishedPoint, published_results
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.estimate.calibration import FITTED, Search, fit_factors
from infer_prof.core.estimate.deployment import Deployment
from infer_prof.core.estimate.factors import StepFactors, default_factors, family_of
from infer_prof.core.estimate.frontier_model import PredictedPoint, predict_point
from infer_prof.core.estimate.peaks import peak_flops
from infer_prof.core.estimate.weight_only import FP4_WEIGHT_ONLY, weight_only_cost
from infer_prof.core.planning.planner import PlanRequest, plan
from infer_prof.estimate.gpu_bound import inversions

__all__ = ["FAMILY_SPREAD", "FITTED", "FP4_SHARE", "FREE_IN_PARENT", "GPU_FITTED",
           "MIN_FAMILY_SOURCES", "MIN_GPU_POINTS", "POOL_WEIGHT", "SOURCE_SPREAD", "TP_ONLY",
           "Case", "Chooser",
           "Fitted", "architecture", "carried", "chooser", "family_search", "fit_all",
           "fit_cases", "fitted_model", "fp4_weight_only_sources", "identifiable",
           "model_family", "pooled", "population_factors", "predict", "predict_case", "prepare",
           "runs_fp4_weight_only", "shipped_factors", "source_count", "unfitted", "unpulled"]


@dataclass(frozen=True)
class Case:
    """One point made ready to predict: the model, GPU and the concurrency to predict at."""

    point: PublishedPoint
    arch: ModelSpec
    family: str
    model_family: str
    concurrency: int
    kv_dtype_bytes: float


@dataclass(frozen=True)
class Fitted:
    """A fit's factors: per architecture family, and per GPU key where it had enough points;
    ``fallback`` the mean of the fitted families' factors (:func:`population_factors`), for a
    family with points from fewer than :data:`MIN_FAMILY_SOURCES` sources or none (None: the
    default)."""

    families: dict[str, StepFactors]
    gpus: dict[str, StepFactors]
    fallback: StepFactors | None = None

MIN_GPU_POINTS = 6
"""Fit points a GPU needs for factors of its own (fewer: its family's serve it)."""



def model_family(alias: str, arch: ModelSpec | None) -> str:
    """``llama``, ``mistral``, ``mixtral``, ``gpt-oss``, ``qwen3``, ...: the alias up to its
    size, with `` (MoE)`` when the architecture routes experts."""
    name = "gpt-oss" if alias.startswith("gpt-oss") else alias.split("-")[0].split("/")[-1]
    moe = arch is not None and arch.moe is not None
    return f"{name} (MoE)" if moe else name


@cache
def architecture(model: str) -> ModelSpec | None:
    """The model's architecture from the catalog, offline; None for a model it cannot read."""
    try:
        return resolve_model(model, create_tiny=False, fetch=False).spec
    except Exception:  # an unknown alias or hub id: not predictable offline
        return None


def mxfp4_activations(p: PublishedPoint) -> str:
    """What ``p``'s MXFP4 MoE multiplied with
    (:data:`~infer_prof.core.estimate.peaks.MXFP4_ACTIVATIONS`): the source's ``mxfp8``, else
    vLLM's default, 16-bit."""
    return p.mxfp4_activations or "bf16"


def prepare(p: PublishedPoint) -> Case | str:
    """The :class:`Case` to predict for ``p``, or a one-line reason it cannot be predicted."""
    arch = architecture(p.model)
    if arch is None:
        return f"model {p.model} is not in the catalog (no architecture offline)"
    gpu = catalog()[p.gpu]
    kv = "fp8" if p.kv_cache_dtype == "fp8" else "auto"
    wanted = p.concurrency or 4096
    try:
        pl = plan(PlanRequest(arch, gpu, gpus=p.gpu_count, concurrency=wanted,
                              input_len=p.input_len, output_len=p.output_len,
                              quantization=p.precision, kv_cache_dtype=kv,
                              max_num_seqs=max(wanted, 1024)), with_suggestions=False)
    except Exception as exc:  # the planner refuses the precision or parallelism
        return f"planner: {exc}".splitlines()[0]
    cap = pl.running_at_once
    if not pl.fits or not cap:
        return "the planner says it does not fit"
    if not peak_flops(gpu, p.precision, mxfp4_activations(p)):  # no compute time
        return f"the GPU catalog has no {p.precision} FLOP/s figure for {gpu.key}"
    at = min(p.concurrency, cap) if p.concurrency else cap
    return Case(p, arch, family_of(gpu), model_family(p.model, arch), max(1, at),
                1.0 if kv == "fp8" else 2.0)


def predict_case(factors: StepFactors, case: Case) -> PredictedPoint:
    """The predicted steady state of ``case`` with ``factors`` (throughput, TTFT, TPOT), its
    all-reduce over the link ``estimate`` counts for the group
    (:func:`~infer_prof.catalog.interconnects.tp_link`: NVLink, Infinity Fabric, or PCIe at
    ``pcie_allreduce_efficiency``)."""
    p = case.point
    link = tp_link(p.gpu, p.gpu_count)
    d = Deployment(arch=case.arch, gpu=catalog()[p.gpu], gpu_count=p.gpu_count,
                   precision=p.precision, factors=factors, kv_dtype_bytes=case.kv_dtype_bytes,
                   link_gbps=link.bidirectional_gbps if link is not None else None,
                   over_pcie=link is not None and link.kind == "pcie",
                   mxfp4_activations=mxfp4_activations(p))
    return predict_point(d, input_len=p.input_len, output_len=p.output_len,
                         concurrency=case.concurrency)


def predict(factors: StepFactors, case: Case) -> float:
    """Predicted output tokens/s per GPU of ``case`` with ``factors`` (:func:`predict_case`)."""
    return predict_case(factors, case).output_tok_s_per_gpu


Chooser = Callable[[str], StepFactors]
"""The factors to predict a GPU (by catalog key) with."""


def shipped_factors(gpu_key: str) -> StepFactors:
    """What ``estimate`` predicts with: :func:`infer_prof.catalog.estimate_factors.factors_for`."""
    return factors_for(catalog()[gpu_key])


def chooser(fit: Fitted) -> Chooser:
    """The GPU's own fit in ``fit``, else its family's, else the estimate's default."""
    def choose(gpu_key: str) -> StepFactors:
        gpu = catalog()[gpu_key]
        family = family_of(gpu)
        own = fit.gpus.get(gpu_key) or fit.families.get(family)
        if own is not None:
            return own
        if fit.fallback is not None:
            return carried(fit.fallback, family)
        return default_factors(gpu)
    return choose


carried = carried_over
"""``factors`` (another family's fit) serving ``family`` (catalog.estimate_factors)."""



GPU_FITTED = ("mbu", "step_overhead_ms")
"""What a GPU's own fit moves beyond its family's: the weights' bandwidth share and the fixed
step time. The KV and compute shares stay the family's: one GPU's fit points are mostly one
model, and letting them move would tune them to that model (an H200 fitted on gpt-oss alone
read KV at a quarter of its bandwidth, and ranked below an H100 for dense models)."""


_FITS: dict[tuple[object, ...], StepFactors] = {}
"""Fits already made, by (cases, start, factors moved, search): the held-out-by-source
benchmark refits every family in every fold, and a family the held-out source has no point in
has the same cases as in the full fit."""


FitLog = Callable[[str], None]
"""Where a fit says what it did, one line a fit (the benchmark prints them to stderr)."""


SOURCE_SPREAD = 0.24
"""``sigma_s``: how far one source's setup (its vLLM build, flags, client) moves its measured
throughputs from what the hardware gives, in log: the standard deviation, across the 23 sources
with points in the goal's set, of each source's median held-out log error (0.236 on
2026-12-04, ``benchmarks/pooling_spreads.py``)."""

FAMILY_SPREAD = 0.26
"""``tau``: how far one architecture family's factors lie from another's, in log: the root mean
square of ``ln(mbu_F / mbu_Hopper)`` over Ada, Ampere, Blackwell RTX and CDNA3, each fitted on its
own points with no pull (0.95, 0.88, 1.00 and 0.53 against Hopper's 0.75; 0.264 on 2026-12-04,
``benchmarks/pooling_spreads.py``)."""

POOL_WEIGHT = SOURCE_SPREAD ** 2 / FAMILY_SPREAD ** 2
"""``lambda0``: a family's fit (or a GPU's own) from ``S`` sources is pulled towards its parent's
fit (the most-measured family's for a family, the family's for a GPU) with the weight
``lambda0 / S`` in :func:`~infer_prof.core.estimate.calibration.objective` (partial pooling). In
Bayesian terms, the sources' setups shift a fit with a spread ``sigma_s`` in log throughput and
the hardware moves a factor from its parent's with a spread ``tau``; the posterior's pull is
``sigma_s^2 / (S tau^2)``: ``lambda0 = 0.24^2 / 0.26^2``, 0.85 (:data:`SOURCE_SPREAD`,
:data:`FAMILY_SPREAD`). Fewer sources pull harder: a family that two sources with the same slow
setup measured stays near its parent. ``sigma_s`` is measured with the pooling its own value
sets; the two constants are that fixed point (``benchmarks/pooling_spreads.py`` measures both at
the shipped figures)."""


def _fit(members: list[Case], start: StepFactors, what: str, day: str,
         fitted: tuple[str, ...] = FITTED, search: Search | None = None,
         log: FitLog | None = None) -> StepFactors:
    key = (tuple(c.point.id for c in members), start, fitted, search, day)
    if key not in _FITS:
        _FITS[key] = _fit_now(members, start, what, day, fitted, search, log)
    return _FITS[key]


def _fit_now(members: list[Case], start: StepFactors, what: str, day: str,
             fitted: tuple[str, ...], search: Search | None,
             log: FitLog | None) -> StepFactors:
    gpus = sorted({c.point.gpu for c in members})
    source = (f"fitted on {len(members)} published vLLM closed-loop points of "
              f"{', '.join(gpus)}, {day}, by benchmarks/estimate_accuracy.py --write "
              "(least squares on log error, infer_prof/core/estimate/calibration.py)")
    result = fit_factors(members, predict, lambda c: c.point.output_tok_s_per_gpu, start,
                         source=source,
                         search=msgspec.structs.replace(search or Search(), fitted=fitted))
    if log is not None:
        log(f"fit {what}: {result.samples} points, median |error| "
            f"{result.median_abs_error_pct_before:.1f} % -> "
            f"{result.median_abs_error_pct_after:.1f} %")
    return msgspec.structs.replace(result.factors, family=start.family)


TP_ONLY: tuple[str, ...] = ("allreduce_efficiency", "allreduce_latency_us", "layer_overhead_us")
"""Factors only tensor-parallel points can tell apart: the all-reduce's, and the per-layer time
that does not shrink with the GPU count (on one GPU it is indistinguishable from the fixed step
time)."""


FREE_IN_PARENT: tuple[str, ...] = ("sequence_overhead_us",)
"""Factors the parent family's fit moves with no pull towards its start: a time the estimate's
defaults set at 0 (no time a sequence assumed) has no scale in log for the weak pull to
hold it at, so the data set it; every other family is pulled to the parent's figure as to any
factor's (:data:`POOL_WEIGHT`)."""


def unpulled(search: Search) -> Search:
    """``search`` with :data:`FREE_IN_PARENT`'s factors pulled with weight 0 (the parent's fit)."""
    return msgspec.structs.replace(
        search, pulls=(*search.pulls, *((name, 0.0) for name in FREE_IN_PARENT)))


FP4_SHARE = "fp4_weight_only_share"
"""The factor only points of FP4 weights on a GPU without FP4 math can tell
(:func:`fp4_weight_only_sources`)."""


def runs_fp4_weight_only(case: Case) -> bool:
    """True when ``case`` runs FP4 weights (MXFP4, NVFP4) on a GPU without FP4 math, unpacked
    to 16-bit (:func:`~infer_prof.core.estimate.weight_only.weight_only_cost`)."""
    cost = weight_only_cost(case.point.precision, catalog()[case.point.gpu])
    return cost is not None and cost.format == FP4_WEIGHT_ONLY


def fp4_weight_only_sources(members: Iterable[Case]) -> int:
    """How many sources measured FP4 weights on a GPU without FP4 math among ``members``: the
    ``S`` of :data:`FP4_SHARE`'s pull (:func:`family_search`)."""
    return source_count(c for c in members if runs_fp4_weight_only(c))


def identifiable(members: Iterable[Case]) -> tuple[str, ...]:
    """The factors a family's fit moves: every one of :data:`FITTED`, less :data:`TP_ONLY` when
    none of ``members`` runs on more than one GPU, and less :data:`FP4_SHARE` when none runs FP4
    weights without FP4 math (those keep their starting figures)."""
    members = list(members)
    out = FITTED
    if not any(c.point.gpu_count > 1 for c in members):
        out = tuple(k for k in out if k not in TP_ONLY)
    if not fp4_weight_only_sources(members):
        out = tuple(k for k in out if k != FP4_SHARE)
    return out


def family_search(search: Search, members: Iterable[Case]) -> Search:
    """``search`` with :data:`FP4_SHARE` pulled to its start (1: int4 Marlin's shares, or the
    parent's fit) with the weight ``POOL_WEIGHT / S``, ``S`` the sources that measured the path
    (:data:`POOL_WEIGHT`'s partial pooling for one factor: a setup shifts a source's points by
    ``sigma_s``, and the FP4 unpacking's rate departs from int4 Marlin's as much as one GPU
    family's shares from another's, ``tau``). Unchanged when no member runs the path."""
    sources = fp4_weight_only_sources(members)
    if not sources:
        return search
    return msgspec.structs.replace(search,
                                   pulls=(*search.pulls, (FP4_SHARE, POOL_WEIGHT / sources)))


def fit_all(day: str, log: FitLog | None = None) -> Fitted:
    """Fit the factors per architecture family on every vLLM closed-loop point of every source
    (bursts and offline tables left out: not a steady concurrency), starting from the estimate's
    defaults; then per GPU with at least :data:`MIN_GPU_POINTS` points, starting from its
    family's fit. How well that generalises is measured by holding each source out of this
    same fit: ``benchmarks/estimate_loso.py``. ``log`` hears one line a fit."""
    fit_points = [p for p in published_results().points
                  if p.engine == "vllm" and p.load == "closed-loop"]
    return fit_cases([c for p in fit_points if isinstance(c := prepare(p), Case)], day,
                     log=log)


def fit_cases(fit_on: Iterable[Case], day: str, only: Iterable[str] | None = None,
              search: Search | None = None, log: FitLog | None = None) -> Fitted:
    """:func:`fit_all`'s fit on the cases ``fit_on``: per architecture family (only the
    families named in ``only``, when given), then per GPU with :data:`MIN_GPU_POINTS` points.
    A family whose cases come from fewer than :data:`MIN_FAMILY_SOURCES` sources is not fitted.
    The family the most sources measured (the parent) is fitted first,
    from the estimate's defaults with :class:`Search`'s weak pull (none on
    :data:`FREE_IN_PARENT`'s); every other family starts
    from the parent's fit and is pulled back to it, and a GPU's own fit to its family's, with
    the weight :func:`pooled` gives its number of sources (partial pooling, :data:`POOL_WEIGHT`).
    ``search`` overrides the coordinate search's settings (default :class:`Search`). The cases
    :func:`unfitted` names are left out."""
    fit_on = list(fit_on)
    left_out = unfitted(c.point for c in fit_on)
    cases: dict[str, list[Case]] = {}
    for case in fit_on:
        if case.point.id not in left_out:
            cases.setdefault(case.family, []).append(case)
    if only is not None:
        wanted = set(only)
        cases = {k: v for k, v in cases.items() if k in wanted}
    sources = {k: source_count(v) for k, v in cases.items()}
    families: dict[str, StepFactors] = {}
    gpus: dict[str, StepFactors] = {}
    eligible = [k for k in cases if sources[k] >= MIN_FAMILY_SOURCES]
    parent = max(eligible, key=lambda k: (sources[k], len(cases[k])), default=None)
    base = search or Search()
    for family in sorted(eligible, key=lambda k: (k != parent, k)):  # the parent first
        members = cases[family]
        if parent is None or family == parent:
            start, how = default_factors(catalog()[members[0].point.gpu]), unpulled(base)
        else:
            start, how = carried(families[parent], family), pooled(base, sources[family])
        families[family] = _fit(members, start, family, day, identifiable(members),
                                family_search(how, members), log)
        by_gpu: dict[str, list[Case]] = {}
        for c in members:
            by_gpu.setdefault(c.point.gpu, []).append(c)
        for key, own in sorted(by_gpu.items()):
            if len(own) >= MIN_GPU_POINTS and len(by_gpu) > 1:
                gpus[key] = _fit(own, families[family], key, day, GPU_FITTED,
                                 pooled(base, source_count(own)), log)
    return Fitted(families, gpus,
                  population_factors(families, sources, families[parent] if parent else None))


def population_factors(families: dict[str, StepFactors], sources: dict[str, int],
                       base: StepFactors | None) -> StepFactors | None:
    """The factors of a family no two sources measured: the mean of the fitted families'.

    In the model :data:`POOL_WEIGHT` stands on, each family's factors are a draw from a
    population of families (spread ``tau``, :data:`FAMILY_SPREAD`) and each family's fit
    measures its own with the error its ``S`` sources leave (``sigma_s^2 / S``,
    :data:`SOURCE_SPREAD`). A family without a fit is another draw: its best prediction is the
    population's mean, each fitted family weighted by its precision, per factor of
    :data:`FITTED`, in log:

        ln f = sum_F w_F ln f_F / sum_F w_F,   w_F = 1 / (tau^2 + sigma_s^2 / S_F)

    (the family with the most sources only as one of them: a family measured by many sources
    counts at most ``1 / tau^2``). ``families``: the fitted families' factors; ``sources``: how
    many sources each was fitted on; ``base``: the most-measured family's fit (fit_cases'
    parent), whose figures the factors not fitted keep (``pcie_allreduce_efficiency``). A factor
    at 0 in some family (a fixed time) is averaged as it is, not in log. None when no family is
    fitted."""
    if not families or base is None:
        return None
    weight = {k: 1.0 / (FAMILY_SPREAD ** 2 + SOURCE_SPREAD ** 2 / max(1, sources.get(k, 1)))
              for k in families}
    total = sum(weight.values())

    def mean(name: str) -> float:
        values = {k: float(getattr(f, name)) for k, f in families.items()}
        if min(values.values()) <= 0:  # a time at 0 (no log): averaged as it is
            return sum(weight[k] * v for k, v in values.items()) / total
        return math.exp(sum(weight[k] * math.log(v) for k, v in values.items()) / total)
    names = sorted(families)
    share = ", ".join(f"{k} {weight[k] / total:.2f}" for k in names)
    return msgspec.structs.replace(
        base, **{name: mean(name) for name in FITTED}, family="the mean of the fitted families",
        source=(f"the precision-weighted mean (in log) of the factors of the families fitted on "
                f"2 or more published sources ({share}; published_fit.population_factors): "
                + "; ".join(f"{k}: {families[k].source}" for k in names)))


def fitted_model(arch: ModelSpec) -> bool:
    """False for a hybrid model (``arch.hybrid``: linear-attention or Mamba layers beside its
    attention layers): its points are predicted and scored, not fitted. The factors are shares
    of the peaks a transformer's steps reach (weight and KV reads, GEMMs, attention); a hybrid's
    recurrent layers run their own kernels (chunked scans, state updates) whose efficiency no
    factor describes, so a fit on its points moves the transformers' factors to absorb them (with
    the three hybrid sources in the fit, held out by source: median 12.3 %, TPn/TP1 7.5 %, 113 of
    121 GPU pairs right; without: 11.6 %, 4.0 %, 117)."""
    return arch.hybrid is None


def unfitted(points: Iterable[PublishedPoint]) -> dict[str, str]:
    """The points of ``points`` a fit leaves out, by id, each with why: measured slower than a
    GPU they dominate in the same source and configuration (their GPU did not bound them:
    :func:`infer_prof.estimate.gpu_bound.inversions`, compared within ``points``), or a hybrid
    model's (:func:`fitted_model`)."""
    pts = list(points)
    out = {i: v.why() for i, v in inversions(pts).items()}
    for p in pts:
        arch = architecture(p.model)
        if p.id not in out and arch is not None and not fitted_model(arch):
            out[p.id] = (f"{p.model} is a hybrid model (linear-attention or Mamba layers): "
                         "scored, not fitted")
    return out


def source_count(cases: Iterable[Case]) -> int:
    """How many sources (publications, by title) ``cases`` come from: the ``S`` of
    :data:`POOL_WEIGHT` and what :data:`MIN_FAMILY_SOURCES` counts."""
    return len({c.point.source.title for c in cases})


def pooled(search: Search, sources: int) -> Search:
    """``search`` with the pull towards the start (the parent's fit) a fit from ``sources``
    sources gets: ``POOL_WEIGHT / sources`` (:data:`POOL_WEIGHT`)."""
    return msgspec.structs.replace(search, prior_weight=POOL_WEIGHT / max(1, sources))
