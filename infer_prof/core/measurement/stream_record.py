"""The result's ``stream`` section as a type: what :func:`infer_prof.core.measurement.
stream_shape.stream_shape` builds and a result holds (through
:mod:`infer_prof.results.load_sections`), declared once beside the arithmetic; its JSON Schema
is generated from it."""

from __future__ import annotations

import msgspec

from infer_prof.core.measurement.distribution_record import Distribution


class Stream(msgspec.Struct, kw_only=True, omit_defaults=False):
    """How tokens arrived (``core.measurement.stream_shape``): events and tokens per request,
    bursts."""

    requests: int
    events_per_request: Distribution | None = None  # mean, p50, min, max SSE events
    tokens_per_event: float | None = None
    reference_gap_ms: float | None = None
    close_gap_fraction: float | None = None
    close_gap_share: float | None = None
    deliveries_per_request: float | None = None
    bursts_per_request: float | None = None
    tokens_per_burst: float | None = None
    events_per_burst: float | None = None
    first_token_unknown: int | None = None
    first_token_unknown_share: float | None = None
    bunched: bool | None = None
