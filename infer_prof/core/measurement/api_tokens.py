"""What a run's API and stream said about token counts (the ``api`` block of a result).

Pure: computed from the request records.

- ``token_count_sources``: how the measured requests' output tokens were counted, each kind with
  its count of requests: ``usage`` (the server's usage on every content chunk: exact per
  chunk), ``usage_one_event`` (usage given, but all of the request's tokens came in one event:
  the total is exact, their timing unknown), ``usage_total`` (usage at the end only: the total is
  exact, the per-chunk split was counted from the chunks, so ITL and tokens per chunk are
  approximate), ``chunks`` (no usage at all: 1 per chunk with generated text, or
  ``len(token_ids)``; totals approximate too). ``token_count_source`` is the kind when there is
  one, else the kinds joined by ``+``, most requests first (never one word for a mix).
- ``chat_template_tokens`` (chat API): the prompt tokens the server's chat template added,
  per request ``usage.prompt_tokens - input_len`` where ``input_len`` is the prompt's own token
  count as the completions API would count it (special tokens such as BOS included); mean, min
  and max over the measured requests whose usage gave ``prompt_tokens``. For a ``messages``
  dataset the input length is already the template's rendering, so this is about 0 there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from infer_prof.core.measurement.api_record import Api, ApiName, ChatTemplateTokens
from infer_prof.core.measurement.metrics import RequestRecord

PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


def api_block(api: ApiName, records: Sequence[RequestRecord]) -> Api:
    """The result's ``api`` section: the API used, how tokens were counted, and (chat) the
    prompt tokens the chat template added (see the module docstring)."""
    done = [r for r in records if not r.warmup and r.ok]
    sources = Counter(count_kind(r) for r in done)
    label = "+".join(k for k, _ in sources.most_common()) or None
    block = Api(name=api, path=PATHS[api], token_count_source=label,
                token_count_sources=dict(sources.most_common()))
    if api != "chat":
        block.chat_template_tokens_reason = "completions API: no chat template applied"
        return block
    diffs = [r.prompt_tokens - r.input_len for r in done if r.prompt_tokens is not None]
    if not diffs:
        block.chat_template_tokens_reason = (
            "the server's usage gave no prompt_tokens" if done else "no completed request"
        )
        return block
    block.chat_template_tokens = ChatTemplateTokens(
        mean=round(sum(diffs) / len(diffs), 3), min=min(diffs), max=max(diffs),
        requests=len(diffs))
    return block


def count_kind(r: RequestRecord) -> str:
    """How one request's output tokens were counted (see the module docstring): the client's
    ``token_count_source``, with ``usage`` split off as ``usage_one_event`` when a single
    event carried all of its tokens (per-chunk usage in name only)."""
    if r.token_count_source == "usage" and len(r.chunk_ns) == 1 and (r.output_tokens or 0) > 1:
        return "usage_one_event"
    return r.token_count_source


_KIND_TEXT = {
    "usage": "usage per chunk (exact)",
    "usage_one_event": "usage with all tokens in one event (no per-token timing)",
    "usage_total": "usage at the end only, per-chunk split counted from chunks",
    "chunks": "counted from chunks, no usage (approximate)",
}


def describe_token_source(label: str | None, counts: dict[str, int] | None = None) -> str:
    """One line for the console: how output tokens were counted; with several kinds, each
    with its count of requests (``counts``: ``api.token_count_sources``)."""
    if counts and len(counts) > 1:
        return "; ".join(f"{_KIND_TEXT.get(k, k)}: {n}" for k, n in counts.items())
    return _KIND_TEXT.get(label or "", label or "-")
