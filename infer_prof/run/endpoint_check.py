"""The first answer of an attached endpoint (``GET /v1/models``), read for what it says about
the run that is about to start: a refused API key, TLS on an ``http://`` URL, or no answer.
Each ends the run before any load with one line naming the fix.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from typing import Any

from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.results.failed_run import shorten
from infer_prof.servers.base import ServerStartError
from infer_prof.servers.http_get import http_get

#: the exit code of a run that measured nothing because its requests were refused (README)
REFUSED_EXIT_CODE = 4


class EndpointRefused(ServerStartError):
    """The endpoint refused the API key (401/403) before any load: exit 4, as a run whose
    every request was refused."""

    exit_code = REFUSED_EXIT_CODE


def key_hint(api_key: str | None, key_env: str = "OPENAI_API_KEY") -> str:
    """What to do about a refused key: give one, or check the one given."""
    if not api_key:
        return f"no API key was sent: pass it with --api-key KEY (or set {key_env})"
    return f"the key sent was refused: check --api-key (or {key_env})"


def speaks_tls(host: str, port: int, timeout_s: float = 2.0) -> bool:
    """Whether ``host:port`` completes a TLS handshake (certificate not checked: only the
    protocol spoken is asked)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw, \
                ctx.wrap_socket(raw, server_hostname=host):
            return True
    except (OSError, ssl.SSLError):
        return False


def _tls_line(endpoint: Endpoint) -> str:
    url = f"https://{endpoint.host}:{endpoint.port}{endpoint.base_path}"
    return f"endpoint {endpoint.url}: this port speaks TLS: use https:// ({url})"


def list_models(endpoint: Endpoint, api_key: str | None,
                key_env: str = "OPENAI_API_KEY") -> list[str]:
    """The model ids the endpoint lists at ``/v1/models``. Raises :class:`EndpointRefused`
    (exit 4) on 401/403, naming ``--api-key``; ServerStartError (exit 1) with one line for
    anything else: "this port speaks TLS: use https://" when an ``http://`` URL reached a TLS
    port (an HTML "plain HTTP request was sent to HTTPS port" page, or no HTTP answer and a
    TLS handshake that succeeds), else the status and the body shortened."""
    url = f"{endpoint.url}/v1/models"
    plain = endpoint.tls is None
    try:
        status, body = http_get(url, 5.0, api_key, endpoint.ssl_context())
    except (OSError, http.client.HTTPException) as exc:
        if plain and speaks_tls(endpoint.host, endpoint.port):
            raise ServerStartError(_tls_line(endpoint)) from None
        raise ServerStartError(
            f"endpoint {endpoint.url} did not answer GET /v1/models: {shorten(str(exc))}"
        ) from None
    text = body.decode("utf-8", "replace")
    if status in (401, 403):
        raise EndpointRefused(
            f"endpoint {endpoint.url} refused the API key (GET /v1/models answered HTTP "
            f"{status}): {key_hint(api_key, key_env)}"
        )
    if status != 200:
        if plain and ("HTTPS port" in text or "<html" in text.lower()) and speaks_tls(
                endpoint.host, endpoint.port):
            raise ServerStartError(_tls_line(endpoint))
        raise ServerStartError(
            f"endpoint {endpoint.url} did not answer GET /v1/models: HTTP {status}: "
            f"{shorten(text, 160)}"
        )
    try:
        data: Any = json.loads(body)
        return [str(m["id"]) for m in data.get("data", [])]
    except (ValueError, TypeError, KeyError, AttributeError):
        raise ServerStartError(
            f"endpoint {endpoint.url}: GET /v1/models did not answer an OpenAI model list: "
            f"{shorten(text, 160)}"
        ) from None
