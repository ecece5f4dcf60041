"""Requests prepared before the load (``loadgen.prepared``): a point's prompts are made and its
request bytes built before the first send, the same bytes the driver would have built at the
send, and taking them during the load makes no prompt and builds nothing."""

from __future__ import annotations

import asyncio
import itertools
from types import SimpleNamespace

from infer_prof.catalog.tinymodel import ensure_tiny_llama
from infer_prof.core.workload.distributions import Fixed
from infer_prof.core.workload.sessions import SessionSettings
from infer_prof.core.workload.workloads import Arrival, Workload
from infer_prof.loadgen.closed_loop import DriverIO, LiveCounters, RequestSpec
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.loadgen.prepared import (
    AHEAD_PER_STREAM,
    MAX_AHEAD,
    PreparedSpecs,
    ahead_of_duration,
    preparation_counts,
    prepare,
    prepare_point,
)
from infer_prof.loadgen.prompts import TokenPool
from infer_prof.loadgen.sessions import SessionPlan
from infer_prof.loadgen.text_prompts import TextPromptMaker
from infer_prof.run.load import request_builder
from infer_prof.run.load_points import SpecOptions, build_specs

ENDPOINT = Endpoint.from_url("http://127.0.0.1:9")


class CountingMaker(TextPromptMaker):
    """tiny-llama's exact-length text prompts, counting every re-tokenization."""

    def __init__(self) -> None:
        base = TextPromptMaker.from_tokenizer_dir(ensure_tiny_llama())
        self.calls = 0

        def count(text: str) -> int:
            self.calls += 1
            return base.count(text)

        super().__init__(count, base.words)


def _builder(api: str) -> tuple[list[int], object]:
    """The run's request builder (chat or completions) and a list counting its calls."""
    ctx = SimpleNamespace(api=api, served="tiny", endpoint=ENDPOINT)
    build = request_builder(ctx, "run1")  # type: ignore[arg-type]
    calls: list[int] = []

    def counted(spec: RequestSpec) -> bytes:
        calls.append(spec.index)
        return build(spec)

    return calls, counted


def _workload(**kw: object) -> Workload:
    base: dict[str, object] = dict(name="w", input_len=Fixed(32), output_len=Fixed(16),
                                   num_requests=48, arrival=Arrival.closed(16), seed=3)
    base.update(kw)
    return Workload(**base)  # type: ignore[arg-type]


def _sent(io: DriverIO, specs: object, n: int | None = None) -> list[bytes]:
    """What a driver sends for the first ``n`` specs (all when None)."""
    return [io.request_bytes(s) for s in itertools.islice(specs, n)]  # type: ignore[call-overload]


def _lazy_reference(wl: Workload, pool: TokenPool, api: str, n_measured: int | None = None
                    ) -> tuple[list[bytes], list[bytes]]:
    """The bytes built at each send, as before preparation: (warm-up, measured)."""
    maker = TextPromptMaker.from_tokenizer_dir(ensure_tiny_llama()) if api == "chat" else None
    warm, measured, _ = build_specs(wl, pool, maker, chat=api == "chat",
                                    options=SpecOptions(salt="s"))
    _calls, build = _builder(api)
    return ([build(s) for s in warm],  # type: ignore[operator]
            [build(s) for s in itertools.islice(measured, n_measured)])  # type: ignore[operator]


def test_a_counted_chat_point_is_made_and_built_before_the_load() -> None:
    pool = TokenPool.from_tokenizer_dir(str(ensure_tiny_llama()))
    wl = _workload()  # steady warm-up under the load: a lazy pool of 4 per stream
    maker = CountingMaker()
    warm, measured, _ = build_specs(wl, pool, maker, chat=True, options=SpecOptions(salt="s"))
    calls, build = _builder("chat")
    warm, measured = prepare_point(wl, warm, measured, build)  # type: ignore[arg-type]
    assert maker.calls > 0 and len(calls) == 64 + 48  # everything made now, before any send
    maker.calls = 0
    calls.clear()
    io = DriverIO(ENDPOINT, build, LiveCounters(), asyncio.Event(), [])  # type: ignore[arg-type]
    sent_warm, sent = _sent(io, warm), _sent(io, measured)
    # the load makes no prompt and builds no request: it sends the prepared bytes
    assert maker.calls == 0 and calls == []
    # the same bytes as when each was built at its send: same prompts, messages, request IDs
    assert (sent_warm, sent) == _lazy_reference(wl, pool, "chat")
    assert b'"messages":[{"role":"user","content":' in sent[0]
    assert b'X-Request-Id: run1-0\r\n' in sent[0]
    assert preparation_counts(warm, measured) == (64 + 48, 0)


def test_a_prepared_spec_keeps_its_bytes_not_its_prompt() -> None:
    pool = TokenPool.from_tokenizer_dir(str(ensure_tiny_llama()))
    wl = _workload(warmup="requests", warmup_requests=5)
    warm, measured, _ = build_specs(wl, pool, options=SpecOptions(salt="s"))
    _calls, build = _builder("completions")
    warm, measured = prepare_point(wl, warm, measured, build)  # type: ignore[arg-type]
    assert isinstance(warm, list) and len(warm) == 5  # a counted warm-up stays a list
    spec = next(measured)
    assert spec.prompt == "" and spec.body is not None and b'"prompt":[' in spec.body
    io = DriverIO(ENDPOINT, build, LiveCounters(), asyncio.Event(), [])  # type: ignore[arg-type]
    ref_warm, ref = _lazy_reference(wl, pool, "completions")
    assert _sent(io, warm) == ref_warm and [spec.body, *_sent(io, measured)] == ref


def test_a_duration_bound_point_prepares_its_look_ahead_then_builds_at_the_send() -> None:
    pool = TokenPool.from_tokenizer_dir(str(ensure_tiny_llama()))
    wl = _workload(num_requests=None, duration_s=30.0, arrival=Arrival.closed(2))
    ahead = ahead_of_duration(wl)
    assert ahead == 2 * AHEAD_PER_STREAM
    warm, measured, _ = build_specs(wl, pool, options=SpecOptions(salt="s"))
    calls, build = _builder("completions")
    _warm, measured = prepare_point(wl, warm, measured, build)  # type: ignore[arg-type]
    assert isinstance(measured, PreparedSpecs) and measured.prepared == ahead
    calls.clear()
    io = DriverIO(ENDPOINT, build, LiveCounters(), asyncio.Event(), [])  # type: ignore[arg-type]
    sent = _sent(io, measured, ahead + 3)
    assert len(calls) == 3 and measured.built_at_send == 3  # past the look-ahead: at the send
    assert sent == _lazy_reference(wl, pool, "completions", ahead + 3)[1]


def test_the_memory_budget_bounds_what_is_prepared() -> None:
    specs = [RequestSpec(i, [100 + i] * 8, 8, 4) for i in range(5)]
    calls, build = _builder("completions")
    got = prepare(iter(specs), build, budget_bytes=1)  # the first crosses it: one prepared
    assert got.prepared == 1 and got.prepared_bytes > 1
    io = DriverIO(ENDPOINT, build, LiveCounters(), asyncio.Event(), [])  # type: ignore[arg-type]
    assert _sent(io, got) == [build(s) for s in specs]  # type: ignore[operator]
    assert got.built_at_send == 4
    assert preparation_counts([RequestSpec(0, [1], 1, 1)]) == (None, None)  # nothing prepared


def test_open_loop_look_ahead_is_the_duration_at_the_rate() -> None:
    wl = _workload(num_requests=None, duration_s=10.0, arrival=Arrival.open(rate=3.5))
    assert ahead_of_duration(wl) == 35
    fast = _workload(num_requests=None, duration_s=10.0, arrival=Arrival.open(rate=1e6))
    assert ahead_of_duration(fast) == MAX_AHEAD


def test_a_multi_turn_chat_point_builds_every_turn_before_the_load() -> None:
    pool = TokenPool.from_tokenizer_dir(str(ensure_tiny_llama()))
    wl = _workload(num_requests=12, input_len=Fixed(16), output_len=Fixed(8))
    plan = SessionPlan(SessionSettings(turns=3, prompt="messages"))
    maker = CountingMaker()
    calls, build = _builder("chat")
    run = plan.start(wl, pool, maker, "s")
    convs = run.prepare(build, None)
    assert (convs.prepared, len(calls)) == (12, 12)  # 4 whole sessions of 3 turns, built now
    maker.calls = 0
    calls.clear()
    io = DriverIO(ENDPOINT, build, LiveCounters(), asyncio.Event(), [])  # type: ignore[arg-type]
    sent = [io.request_bytes(t) for c in iter(run._next, None) for t in c.turns]
    assert maker.calls == 0 and calls == [] and convs.built_at_send == 0
    # the bytes each turn was built into at its send before: same conversations, same IDs
    lazy = plan.start(wl, pool, TextPromptMaker.from_tokenizer_dir(ensure_tiny_llama()), "s")
    assert sent == [build(t) for c in iter(lazy._next, None) for t in c.turns]  # type: ignore[operator]
    assert sent[2].count(b'"role":"assistant"') == 2  # turn 3 resends 2 answers


def test_a_duration_bound_multi_turn_point_prepares_whole_sessions_ahead() -> None:
    pool = TokenPool.from_tokenizer_dir(str(ensure_tiny_llama()))
    wl = _workload(num_requests=None, duration_s=30.0, arrival=Arrival.closed(1))
    run = SessionPlan(SessionSettings(turns=3)).start(wl, pool, None, "s")
    _calls, build = _builder("completions")
    convs = run.prepare(build, ahead_of_duration(wl))  # 8 requests: 3 whole sessions
    assert convs.prepared == 9
    taken = [run._next() for _ in range(4)]
    assert all(t.body is not None for c in taken[:3] for t in c.turns)  # type: ignore[union-attr]
    assert convs.built_at_send == 3  # the 4th session's turns are built at their send
