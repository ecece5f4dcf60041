"""The prefix cache's state at the start of each measured point (``run --prefix-cache``).

- ``cold`` (the default): the cache is emptied before the point
  (:func:`infer_prof.servers.prefix_cache_reset.reset_prefix_cache`); an endpoint that refuses
  leaves the state ``unknown``, said in one line, once per run.
- ``warm``: emptied as for cold, then each of the point's shared prefixes
  (:func:`infer_prof.run.point_prompts.group_prefix`) is sent once as a one-token request, so that
  every measured request of a prefix group finds its prefix cached. A point without shared
  prefixes has nothing to send: its state is what the reset left (``cold``).
- ``as-is``: nothing is sent; the cache holds whatever earlier traffic left (never another
  point's prompts of the same launch: :func:`infer_prof.run.point_prompts.point_salt`).

The warm-up never primes the measured prefixes (it has its own), so the state is what this
option made it.
"""

from __future__ import annotations

from dataclasses import dataclass

from infer_prof.core.workload.workloads import Workload
from infer_prof.loadgen.openai_requests import chat_messages
from infer_prof.report.progress import ProgressLine
from infer_prof.run.point_prompts import group_prefix
from infer_prof.run.startup import RunContext, warn
from infer_prof.servers.http_get import http_post_json
from infer_prof.servers.prefix_cache_reset import reset_prefix_cache


@dataclass(frozen=True)
class CacheSetup:
    """What was done to the cache before a point: the mode asked, the state it left
    (``cold``, ``warm``, ``as-is`` or ``unknown``), what the reset did (one line; None for
    as-is), and for warm the prefixes sent and their tokens."""

    asked: str
    state: str
    detail: str | None = None
    primed_prefixes: int | None = None
    primed_tokens: int | None = None


def prepare_cache(
    ctx: RunContext, wl: Workload, salt: str, progress: ProgressLine
) -> CacheSetup:
    """Bring the server's prefix cache into the state ``--prefix-cache`` asks, before point
    ``wl`` (whose prompts are seeded with ``salt``) sends anything."""
    asked = ctx.cfg.engine.prefix_cache
    if asked == "as-is":
        return CacheSetup(asked, "as-is")
    ep = ctx.endpoint
    reset = reset_prefix_cache(ep.url, ep.api_key, ep.ssl_context())
    if not reset.done and not ctx.said_cache_refused:
        ctx.said_cache_refused = True
        warn(progress, f"prefix cache: {reset.detail}; its state at each point is recorded "
                       f"as unknown (--prefix-cache as-is does not ask)")
    if asked == "cold":
        return CacheSetup(asked, "cold" if reset.done else "unknown", reset.detail)
    sent, tokens, problem = prime_prefixes(ctx, wl, salt)
    if problem is not None:
        return CacheSetup(asked, "unknown", f"{reset.detail}; {problem}", sent, tokens)
    if not sent:  # nothing to prime: the cache is as the reset left it
        return CacheSetup(asked, "cold" if reset.done else "unknown",
                          f"{reset.detail}; the point has no shared prefix to send", 0, 0)
    return CacheSetup(asked, "warm", reset.detail, sent, tokens)


def prime_prefixes(ctx: RunContext, wl: Workload, salt: str) -> tuple[int, int, str | None]:
    """Send each shared prefix of point ``wl`` once, as a one-token request of the run's API:
    (prefixes sent, their tokens, what went wrong or None). A point without shared prefixes
    (``shared_prefix.fraction`` 0, a dataset, a trace, sessions) sends nothing."""
    sp = wl.shared_prefix
    if sp.fraction <= 0 or not sp.length or ctx.dataset or ctx.trace or ctx.sessions:
        return 0, 0, None
    ep = ctx.endpoint
    path = "/v1/chat/completions" if ctx.api == "chat" else "/v1/completions"
    sent = 0
    for group in range(sp.groups):
        prefix = group_prefix(wl, ctx.pool, ctx.text, group, salt)
        body: dict[str, object] = {"model": ctx.served, "max_tokens": 1, "stream": True}
        if ctx.api == "chat":
            body["messages"] = chat_messages(prefix)
        else:
            body["prompt"] = prefix
        try:
            status, answer = http_post_json(ep.url + path, body, ctx.cfg.load.timeout_s,
                                            ep.api_key, ep.ssl_context())
        except OSError as exc:
            return sent, sent * sp.length, f"sending shared prefix {group} failed ({exc})"
        if status != 200:
            text = answer[:120].decode("utf-8", "replace").strip()
            return sent, sent * sp.length, (f"sending shared prefix {group} answered HTTP "
                                            f"{status}: {text}")
        sent += 1
    return sent, sent * sp.length, None
