"""benchmarks/client_cpu.py: the parts that read /proc, pick the measured window and report."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "client_cpu", ROOT / "benchmarks" / "client_cpu.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["client_cpu"] = mod  # its dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


bench = _script()


def test_stat_fields_are_counted_after_a_command_name_with_spaces_and_parens():
    # proc(5): pid (comm) state ppid ... utime(14) stime(15) ...
    text = "4242 (my (odd) cmd) S 7 4242 4242 0 -1 4194560 10 0 0 0 123 45 0 0 20 0 3 0\n"
    assert bench.stat_cpu_ticks(text) == (7, 123, 45)


def test_tree_cpu_of_a_busy_child_grows_and_a_gone_process_reads_none():
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        got = bench.tree_cpu_s(os.getpid())
        assert got is not None
        first = got[0]
        assert 0 <= got[1] <= got[0]  # system time is part of the whole
        deadline = time.monotonic() + 20
        grown = 0.0
        while time.monotonic() < deadline and grown < 0.2:  # the busy child counts in the tree
            time.sleep(0.05)
            now = bench.tree_cpu_s(os.getpid())
            assert now is not None
            grown = now[0] - first
        assert grown >= 0.2
    finally:
        child.kill()
        child.wait()
    assert bench.tree_cpu_s(child.pid) is None


def test_cpu_is_interpolated_between_samples_and_none_outside():
    samples = [(1000, 1.0), (2000, 2.0), (4000, 2.5)]
    assert bench.cpu_at(samples, 1500) == pytest.approx(1.5)
    assert bench.cpu_at(samples, 2000) == 2.0
    assert bench.cpu_at(samples, 3000) == pytest.approx(2.25)
    assert bench.cpu_at(samples, 999) is None and bench.cpu_at(samples, 4001) is None
    assert bench.window_cpu(samples, 1500, 3000) == pytest.approx(0.75)
    assert bench.window_cpu(samples, 500, 3000) is None


def test_window_is_the_last_n_requests_and_their_tokens():
    truth = [
        {"arrival_ns": 10, "send_ns": [20, 30], "aborted": False},  # a readiness probe
        {"arrival_ns": 100, "send_ns": [150, 160, 170], "aborted": False},
        {"arrival_ns": 110, "send_ns": [150, 180], "aborted": False},
        {"arrival_ns": 120, "send_ns": [130], "aborted": True},  # cut off: not counted
    ]
    assert bench.measured_window(truth, 2) == (100, 180, 6)  # the cut-off one's token at 130
    with pytest.raises(ValueError, match="expected 4"):
        bench.measured_window(truth, 4)


def test_reads_are_scaled_to_the_window():
    assert bench.reads_in_window(1200, 900, 1000) == 1080
    assert bench.reads_in_window(None, 900, 1000) is None
    assert bench.reads_in_window(10, 0, 0) is None


def test_report_prints_each_client_the_ratio_and_its_kernel_floor():
    rows = [
        {"client": "infer-prof", "concurrency": 128, "window_s": 4.0, "cpu_s": 0.5,
         "tokens": 32768, "cpu_us_per_token": 15.0, "sys_us_per_token": 9.0, "reads": 33000,
         "cpu_us_per_read": 15.2, "queue_p99_ms": 3.0, "in_flight_mean": 126.0},
        {"client": "vllm", "concurrency": 128, "window_s": 4.2, "cpu_s": 1.2, "tokens": 32768,
         "cpu_us_per_token": 37.5},
    ]
    lines = bench.report_lines(rows)
    assert "15.20" in lines[1] and "9.00" in lines[1] and "126.0" in lines[1]
    assert "n/a" in lines[2]
    assert lines[-1] == (
        "ratio infer-prof / vllm CPU per token at 128 streams: 0.400 (target <= 0.2); "
        "infer-prof's kernel time alone: 0.240")


def test_arguments_are_checked():
    a = bench.parse_args(["--concurrency", "128,256", "--clients", "infer-prof"])
    assert a.concurrency == [128, 256] and a.clients == ["infer-prof"]
    with pytest.raises(SystemExit):
        bench.parse_args(["--clients", "curl"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--concurrency", "0"])
