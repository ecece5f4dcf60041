"""What every section of the result document is built on (:mod:`infer_prof.results.document`):
the section base class, an open JSON object, and a distribution."""

from __future__ import annotations

from typing import Any

import msgspec

#: A JSON object whose shape is documented by the module that builds it.
Obj = dict[str, Any]


class Section(msgspec.Struct, kw_only=True, omit_defaults=False):
    """Every section: keyword construction; keys an older or newer file adds are ignored on
    load (:func:`infer_prof.results.document.undeclared_keys` finds them when writing)."""


class Distribution(Section):
    """A latency (or other) distribution: ``count`` values, their mean, percentiles (linear
    interpolation between closest ranks), max, min and population std, in the unit of the key
    that holds it (``ttft_ms``: milliseconds)."""

    count: int | None = None  # (older and hand-written files may hold only some of these)
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    min: float | None = None
    std: float | None = None
