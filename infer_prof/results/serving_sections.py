"""The result's sections about server state that changes the numbers (part of
:class:`infer_prof.results.document.Result`): the prefix cache's state at the point's start and
its hit rate (``prefix_cache``), and speculative decoding's acceptance (``speculative``). Made
by :mod:`infer_prof.run.serving_state`; the arithmetic is in
:mod:`infer_prof.core.measurement.prefix_hits` and :mod:`infer_prof.core.measurement.
speculative`. Every field has a default: an older result lacks them (None: not recorded).
"""

from __future__ import annotations

from typing import Literal

from infer_prof.results.document_base import Distribution, Section

#: The cache's state at the start of the measured point: emptied (``cold``), emptied and the
#: point's shared prefixes sent once (``warm``), left alone (``as-is``), or ``unknown`` (asked
#: cold, the server refused the reset).
PrefixCacheState = Literal["cold", "warm", "as-is", "unknown"]


class PrefixCacheSection(Section):
    """The prefix cache over the point (``run --prefix-cache``): the state asked and the one
    it had (``state``; ``detail`` says what the reset did, and why when it did not), for
    ``warm`` the shared prefixes sent before the point and their tokens; the hit rate (0..1)
    the result reports and its source (``usage`` when the server sent cached tokens, else
    ``counters``, with ``hit_rate_reason`` when neither); from the responses' usage the
    measured requests that reported cached tokens, their cached and prompt tokens and their
    rate; from the server's counters over the window the hits and queries (tokens) and
    theirs."""

    asked: str | None = None
    state: PrefixCacheState | None = None
    detail: str | None = None
    primed_prefixes: int | None = None
    primed_tokens: int | None = None
    hit_rate: float | None = None
    hit_rate_source: Literal["usage", "counters"] | None = None
    hit_rate_reason: str | None = None
    usage_requests: int | None = None
    usage_cached_tokens: int | None = None
    usage_prompt_tokens: int | None = None
    usage_hit_rate: float | None = None
    counter_hits: float | None = None
    counter_queries: float | None = None
    counter_hit_rate: float | None = None


class SpeculativeSection(Section):
    """Speculative decoding over the point (``run --speculative-config``; an endpoint's own,
    read from its counters): the configuration (JSON) and its method and draft length; from
    the server's counters over the measured window the drafts, draft tokens and accepted
    tokens, the acceptance rate (accepted / draft tokens, 0..1), the mean acceptance length
    (1 + accepted / drafts, tokens per verify step) and the acceptance at each draft position
    (0..1, position 0 first), with ``reason`` when unknown; from the responses'
    ``metrics.speculative_decoding``, the measured requests that reported it and the
    distributions of their own acceptance rate and length."""

    config: str | None = None
    method: str | None = None
    num_speculative_tokens: int | None = None
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    acceptance_rate: float | None = None
    acceptance_length: float | None = None
    acceptance_per_position: list[float | None] | None = None
    reason: str | None = None
    requests_reporting: int | None = None
    request_acceptance_rate: Distribution | None = None
    request_acceptance_length: Distribution | None = None
