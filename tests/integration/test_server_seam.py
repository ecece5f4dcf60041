"""The server seam, end to end: ``infer-prof run --server NAME`` starts a server through
:mod:`infer_prof.servers.registry` and measures it over real HTTP; a server kind registered from
outside the package (``seam_server.py``) runs with no change to ``run/`` or ``cli/``."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, cli

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
LOAD = ("--model", "llama-2-7b", "-c", "2", "-n", "8", "--input-len", "16", "--output-len",
        "8", "--warmup-requests", "1", "--no-progress", "--no-history", "--json")


def _result(folder: Path) -> dict:
    files = [p for p in folder.glob("*.json") if not p.name.endswith(".requests.json")]
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


def test_builtin_synthetic_server_started_by_run(tmp_path):
    p = cli("run", "--server", "synthetic", *LOAD, "--results-dir", str(tmp_path),
            "--engine-arg=--ttft-ms 25", "--engine-arg=--itl-ms 5")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["requests_completed"] == 8 and summary["requests_failed"] == 0
    assert 24.0 < summary["ttft_ms"]["p50"] < 60.0  # the server's 25 ms, measured
    server = _result(tmp_path)["server"]
    assert server["kind"] == "synthetic" and server["engine"] == "synthetic"
    assert server["command"][-4:] == ["--ttft-ms", "25", "--itl-ms", "5"]
    assert Path(server["log_file"]).exists() and server["startup_s"] > 0


def test_a_server_registered_from_outside_the_package_runs_end_to_end(tmp_path):
    p = subprocess.run(
        [sys.executable, str(HERE / "seam_server.py"), "run", "--server", "fixed-delay", *LOAD,
         "--results-dir", str(tmp_path), "--gpu", "H100-SXM"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["requests_completed"] == 8
    assert 29.0 < summary["ttft_ms"]["p50"] < 70.0  # its fixed 30 ms TTFT, measured
    result = _result(tmp_path)
    assert result["server"]["kind"] == "fixed-delay"
    assert result["server"]["engine"] == "fixed-delay"
    assert "--ttft-ms" in result["server"]["command"]
    # the planner's engine-neutral settings, spelled by this server (not as vLLM flags)
    assert result["plan"]["engine_args"] == {"tp": 1, "weights": result["plan"]["precision"]}


def test_unknown_server_is_bad_input(tmp_path):
    p = cli("run", "--server", "nope", *LOAD, "--results-dir", str(tmp_path))
    assert p.returncode == 2
    assert "--server 'nope': unknown server; choose one of vllm, synthetic" in p.stderr
    assert not list(tmp_path.iterdir())
