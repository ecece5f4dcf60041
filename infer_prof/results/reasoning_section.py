"""The result's ``reasoning`` section: what a reasoning model thought before it answered.

Declared here (one topic per module, as the other sections are); the figures come from
:func:`infer_prof.core.measurement.reasoning.summarize_reasoning` over the completed measured
requests, the parser from :func:`infer_prof.core.catalog.reasoning_parsers.choose_reasoning_parser`.
The latencies (TTFO, the answer-only TPOT) are in ``summary`` beside TTFT and TPOT.
"""

from __future__ import annotations

from typing import Literal

from infer_prof.results.document_base import Distribution, Section


class Reasoning(Section):
    """A reasoning model's run (present when a request streamed reasoning, the model is known
    to reason, or a reasoning parser was asked for).

    ``parser``: the ``--reasoning-parser`` a launched vLLM ran with (None: none, or unknown for
    an ``--endpoint``); ``parser_source``: why (the model family's row and its source, or the
    option); ``family``: the family of the table the model belongs to (None: not known to
    reason). ``streamed``: whether any completed request streamed a reasoning field; ``note``:
    one line when a model known to reason streamed none (TTFT then includes the thinking).
    ``requests``: completed requests that streamed reasoning; ``ended_in_reasoning``: those
    that ended before any answer token (no TTFO). ``reasoning_tokens`` / ``answer_tokens``:
    per completed request (tokens; answer = output - reasoning), with their totals;
    ``token_source``: ``usage`` (the server's ``completion_tokens_details.reasoning_tokens``),
    ``chunks`` (the tokens of the reasoning chunks) or ``mixed``, and requests per source;
    ``answer_throughput``: answer tokens / the rate window (tokens/s)."""

    streamed: bool
    parser: str | None = None
    parser_source: str | None = None
    family: str | None = None
    note: str | None = None
    requests: int | None = None
    ended_in_reasoning: int | None = None
    reasoning_tokens_total: int | None = None
    answer_tokens_total: int | None = None
    reasoning_tokens: Distribution | None = None
    answer_tokens: Distribution | None = None
    token_source: Literal["usage", "chunks", "mixed"] | None = None
    token_sources: dict[str, int] | None = None
    answer_throughput: float | None = None
