"""benchmarks/gpu_session.py end to end on the synthetic server: cases run in order inside the
budget, a case past its limit is stopped with SIGINT and keeps what it measured, a case that no
longer fits is skipped with the reason, each case comes back as one archive, and the report
reads them."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile

import pytest

from tests.benchmark_scripts import BENCHMARKS

CASES = """
[[case]]
name = "quick"
args = ["run", "--server", "synthetic", "--model", "tiny-llama", "-c", "4", "-n", "16",
        "--input-len", "32", "--output-len", "8", "--price-per-hour", "2.0", "--min-duration", "0"]
min_s = 2
max_s = 60

[[case]]
name = "slow"
args = ["run", "--server", "synthetic", "--model", "tiny-llama", "-c", "4", "-n", "10000",
        "--input-len", "32", "--output-len", "64", "--engine-arg=--itl-ms=20"]
min_s = 2
max_s = 6

[[case]]
name = "too-long"
args = ["run", "--server", "synthetic"]
min_s = 100000
max_s = 100000
"""


def test_session_runs_stops_and_skips_inside_its_budget(tmp_path):
    cases = tmp_path / "cases.toml"
    cases.write_text(CASES)
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_session.py"), "--out", str(out),
                        "--work", str(tmp_path / "work"), "--cases", str(cases),
                        "--budget-s", "120"], capture_output=True, text=True, timeout=200)
    assert p.returncode == 0, p.stderr
    s = json.loads((out / "session.json").read_text())
    status = {o["name"]: o for o in s["outcomes"]}
    assert [o["name"] for o in s["outcomes"]] == ["quick", "slow", "too-long"]
    assert status["quick"]["status"] == "ok" and status["quick"]["rc"] == 0
    assert status["slow"]["status"] == "stopped" and "SIGINT" in status["slow"]["reason"]
    assert 6 <= status["slow"]["seconds"] < 6 + 45
    assert status["too-long"]["status"] == "skipped"
    assert "the case needs 100000 s" in status["too-long"]["reason"]
    assert sorted(p.name for p in out.iterdir()) == ["quick.tar.xz", "session.json",
                                                      "slow.tar.xz"]
    with tarfile.open(out / "slow.tar.xz") as tar:
        result = next(m for m in tar.getmembers() if m.name.endswith("-c4.json"))
        doc = json.load(tar.extractfile(result))
    # stopped mid-load: the result is kept, marked incomplete, with what was measured
    assert doc["complete"] is False and doc["summary"]["requests_completed"] > 0
    r = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_session_report.py"), str(out),
                        "--no-estimate", "--csv", str(tmp_path / "s.csv")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    quick = next(line for line in r.stdout.splitlines() if line.startswith("| quick | CPU |"))
    cells = [c.strip() for c in quick.strip("|").split("|")]
    out_tok_s, usd_per_m = float(cells[4].replace(",", "")), float(cells[8])
    # $ / 1M out = price per hour / (output tok/s x 3600) x 1e6, at the case's $2.0/h; the
    # table rounds tok/s to a whole number and the cost to 3 decimals
    assert usd_per_m == pytest.approx(2.0 / (out_tok_s * 3600) * 1e6, rel=0.01)
    assert "`too-long`: skipped" in r.stdout and "`slow`: stopped" in r.stdout
    assert len((tmp_path / "s.csv").read_text().splitlines()) == 3
