"""The estimate's factors as fitted on published measurements (``estimate_factors.json``).

The file holds a :class:`StepFactors` per architecture family (``families``) and, for the GPUs
the fit split has enough points of, per GPU (``gpus``: an H200 reaches a different share of its
peaks than an H100 of the same family), fitted on the ``fit`` split of
``published_results.json`` by ``benchmarks/estimate_accuracy.py --write`` (which also writes
``estimate_errors.json``, the error on the ``holdout`` split, read by
:mod:`infer_prof.estimate.expected_error`). :func:`factors_for` picks the GPU's own fit, else its
family's, else the ``fallback`` (the precision-weighted mean of the fitted families' factors,
``published_fit.population_factors``, carried over), else the estimate's built-in default
(:func:`infer_prof.core.estimate.factors.default_factors`).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import msgspec

from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.estimate.factors import StepFactors, default_factors, family_of

MIN_FAMILY_SOURCES = 2
"""Sources a family's points must come from for a fit of its own: one source's points cannot
tell the hardware from that source's setup (its vLLM build, flags, client), and a family fitted
on one source's setup carries it to every other (a B200 fitted on one slow August 2025 setup
alone predicted InferenceMAX's B200 runs 50-70 % too slow). Fewer: the mean of the fitted
families' factors serves it (``Fitted.fallback``)."""

FACTORS_FILE = "estimate_factors.json"


def _read(name: str) -> dict[str, Any] | None:
    path = resources.files("infer_prof.catalog.data").joinpath(name)
    if not path.is_file():
        return None
    return dict(json.loads(path.read_text("utf-8")))


def parse_fitted_factors(doc: dict[str, Any], section: str = "families"
                         ) -> dict[str, StepFactors]:
    """``{name: StepFactors}`` from one section (``families`` or ``gpus``) of an
    ``estimate_factors.json`` document."""
    return {name: msgspec.convert(entry, StepFactors)
            for name, entry in doc.get(section, {}).items()}


@cache
def fitted_factors() -> dict[str, StepFactors]:
    """The shipped fitted factors by architecture family ({} when the file is absent)."""
    doc = _read(FACTORS_FILE)
    return parse_fitted_factors(doc) if doc else {}


@cache
def fitted_gpu_factors() -> dict[str, StepFactors]:
    """The shipped fitted factors by GPU catalog key ({} when none)."""
    doc = _read(FACTORS_FILE)
    return parse_fitted_factors(doc, "gpus") if doc else {}


@cache
def fallback_factors() -> StepFactors | None:
    """The shipped ``fallback``: the precision-weighted mean of the fitted families' factors, for
    a family without a fit of its own (None when the file has none)."""
    doc = _read(FACTORS_FILE)
    entry = doc.get("fallback") if doc else None
    return msgspec.convert(entry, StepFactors) if entry else None


def factors_for(gpu: GpuSpec) -> StepFactors:
    """The factors to predict ``gpu`` with: its own fit, else its architecture family's, else
    the fallback carried over to its family (the mean of the fitted families' factors), else
    the estimate's default for the family (each says where it comes from in ``source``)."""
    family = family_of(gpu)
    own = fitted_gpu_factors().get(gpu.key) or fitted_factors().get(family)
    if own is not None:
        return own
    carried = fallback_factors()
    if carried is None:
        return default_factors(gpu)
    return carried_over(carried, family)


def carried_over(factors: StepFactors, family: str) -> StepFactors:
    """``factors`` (another family's fit, or the fitted families' mean) serving ``family``, its
    source saying so (the same factors when they are ``family``'s own)."""
    if factors.family == family:
        return factors
    return msgspec.structs.replace(
        factors, family=family,
        source=(f"no {family} fit from {MIN_FAMILY_SOURCES} or more published sources: "
                f"carried over from {factors.family} ({factors.source})"))
