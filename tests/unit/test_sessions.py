"""Multi-turn sessions: conversations of exact lengths whose every turn extends the last, the
same for the same seed; per-turn figures; ShareGPT conversations; Mooncake hash-id prefixes."""

import json
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from infer_prof.catalog.tinymodel import ensure_tiny_llama
from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.workload.distributions import Fixed, Uniform
from infer_prof.core.workload.sessions import SessionSettings, by_turn, prefix_cache
from infer_prof.loadgen.datasets import DatasetError
from infer_prof.loadgen.prompts import TokenPool
from infer_prof.loadgen.sessions import SessionPlan, load_sharegpt_sessions, synthetic_turns
from infer_prof.loadgen.text_prompts import TextPromptMaker, server_token_counter
from infer_prof.loadgen.traces import TraceError, load_trace
from infer_prof.run.point_prompts import hashed_prompt

POOL = TokenPool.from_vocab_size(32000)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.from_file(str(ensure_tiny_llama() / "tokenizer.json"))


@pytest.fixture(scope="module")
def maker(tok: Tokenizer) -> TextPromptMaker:
    return TextPromptMaker.from_tokenizer(tok)


def test_token_id_turns_exact_lengths_and_prefix_growth() -> None:
    inp, out = Uniform(5, 300), Uniform(1, 200)
    for s in range(30):
        turns = synthetic_turns(s, 5, inp, out, 7, POOL)
        users = inp.sample(random.Random(f"7/session/{s}/input_len"), 5)
        answers = out.sample(random.Random(f"7/session/{s}/output_len"), 5)
        assert [o for _, _, o in turns] == answers
        expect = 0
        for k, (prompt, n_in, _) in enumerate(turns):
            expect += users[k] + (answers[k - 1] if k else 0)
            assert n_in == len(prompt) == expect
            if k:  # the whole previous turn, then its answer's stand-in, then the new input
                prev = turns[k - 1][0]
                assert prompt[:len(prev)] == prev
                assert len(prompt) - len(prev) == answers[k - 1] + users[k]


def test_text_turns_exact_lengths_and_prefix_growth(maker: TextPromptMaker,
                                                    tok: Tokenizer) -> None:
    inp, out = Uniform(12, 200), Uniform(1, 64)
    for s in range(20):
        turns = synthetic_turns(s, 4, inp, out, 3, POOL, maker)
        users = inp.sample(random.Random(f"3/session/{s}/input_len"), 4)
        answers = out.sample(random.Random(f"3/session/{s}/output_len"), 4)
        history = 0
        for k, (prompt, n_in, n_out) in enumerate(turns):
            assert isinstance(prompt, str)
            assert n_in == len(tok.encode(prompt).ids)  # what the server counts
            assert n_out == answers[k]
            # the user turn adds exactly its drawn length to the conversation so far
            assert n_in == history + users[k]
            assert prompt.endswith("\nAssistant:") and "User:" in prompt
            if k:
                prev = turns[k - 1][0]
                assert isinstance(prev, str) and prompt.startswith(prev)
                # the server's tokens of the previous turn are a prefix of this turn's
                a, b = tok.encode(prev).ids, tok.encode(prompt).ids
                assert b[:len(a)] == a
            history = n_in + answers[k] + 1  # the answer stand-in, then a newline


def test_chat_turns_are_messages_of_exact_lengths(maker: TextPromptMaker, tok: Tokenizer) -> None:
    inp, out = Uniform(1, 120), Uniform(1, 40)
    for s in range(10):
        turns = synthetic_turns(s, 4, inp, out, 5, POOL, maker, chat=True)
        users = inp.sample(random.Random(f"5/session/{s}/input_len"), 4)
        answers = out.sample(random.Random(f"5/session/{s}/output_len"), 4)
        total = 0
        for k, (msgs, n_in, n_out) in enumerate(turns):
            assert isinstance(msgs, list)
            assert [m["role"] for m in msgs] == ["user", "assistant"] * k + ["user"]
            own = [len(tok.encode(m["content"]).ids) - maker.overhead for m in msgs]
            assert own[-1] == users[k] and own[1::2] == answers[:k]
            total += users[k] + (answers[k - 1] if k else 0)
            assert n_in == sum(own) == total and n_out == answers[k]
            if k:
                assert msgs[: 2 * k - 1] == turns[k - 1][0]  # the last turn, unchanged
    with pytest.raises(ValueError, match="text prompt maker"):
        synthetic_turns(0, 2, inp, out, 5, POOL, None, chat=True)


def test_same_seed_same_conversation(maker: TextPromptMaker) -> None:
    a = synthetic_turns(4, 3, Uniform(20, 90), Fixed(16), 11, POOL, maker)
    assert a == synthetic_turns(4, 3, Uniform(20, 90), Fixed(16), 11, POOL, maker)
    assert a != synthetic_turns(4, 3, Uniform(20, 90), Fixed(16), 12, POOL, maker)
    assert a != synthetic_turns(5, 3, Uniform(20, 90), Fixed(16), 11, POOL, maker)
    ids = synthetic_turns(0, 3, Fixed(50), Fixed(10), 1, POOL)
    assert ids == synthetic_turns(0, 3, Fixed(50), Fixed(10), 1, POOL)


def test_plan_rounds_to_whole_sessions_and_numbers_requests() -> None:
    plan = SessionPlan(SessionSettings(turns=3))
    assert plan.sessions_for(10) == 4 and plan.turns_for(4) == 12
    assert plan.sessions_for(None) is None
    convs = list(plan.conversations(4, Fixed(8), Fixed(4), 0, POOL, None, None))
    assert [c.session for c in convs] == [0, 1, 2, 3]
    assert [s.index for c in convs for s in c.turns] == list(range(12))
    assert [s.input_len for s in convs[0].turns] == [8, 20, 32]
    assert plan.longest(Fixed(8), Fixed(4)) == 36


def _rec(index: int, turn_ttft_ms: float, inp: int, ok: bool = True) -> RequestRecord:
    r = RequestRecord(index=index, input_len=inp, max_tokens=4)
    r.send_ns = 1_000_000_000
    if ok:
        r.chunk_ns = [r.send_ns + int(turn_ttft_ms * 1e6), r.send_ns + int(turn_ttft_ms * 1e6) + 5]
        r.chunk_tokens = [1, 3]
        r.done_ns = r.chunk_ns[-1]
        r.output_tokens = 4
        r.prompt_tokens = inp
    else:
        r.error = "http_500"
    return r


def test_by_turn_groups_measured_requests() -> None:
    recs = [_rec(0, 10, 8), _rec(1, 4, 20), _rec(2, 12, 8), _rec(3, 6, 20), _rec(4, 0, 20, False)]
    warm = _rec(-1, 99, 8)
    warm.warmup = True
    turn_of = {0: 1, 1: 2, 2: 1, 3: 2, 4: 2}
    rows = by_turn([*recs, warm], turn_of)
    assert [r["turn"] for r in rows] == [1, 2]
    assert rows[0]["requests"] == 2 and rows[0]["ttft_ms"]["mean"] == pytest.approx(11.0)
    assert rows[1]["requests"] == 3 and rows[1]["completed"] == 2
    assert rows[1]["ttft_ms"]["p50"] == pytest.approx(5.0)  # the failed one has no TTFT
    assert rows[1]["input_tokens"] == {"mean": 20.0, "min": 20.0, "max": 20.0}


def test_prefix_cache_rate_or_reason() -> None:
    ok = prefix_cache({"available": True, "summary": {
        "prefix_cache_hits": 300.0, "prefix_cache_queries": 1000.0,
        "prefix_cache_hit_rate": 0.3}})
    assert ok == {"hits": 300.0, "queries": 1000.0, "hit_rate": 0.3, "reason": None}
    none = prefix_cache({"available": True, "summary": {"prefix_cache_queries": None}})
    assert none["hit_rate"] is None and "exposes no" in none["reason"]
    down = prefix_cache({"available": False, "reason": "no successful scrape"})
    assert down["hit_rate"] is None and "no successful scrape" in down["reason"]
    zero = prefix_cache({"available": True, "summary": {"prefix_cache_hits": 0.0,
                                                        "prefix_cache_queries": 0.0}})
    assert zero["reason"] == "no prefix-cache queries in the measured window"


SHAREGPT = [
    {"conversations": [{"from": "human", "value": "What is a cat?"},
                       {"from": "gpt", "value": "A small domesticated mammal."},
                       {"from": "human", "value": "And a dog?"},
                       {"from": "gpt", "value": "Another domesticated mammal, larger."},
                       {"from": "human", "value": "Which is older?"},
                       {"from": "gpt", "value": "Dogs were domesticated first."}]},
    {"conversations": [{"from": "gpt", "value": "no human"}]},
    {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello!"}]},
]


def test_sharegpt_conversations(tmp_path: Path, tok: Tokenizer) -> None:
    p = tmp_path / "s.json"
    p.write_text(json.dumps(SHAREGPT))
    count = server_token_counter(tok)
    ds = load_sharegpt_sessions(p, count, turns=2, context=None, output_len=None, sample=None,
                                seed=0)
    assert [len(c) for c in ds.conversations] == [2, 1]  # cut at --turns; one without a pair
    assert ds.skipped == {"no_pair": 1, "cut_at_context": 0}
    (p1, n1, o1), (p2, n2, o2) = ds.conversations[0]
    assert p1 == "User: What is a cat?\nAssistant:"
    assert p2 == ("User: What is a cat?\nAssistant: A small domesticated mammal.\n"
                  "User: And a dog?\nAssistant:")
    assert n1 == count(p1) and n2 == count(p2) and p2.startswith(p1)
    assert o1 == count("A small domesticated mammal.") - count("")
    # the context cuts a conversation at the first turn that does not fit
    cut = load_sharegpt_sessions(p, count, turns=3, context=n2 + o2 - 1, output_len=None,
                                 sample=None, seed=0)
    assert [len(c) for c in cut.conversations] == [1, 1] and cut.skipped["cut_at_context"] == 1
    fixed = load_sharegpt_sessions(p, count, turns=3, context=None, output_len=7, sample=1,
                                   seed=0)
    assert len(fixed.conversations) == 1 and all(o == 7 for c in fixed.conversations
                                                 for _, _, o in c)
    plan = SessionPlan(SessionSettings(3, source="sharegpt"), ds)
    assert plan.sessions_for(5) == 3 and plan.turns_for(3) == 5  # 2 + 1 + 2 (cycled)
    # for the chat API: the data's own messages, counted without the tokenizer's additions
    chat = load_sharegpt_sessions(p, count, turns=2, context=None, output_len=None,
                                  sample=None, seed=0, chat=True)
    (m1, c1, a1), (m2, c2, _) = chat.conversations[0]
    assert m1 == [{"role": "user", "content": "What is a cat?"}]
    assert m2 == [*m1, {"role": "assistant", "content": "A small domesticated mammal."},
                  {"role": "user", "content": "And a dog?"}]
    own = [count(m["content"]) - count("") for m in m2]  # type: ignore[index]
    assert c1 == own[0] and a1 == own[1] and c2 == sum(own)


def test_sharegpt_bad_file(tmp_path: Path, tok: Tokenizer) -> None:
    p = tmp_path / "bad.json"
    p.write_text('[{"conversations": [{"from": "human"}]}]')
    with pytest.raises(DatasetError, match=r"bad.json: entry 0: conversations\[0\]"):
        load_sharegpt_sessions(p, server_token_counter(tok), turns=2, context=None,
                               output_len=None, sample=None, seed=0)
    p.write_text('{"prompt": "x"}\n')
    with pytest.raises(DatasetError, match="ShareGPT"):
        load_sharegpt_sessions(p, server_token_counter(tok), turns=2, context=None,
                               output_len=None, sample=None, seed=0)


def test_mooncake_hash_ids_read_and_checked(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 1100, "output_length": 4, '
                 '"hash_ids": [0, 1, 2]}\n'
                 '{"timestamp": 500, "input_length": 700, "output_length": 4, '
                 '"hash_ids": [0, 3]}\n'
                 '{"timestamp": 900, "input_length": 50, "output_length": 4}\n')
    t = load_trace(p)
    assert t.hash_ids == [(0, 1, 2), (0, 3), None] and t.block_tokens == 512
    assert t.to_dict()["hash_ids"] is True
    p.write_text('{"timestamp": 0, "input_length": 10, "output_length": 4, "hash_ids": [-1]}\n')
    with pytest.raises(TraceError, match=r"m.jsonl:1: hash_ids"):
        load_trace(p)


def test_hashed_prompts_share_blocks(maker: TextPromptMaker, tok: Tokenizer) -> None:
    a = hashed_prompt((0, 1, 2), 1100, 5, 0, POOL, None, 512)
    b = hashed_prompt((0, 3), 700, 5, 1, POOL, None, 512)
    c = hashed_prompt((9,), 300, 5, 2, POOL, None, 512)
    assert isinstance(a, list) and isinstance(b, list) and isinstance(c, list)
    assert (len(a), len(b), len(c)) == (1100, 700, 300)
    assert a[:512] == b[:512] and a[512:1024] != b[512:1024]
    assert c != a[:300]
    assert a == hashed_prompt((0, 1, 2), 1100, 5, 0, POOL, None, 512)  # seeded
    ta = hashed_prompt((0, 1), 1100, 5, 0, POOL, maker, 512)
    tb = hashed_prompt((0, 4), 600, 5, 1, POOL, maker, 512)
    assert isinstance(ta, str) and isinstance(tb, str)
    ia, ib = tok.encode(ta).ids, tok.encode(tb).ids
    assert (len(ia), len(ib)) == (1100, 600)
    assert ia[:500] == ib[:500]  # the shared block's tokens


def test_compare_tells_session_settings_apart() -> None:
    from infer_prof.results.document import decode_result as typed
    from infer_prof.results.identity import config_fields, differing_fields

    def result(sessions: dict | None) -> dict:
        return {"kind": "infer-prof.run", "schema_version": 1, "run_id": "r", "summary": {},
                "config": {"model": "m", "sessions": sessions}, "model": {"name": "m"}}

    plain = result(None)
    assert "sessions" not in config_fields(typed(plain))  # older fingerprints stay the same
    a = result({"turns": 3, "think_time_s": 0.0, "source": "synthetic", "sessions": 4,
                "prompt": "token-ids", "dataset": None})
    b = result({**a["config"]["sessions"], "think_time_s": 1.0})
    c = result({**a["config"]["sessions"], "sessions": 9})  # how many is not the setting
    assert list(differing_fields([typed(a), typed(b)])) == ["sessions"]
    assert differing_fields([typed(a), typed(c)]) == {}
    assert "sessions" in differing_fields([typed(a), typed(plain)])


def test_text_turns_exact_with_a_bos_tokenizer() -> None:
    # a tokenizer that adds a BOS and knows no ':' (the role markers cost many tokens): turns
    # too short for the markers are words alone, every length still exact, every turn a prefix
    from .test_text_prompts import _bos_metaspace_tokenizer

    tok = _bos_metaspace_tokenizer()
    maker = TextPromptMaker.from_tokenizer(tok)
    plain = 0
    for s in range(20):
        turns = synthetic_turns(s, 4, Uniform(2, 120), Uniform(1, 40), 2, POOL, maker)
        for k, (prompt, n_in, _) in enumerate(turns):
            assert isinstance(prompt, str)
            ids = tok.encode(prompt).ids
            assert len(ids) == n_in and ids[0] == tok.token_to_id("<s>")
            plain += not prompt.endswith("Assistant:")
            if k:
                prev = turns[k - 1][0]
                assert isinstance(prev, str)
                assert ids[:len(tok.encode(prev).ids)] == tok.encode(prev).ids
    assert plain > 0


def test_think_time_never_ends_early_under_uvloop():
    """uvloop's timers run on a whole-millisecond clock and can fire just before their time; a
    think time still lasts at least what was asked, counted from the answer's last byte."""
    import asyncio
    import time

    import uvloop

    from infer_prof.loadgen.sessions import _think

    async def go() -> list[tuple[int, int, int]]:
        stop = asyncio.Event()
        out = []
        for i in range(40):
            done = time.perf_counter_ns() - (i % 7) * 300_000  # answer ended a little ago
            due = await _think(done, 0.003 + (i % 3) * 0.0007, stop)
            out.append((done, due, time.perf_counter_ns()))
        return out

    loop = uvloop.new_event_loop()
    try:
        waits = loop.run_until_complete(go())
    finally:
        loop.close()
    for i, (done, due, woke) in enumerate(waits):
        think_ns = int((0.003 + (i % 3) * 0.0007) * 1e9)
        assert due == done + think_ns  # the next turn is due exactly at the think time's end
        assert woke >= due  # and is not sent before it


def test_think_time_ends_at_stop():
    import asyncio
    import time

    from infer_prof.loadgen.sessions import _think

    async def go() -> float:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.01, stop.set)
        t0 = time.perf_counter()
        await _think(time.perf_counter_ns(), 30.0, stop)
        return time.perf_counter() - t0

    assert asyncio.run(go()) < 5.0
