"""The nightly recipe (docs/nightly.md) end to end on real vLLM (CPU) with the tiny model.

Night 1 records the suite (every workload and load point of workloads/nightly.toml, scaled
tiny) in the history; night 2 runs the same suite on a server limited to one sequence at a
time (a planted regression: --max-num-seqs=1), and the gate against the history must fail on
the throughput of the concurrent points, with a JUnit file saying so.
"""

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from infer_prof.results.schema import load_result

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")


def infer_prof(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infer_prof", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def nightly(results: Path, db: Path, *extra: str) -> subprocess.CompletedProcess:
    return infer_prof("run", "--model", "tiny-llama", "--suite", "nightly", "--scale", "tiny",
                      "--results-dir", str(results), "--history-db", str(db), "--no-progress",
                      "--enforce-eager", *extra)


def test_nightly_suite_history_and_gate(tmp_path):
    db = tmp_path / "history.sqlite"
    night1 = nightly(tmp_path / "night1", db)
    assert night1.returncode == 0, night1.stderr[-3000:]
    results = sorted((tmp_path / "night1").glob("*.json"))
    points = [load_result(p) for p in results if not p.name.endswith(".sweep.json")]
    assert len(points) == 10  # 5 members x 2 points, one server launch
    assert len({p["server"]["url"] for p in points}) == 1
    assert {p["load"]["mode"] for p in points} == {"closed", "open"}
    assert all(p["complete"] and p["summary"]["requests_completed"] == 16 for p in points)
    sweep = next((tmp_path / "night1").glob("*.sweep.json"))
    assert "points" in sweep.read_text()

    history = infer_prof("history", "--db", str(db), "--json")
    assert history.returncode == 0, history.stderr
    assert history.stdout.count('"run_id"') == 10

    night2 = nightly(tmp_path / "night2", db, "--engine-arg=--max-num-seqs=1")
    assert night2.returncode == 0, night2.stderr[-3000:]
    junit = tmp_path / "gate.xml"
    gate = infer_prof("regress", "--baseline", "history:1", "--history", str(db),
                      "--current", str(tmp_path / "night2"), "--junit", str(junit),
                      "--markdown", str(tmp_path / "gate.md"))
    assert gate.returncode == 1, gate.stdout + gate.stderr
    failures = [tc.get("name") for tc in ET.parse(junit).iter("testcase")
                if tc.find("failure") is not None]
    # one sequence at a time cannot keep 4 streams' throughput
    assert any("c4" in name and "throughput" in name for name in failures), failures
    assert (tmp_path / "gate.md").read_text().strip()
