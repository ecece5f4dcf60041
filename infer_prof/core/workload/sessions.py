"""Multi-turn sessions: the settings a result records and the per-turn figures (pure).

A session is a conversation of ``turns`` requests sent in order on one stream; turn ``k``'s
prompt is the whole conversation so far (turn ``k - 1``'s prompt, its answer, and the new user
input), so a server with prefix caching finds every earlier turn's tokens cached. Between a
response's end and the next turn's send the stream waits ``think_time_s``.

Per-turn figures (:func:`by_turn`): for each turn index (1-based), the measured requests of that
turn, TTFT (ms: mean, p50, p99 of the completed ones) and input tokens (mean, min, max of the
prompt tokens the server counted, ``usage.prompt_tokens``; the length sent where it gave none).
The server's prefix-cache hit rate over the measured window (:func:`prefix_cache`) is hits /
queries, the increase of vLLM's
``vllm:prefix_cache_hits_total`` and ``vllm:prefix_cache_queries_total`` (tokens) from the
window's first scrape to its last; null with a reason where it cannot be read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from infer_prof.core.measurement.metrics import RequestRecord, ttft_ns
from infer_prof.core.measurement.stats import summarize


@dataclass(frozen=True)
class SessionSettings:
    """What a session run is given: turns per session (at most, for a dataset), think time
    between turns (seconds), where conversations come from (``synthetic`` or ``sharegpt``) and
    how many sessions the measured phase runs (None: bound by duration)."""

    turns: int
    think_time_s: float = 0.0
    source: str = "synthetic"
    sessions: int | None = None
    # what the conversation is sent as: token IDs, text, or chat messages (``--api chat``)
    prompt: str = "token-ids"

    def to_dict(self) -> dict[str, Any]:
        """For ``config.sessions`` in a result (``compare`` refuses to mix different ones)."""
        return asdict(self)


def by_turn(records: Sequence[RequestRecord], turn_of: Mapping[int, int]) -> list[dict[str, Any]]:
    """Per-turn figures of the measured requests (see the module docstring); ``turn_of`` maps a
    request's index to its 1-based turn. Turns with no request are left out."""
    groups: dict[int, list[RequestRecord]] = {}
    for r in records:
        if r.warmup or r.index not in turn_of:
            continue
        groups.setdefault(turn_of[r.index], []).append(r)
    out = []
    for turn in sorted(groups):
        recs = groups[turn]
        ttft = [v / 1e6 for r in recs if r.ok and (v := ttft_ns(r)) is not None]
        d = summarize(ttft)
        inp = [float(r.prompt_tokens if r.prompt_tokens is not None else r.input_len)
               for r in recs]
        di = summarize(inp)
        out.append({
            "turn": turn,
            "requests": len(recs),
            "completed": sum(1 for r in recs if r.ok),
            "ttft_ms": None if d is None else {"mean": d.mean, "p50": d.p50, "p99": d.p99},
            "input_tokens": None if di is None else {"mean": di.mean, "min": di.min,
                                                     "max": di.max},
        })
    return out


def prefix_cache(server_metrics: Mapping[str, Any] | None) -> dict[str, Any]:
    """The server's prefix-cache figures over the measured window, from the scraper's result
    (``telemetry.server_metrics``): ``hits``, ``queries`` (tokens), ``hit_rate`` = hits /
    queries, and ``reason`` when the rate is null (no scrape, counters not exposed, no query)."""
    sm = server_metrics or {}
    s = sm.get("summary") or {}
    hits, queries = s.get("prefix_cache_hits"), s.get("prefix_cache_queries")
    rate = s.get("prefix_cache_hit_rate")
    reason = None
    if rate is None:
        if not sm.get("available"):
            reason = f"no /metrics scrape ({sm.get('reason') or 'not scraped'})"
        elif queries is None:
            reason = ("the server exposes no vllm:prefix_cache_queries_total counter (or it was "
                      "not read at the window's edges)")
        else:
            reason = "no prefix-cache queries in the measured window"
    return {"hits": hits, "queries": queries, "hit_rate": rate, "reason": reason}
