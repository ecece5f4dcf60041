"""Issue 36 on real vLLM (CPU) with the tiny model: three identical runs, each its own engine
launch, recorded in one history; each gated against the history of the other two passes, judged
over runs with the spread measured between them, and says what it could not see (with two runs
of history: any change)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")


def infer_prof(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infer_prof", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def test_identical_runs_pass_the_gate_against_their_history(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    runs = []
    for i in range(3):
        out = tmp_path / f"run-{i}.json"
        p = infer_prof("run", "--model", "tiny-llama", "-c", "4", "-n", "32", "--input-len", "32",
                       "--output-len", "16", "--seed", "1", "--enforce-eager", "--no-progress",
                       "--output", str(out), "--history-db", str(db))
        assert p.returncode == 0, p.stderr[-3000:]
        runs.append(out)
    for out in runs:
        gate = infer_prof("regress", "--baseline", "history:2", "--history", str(db),
                          "--current", str(out), "--json")
        assert gate.returncode == 0, gate.stdout + gate.stderr
        verdicts = json.loads(gate.stdout)
        assert verdicts["regression"] is False
        tpot = next(m for m in verdicts["metrics"] if m["name"] == "tpot_ms.p50")
        assert tpot["n_baseline"] == 2 and tpot["statistic"] == "value"
        assert tpot["spread_basis"] == "measured between 2 runs here"
        # two runs of history (1 degree of freedom) see nothing, and the verdict says so
        assert tpot["detectable_pct"] > 1000
        assert "this history cannot detect any change" in tpot["note"]
