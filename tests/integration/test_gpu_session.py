"""benchmarks/gpu_session.py end to end on the synthetic server: cases run in order inside the
budget, a case past its limit is stopped with SIGINT and keeps what it measured, a case that no
longer fits is skipped with the reason, each case comes back as one archive, and the report
reads them. Also, without a session: each of the lent GPU's case commands reaches the
preflight, and the report asks `infer-prof estimate --measured` for each GPU run's prediction
(read from the recorded CPU session, tests/fixtures/gpu_session/cpu-smoke)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.benchmark_scripts import BENCHMARKS, load_benchmark

session = load_benchmark("gpu_session")
report = load_benchmark("gpu_session_report")
SMOKE = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_session" / "cpu-smoke"

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


def test_the_estimate_is_asked_for_each_gpu_run(tmp_path):
    """A CPU run has no prediction, with the reason; a result relabelled as the 2026-11-23 H100
    run of llama-2-7b bf16 (128 streams, 512/128, 4,258 output tok/s:
    ../shared/measurements/h100-2026-11-23.csv) gets `infer-prof estimate --measured`'s."""
    rows = report.build(SMOKE, tmp_path, predict=True)
    assert all(r.predicted_tok_s is None and "CPU" in r.predicted_reason for r in rows)
    doc = json.loads(rows[0].path.read_text())
    doc["gpu"].update(key="H100-SXM", count=1, how="--gpu")
    doc["model"]["name"] = doc["config"]["model"] = "llama-2-7b"
    doc["workload"]["input_len"]["value"], doc["workload"]["output_len"]["value"] = 512, 128
    doc["config"].update(input_len=512, output_len=128, concurrency=128)
    doc["load"]["concurrency"] = doc["workload"]["arrival"]["concurrency"] = 128
    doc["summary"].update(output_throughput=4258.0, output_tok_s_per_gpu=4258.0)
    h100 = tmp_path / "h100" / "run.json"
    h100.parent.mkdir()
    h100.write_text(json.dumps(doc))  # the CPU run was too short to be valid: said as such
    row = report.read_case("h100", h100.parent, "infer-prof run --model llama-2-7b")[0]
    report.add_predictions([row])
    assert row.predicted_reason == "estimate --measured did not use it: marked invalid by its " \
        "validity checks"
    doc["validity"].update(valid=True, reasons=[])
    h100.write_text(json.dumps(doc))
    row = report.read_case("h100", h100.parent, "infer-prof run --model llama-2-7b")[0]
    report.add_predictions([row])
    assert row.predicted_reason is None, row.predicted_reason
    # held out by source, the estimate's error is 8.8 % median, 27.4 % p90 on released vLLM
    # builds (docs/estimate.md); this project's own H100 runs, 5.6 % median
    assert row.predicted_tok_s == pytest.approx(4258.0, rel=0.3)
    assert "(" in report.results_table([row]).splitlines()[-1].split("|")[-2]


def test_every_gpu_case_command_parses_and_reaches_the_preflight(tmp_path):
    """Each case's command line is one `infer-prof run` accepts: here, without a GPU, every one
    gets as far as the run-time check and is refused there (exit 2, naming its model), not at an
    option."""
    for case in session.read_cases(BENCHMARKS / "gpu_session_cases.toml"):
        p = subprocess.run([sys.executable, "-m", "infer_prof", *case.args, "--no-history",
                            "--no-progress", "--results-dir", str(tmp_path)],
                           capture_output=True, text=True, timeout=120)
        model = case.args[case.args.index("--model") + 1]
        last = p.stderr.strip().splitlines()[-1]
        assert p.returncode == 2 and last.startswith(f"error: {model}: ") and "on CPU" in last, \
            (case.name, p.stderr[-2000:])
