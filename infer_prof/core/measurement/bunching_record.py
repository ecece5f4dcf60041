"""The result's ``load.send_bunching`` as a type: what :func:`infer_prof.core.measurement.metrics.
send_bunching` builds and a result holds (through :mod:`infer_prof.results.load_sections`),
declared once beside the arithmetic; its JSON Schema is generated from it."""

from __future__ import annotations

import msgspec


class SendBunching(msgspec.Struct, kw_only=True, omit_defaults=False):
    """Share of send gaps under ``within_ms``, beside what independent sends would give."""

    within_ms: float
    share: float | None = None
    independent_share: float | None = None
