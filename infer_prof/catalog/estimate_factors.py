"""The estimate's factors as fitted on published measurements (``estimate_factors.json``).

The file holds a :class:`StepFactors` per architecture family (``families``) and, for the GPUs
the fit split has enough points of, per GPU (``gpus``: an H200 reaches a different share of its
peaks than an H100 of the same family), fitted on the ``fit`` split of
``published_results.json`` by ``benchmarks/estimate_accuracy.py --write`` (which also writes
``estimate_errors.json``, the error on the ``holdout`` split, read by
:mod:`infer_prof.estimate.expected_error`). :func:`factors_for` picks the GPU's own fit, else its
family's, else the ``fallback`` (the fit of the family the most sources measured, carried
over), else the estimate's built-in default
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
    """The shipped ``fallback``: the fit of the family the most sources measured, for a family
    without a fit of its own (None when the file has none)."""
    doc = _read(FACTORS_FILE)
    entry = doc.get("fallback") if doc else None
    return msgspec.convert(entry, StepFactors) if entry else None


def factors_for(gpu: GpuSpec) -> StepFactors:
    """The factors to predict ``gpu`` with: its own fit, else its architecture family's, else
    the fallback fit carried over to its family (the family measured by the most published
    sources), else the estimate's default for the family (each says where it comes from in
    ``source``)."""
    family = family_of(gpu)
    own = fitted_gpu_factors().get(gpu.key) or fitted_factors().get(family)
    if own is not None:
        return own
    carried = fallback_factors()
    if carried is None:
        return default_factors(gpu)
    if carried.family == family:
        return carried
    return msgspec.structs.replace(
        carried, family=family,
        source=(f"no {family} fit from 2 or more published sources: {carried.family}'s fit "
                f"carried over ({carried.source})"))
