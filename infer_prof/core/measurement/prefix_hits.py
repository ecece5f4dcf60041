"""The prefix cache's share of a run's prompt tokens, and when two runs' shares are too far
apart to be compared as equals. Pure.

The hit rate is prompt tokens found in the server's prefix cache / prompt tokens, over the
measured requests. Two sources: each response's ``usage.prompt_tokens_details.cached_tokens``
(``RequestRecord.cached_tokens``: exactly the measured requests) and the server's counters
``vllm:prefix_cache_hits`` / ``vllm:prefix_cache_queries`` over the measured window
(``telemetry.prometheus.summarize_metrics``: every request the engine scheduled in the window,
warm-up requests still running at its edges included, and a preempted request's prompt again
when it is scheduled anew). The result's hit rate is the first where the server sends it, else
the second.

A prefix-cache hit skips that share of the prefill: TTFT and prompt throughput then measure a
different job. Runs whose hit rates differ by more than :data:`HIT_RATE_GAP` (10 points) are
flagged by ``compare`` and ``regress``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infer_prof.core.measurement.metrics import RequestRecord

#: Hit rates (0..1) further apart than this make two runs' latencies another job's.
HIT_RATE_GAP = 0.10


@dataclass(frozen=True)
class UsageHits:
    """The measured, completed requests whose usage gave both ``cached_tokens`` and
    ``prompt_tokens``: how many, their cached and prompt tokens, and cached / prompt (None
    without any)."""

    requests: int
    cached_tokens: int
    prompt_tokens: int
    hit_rate: float | None


def usage_hits(records: Sequence[RequestRecord]) -> UsageHits:
    """:class:`UsageHits` of the measured requests (warm-up and failed ones left out)."""
    done = [r for r in records if not r.warmup and r.ok
            and r.cached_tokens is not None and r.prompt_tokens is not None]
    cached = sum(r.cached_tokens or 0 for r in done)
    prompt = sum(r.prompt_tokens or 0 for r in done)
    return UsageHits(len(done), cached, prompt, cached / prompt if prompt else None)


def hit_rate_spread(rates: Sequence[float | None]) -> float | None:
    """Largest minus smallest of the known hit rates (0..1); None with fewer than two."""
    known = [r for r in rates if r is not None]
    return max(known) - min(known) if len(known) >= 2 else None


def mixed_hit_rates(names: Sequence[str], rates: Sequence[float | None]) -> str | None:
    """One line when the runs' prefix-cache hit rates differ by more than
    :data:`HIT_RATE_GAP` (naming the lowest and the highest), else None."""
    spread = hit_rate_spread(rates)
    if spread is None or spread <= HIT_RATE_GAP + 1e-12:
        return None
    known = [(r, n) for n, r in zip(names, rates, strict=True) if r is not None]
    low, high = min(known), max(known)
    return (f"prefix-cache hit rates differ by {spread * 100:.0f} points ({low[1]} "
            f"{low[0]:.0%}, {high[1]} {high[0]:.0%}): their TTFTs measure different prefills; "
            "compare runs of one --prefix-cache state and workload")
