"""Multi-turn sessions and Mooncake hash-id prefixes against the built-in synthetic server
(a real HTTP server in its own process): turns in order on one stream, the think time kept,
every turn's prompt the conversation so far, per-turn figures in the result."""

import json
from pathlib import Path

import pytest

from infer_prof.results.schema import load_result
from infer_prof.results.store import read_requests

from .conftest import cli

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "datasets"
BASE = ("run", "--model", "tiny-llama", "--no-progress", "--no-history")


def _run(server_url: str, out: Path, *extra: str) -> dict:
    p = cli(*BASE, "--endpoint", server_url, "--output", str(out), *extra)
    assert p.returncode == 0, p.stderr
    return load_result(out)


def _requests(out: Path) -> list:
    return read_requests(out.with_name(out.stem + ".requests.jsonl"))


def test_synthetic_sessions_in_order_with_think_time(synthetic, tmp_path):
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=8)
    out = tmp_path / "s.json"
    # 10 turns asked: rounded up to 4 whole sessions of 3 turns
    result = _run(server.url, out, "-c", "2", "-n", "10", "--turns", "3", "--think-time",
                  "0.2", "--input-len", "20", "--output-len", "8", "--seed", "4")
    cfg = result["config"]["sessions"]
    assert cfg == {"turns": 3, "think_time_s": 0.2, "source": "synthetic", "sessions": 4,
                   "prompt": "token-ids", "dataset": None}
    ses = result["sessions"]
    assert ses["sessions_started"] == 4 and ses["sessions_completed"] == 4
    assert result["summary"]["requests_completed"] == 12
    # turn k's input is the conversation so far: 20 + (k - 1) * (8 + 20) tokens, as sent
    assert [t["input_tokens"]["mean"] for t in ses["by_turn"]] == [20.0, 48.0, 76.0]
    assert all(t["requests"] == 4 and t["ttft_ms"]["p50"] > 0 for t in ses["by_turn"])
    # the synthetic server has no prefix cache: the rate is unknown, and the result says why
    pc = ses["prefix_cache"]
    assert pc["hit_rate"] is None and "prefix_cache_queries_total" in pc["reason"]
    recs = {r.index: r for r in _requests(out) if not r.warmup}
    assert sorted(recs) == list(range(12))
    for s in range(4):
        turns = [recs[3 * s + k] for k in range(3)]
        assert len({r.worker for r in turns}) == 1  # one stream runs a session
        for a, b in zip(turns, turns[1:], strict=False):
            assert b.prompt_tokens == a.prompt_tokens + 8 + 20  # the server counted it
            gap = (b.send_ns - a.done_ns) / 1e9
            assert 0.2 <= gap < 0.6  # the think time, then the next turn at once
    # the console shows the per-turn rows
    p = cli(*BASE, "--endpoint", server.url, "--output", str(tmp_path / "t.json"), "-c", "1",
            "-n", "2", "--turns", "2", "--input-len", "10", "--output-len", "4")
    assert p.returncode == 0 and "turn 2: TTFT p50 / p99" in p.stdout
    assert "prefix-cache hits (server)" in p.stdout
    p = cli(*BASE, "--endpoint", server.url, "--output", str(tmp_path / "j.json"), "-c", "1",
            "-n", "2", "--turns", "2", "--input-len", "10", "--output-len", "4", "--json")
    assert p.returncode == 0
    assert [t["turn"] for t in json.loads(p.stdout)["sessions"]["by_turn"]] == [1, 2]


def test_prefix_cache_hit_rate_from_the_server(synthetic, tmp_path):
    # the synthetic server's prefix cache (blocks of 16 tokens, vLLM's rule): turn 2 hits on
    # turn 1's 32 prompt tokens, turn 3 on turn 2's 80 (the answer stand-ins are new tokens)
    server = synthetic("--prefix-cache-block", "16", ttft_ms=5.0, itl_ms=1.0, tokens=16)
    out = tmp_path / "p.json"
    result = _run(server.url, out, "-c", "2", "-n", "12", "--turns", "3", "--think-time",
                  "0.3", "--input-len", "32", "--output-len", "16", "--warmup", "none")
    pc = result["sessions"]["prefix_cache"]
    assert pc["reason"] is None
    assert pc["hits"] == 4 * (32 + 80)
    # every prompt token is queried: 4 x (32 + 80 + 128), less any first turns sent before
    # the window's first scrape (at most one per stream)
    assert 4 * 240 - 2 * 32 <= pc["queries"] <= 4 * 240
    assert pc["hit_rate"] == pytest.approx(pc["hits"] / pc["queries"])


def test_sharegpt_sessions(synthetic, tmp_path):
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=8)
    out = tmp_path / "g.json"
    result = _run(server.url, out, "-c", "2", "-n", "4", "--turns", "4", "--dataset",
                  str(DATA / "sharegpt.json"), "--output-len", "6", "--warmup", "none")
    cfg = result["config"]["sessions"]
    assert cfg["source"] == "sharegpt" and cfg["prompt"] == "text"
    assert result["config"]["prompt"] == "text"
    ds = cfg["dataset"]
    # a1 has 2 turns, a3 and a4 one each; a2 and a5 have no human/gpt pair
    assert ds["conversations"] == 3 and ds["turns"] == 4 and ds["skipped"]["no_pair"] == 2
    assert result["sessions"]["sessions_started"] == 3
    assert [t["requests"] for t in result["sessions"]["by_turn"]] == [3, 1]
    recs = sorted((r for r in _requests(out) if not r.warmup), key=lambda r: r.index)
    assert len(recs) == 4 and all(r.ok and r.output_tokens == 6 for r in recs)
    assert recs[1].input_len > recs[0].input_len  # a1's second turn holds its first


def test_session_bad_input_exits_2(tmp_path):
    p = cli(*BASE, "--turns", "3", "--rate", "2", "--output", str(tmp_path / "x.json"))
    assert p.returncode == 2 and "drop --rate" in p.stderr
    p = cli(*BASE, "--think-time", "1", "--output", str(tmp_path / "x.json"))
    assert p.returncode == 2 and "give --turns" in p.stderr
    p = cli(*BASE, "--turns", "0", "--output", str(tmp_path / "x.json"))
    assert p.returncode == 2 and "--turns must be a positive integer" in p.stderr
    p = cli(*BASE, "--turns", "40", "--input-len", "100", "--output-len", "100",
            "--output", str(tmp_path / "x.json"))
    assert p.returncode == 2 and "context" in p.stderr


def test_mooncake_hash_ids_replay(synthetic, tmp_path):
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=4)
    trace = tmp_path / "m.jsonl"
    rows = [{"timestamp": 100 * i, "input_length": 600 + 10 * i, "output_length": 4,
             "hash_ids": [0, 10 + i]} for i in range(6)]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "m.json"
    result = _run(server.url, out, "--trace", str(trace))
    assert result["config"]["trace"]["hash_ids"] is True
    assert result["config"]["trace"]["block_tokens"] == 512
    recs = sorted((r for r in _requests(out) if not r.warmup), key=lambda r: r.index)
    assert [r.prompt_tokens for r in recs] == [600 + 10 * i for i in range(6)]
