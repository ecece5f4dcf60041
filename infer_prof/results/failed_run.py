"""A point that measured nothing: every measured request failed. ``run`` writes its result and
exits 4 with one line saying why (:func:`every_request_failed`), so a nightly job notices."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from infer_prof.results.store import read_requests

#: What to check when every request failed with this kind.
_FAILURE_HINTS = {
    "http_404": "check the --endpoint path, --api (completions or chat) and the model name "
                "(--served-model-name)",
    "http_400": "the server refused the requests: check the lengths against its context and "
                "--api",
    "http_401": "check --api-key (or OPENAI_API_KEY)",
    "http_403": "check --api-key (or OPENAI_API_KEY)",
    "connect_failed": "is the server listening at --endpoint?",
    "timeout": "no response in time: raise --timeout or lower the load",
    "rate_limited": "the server answered 429 (rate limit; Retry-After in the per-request file): "
                    "lower --concurrency or --rate, or raise the key's limit",
    "not_sse": "a 200 that is no event stream (an HTML page from a proxy or gateway?): check "
               "--endpoint points at the OpenAI-compatible server itself",
    "unexpected_encoding": "a compressed stream the client did not ask for: switch gzip off "
                           "for this path on the proxy in front of the server",
    "truncated": "the streams ended before their [DONE]: check the proxy or load balancer in "
                 "front of the server (idle or body timeouts, TLS termination)",
}


def every_request_failed(result: dict[str, Any], requests_path: Path) -> str | None:
    """One line when not one measured request of a point completed and some failed (None
    otherwise): the failure kinds, the first failure's detail from the per-request file, and
    what to check. Such a run is no measurement, so ``run`` exits 4 after writing it."""
    summary = result.get("summary") or {}
    if summary.get("requests_completed") or not summary.get("requests_failed"):
        return None
    kinds = summary.get("failure_kinds") or {}
    detail = None
    with contextlib.suppress(OSError, ValueError, TypeError):  # no file: the kinds still tell
        detail = next((r.error_detail for r in read_requests(requests_path)
                       if not r.warmup and r.error and r.error_detail), None)
    top = max(kinds, key=lambda k: kinds[k]) if kinds else None
    text = ", ".join(f"{k}: {v}" for k, v in kinds.items())
    line = f"every measured request failed ({text})"
    if detail:
        line += f": {detail[:200]}"
    hint = _FAILURE_HINTS.get(top or "")
    return f"{line}; {hint}" if hint else line

