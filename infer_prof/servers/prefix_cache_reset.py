"""Emptying a server's prefix cache before a measured point (``run --prefix-cache cold|warm``).

vLLM empties its prefix cache on ``POST /reset_prefix_cache``, a route it mounts only when
started with ``VLLM_SERVER_DEV_MODE=1`` (``vllm/entrypoints/serve/dev/cache/api_router.py``,
vLLM 0.32; infer-prof sets it for the vLLM it launches, :data:`infer_prof.servers.vllm_args.
VLLM_ENV`). It answers ``{"success": false}`` while blocks are still held (requests running, KV
transfers in flight), and callers may retry; older builds answer 200 with no body. The built-in
synthetic server serves the same route. An endpoint without the route answers 404: its cache
state is then unknown.
"""

from __future__ import annotations

import json
import ssl
import time
from dataclasses import dataclass

from infer_prof.servers.http_get import http_post_json

RESET_PATH = "/reset_prefix_cache"


@dataclass(frozen=True)
class CacheReset:
    """What one reset attempt came to: ``done`` when the server said it emptied its cache, and
    ``detail``, one line saying what happened (why not, when not)."""

    done: bool
    detail: str


def reset_prefix_cache(
    base_url: str,
    api_key: str | None = None,
    context: ssl.SSLContext | None = None,
    *,
    attempts: int = 40,
    wait_s: float = 0.25,
    timeout_s: float = 30.0,
) -> CacheReset:
    """``POST <base_url>/reset_prefix_cache``, again up to ``attempts`` times ``wait_s``
    seconds apart (10 s in all) while the server answers ``{"success": false}`` (the last
    point's requests, cut at its end, still hold blocks until the engine drops them). Never
    raises: a refusal (404, 405, 403, ...) or no answer is a :class:`CacheReset` with ``done``
    False and the reason."""
    url = base_url.rstrip("/") + RESET_PATH
    detail = ""
    for attempt in range(max(1, attempts)):
        try:
            status, body = http_post_json(url, None, timeout_s, api_key, context)
        except OSError as exc:
            return CacheReset(False, f"POST {RESET_PATH} got no answer ({exc})")
        if status in (404, 405):
            return CacheReset(False, f"the server has no POST {RESET_PATH} (HTTP {status}; "
                              "vLLM serves it only when started with VLLM_SERVER_DEV_MODE=1)")
        if status != 200:
            text = body[:120].decode("utf-8", "replace").strip()
            return CacheReset(False, f"POST {RESET_PATH} answered HTTP {status}: {text}")
        said = _success(body)
        if said is None:
            text = body[:80].decode("utf-8", "replace").strip()
            return CacheReset(False, f"POST {RESET_PATH} answered 200 but not whether it "
                              f"emptied the cache: {text!r}")
        if said:
            return CacheReset(True, f"emptied (POST {RESET_PATH}"
                              + (f", after {attempt} retries)" if attempt else ")"))
        detail = (f"POST {RESET_PATH} answered success false {attempt + 1} times (blocks still "
                  "held by running requests)")
        time.sleep(wait_s)
    return CacheReset(False, detail)


def _success(body: bytes) -> bool | None:
    """What a 200 answer says: ``{"success": true|false}`` as vLLM 0.32 answers, True for an
    empty body (older vLLM builds), None for anything else (a gateway's page: not an answer)."""
    if not body.strip():
        return True
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("success"), bool):
        return bool(value["success"])
    return None
