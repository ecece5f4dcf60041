"""The result's ``api`` section as types: what :func:`infer_prof.core.measurement.api_tokens.
api_block` builds and a result holds (:class:`infer_prof.results.document.Result`), declared
once beside the arithmetic; its JSON Schema is generated from it. Every field is written (null
where not known)."""

from __future__ import annotations

from typing import Literal

import msgspec

ApiName = Literal["completions", "chat"]


class _Record(msgspec.Struct, kw_only=True, omit_defaults=False):
    """Keyword construction, every field written; keys another version adds are ignored on
    load (as the result's other sections, ``results.document_base.Section``)."""


class ChatTemplateTokens(_Record):
    """``api.chat_template_tokens``: the prompt tokens the server's chat template added to
    each message (prompt tokens - the message's own), over ``requests`` completed requests
    (``core.measurement.api_tokens``)."""

    mean: float | None = None
    min: int | None = None
    max: int | None = None
    requests: int | None = None


class Api(_Record):
    """The API used (``name``, its ``path``) and how output tokens were counted: the kind, or
    the kinds joined by ``+`` most requests first, and the measured requests of each kind; for
    chat, the prompt tokens its template added per request, or why that is not known
    (``core.measurement.api_tokens``)."""

    name: ApiName
    path: str
    token_count_source: str | None = None
    token_count_sources: dict[str, int] | None = None
    chat_template_tokens: ChatTemplateTokens | None = None
    chat_template_tokens_reason: str | None = None
