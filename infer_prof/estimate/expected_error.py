"""The estimate's expected error, from validation against published measurements.

Read from the shipped file ``infer_prof/catalog/data/estimate_errors.json``, which the
validation benchmark (``benchmarks/estimate_accuracy.py``) writes. Its shape:

    {"expected_error_pct": 12.3,            # median |error| of output tok/s per GPU, %
     "p90_error_pct": 25.0,                 # optional
     "by_family": {"Hopper": 9.8, ...},     # optional: per GPU architecture family
     "intervals": [                         # optional: per kind of configuration
       {"family": "Hopper", "precision": "bf16", "tp": 1, "interconnect": "none",
        "low_pct": -12.0, "high_pct": 9.5, "n": 14,
        "held_out": "source", "median_abs_pct": 6.1},
       ...],
     "source": "benchmarks/estimate_accuracy.py on N held-out points, DATE"}

An interval is the spread of the signed error ``predicted / measured - 1`` (x 100) of output
tokens/s per GPU over the validation points of one kind of configuration, each predicted with
its own source held out of the fit: ``low_pct`` the low end (the prediction too slow by that
much), ``high_pct`` the high end (too fast by that much), ``n`` how many points. A kind is an
architecture ``family`` (:func:`infer_prof.core.estimate.factors.family_of`), a weight
``precision`` (the planner's name), a tensor-parallel size ``tp`` and what its all-reduce runs
over, ``interconnect`` (``none`` on one GPU, ``nvlink``, ``infinity-fabric``, ``pcie``). A field
may be ``"*"`` (validated over every value of it); the most specific matching entry answers. A
configuration no entry matches is *unvalidated*: no interval is claimed for it, never a guess.

Absent file (or no number in it): no error is claimed (:data:`NOT_VALIDATED`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

import msgspec

ERRORS_FILE = "estimate_errors.json"
NOT_VALIDATED = "expected error: not yet validated"
ANY = "*"


class ErrorInterval(msgspec.Struct, frozen=True, kw_only=True):
    """One kind of configuration's validated error (module docstring): the signed error of
    output tokens/s per GPU ran from ``low_pct`` to ``high_pct`` % over ``n`` held-out points
    (``held_out``: what was held out of the fit for each, e.g. ``source``);
    ``median_abs_pct`` their median |error| where given. ``family``, ``precision``, ``tp``,
    ``interconnect``: the kind (``"*"``: any)."""

    family: str
    precision: str
    tp: int | str
    interconnect: str
    low_pct: float
    high_pct: float
    n: int
    held_out: str = "source"
    median_abs_pct: float | None = None

    def matches(self, family: str, precision: str, tp: int, interconnect: str) -> bool:
        """Whether this entry covers the configuration (``"*"`` covers every value)."""
        return ((self.family in (ANY, family)) and (self.precision in (ANY, precision))
                and (self.tp == ANY or self.tp == tp)
                and (self.interconnect in (ANY, interconnect)))

    def specificity(self) -> int:
        """How many of the four fields are named (not ``"*"``): the most specific entry wins."""
        return sum(v != ANY for v in (self.family, self.precision, self.tp, self.interconnect))


@dataclass(frozen=True)
class ExpectedError:
    """The validation's figures: overall median |error| in %, per family where given, the
    per-kind intervals, and a line saying where they come from (or :data:`NOT_VALIDATED`)."""

    overall_pct: float | None
    by_family: dict[str, float]
    says: str
    intervals: tuple[ErrorInterval, ...] = ()

    def for_family(self, family: str) -> float | None:
        """The family's figure, else the overall one, else None."""
        return self.by_family.get(family, self.overall_pct)

    def interval_for(self, family: str, precision: str, tp: int,
                     interconnect: str) -> ErrorInterval | None:
        """The most specific interval covering a configuration of GPU architecture ``family``,
        weight ``precision``, tensor-parallel size ``tp`` and ``interconnect`` (``none`` on one
        GPU); None when it is unvalidated."""
        hits = [i for i in self.intervals if i.matches(family, precision, tp, interconnect)]
        return max(hits, key=ErrorInterval.specificity) if hits else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _intervals(doc: Any) -> tuple[ErrorInterval, ...]:
    """The well-formed entries of ``intervals`` (an entry that is not is left out)."""
    out = []
    for entry in doc if isinstance(doc, list) else ():
        try:
            out.append(msgspec.convert(entry, ErrorInterval))
        except msgspec.ValidationError:
            continue
    return tuple(i for i in out if i.n > 0 and i.low_pct <= i.high_pct)


def parse_errors(doc: Any) -> ExpectedError:
    """An :class:`ExpectedError` from the file's JSON value (module docstring)."""
    if not isinstance(doc, dict):
        return ExpectedError(None, {}, NOT_VALIDATED)
    overall = _number(doc.get("expected_error_pct"))
    fam_doc = doc.get("by_family")
    families = {str(k): v for k, val in (fam_doc.items() if isinstance(fam_doc, dict) else ())
                if (v := _number(val)) is not None}
    intervals = _intervals(doc.get("intervals"))
    if overall is None and not families and not intervals:
        return ExpectedError(None, {}, NOT_VALIDATED)
    p90 = _number(doc.get("p90_error_pct"))
    if overall is not None:
        says = f"expected error: median {overall:.0f} %"
    else:
        says = ("expected error: by GPU family only" if families
                else "expected error: per kind of configuration only")
    if p90 is not None:
        says += f", 90th percentile {p90:.0f} %"
    says += f" of output tok/s per GPU ({doc.get('source') or ERRORS_FILE})"
    return ExpectedError(overall, families, says, intervals)


def load_expected_error() -> ExpectedError:
    """The shipped file's figures, or :data:`NOT_VALIDATED` when there is none."""
    file = resources.files("infer_prof.catalog.data") / ERRORS_FILE
    if not file.is_file():
        return ExpectedError(None, {}, NOT_VALIDATED)
    try:
        return parse_errors(json.loads(file.read_text()))
    except (OSError, ValueError):
        return ExpectedError(None, {}, f"{NOT_VALIDATED} ({ERRORS_FILE} is unreadable)")
