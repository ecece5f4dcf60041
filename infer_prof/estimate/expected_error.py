"""The estimate's expected error, from validation against published measurements.

Read from the shipped file ``infer_prof/catalog/data/estimate_errors.json``, which the
validation benchmark (``benchmarks/estimate_accuracy.py``) writes. Its shape:

    {"expected_error_pct": 12.3,            # median |error| of output tok/s per GPU, %
     "p90_error_pct": 25.0,                 # optional
     "by_family": {"Hopper": 9.8, ...},     # optional: per GPU architecture family
     "source": "benchmarks/estimate_accuracy.py on N held-out points, DATE"}

and, written by ``benchmarks/estimate_loso.py --write``, a ``held_out`` section
(:class:`HeldOutErrors`): the errors with each published source held out of the fit, overall and
by GPU family, precision, GPU count (tensor parallel), interconnect and their cells. From it
:meth:`ExpectedError.interval` gives the interval of one configuration (family + precision +
TP + interconnect), marked unvalidated when any of them has no held-out point.

Absent file (or no number in it): no error is claimed (:data:`NOT_VALIDATED`), never a
guess.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import msgspec

ERRORS_FILE = "estimate_errors.json"
NOT_VALIDATED = "expected error: not yet validated"


MIN_CELL_POINTS = 5
"""Held-out points a (family, precision, TP, interconnect) cell needs for its own figures; a
smaller cell takes the worst of its family's, precision's and TP size's."""

LINKS = {"nvlink": "link", "infinity-fabric": "link", "link": "link", "pcie": "pcie",
         "none": "none"}
"""Interconnect names a caller may pass, to the held-out groups' (``none`` on one GPU, ``link``
an NVLink / Infinity Fabric domain, ``pcie``)."""


class HeldOutStats(msgspec.Struct, frozen=True):
    """|predicted / measured - 1| of output tok/s per GPU over ``n`` held-out points, percent."""

    n: int
    median_abs_error_pct: float
    p90_abs_error_pct: float


class HeldOutErrors(msgspec.Struct, frozen=True):
    """The ``held_out`` section: each source held out of the fit in turn
    (``benchmarks/estimate_loso.py``). Group keys: GPU family (``Hopper``), precision
    (``bf16``), GPU count (``"2"``), interconnect (``none``, ``link``, ``pcie``) over the
    points their GPU bounded (:mod:`infer_prof.estimate.gpu_bound`); cells
    ``family|precision|tp|interconnect`` and ``family|precision`` pairs over every point, those
    too (a setup its GPU did not bound says something of its family's kernels for that
    precision, nothing of the family's others); ``hybrid`` the hybrid models' points alone
    (linear-attention or Mamba layers: predicted, scored, not fitted), which a hybrid model's
    row is held to (:meth:`ExpectedError.interval`)."""

    overall: HeldOutStats
    by_family: dict[str, HeldOutStats] = {}
    by_precision: dict[str, HeldOutStats] = {}
    by_tp: dict[str, HeldOutStats] = {}
    by_interconnect: dict[str, HeldOutStats] = {}
    by_cell: dict[str, HeldOutStats] = {}
    source: str = ""
    hybrid: HeldOutStats | None = None
    by_family_precision: dict[str, HeldOutStats] = {}


@dataclass(frozen=True)
class ErrorInterval:
    """How far one configuration's prediction is expected to be off: the held-out median and
    90th percentile of |error| (percent) of the group it was looked up in (``basis``, ``n``
    points). ``validated`` False when its family, precision, TP size or interconnect has no
    held-out point (``missing`` names them); the figures are then the overall ones, a floor,
    not a measure of this configuration."""

    median_pct: float | None
    p90_pct: float | None
    n: int
    validated: bool
    basis: str
    missing: tuple[str, ...] = ()

    def throughput_bounds(self, predicted: float) -> tuple[float, float] | None:
        """(slow, fast) ends of a predicted throughput: ``predicted / (1 + p90)`` and
        ``predicted / (1 - p90)`` (p90 as a fraction, capped at 0.9), the measured values whose
        error ``predicted / measured - 1`` is within the 90th percentile; None without figures."""
        if self.p90_pct is None:
            return None
        e = self.p90_pct / 100.0
        return predicted / (1.0 + e), predicted / (1.0 - min(e, 0.9))

    def describe(self) -> str:
        """One line: the interval and what it rests on."""
        if self.median_pct is None or self.p90_pct is None:
            return NOT_VALIDATED
        head = (f"median {self.median_pct:.0f} %, p90 {self.p90_pct:.0f} % "
                f"({self.basis}, n={self.n})")
        if self.validated:
            return head
        return f"unvalidated: no held-out point of {', '.join(self.missing)}; overall {head}"


@dataclass(frozen=True)
class ExpectedError:
    """The validation's figures: overall median |error| in %, per family where given, and a
    line saying where they come from (or :data:`NOT_VALIDATED`); ``held_out`` the
    held-out-by-source groups when the file has them."""

    overall_pct: float | None
    by_family: dict[str, float]
    says: str
    held_out: HeldOutErrors | None = field(default=None)

    def for_family(self, family: str) -> float | None:
        """The family's figure, else the overall one, else None."""
        return self.by_family.get(family, self.overall_pct)

    def format_validated(self, precision: str) -> bool:
        """Whether any held-out point ran ``precision`` (a weight format with none, such as
        ``awq`` or ``bnb-nf4`` today, is predicted from its modelled cost alone)."""
        return self.held_out is not None and precision in self.held_out.by_precision

    def interval(self, family: str, precision: str, tp: int, interconnect: str | None = None,
                 hybrid: bool = False) -> ErrorInterval:
        """The expected-error interval of a configuration: GPU ``family`` (``Hopper``),
        ``precision``, ``tp`` GPUs and, for ``tp > 1``, the ``interconnect`` its all-reduce
        crosses (``nvlink``, ``infinity-fabric``, ``pcie``; None: not checked). The cell's own
        figures when it has :data:`MIN_CELL_POINTS` held-out points; else the worst (largest
        median, largest p90) of its family's, precision's, TP size's and interconnect's groups
        and of its family and precision together where that pair has points; unvalidated
        (the overall figures, :class:`ErrorInterval`) when any of those has no point. For a
        ``hybrid`` model, the worse of that and the hybrid models' own held-out figures
        (unvalidated when none were held out): the groups are mostly transformers, which the
        model predicts better than it does a hybrid's recurrent layers."""
        base = self._configuration_interval(family, precision, tp, interconnect)
        h = self.held_out
        if not hybrid or h is None:
            return base
        hy = h.hybrid
        if hy is None:
            return ErrorInterval(base.median_pct, base.p90_pct, base.n, False, base.basis,
                                 (*base.missing, "a hybrid model"))
        return ErrorInterval(
            max(base.median_pct or 0.0, hy.median_abs_error_pct),
            max(base.p90_pct or 0.0, hy.p90_abs_error_pct), min(base.n, hy.n), base.validated,
            f"{base.basis}; hybrid models (n={hy.n})", base.missing)

    def _configuration_interval(self, family: str, precision: str, tp: int,
                                interconnect: str | None) -> ErrorInterval:
        h = self.held_out
        if h is None:
            return ErrorInterval(self.overall_pct, None, 0, False, NOT_VALIDATED,
                                 ("a held-out-by-source validation",))
        link = "none" if tp <= 1 else LINKS.get((interconnect or "").lower())
        groups = {f"GPU family {family}": h.by_family.get(family),
                  f"precision {precision}": h.by_precision.get(precision),
                  f"TP{tp}": h.by_tp.get(str(tp))}
        if link is not None:
            groups[f"interconnect {link}"] = h.by_interconnect.get(link)
        missing = tuple(name for name, g in groups.items() if g is None)
        if missing:
            o = h.overall
            return ErrorInterval(o.median_abs_error_pct, o.p90_abs_error_pct, o.n, False,
                                 "every held-out point", missing)
        cell = h.by_cell.get(f"{family}|{precision}|{tp}|{link}") if link else None
        if cell is not None and cell.n >= MIN_CELL_POINTS:
            return ErrorInterval(cell.median_abs_error_pct, cell.p90_abs_error_pct, cell.n,
                                 True, f"{family} {precision} TP{tp}")
        pair = h.by_family_precision.get(f"{family}|{precision}")
        if pair is not None:
            groups[f"{family} {precision}"] = pair
        found = [g for g in groups.values() if g is not None]
        return ErrorInterval(max(g.median_abs_error_pct for g in found),
                             max(g.p90_abs_error_pct for g in found), min(g.n for g in found),
                             True, "worst of " + ", ".join(groups))


WEIGHT_ONLY_FP8 = "fp8-w8a16"
"""The interval's precision for fp8 weights run weight-only (W8A16 through FP8 Marlin, 16-bit
math, on GPUs without FP8 math): other kernels than fp8 W8A8's, so its own kind of
configuration, validated only by points of its own."""


def interval_precision(precision: str, weight_only: bool) -> str:
    """The precision an interval is looked up by: :data:`WEIGHT_ONLY_FP8` for ``fp8`` run
    ``weight_only`` (vLLM's support table: compute capability below 8.9), else ``precision``.
    AWQ and GPTQ always run weight-only, and MXFP4 without FP4 math is validated on Hopper, so
    only fp8 has two kinds."""
    return WEIGHT_ONLY_FP8 if precision == "fp8" and weight_only else precision


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
    return ExpectedError(overall, families, says, parse_held_out(doc.get("held_out")))


def parse_held_out(section: object) -> HeldOutErrors | None:
    """The ``held_out`` section as :class:`HeldOutErrors`; None when absent or malformed."""
    if section is None:
        return None
    try:
        return msgspec.convert(section, HeldOutErrors)
    except msgspec.ValidationError:
        return None


def load_expected_error() -> ExpectedError:
    """The shipped file's figures, or :data:`NOT_VALIDATED` when there is none."""
    file = resources.files("infer_prof.catalog.data") / ERRORS_FILE
    if not file.is_file():
        return ExpectedError(None, {}, NOT_VALIDATED)
    try:
        return parse_errors(json.loads(file.read_text()))
    except (OSError, ValueError):
        return ExpectedError(None, {}, f"{NOT_VALIDATED} ({ERRORS_FILE} is unreadable)")
