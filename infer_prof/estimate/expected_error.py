"""The estimate's expected error, from validation against published measurements.

Read from the shipped file ``infer_prof/catalog/data/estimate_errors.json``, which the
validation benchmark (``benchmarks/estimate_accuracy.py``) writes. Its shape:

    {"expected_error_pct": 12.3,            # median |error| of output tok/s per GPU, %
     "p90_error_pct": 25.0,                 # optional
     "by_family": {"Hopper": 9.8, ...},     # optional: per GPU architecture family
     "source": "benchmarks/estimate_accuracy.py on N held-out points, DATE"}

Absent file (or no number in it): no error is claimed (:data:`NOT_VALIDATED`), never a
guess.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

ERRORS_FILE = "estimate_errors.json"
NOT_VALIDATED = "expected error: not yet validated"


@dataclass(frozen=True)
class ExpectedError:
    """The validation's figures: overall median |error| in %, per family where given, and a
    line saying where they come from (or :data:`NOT_VALIDATED`)."""

    overall_pct: float | None
    by_family: dict[str, float]
    says: str

    def for_family(self, family: str) -> float | None:
        """The family's figure, else the overall one, else None."""
        return self.by_family.get(family, self.overall_pct)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def parse_errors(doc: Any) -> ExpectedError:
    """An :class:`ExpectedError` from the file's JSON value (module docstring)."""
    if not isinstance(doc, dict):
        return ExpectedError(None, {}, NOT_VALIDATED)
    overall = _number(doc.get("expected_error_pct"))
    fam_doc = doc.get("by_family")
    families = {str(k): v for k, val in (fam_doc.items() if isinstance(fam_doc, dict) else ())
                if (v := _number(val)) is not None}
    if overall is None and not families:
        return ExpectedError(None, {}, NOT_VALIDATED)
    p90 = _number(doc.get("p90_error_pct"))
    says = f"expected error: median {overall:.0f} %" if overall is not None else (
        "expected error: by GPU family only")
    if p90 is not None:
        says += f", 90th percentile {p90:.0f} %"
    says += f" of output tok/s per GPU ({doc.get('source') or ERRORS_FILE})"
    return ExpectedError(overall, families, says)


def load_expected_error() -> ExpectedError:
    """The shipped file's figures, or :data:`NOT_VALIDATED` when there is none."""
    file = resources.files("infer_prof.catalog.data") / ERRORS_FILE
    if not file.is_file():
        return ExpectedError(None, {}, NOT_VALIDATED)
    try:
        return parse_errors(json.loads(file.read_text()))
    except (OSError, ValueError):
        return ExpectedError(None, {}, f"{NOT_VALIDATED} ({ERRORS_FILE} is unreadable)")
