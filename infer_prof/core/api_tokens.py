"""What a run's API and stream said about token counts (the ``api`` block of a result).

Pure: computed from the request records.

- ``token_count_source``: how the measured requests' output tokens were counted, one label for
  the run: ``usage`` (the server's per-chunk usage: exact per chunk), ``usage_total`` (the
  final usage gave the total; the per-chunk split was counted from the chunks, so ITL and the
  tokens per chunk are approximate), ``chunks`` (no usage at all: 1 per chunk with generated
  text, or ``len(token_ids)``; totals approximate too), or ``mixed`` when requests differ
  (``token_count_sources`` has the counts).
- ``chat_template_tokens`` (chat API): the prompt tokens the server's chat template added,
  per request ``usage.prompt_tokens - input_len`` where ``input_len`` is the prompt's own token
  count as the completions API would count it (special tokens such as BOS included); mean, min
  and max over the measured requests whose usage gave ``prompt_tokens``. For a ``messages``
  dataset the input length is already the template's rendering, so this is about 0 there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from infer_prof.core.metrics import RequestRecord

PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


def api_block(api: str, records: Sequence[RequestRecord]) -> dict[str, Any]:
    """The ``api`` block of a result: the API used, how tokens were counted, and (chat) the
    prompt tokens the chat template added (see the module docstring)."""
    done = [r for r in records if not r.warmup and r.ok]
    sources = Counter(r.token_count_source for r in done)
    label = None if not sources else next(iter(sources)) if len(sources) == 1 else "mixed"
    block: dict[str, Any] = {
        "name": api,
        "path": PATHS.get(api),
        "token_count_source": label,
        "token_count_sources": dict(sources),
        "chat_template_tokens": None,
        "chat_template_tokens_reason": None,
    }
    if api != "chat":
        block["chat_template_tokens_reason"] = "completions API: no chat template applied"
        return block
    diffs = [r.prompt_tokens - r.input_len for r in done if r.prompt_tokens is not None]
    if not diffs:
        block["chat_template_tokens_reason"] = (
            "the server's usage gave no prompt_tokens" if done else "no completed request"
        )
        return block
    block["chat_template_tokens"] = {
        "mean": round(sum(diffs) / len(diffs), 3),
        "min": min(diffs),
        "max": max(diffs),
        "requests": len(diffs),
    }
    return block


def describe_token_source(label: str | None) -> str:
    """One line for the console: how output tokens were counted."""
    return {
        "usage": "server usage, per chunk (exact)",
        "usage_total": "usage total; per-chunk split counted from chunks (ITL approximate)",
        "chunks": "counted from chunks, no usage (approximate)",
        "mixed": "mixed across requests (see api.token_count_sources)",
    }.get(label or "", "-")
