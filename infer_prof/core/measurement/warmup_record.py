"""The result's ``warmup`` section as types: what :func:`infer_prof.core.measurement.warmup.
warmup_block` builds and a result holds (:class:`infer_prof.results.document.Result`, through
:mod:`infer_prof.results.load_sections`), declared once beside the arithmetic; its JSON Schema is
generated from it. Every field is written (null where not recorded); TTFT in milliseconds,
durations in seconds, lengths in tokens.
"""

from __future__ import annotations

from typing import Literal

import msgspec

#: What ended the warm-up phase (``warmup.ended_by``): every stream finished a warm-up request,
#: the asked duration passed, the warm-up's requests ran out, a counted warm-up's requests all
#: finished, or every warm-up request failed (``core.measurement.warmup.WARMUP_JUDGED``).
WarmupEnd = Literal["steady", "duration", "pool_exhausted", "requests", "every_request_failed"]


class _Record(msgspec.Struct, kw_only=True, omit_defaults=False):
    """Keyword construction, every field written; keys another version adds are ignored on
    load (as the result's other sections, ``results.document_base.Section``)."""


class MeanP50(_Record):
    """A mean and median (ms)."""

    mean: float | None = None
    p50: float | None = None


class WaveTtft(_Record):
    """TTFT (ms) of the first wave of measured requests and of the rest."""

    first_wave: MeanP50 | None = None
    rest: MeanP50 | None = None


class FirstWave(_Record):
    """The first wave of measured requests (one per stream) against the rest
    (``core.measurement.warmup.first_wave``): how many, their share of the measured requests, their
    TTFT and the rest's, and first-wave TTFT mean / rest TTFT mean (``ratio_mean``)."""

    requests: int
    share: float | None = None
    ttft_ms: WaveTtft | None = None
    ratio_mean: float | None = None


class PhaseStagger(_Record):
    """What the warm-up's phase stagger asked (``core.measurement.warmup.stagger_summary``): the
    first ``requests`` warm-up requests' output lengths (tokens), from ``output_len_min`` to
    ``output_len_max``."""

    requests: int
    output_len_min: int | None = None
    output_len_max: int | None = None


class Warmup(_Record):
    """How the point was warmed up and how the first measured wave compares
    (``core.measurement.warmup.warmup_block``): the mode, the warm-up requests sent, the seconds
    from the first warm-up send to measuring (or to the last warm-up end), what ended it and how
    steady state was judged, the first wave, the phase stagger and the cool-down requests."""

    mode: str  # steady, requests or <N>s (a duration: not one of WarmupMode's words)
    requests: int = 0
    seconds: float | None = None
    ended_by: WarmupEnd | None = None
    judged: str | None = None
    first_wave: FirstWave | None = None
    phase_stagger: PhaseStagger | None = None
    cooldown_requests: int | None = None
