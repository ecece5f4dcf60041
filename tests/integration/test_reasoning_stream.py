"""A reasoning model's stream measured against the synthetic server's truth: ``--reasoning-
tokens R`` makes each chat stream think for R tokens (``delta.reasoning``) before it answers,
so the true TTFO is the (R+1)-th token's send - arrival, and the reasoning and answer token
counts are known exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from infer_prof.results.schema import load_typed_result
from infer_prof.results.store import read_requests
from infer_prof.servers.http_get import get_json

from .conftest import cli

pytestmark = pytest.mark.integration
THINK = 10  # reasoning tokens per stream


def _run(url: str, tmp_path: Path, name: str, output_len: int, *extra: str) -> Path:
    out = tmp_path / f"{name}.json"
    p = cli("run", "--model", "tiny-llama", "--endpoint", url, "--api", "chat", "-c", "4",
            "-n", "16", "--input-len", "8", "--output-len", str(output_len), "--warmup", "none",
            "--no-history", "--no-progress", "--results-dir", str(tmp_path / "results"),
            "--output", str(out), *extra)
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def _truth_ttfo_ms(url: str) -> list[float]:
    truth = get_json(f"{url}/truth")["requests"]
    get_json(f"{url}/truth/reset")
    return sorted((t["send_ns"][t["reasoning_tokens"]] - t["arrival_ns"]) / 1e6 for t in truth)


def test_ttfo_and_token_counts_match_the_servers_truth(synthetic, tmp_path):
    server = synthetic("--reasoning-tokens", str(THINK), ttft_ms=20.0, itl_ms=5.0, tokens=16)
    out = _run(server.url, tmp_path, "think", 16)
    r = load_typed_result(out)
    s, rz = r.summary, r.reasoning
    assert rz is not None and rz.streamed and rz.note is None
    assert (rz.requests, rz.ended_in_reasoning, rz.token_source) == (16, 0, "usage")
    assert rz.reasoning_tokens is not None and rz.answer_tokens is not None
    assert (rz.reasoning_tokens.min, rz.reasoning_tokens.max) == (THINK, THINK)
    assert (rz.answer_tokens.min, rz.answer_tokens.max) == (16 - THINK, 16 - THINK)
    assert rz.parser is None and rz.parser_source is None  # an endpoint: not known
    truth = _truth_ttfo_ms(server.url)
    assert s.ttfo_ms is not None and s.ttft_ms is not None and s.answer_tpot_ms is not None
    # the client's TTFO is the truth's (70 ms asked: 20 + 10 x 5), within a read's lag
    assert s.ttfo_ms.p50 == pytest.approx(truth[len(truth) // 2], abs=2.0)
    assert s.ttfo_ms.p50 == pytest.approx(s.ttft_ms.p50 + THINK * 5.0, abs=3.0)
    assert s.answer_tpot_ms.p50 == pytest.approx(5.0, abs=1.0)
    assert s.tpot_ms is not None and s.tpot_ms.p50 == pytest.approx(5.0, abs=1.0)
    assert r.requests_file is not None
    recs = read_requests(out.with_name(Path(r.requests_file).name))
    measured = [x for x in recs if not x.warmup]
    assert {x.first_answer_chunk for x in measured} == {THINK}
    assert {x.reasoning_chunk_tokens for x in measured} == {THINK}
    assert {x.reasoning_tokens_usage for x in measured} == {THINK}


def test_requests_cut_while_thinking_have_no_ttfo_and_counts_fall_back_to_chunks(
        synthetic, tmp_path):
    server = synthetic("--reasoning-tokens", str(THINK), "--no-reasoning-usage", ttft_ms=5.0,
                       itl_ms=2.0, tokens=16)
    cut = load_typed_result(_run(server.url, tmp_path, "cut", THINK - 2))
    assert cut.reasoning is not None
    assert (cut.reasoning.requests, cut.reasoning.ended_in_reasoning) == (16, 16)
    assert cut.summary.ttfo_ms is None and cut.summary.answer_tpot_ms is None  # null, never 0
    assert cut.summary.ttft_ms is not None and cut.summary.tpot_ms is not None
    full = load_typed_result(_run(server.url, tmp_path, "full", 16,
                                  "--interactivity-of", "answer"))
    assert full.reasoning is not None and full.reasoning.token_source == "chunks"
    s = full.summary  # interactivity over answer tokens: 1000 / answer TPOT p50
    assert s.answer_tpot_ms is not None and s.interactivity_tok_s_user is not None
    assert s.interactivity_tok_s_user == pytest.approx(1000 / s.answer_tpot_ms.p50, rel=1e-6)
    assert full.reasoning.reasoning_tokens_total == 16 * THINK
    assert full.reasoning.answer_tokens_total == 16 * (16 - THINK)
