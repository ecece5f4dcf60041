"""The two completions-API calls the quality check makes, blocking (``urllib``; the check is
sequential and off the timed path):

- :func:`complete`: the completion of a prompt at temperature 0;
- :func:`prompt_logprobs`: the log-probability of each token of a prompt and the top-k
  alternatives at each position, through ``echo: true`` with ``logprobs: k`` (the OpenAI
  completions API's form, which vLLM serves): the first ``usage.prompt_tokens`` entries of
  ``choices[0].logprobs`` are the prompt's (the first has no context: null).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from infer_prof.core.messages import OneLineError
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.loadgen.tls import client_context

#: Seconds one call may take before the check calls the endpoint failed.
CALL_TIMEOUT_S = 120.0


class EndpointCallError(OneLineError):
    """A completions call failed (connection, HTTP status, a body that is not the API's)."""


class NoPromptLogprobs(OneLineError):
    """The endpoint answered but returned no prompt log-probabilities."""


@dataclass(frozen=True)
class ScoredToken:
    """One prompt token after the first: its text, ``ln p`` and the top-k (token -> ln p)."""

    token: str
    logprob: float
    top: dict[str, float]


def _post(endpoint: Endpoint, body: dict[str, Any]) -> dict[str, Any]:
    url = f"{endpoint.scheme}://{endpoint.host}:{endpoint.port}{endpoint.base_path}/v1/completions"
    headers = {"Content-Type": "application/json"}
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {endpoint.api_key}"
    req = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    context: ssl.SSLContext | None = client_context(endpoint.tls) if endpoint.tls else None
    try:
        with urllib.request.urlopen(req, timeout=CALL_TIMEOUT_S, context=context) as resp:
            data = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace")
        raise EndpointCallError(f"{url} answered HTTP {exc.code}: {detail}") from None
    except (OSError, ValueError) as exc:
        raise EndpointCallError(f"{url}: {exc}") from None
    if not isinstance(data, dict) or not data.get("choices"):
        raise EndpointCallError(f"{url} answered without 'choices': not a completions API")
    return data


def complete(endpoint: Endpoint, model: str, prompt: str, max_tokens: int) -> str:
    """The completion of ``prompt`` by ``model`` at temperature 0, at most ``max_tokens``
    tokens, ending at a newline (``stop: ["\\n"]``)."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "stop": ["\n"]}
    text = _post(endpoint, body)["choices"][0].get("text")
    return text if isinstance(text, str) else ""


def prompt_logprobs(endpoint: Endpoint, model: str, prompt: str, top_k: int) -> list[ScoredToken]:
    """The prompt's tokens after the first with their natural-log probabilities and the top
    ``top_k`` alternatives. Raises NoPromptLogprobs when the answer holds none."""
    body = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0,
            "echo": True, "logprobs": top_k}
    data = _post(endpoint, body)
    n = (data.get("usage") or {}).get("prompt_tokens")
    lp = data["choices"][0].get("logprobs") or {}
    tokens, values, tops = lp.get("tokens"), lp.get("token_logprobs"), lp.get("top_logprobs")
    if not isinstance(n, int) or not isinstance(tokens, list) or not isinstance(values, list) \
            or len(values) < n or n < 1 or all(v is None for v in values[1:n]):
        raise NoPromptLogprobs(
            f"{endpoint.host}:{endpoint.port} returned no prompt log-probabilities (echo with "
            "logprobs); the quality check needs a server that returns them, such as vLLM")
    tops = tops if isinstance(tops, list) else [None] * len(values)
    out = []
    for token, value, top in zip(tokens[1:n], values[1:n], tops[1:n], strict=True):
        if not isinstance(value, (int, float)):
            raise NoPromptLogprobs(f"{endpoint.host}:{endpoint.port} left a prompt token's "
                                   "log-probability out")
        alts = {str(k): float(v) for k, v in top.items()} if isinstance(top, dict) else {}
        out.append(ScoredToken(str(token), float(value), alts))
    return out
