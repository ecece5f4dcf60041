"""The estimate's factors as fitted on published measurements (``estimate_factors.json``).

The file holds a :class:`StepFactors` per architecture family, fitted on the ``fit`` split of
``published_results.json`` by ``benchmarks/estimate_accuracy.py --write`` (which also writes
``estimate_errors.json``, the error on the ``holdout`` split, read by
:mod:`infer_prof.estimate.expected_error`). A family absent from the file keeps the estimate's
built-in default (:func:`infer_prof.core.estimate.factors.default_factors`).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import msgspec

from infer_prof.core.estimate.factors import StepFactors

FACTORS_FILE = "estimate_factors.json"


def _read(name: str) -> dict[str, Any] | None:
    path = resources.files("infer_prof.catalog.data").joinpath(name)
    if not path.is_file():
        return None
    return dict(json.loads(path.read_text("utf-8")))


def parse_fitted_factors(doc: dict[str, Any]) -> dict[str, StepFactors]:
    """``{family: StepFactors}`` from an ``estimate_factors.json`` document (its ``families``)."""
    return {family: msgspec.convert(entry, StepFactors)
            for family, entry in doc.get("families", {}).items()}


@cache
def fitted_factors() -> dict[str, StepFactors]:
    """The shipped fitted factors by architecture family ({} when the file is absent)."""
    doc = _read(FACTORS_FILE)
    return parse_fitted_factors(doc) if doc else {}
