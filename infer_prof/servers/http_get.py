"""Small blocking HTTP calls for control-plane requests (health, model list, metrics, the
prefix cache's reset)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any


def _exchange(
    req: urllib.request.Request,
    timeout_s: float,
    api_key: str | None,
    context: ssl.SSLContext | None,
) -> tuple[int, bytes]:
    """Send ``req`` (with the Bearer ``api_key`` when given): (status, body), an HTTP error's
    status and body included. Raises OSError when no HTTP answer came at all."""
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s, context=context) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def http_get(
    url: str,
    timeout_s: float = 5.0,
    api_key: str | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, bytes]:
    """GET ``url``: (status, body). Raises OSError when no HTTP answer came at all.
    ``context``: the TLS context for an https URL (the endpoint's; default: the system's)."""
    req = urllib.request.Request(url, headers={"User-Agent": "infer-prof"})
    return _exchange(req, timeout_s, api_key, context)


def get_json(
    url: str,
    timeout_s: float = 5.0,
    api_key: str | None = None,
    context: ssl.SSLContext | None = None,
) -> Any:
    """GET ``url`` and decode JSON; raises OSError/ValueError on failure."""
    status, body = http_get(url, timeout_s, api_key, context)
    if status != 200:
        raise OSError(f"GET {url} answered HTTP {status}: {body[:200]!r}")
    return json.loads(body)


def served_model_names(
    base_url: str, api_key: str | None = None, context: ssl.SSLContext | None = None
) -> list[str]:
    """The model ids an OpenAI-compatible server lists at ``/v1/models``."""
    data = get_json(f"{base_url}/v1/models", api_key=api_key, context=context)
    return [str(m["id"]) for m in data.get("data", [])]


def http_post_json(
    url: str,
    body: Any,
    timeout_s: float = 30.0,
    api_key: str | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, bytes]:
    """POST ``body`` as JSON to ``url`` (``None``: an empty body): (status, response body).
    Raises OSError when no HTTP answer came at all."""
    data = b"" if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"User-Agent": "infer-prof",
                                          "Content-Type": "application/json"})
    return _exchange(req, timeout_s, api_key, context)
