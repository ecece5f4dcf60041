"""The result's ``slo`` section as types: what :meth:`infer_prof.core.workload.slo.SloReport.
section` builds and a result holds (:class:`infer_prof.results.document.Result`), declared once
beside the SLO arithmetic; its JSON Schema is generated from it."""

from __future__ import annotations

import msgspec


class SloCheckOutcome(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One SLO checked at run level (``core.workload.slo.SloCheck``): the run's statistic
    ``value_ms`` against ``limit_ms`` (milliseconds), ``slo`` its key (``ttft_p99``)."""

    slo: str
    limit_ms: float
    passed: bool
    value_ms: float | None = None


class SloOutcome(msgspec.Struct, kw_only=True, omit_defaults=False):
    """The run's SLOs (``core.workload.slo.SloReport``): each check, ``passed`` when all pass, the
    failed checks in words, and goodput (requests/s of completed requests within every limit)."""

    passed: bool
    slos: str | None = None
    checks: list[SloCheckOutcome] = []
    failures: list[str] = []
    good_requests: int | None = None
    completed_requests: int | None = None
    goodput: float | None = None
    definition: str | None = None
