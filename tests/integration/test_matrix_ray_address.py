"""`matrix --ray ADDRESS` with a head that does not answer, or a malformed address: one line,
exit 2, at once (``ray.init`` alone retries for minutes). Run from a folder holding an
``infer_prof`` package, the driver warns that Ray would put it first on every node's path."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
# as the installed console script runs: the working directory is not on sys.path
CLI = ("import sys; sys.path.pop(0); sys.argv[0] = 'infer-prof'; "
       "from infer_prof.cli import app; app()")
MATRIX = ('name = "m"\nmodels = ["llama-2-7b"]\ngpus = ["H100-SXM"]\nconcurrency = [2]\n'
          'input_len = 8\noutput_len = 8\n')


def _matrix(folder: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    pytest.importorskip("ray", reason="Ray is not installed (scripts/install_ray.sh)")
    (folder / "m.toml").write_text(MATRIX)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", CLI, "matrix", "m.toml", *args], cwd=folder,
                       env=env, capture_output=True, text=True, timeout=120)
    return p, time.monotonic() - t0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_head_that_refuses_is_one_line_at_once(tmp_path: Path) -> None:
    port = _closed_port()
    p, took = _matrix(tmp_path, "--ray", f"127.0.0.1:{port}", "--dry-run")
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines()[-1] == (
        f"error: --ray 127.0.0.1:{port}: cannot connect to the Ray cluster's head (Connection "
        "refused); start it with `ray start --head` or give its ADDRESS:6379")
    assert took < 30
    assert "warning" not in p.stderr


def test_a_malformed_address_is_one_line(tmp_path: Path) -> None:
    p, _ = _matrix(tmp_path, "--ray", "headnode", "--dry-run")
    assert p.returncode == 2
    assert "error: --ray headnode: give the head node as HOST:PORT" in p.stderr


def test_a_folder_holding_infer_prof_is_warned_of(tmp_path: Path) -> None:
    (tmp_path / "infer_prof").mkdir()
    (tmp_path / "infer_prof" / "__init__.py").write_text('__version__ = "0.0.0"\n')
    p, _ = _matrix(tmp_path, "--ray", f"127.0.0.1:{_closed_port()}", "--dry-run")
    assert p.returncode == 2
    assert (f"warning: {tmp_path} holds an infer_prof package, which Ray puts first on every "
            "node's path") in p.stderr
