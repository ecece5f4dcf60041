"""The result's ``validity`` section as types: what :meth:`infer_prof.core.measurement.validity.
Validity.section` builds and a result holds (:class:`infer_prof.results.document.Result`),
declared once beside the verdict's arithmetic; its JSON Schema is generated from it."""

from __future__ import annotations

import msgspec


class ValidityRules(msgspec.Struct, kw_only=True, omit_defaults=False):
    """The limits a run was judged by (``core.measurement.validity.ValidityRules``): the least
    requests and seconds (s), the read lag as a share of the ITL p50, the dispatch lag (ms), the
    busiest client process's CPU share and the share of requests without a first-token time."""

    min_requests: int | None = None
    min_duration_s: float | None = None
    max_read_lag_fraction: float | None = None
    max_dispatch_lag_ms: float | None = None
    max_cpu_share: float | None = None
    max_first_token_unknown_share: float | None = None


class Validity(msgspec.Struct, kw_only=True, omit_defaults=False):
    """Whether the numbers hold, and each reason they do not (``core.measurement.validity``)."""

    valid: bool
    reasons: list[str] = []
    client_overloaded: bool | None = None
    stream_problem: bool | None = None
    rules: ValidityRules | None = None
