"""Reasoning models: the thinking a request streamed before its answer, per request and per run.

Pure (no I/O). A reasoning model served with a reasoning parser (vLLM's ``--reasoning-parser``)
streams its thinking as ``delta.reasoning`` (``reasoning_content`` before vLLM 0.10) and the
answer as ``delta.content`` or ``delta.tool_calls``. The client classifies each token-carrying
chunk as it arrives (``loadgen.stamped_reader.chunk_kind``) and keeps, per request
(:class:`~infer_prof.core.measurement.metrics.RequestRecord`): ``first_answer_chunk`` (the index in
``chunk_ns`` of the first answer chunk), ``reasoning_chunk_tokens`` (the tokens the reasoning
chunks carried, from the per-chunk usage deltas) and ``reasoning_tokens_usage`` (the server's
``usage.completion_tokens_details.reasoning_tokens``, when it sends it).

Definitions (times are ``perf_counter`` ns, as everywhere):

- reasoning tokens = the server's ``reasoning_tokens`` when sent (source ``usage``), else the
  tokens of the reasoning chunks (source ``chunks``). vLLM counts the tokens between the
  thinking markers, the markers left out; the chunks count the markers too (a marker alone
  streams nothing, so its token rides on the next chunk: ``<think>`` on the first reasoning
  chunk, ``</think>`` on the first answer chunk).
- answer tokens = output tokens - reasoning tokens.
- TTFO and the answer-only TPOT are per-request latencies, beside TTFT in
  :mod:`infer_prof.core.measurement.metrics` (``ttfo_ns``, ``answer_tpot_ns``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from infer_prof.core.measurement.stats import Distribution, summarize

if TYPE_CHECKING:
    from infer_prof.core.measurement.metrics import RequestRecord

ReasoningSource = Literal["usage", "chunks"]


def reasoning_tokens(r: RequestRecord) -> int:
    """A request's reasoning tokens: the server's ``reasoning_tokens`` when it sent them, else
    the tokens its reasoning chunks carried (0 when it streamed none)."""
    if r.reasoning_tokens_usage is not None:
        return r.reasoning_tokens_usage
    return r.reasoning_chunk_tokens


def reasoning_source(r: RequestRecord) -> ReasoningSource:
    """Where :func:`reasoning_tokens` came from: ``usage`` (the server's count) or ``chunks``."""
    return "usage" if r.reasoning_tokens_usage is not None else "chunks"


def reasoned(r: RequestRecord) -> bool:
    """Whether a request streamed any reasoning (a reasoning chunk, or a server count > 0)."""
    return r.reasoning_chunk_tokens > 0 or bool(r.reasoning_tokens_usage)


def answer_tokens(r: RequestRecord) -> int | None:
    """Output tokens - reasoning tokens; None without an output token count."""
    if r.output_tokens is None:
        return None
    return max(0, r.output_tokens - reasoning_tokens(r))


def ended_in_reasoning(r: RequestRecord) -> bool:
    """A completed request that streamed reasoning and no answer chunk (cut by its token limit
    while thinking): it has no TTFO."""
    return r.ok and reasoned(r) and r.first_answer_chunk is None


@dataclass(frozen=True)
class ReasoningSummary:
    """A run's reasoning (completed measured requests): how many streamed reasoning and how many
    of them ended still reasoning; reasoning and answer tokens in all and per request; where the
    counts came from (requests per source); answer tokens per second over the rate window."""

    requests: int
    ended_in_reasoning: int
    reasoning_tokens_total: int
    answer_tokens_total: int
    reasoning_tokens: Distribution | None
    answer_tokens: Distribution | None
    token_sources: dict[str, int]
    answer_throughput: float | None

    @property
    def token_source(self) -> str:
        """``usage``, ``chunks``, or ``mixed`` when requests differ."""
        return next(iter(self.token_sources)) if len(self.token_sources) == 1 else "mixed"


def summarize_reasoning(ok: Iterable[RequestRecord],
                        rate_window_s: float | None) -> ReasoningSummary | None:
    """The reasoning of completed requests ``ok``; None when none of them streamed reasoning
    (a model that does not think, or an endpoint that streams no reasoning field).
    ``answer_throughput`` = answer tokens / ``rate_window_s`` (tokens/s)."""
    done = list(ok)
    if not any(reasoned(r) for r in done):
        return None
    reasoning = [reasoning_tokens(r) for r in done]
    answers = [a for r in done if (a := answer_tokens(r)) is not None]
    total_answer = sum(answers)
    return ReasoningSummary(
        requests=sum(1 for r in done if reasoned(r)),
        ended_in_reasoning=sum(1 for r in done if ended_in_reasoning(r)),
        reasoning_tokens_total=sum(reasoning),
        answer_tokens_total=total_answer,
        reasoning_tokens=summarize([float(v) for v in reasoning]),
        answer_tokens=summarize([float(v) for v in answers]),
        token_sources=dict(sorted(Counter(reasoning_source(r) for r in done).items())),
        answer_throughput=total_answer / rate_window_s if rate_window_s else None,
    )
