"""Speculative decoding's acceptance over a run: from the server's counters over the measured
window, and from what the server reported for each request. Pure.

A draft model (or n-gram lookup, EAGLE, MTP heads) proposes up to k tokens per verify step
(a *draft*); the target model checks them in one forward pass and keeps the longest prefix
it agrees with, plus one token of its own (the bonus token). The figures, as vLLM defines
them (``vllm/benchmarks/serve.py`` and ``vllm/v1/spec_decode/metrics.py``, vLLM 0.32):

- acceptance rate = accepted draft tokens / draft tokens proposed (0..1);
- mean acceptance length = 1 + accepted draft tokens / drafts: tokens a verify step yields,
  bonus included (1 = drafting never helped; at most 1 + k);
- acceptance at draft position i = drafts whose i-th token was accepted / drafts (falls with
  i: a token is kept only when every one before it was).

From the counters, each figure is of the window's increases of ``vllm:spec_decode_num_drafts``,
``..._num_draft_tokens``, ``..._num_accepted_tokens`` and ``..._num_accepted_tokens_per_pos``
(counted since the server started). Per request, from the response's
``metrics.speculative_decoding`` (``RequestRecord.spec_steps``, ``spec_draft_tokens``,
``spec_accepted_tokens``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infer_prof.core.measurement.metrics import RequestRecord


@dataclass(frozen=True)
class Acceptance:
    """The window's speculative decoding from the counters' increases: drafts, draft tokens
    and accepted tokens (counts), the acceptance rate (0..1), the mean acceptance length
    (tokens per verify step) and the acceptance at each draft position (0..1, position 0
    first); None where it cannot be known, with ``reason``."""

    drafts: float | None
    draft_tokens: float | None
    accepted_tokens: float | None
    acceptance_rate: float | None
    acceptance_length: float | None
    per_position: list[float | None] | None
    reason: str | None


def acceptance(
    drafts: float | None,
    draft_tokens: float | None,
    accepted: float | None,
    accepted_per_position: Sequence[float | None] | None = None,
) -> Acceptance:
    """:class:`Acceptance` from the counters' increases over the window (None: not read).

    rate = ``accepted / draft_tokens``; length = ``1 + accepted / drafts``; position i =
    ``accepted_per_position[i] / drafts``. ``acceptance(10, 30, 12, [7, 4, 1])``: rate 0.4,
    length 2.2, positions [0.7, 0.4, 0.1]. With no draft in the window the rates are None
    (nothing was proposed: not 0)."""
    reason = None
    if drafts is None or draft_tokens is None or accepted is None:
        reason = ("the server exposes no speculative-decoding counters "
                  "(vllm:spec_decode_num_drafts_total), or they were not read at the window's "
                  "edges")
    elif drafts == 0 or draft_tokens == 0:
        reason = "no draft was proposed in the measured window"
    rate = accepted / draft_tokens if reason is None and accepted is not None \
        and draft_tokens else None
    length = 1.0 + accepted / drafts if reason is None and accepted is not None \
        and drafts else None
    positions = None
    if accepted_per_position is not None and reason is None and drafts:
        positions = [None if a is None else a / drafts for a in accepted_per_position]
    return Acceptance(drafts, draft_tokens, accepted, rate, length, positions, reason)


@dataclass(frozen=True)
class RequestAcceptance:
    """What the server reported per request over the measured, completed requests:
    ``requests`` that carried it, and each one's acceptance rate (accepted / draft tokens,
    0..1; only requests that were proposed drafts) and mean acceptance length (1 + accepted /
    verify steps; only requests with a verify step)."""

    requests: int
    rates: list[float]
    lengths: list[float]


def request_acceptance(records: Sequence[RequestRecord]) -> RequestAcceptance:
    """Each measured, completed request's own acceptance (see :class:`RequestAcceptance`)."""
    rates: list[float] = []
    lengths: list[float] = []
    n = 0
    for r in records:
        if r.warmup or not r.ok or r.spec_accepted_tokens is None:
            continue
        n += 1
        if r.spec_draft_tokens:
            rates.append(r.spec_accepted_tokens / r.spec_draft_tokens)
        if r.spec_steps:
            lengths.append(1.0 + r.spec_accepted_tokens / r.spec_steps)
    return RequestAcceptance(n, rates, lengths)
