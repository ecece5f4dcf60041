"""The bytes of streaming OpenAI requests (completions and chat): JSON bodies that ask for
per-chunk usage, greedy sampling and exact output lengths, and the HTTP ``POST`` around them.
"""

from __future__ import annotations

from typing import Any

import orjson

from infer_prof.loadgen.endpoint import Endpoint


def build_completion_request(
    endpoint: Endpoint,
    model: str,
    prompt: list[int] | str | list[dict[str, str]],
    max_tokens: int,
    *,
    ignore_eos: bool = True,
    extra: dict[str, Any] | None = None,
    request_id: str | None = None,
) -> bytes:
    """The bytes of one streaming ``POST /v1/completions`` request with a token-ID or text
    ``prompt`` (chat messages raise ValueError: they need :func:`build_chat_request`).

    Asks for per-chunk usage (``continuous_usage_stats``) so that token counts come from the
    server, and ``ignore_eos`` so that outputs have exactly ``max_tokens`` tokens.
    """
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], dict):
        raise ValueError("chat messages need the chat API (--api chat)")
    body = _stream_body(model, max_tokens, ignore_eos, extra, prompt=prompt,
                        max_tokens=max_tokens)
    return _post(endpoint, "/v1/completions", body, request_id)


def build_chat_request(
    endpoint: Endpoint,
    model: str,
    messages: list[dict[str, Any]],
    max_tokens: int,
    *,
    ignore_eos: bool = True,
    extra: dict[str, Any] | None = None,
    request_id: str | None = None,
) -> bytes:
    """The bytes of one streaming ``POST /v1/chat/completions`` request with ``messages``
    (OpenAI chat messages, sent as they are).

    The same asks as :func:`build_completion_request`: per-chunk usage, ``ignore_eos`` and
    ``min_tokens`` so outputs have exactly ``max_tokens`` tokens, greedy sampling. The length
    is sent both as ``max_completion_tokens`` (the current OpenAI name) and ``max_tokens``
    (what older servers read); servers take the one they know.
    """
    body = _stream_body(model, max_tokens, ignore_eos, extra, messages=messages,
                        max_completion_tokens=max_tokens, max_tokens=max_tokens)
    return _post(endpoint, "/v1/chat/completions", body, request_id)


def _stream_body(
    model: str, length: int, ignore_eos: bool, extra: dict[str, Any] | None, **fields: Any
) -> dict[str, Any]:
    """The JSON body both APIs share: ``model``, the API's own ``fields`` (prompt or messages,
    length), streaming with per-chunk usage, greedy sampling, ``ignore_eos``/``min_tokens`` so
    outputs have exactly ``length`` tokens, then ``extra`` over all of it."""
    body: dict[str, Any] = {
        "model": model,
        **fields,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "temperature": 0.0,
    }
    if ignore_eos:
        body["ignore_eos"] = True
        body["min_tokens"] = length
    if extra:
        body.update(extra)
    return body


def chat_messages(prompt: str | list[Any]) -> list[dict[str, Any]]:
    """The ``messages`` for a chat request: a text prompt becomes one user message; a list of
    messages (a dataset's) is sent as it is. Token-ID prompts cannot be sent (ValueError)."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if prompt and all(isinstance(m, dict) for m in prompt):
        return [dict(m) for m in prompt]
    raise ValueError("the chat API takes text, not token IDs; use --prompt text")


def _post(endpoint: Endpoint, path: str, body: dict[str, Any], request_id: str | None) -> bytes:
    """A ``POST`` of ``body`` as JSON to ``path`` under the endpoint's prefix, with the
    headers every streaming request carries (and the API key, when there is one). The stream
    is asked for uncompressed (``Accept-Encoding: identity``): a compressed 200 fails with
    ``unexpected_encoding``."""
    payload = orjson.dumps(body)
    head = (
        f"POST {endpoint.base_path}{path} HTTP/1.1\r\n"
        f"Host: {endpoint.host_header}\r\n"
        "User-Agent: infer-prof\r\n"
        "Content-Type: application/json\r\n"
        "Accept: text/event-stream\r\n"
        "Accept-Encoding: identity\r\n"
        f"Content-Length: {len(payload)}\r\n"
    )
    if request_id:
        head += f"X-Request-Id: {request_id}\r\n"
    if endpoint.api_key:
        head += f"Authorization: Bearer {endpoint.api_key}\r\n"
    return (head + "\r\n").encode() + payload
