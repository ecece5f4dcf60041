import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infer_prof.run.calibrate import start_synthetic

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def synthetic():
    """A synthetic server (50 ms to first token, then a token every 15 ms) per test."""
    started = []

    def start(*extra: str, ttft_ms: float = 50.0, itl_ms: float = 15.0, tokens: int = 128):
        s = start_synthetic(ttft_ms, itl_ms, tokens, extra_args=tuple(extra))
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -m infer_prof ARGS`` as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "infer_prof", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def cli_background(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "infer_prof", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def long_run(server_url: str, results_dir: Path, *extra: str) -> subprocess.Popen:
    """A `run --endpoint` of 400 requests on 4 streams, started in the background, long enough
    to be interrupted (Ctrl-C, server killed) mid-run; ``extra`` adds options."""
    return cli_background(
        "run",
        "--model",
        "llama-2-7b",
        "--no-progress",
        "--endpoint",
        server_url,
        "-c",
        "4",
        "-n",
        "400",
        "--input-len",
        "8",
        "--output-len",
        "50",
        "--warmup-requests",
        "0",
        "--results-dir",
        str(results_dir),
        *extra,
    )


def load_single_result(folder: Path) -> dict:
    files = [p for p in folder.glob("*.json")]
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


def wait_for_requests(folder: Path, proc: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)


def interrupt(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)


__all__ = ["cli", "cli_background", "load_single_result", "os"]


def wait_until_served(url: str, n: int, timeout_s: float = 60.0) -> None:
    """Wait until the synthetic server at ``url`` has finished ``n`` requests (its ``/truth``
    records): a test that interrupts a run mid-way acts once the run is measuring, however long
    the client took to start on a busy machine (a fixed sleep raced it under CPU pressure)."""
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{url}/truth", timeout=5) as r:
            if len(json.load(r)["requests"]) >= n:
                return
        time.sleep(0.1)
    raise AssertionError(f"{url} did not serve {n} requests in {timeout_s} s")
