"""A distribution as the result document writes it (``ttft_ms``, ``stream.events_per_request``,
...): declared once here, beside the arithmetic that fills it, and re-exported by
:mod:`infer_prof.results.document_base` for the result's sections."""

from __future__ import annotations

import msgspec


class Distribution(msgspec.Struct, kw_only=True, omit_defaults=False):
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


def p50_of(d: Distribution | None) -> float | None:
    """The median of ``d`` (None when there is no distribution), in its key's unit."""
    return None if d is None else d.p50


def p99_of(d: Distribution | None) -> float | None:
    """The 99th percentile of ``d`` (None when there is no distribution), in its key's unit."""
    return None if d is None else d.p99
