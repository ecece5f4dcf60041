"""How a run's tokens arrived: the shape of its streams. Pure.

An engine streams one event per decode step, so at the client a request's token-carrying
events arrive about one step apart. Anything on the way that buffers (an nginx left at
``proxy_buffering on``, an HTTP/1.0 upstream, a gateway that re-chunks) delivers them in bursts
instead: many events in one read, with near-zero gaps between them, and long gaps between the
bursts. Then TTFT, ITL and TPOT describe the proxy's flushes, not the engine: a buffered nginx
in front of vLLM-CPU read TTFT p50 176 ms against the engine's 9 ms, and TPOT 0.82 ms against
3.5 ms, with 98 % of the ITLs 0.

Per completed measured request, with ``chunk_ns`` its token-carrying events' arrival times:

- events: ``len(chunk_ns)``; tokens: ``output_tokens`` (else the sum of ``chunk_tokens``).
- its steady gap: ``(chunk_ns[-1] - chunk_ns[0]) / (events - 1)``, the gap between events had
  they come evenly over its span (defined for 2+ events over a span > 0).

Over the run:

- ``reference_gap_ms``: the median of the requests' steady gaps. Not the median of the gaps
  themselves: when most gaps are 0 (a buffered stream), that median is 0 and every comparison
  with it is void.
- ``close_gap_share``: of all gaps between consecutive events of a request, the share shorter
  than ``CLOSE_GAP_FRACTION`` (1/10) x the reference gap: events that arrived together. An
  engine's own stream, read in time, has almost none (one event per step); a buffered one has
  nearly all.
- deliveries: a request's events grouped where the gap is close; a delivery of 2+ events is a
  ``burst``. ``bursts_per_request`` (mean), ``tokens_per_burst`` and ``events_per_burst``
  (means over bursts).
- ``first_token_unknown``: requests of more than one token whose every event arrived at one
  time (one event carried all of them, as behind a gateway that drops per-chunk usage and empty
  deltas, or one buffer flush held the whole response). When their first token came cannot be
  known, so they have no TTFT and no TPOT (:func:`first_token_known`); they are counted here.

``bunched`` is ``close_gap_share > MAX_CLOSE_GAP_SHARE`` (1/2): more than half the gaps close.
Whether that is the stream's doing or the client's (a client that reads late reads several
events at once too) is judged in :mod:`infer_prof.core.measurement.validity` against the client's
read lag.
"""

from __future__ import annotations

from collections.abc import Iterable
from statistics import median
from typing import Any

from infer_prof.core.measurement.distribution_record import Distribution
from infer_prof.core.measurement.metrics import NS_PER_MS, RequestRecord, first_token_known
from infer_prof.core.measurement.stream_record import Stream

CLOSE_GAP_FRACTION = 0.1
MAX_CLOSE_GAP_SHARE = 0.5


def _steady_gap_ns(chunk_ns: list[int]) -> float | None:
    if len(chunk_ns) < 2 or chunk_ns[-1] <= chunk_ns[0]:
        return None
    return (chunk_ns[-1] - chunk_ns[0]) / (len(chunk_ns) - 1)


def stream_shape(records: Iterable[RequestRecord]) -> Stream | None:
    """The result's ``stream`` section (see the module docstring) over completed measured
    requests; None when there were none."""
    done = [r for r in records if not r.warmup and r.ok]
    if not done:
        return None
    events = sorted(len(r.chunk_ns) for r in done)
    tokens = sum(r.output_tokens if r.output_tokens is not None else sum(r.chunk_tokens)
                 for r in done)
    steady = [g for r in done if (g := _steady_gap_ns(r.chunk_ns)) is not None]
    ref = median(steady) if steady else None
    gaps = close = bursts = burst_tokens = burst_events = deliveries = 0
    for r in done:
        t, k = r.chunk_ns, r.chunk_tokens
        deliveries += 1
        run_events, run_tokens = 1, (k[0] if k else 1)
        for i in range(1, len(t)):
            gaps += 1
            ki = k[i] if i < len(k) else 1
            if ref is not None and t[i] - t[i - 1] < CLOSE_GAP_FRACTION * ref:
                close += 1
                run_events += 1
                run_tokens += ki
                continue
            if run_events > 1:
                bursts += 1
                burst_tokens += run_tokens
                burst_events += run_events
            deliveries += 1
            run_events, run_tokens = 1, ki
        if run_events > 1:
            bursts += 1
            burst_tokens += run_tokens
            burst_events += run_events
    unknown = sum(1 for r in done if not first_token_known(r))
    share = close / gaps if gaps and ref is not None else None
    return Stream(
        requests=len(done),
        events_per_request=Distribution(  # events are counted: min and max held as floats
            mean=round(sum(events) / len(events), 3),
            p50=float(median(events)),
            min=float(events[0]),
            max=float(events[-1]),
        ),
        tokens_per_event=round(tokens / sum(events), 3) if sum(events) else None,
        reference_gap_ms=None if ref is None else round(ref / NS_PER_MS, 4),
        close_gap_fraction=CLOSE_GAP_FRACTION,
        close_gap_share=None if share is None else round(share, 4),
        deliveries_per_request=round(deliveries / len(done), 3),
        bursts_per_request=round(bursts / len(done), 3),
        tokens_per_burst=round(burst_tokens / bursts, 2) if bursts else None,
        events_per_burst=round(burst_events / bursts, 2) if bursts else None,
        first_token_unknown=unknown,
        first_token_unknown_share=round(unknown / len(done), 4),
        bunched=share is not None and share > MAX_CLOSE_GAP_SHARE,
    )


def describe_shape(shape: dict[str, Any] | None) -> str:
    """One console line: how tokens arrived."""
    if not shape:
        return "-"
    ev = shape["events_per_request"]
    parts = [f"{ev['mean']:g} events/request", f"{shape['tokens_per_event']} tokens/event"]
    if shape.get("close_gap_share") is not None:
        parts.append(f"{shape['close_gap_share']:.0%} of gaps < "
                     f"{shape['close_gap_fraction']:g} x the {shape['reference_gap_ms']:.3f} ms "
                     "steady gap")
    if shape.get("bursts_per_request"):
        parts.append(f"{shape['bursts_per_request']:g} bursts/request of "
                     f"{shape['tokens_per_burst']} tokens")
    return ", ".join(parts)
