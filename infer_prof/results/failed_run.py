"""A point that measured nothing: every measured request failed, or every warm-up request did
(then the run stops after its warm-up, before the load). ``run`` writes its result and exits 4
with one line saying why (:func:`every_request_failed`, :func:`warmup_failed`): the failure
kinds, the first failure's detail shortened (:func:`shorten`), and the likely fix
(:func:`failure_hint`), so a nightly job notices and a user knows what to change.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.results.document import Result
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

#: What vLLM's API server answers (HTTP 500) once its engine process died under a request: the
#: cause is in the server's log, not in the answer (vllm/v1/engine/exceptions.py).
ENGINE_DEAD = "EngineCore encountered an issue"

_ID_LIST = re.compile(r"\[\s*-?\d+(?:\s*,\s*-?\d+){8,}\s*,?\s*\]?")
_OUT_OF_VOCAB = re.compile(r"token id -?\d+ is out of vocabulary", re.IGNORECASE)


def shorten(text: str, limit: int = 240) -> str:
    """``text`` on one line within about ``limit`` characters, elided in the middle, never cut:
    a long list of token IDs (a prompt echoed in an error) becomes its first 4 and last ID
    around a count (``[74, 253, 125, 293, ... 1,019 more ..., 7]``), HTML tags are dropped, and
    what is still too long keeps its head and tail around `` ... ``."""
    text = re.sub(r"<[^>]+>", " ", text)
    text = " ".join(text.split())

    def ids(m: re.Match[str]) -> str:
        nums = re.findall(r"-?\d+", m.group(0))
        closed = m.group(0).rstrip().endswith("]")
        tail = f", {nums[-1]}]" if closed else ", ...]"
        return f"[{', '.join(nums[:4])}, ... {len(nums) - 5:,} more ...{tail}"

    text = _ID_LIST.sub(ids, text)
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    return f"{text[:head]} ... {text[-(limit - head - 5):]}"


def failure_hint(kind: str | None, detail: str | None, prompt: str | None = None,
                 model: str | None = None) -> str | None:
    """The likely fix for failures of ``kind`` with ``detail``: the tokenizer for an
    out-of-vocabulary token ID (token-ID prompts come from ``--model``'s tokenizer); ``--prompt
    text`` when token-ID prompts (``prompt``) were refused with anything but a key or path
    error and the detail names the prompt (a gateway that takes text only); else the kind's
    hint."""
    d = detail or ""
    if _OUT_OF_VOCAB.search(d):
        return (f"the prompts' token IDs came from --model's tokenizer ({model or 'the model'}),"
                " which is not the served model's: pass --model with the served model's name or "
                "folder, or send --prompt text")
    if (prompt == "token-ids" and kind and kind.startswith("http_") and "prompt" in d.lower()
            and kind not in ("http_401", "http_403", "http_404")):
        return ("the server or a gateway in front of it refused token-ID prompts: use "
                "--prompt text (and --api chat if it serves chat only)")
    return _FAILURE_HINTS.get(kind or "")


def _config(result: Result) -> tuple[str | None, str | None]:
    cfg = result.config
    return cfg.prompt, (result.model.name if result.model else None) or cfg.model


def engine_dead(details: Iterable[str | None]) -> bool:
    """Whether any of the failures' ``details`` is vLLM's answer after its engine died."""
    return any(d and ENGINE_DEAD in d for d in details)


def root_cause_line(result: Result) -> str | None:
    """The one line of the root cause read in the server's log (``server.root_cause``, written
    when the server or its engine died): the original exception, else the engine's first ERROR
    line; None without one."""
    cause = result.server.root_cause if result.server else None
    lines = [ln for ln in (cause or "").splitlines() if ln.strip()]
    first = next((ln for ln in lines if not ln.startswith(("---", " "))), None)
    if first is None:  # no traceback: the engine/worker processes' ERROR lines
        first = next((ln.strip() for ln in lines if ln.startswith("    ")), None)
    return first


def _line(what: str, kinds: dict[str, int], detail: str | None, result: Result) -> str:
    top = max(kinds, key=lambda k: kinds[k]) if kinds else None
    text = ", ".join(f"{k}: {v}" for k, v in kinds.items())
    line = f"{what} ({text})"
    cause = root_cause_line(result) if engine_dead([detail]) else None
    if cause:  # vLLM's 500 says only "see the stack trace above": quote the log instead
        log = result.server.log_file if result.server else None
        return (f"{line}: the engine died: {shorten(cause)} (root cause in the server log"
                + (f" {log})" if log else ")"))
    if detail:
        line += f": {shorten(detail)}"
    hint = failure_hint(top, detail, *_config(result))
    return f"{line}; {hint}" if hint else line


def every_request_failed(result: Result, requests_path: Path) -> str | None:
    """One line when not one measured request of a point completed and some failed (None
    otherwise): the failure kinds, the first failure's detail from the per-request file, and
    what to check. Such a run is no measurement, so ``run`` exits 4 after writing it."""
    summary = result.summary
    if summary.requests_completed or not summary.requests_failed:
        return None
    kinds: dict[str, int] = dict(summary.failure_kinds)
    detail = None
    with contextlib.suppress(OSError, ValueError, TypeError):  # no file: the kinds still tell
        detail = next((r.error_detail for r in read_requests(requests_path)
                       if not r.warmup and r.error and r.error_detail), None)
    return _line("every measured request failed", kinds, detail, result)


def warmup_failed(result: Result, requests_path: Path) -> str | None:
    """One line for a point stopped after its warm-up because every warm-up request failed
    (``incomplete_reason`` ``warmup_failed``; None otherwise): kinds, first detail, fix."""
    if result.incomplete_reason != "warmup_failed":
        return None
    recs: list[RequestRecord] = []
    with contextlib.suppress(OSError, ValueError, TypeError):
        recs = [r for r in read_requests(requests_path) if r.warmup and not r.cooldown]
    kinds = dict(sorted(Counter(r.error or "no_tokens" for r in recs if not r.ok).items()))
    detail = next((r.error_detail for r in recs if r.error and r.error_detail), None)
    return _line("every warm-up request failed, so the load was not sent", kinds, detail,
                 result)
