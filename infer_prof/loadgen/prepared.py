"""Requests prepared before the load: each spec's prompt made and its request bytes built before
the first request is sent, so that sending a request on the load's hot path costs no prompt
making, no JSON encoding, only the send.

Why: the specs of a point are drawn lazily (:func:`infer_prof.run.load_points.build_specs`),
and a text prompt of exact length (``--prompt text``, the chat API's default) re-tokenizes its
text until the count is right (:mod:`infer_prof.loadgen.text_prompts`): about 0.6 ms of client
CPU per 32-token prompt with tiny-llama's tokenizer on the 2-core development machine, against
0.03 ms for a token-ID prompt. Made at the send, at 1024 chat streams (about 520 requests/s
against the built-in server) that took a third of a core from the reads, and a wave of streams
ending together waited for each other's prompts: the client held 215-518 requests in flight of
1024, with a queue p99 of 10-19 s (docs/accuracy.md).

How many are prepared: every spec of a source that ends (a counted point, a counted or steady
warm-up), and from a source bound only by a duration, the first ``ahead`` of them; within
:data:`BUDGET_BYTES` of request bytes either way. A multi-turn point's conversations are
prepared whole, every turn of each (:func:`prepare_conversations`; the turns of synthetic and
dataset sessions do not depend on the server's answers). The specs beyond those are made when taken
and their bytes built at the send, as before (:attr:`PreparedSpecs.built_at_send` counts them).
The bytes are those the same builder makes at the send: same prompt, same request ID.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from infer_prof.core.workload.workloads import Workload
from infer_prof.loadgen.closed_loop import RequestSpec

if TYPE_CHECKING:  # (sessions imports this module)
    from infer_prof.loadgen.sessions import Conversation

#: Request bytes one source prepares at most (memory); the specs beyond are built at the send.
BUDGET_BYTES = 256 * 2**20
#: Specs prepared per stream from a source bound only by a duration (a closed loop's streams).
AHEAD_PER_STREAM = 8
#: The most specs prepared from a source bound only by a duration (about 10 s of making 32-token
#: text prompts on the development machine).
MAX_AHEAD = 16_384


class PreparedSpecs(Iterator[RequestSpec]):
    """The specs of a source, the prepared ones first (each with its ``body``, its prompt
    dropped: the bytes hold it, and a token-ID list takes several times their memory), then
    the rest of the source as it comes (built at the send). Each prepared spec is let go of once
    taken."""

    def __init__(self, ready: deque[RequestSpec], rest: Iterator[RequestSpec],
                 prepared_bytes: int) -> None:
        self._ready = ready
        self._rest = rest
        self.prepared = len(ready)  # specs prepared before the load
        self.prepared_bytes = prepared_bytes  # their request bytes in all
        self.built_at_send = 0  # specs taken after the prepared ones ran out

    def __iter__(self) -> PreparedSpecs:
        return self

    def __next__(self) -> RequestSpec:
        if self._ready:
            return self._ready.popleft()
        spec = next(self._rest)
        self.built_at_send += 1
        return spec


def prepare(
    specs: Iterable[RequestSpec],
    build: Callable[[RequestSpec], bytes],
    ahead: int | None = None,
    budget_bytes: int = BUDGET_BYTES,
) -> PreparedSpecs:
    """``specs`` with the first ``ahead`` of them (all, when None: the source must end) made
    and built now, within ``budget_bytes`` of request bytes (the spec that crosses the budget is
    the last one prepared). ``build(spec)``: the request bytes, as the driver would build them
    at the send."""
    it = iter(specs)
    ready: deque[RequestSpec] = deque()
    used = 0
    while (ahead is None or len(ready) < ahead) and used < budget_bytes:
        spec = next(it, None)
        if spec is None:
            break
        body = build(spec)
        used += len(body)
        ready.append(replace(spec, prompt="", body=body))
    return PreparedSpecs(ready, it, used)


def ahead_of_duration(wl: Workload) -> int:
    """Specs to prepare from a source bound only by ``wl``'s duration: a closed loop's
    :data:`AHEAD_PER_STREAM` per stream; an open loop's requests due in the duration
    (``rate x duration``, rounded up); at most :data:`MAX_AHEAD` (also for an unbounded rate)."""
    a = wl.arrival
    if a.mode == "closed":
        n = AHEAD_PER_STREAM * (a.concurrency or 1)
    elif a.rate is None or math.isinf(a.rate) or not wl.duration_s:
        n = MAX_AHEAD
    else:
        n = math.ceil(a.rate * wl.duration_s)
    return max(1, min(MAX_AHEAD, n))


def prepare_point(
    wl: Workload,
    warm: list[RequestSpec] | Iterator[RequestSpec],
    measured: Iterator[RequestSpec],
    build: Callable[[RequestSpec], bytes],
) -> tuple[list[RequestSpec] | PreparedSpecs, PreparedSpecs]:
    """A point's warm-up and measured specs (:func:`~infer_prof.run.load_points.build_specs`)
    prepared before its load: a warm-up list stays a list, all of it prepared; a warm-up under
    the load itself (a lazy source) and the measured specs of a counted point are prepared
    whole, those of a duration-bound point :func:`ahead_of_duration` ahead. Bounded by
    :data:`BUDGET_BYTES` each."""
    if isinstance(warm, list):
        warm_ready: list[RequestSpec] | PreparedSpecs = list(prepare(warm, build))
    else:  # a steady warm-up's pool ends (4 per stream); a duration's is drawn for the duration
        warm_ready = prepare(warm, build, ahead_of_duration(wl))
    ahead = None if wl.num_requests is not None else ahead_of_duration(wl)
    return warm_ready, prepare(measured, build, ahead)


def preparation_counts(
    *sources: list[RequestSpec] | Iterator[RequestSpec],
) -> tuple[int | None, int | None]:
    """(requests prepared before the load, requests taken without prepared bytes and so built
    at their send) over a point's sources once its load has run; each None when no source was
    prepared (a multi-turn session's). A list counts its specs with and without bytes; a
    :class:`PreparedSpecs` its prepared specs and those taken after them (in this process:
    specs that worker processes took from a lazy source are not seen here)."""
    prepared = at_send = 0
    seen = False
    for src in sources:
        if isinstance(src, PreparedSpecs):
            seen = True
            prepared += src.prepared
            at_send += src.built_at_send
        elif isinstance(src, list) and any(s.body is not None for s in src):
            seen = True
            prepared += sum(1 for s in src if s.body is not None)
            at_send += sum(1 for s in src if s.body is None)
    return (prepared, at_send) if seen else (None, None)


class PreparedConversations(Iterator["Conversation"]):
    """A multi-turn point's conversations, the prepared ones first (every turn with its bytes),
    then the rest as they come (their turns built at the send, counted in ``built_at_send``)."""

    def __init__(self, ready: deque[Conversation], rest: Iterator[Conversation], prepared: int,
                 at_send: int) -> None:
        self._ready = ready
        self._rest = rest
        self.prepared = prepared  # turns prepared before the load
        self.built_at_send = at_send  # turns left to build at their send (taken so far)

    def __iter__(self) -> PreparedConversations:
        return self

    def __next__(self) -> Conversation:
        if self._ready:
            return self._ready.popleft()
        conv = next(self._rest)
        self.built_at_send += len(conv.turns)
        return conv


def prepare_conversations(
    convs: Iterable[Conversation],
    build: Callable[[RequestSpec], bytes],
    ahead: int | None = None,
    budget_bytes: int = BUDGET_BYTES,
) -> PreparedConversations:
    """``convs`` with the first ones whose turns reach ``ahead`` requests (all, when None: the
    source must end) made and built now, within ``budget_bytes`` of request bytes in all."""
    it = iter(convs)
    ready: deque[Conversation] = deque()
    turns = at_send = used = 0
    while (ahead is None or turns < ahead) and used < budget_bytes:
        conv = next(it, None)
        if conv is None:
            break
        done = prepare(conv.turns, build, budget_bytes=budget_bytes - used)
        used += done.prepared_bytes
        turns += done.prepared
        specs = list(done)
        at_send += done.built_at_send  # a conversation the budget ran out in
        ready.append(replace(conv, turns=specs))
    return PreparedConversations(ready, it, turns, at_send)
