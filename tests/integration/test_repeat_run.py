"""``run --repeat N`` end to end against the built-in synthetic server (real HTTP, a real
server process per launch, delays set exactly): N ordinary results, the repeats section on the
one closing the group, the server started afresh per repeat with --repeat-relaunch and the
launch spread stored in the history, compare showing the mean ± SD."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infer_prof.results.history import launch_spreads
from infer_prof.results.identity import config_fingerprint
from infer_prof.results.schema import load_typed_result

from .conftest import cli

pytestmark = pytest.mark.integration

LOAD = ("--server", "synthetic", "--model", "llama-2-7b", "-n", "12", "--input-len", "16",
        "--output-len", "8", "--warmup-requests", "1", "--no-progress",
        "--engine-arg=--ttft-ms 25", "--engine-arg=--itl-ms 5")


def _results(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.json") if not p.name.endswith(".sweep.json"))


def test_repeat_relaunch_starts_the_server_per_repeat_and_stores_the_launch_spread(tmp_path):
    db = tmp_path / "h.sqlite"
    p = cli("run", *LOAD, "-c", "2", "--repeat", "3", "--repeat-relaunch",
            "--results-dir", str(tmp_path), "--history", str(db))
    assert p.returncode == 0, p.stderr
    files = _results(tmp_path)
    assert [f.stem[-3:] for f in files] == ["-r1", "-r2", "-r3"]
    runs = [load_typed_result(f) for f in files]
    logs = {r.server.log_file for r in runs if r.server}
    assert len(logs) == 3  # three launches, each its own server process and log
    assert all(r.server and r.server.startup_s and r.server.startup_s > 0 for r in runs)
    assert not list(tmp_path.glob("*.sweep.json"))  # one point repeated is no sweep
    last = runs[-1].repeats
    assert last is not None and last.metrics is not None and last.relaunch is True
    assert last.run_ids == [r.run_id for r in runs] and last.group == runs[0].run_id
    tpot = last.metrics["tpot_ms.p50"]
    assert tpot.values == [r.summary.tpot_ms.p50 for r in runs if r.summary.tpot_ms]
    assert 4.0 < tpot.mean < 12.0  # the server's 5 ms between tokens, measured
    assert tpot.low is not None and tpot.high is not None and tpot.low < tpot.mean < tpot.high
    stored = launch_spreads(db, config_fingerprint(runs[-1]))
    assert stored["tpot_ms.p50"].n_runs == 3
    assert stored["tpot_ms.p50"].cv == pytest.approx(tpot.cv)
    assert "across 3 of 3 repeats (between launches)" in " ".join(p.stdout.split())
    shown = cli("compare", str(files[-1]), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    row = json.loads(shown.stdout)["rows"][0]
    assert row["repeats"] == 3 and row["tpot_p50"] == pytest.approx(tpot.mean)
    assert row["tpot_p50_sd"] == pytest.approx(tpot.sd)


def test_repeats_of_a_sweep_run_round_by_round_in_one_launch(tmp_path):
    p = cli("run", *LOAD, "-c", "1,2", "--repeat", "2", "--results-dir", str(tmp_path),
            "--no-history", "--json")
    assert p.returncode == 0, p.stderr
    points = json.loads(p.stdout)["points"]
    assert [(q["repeats"]["index"], q["repeats"]["count"]) for q in points] == [
        (1, 2), (1, 2), (2, 2), (2, 2)]
    groups = [q["repeats"]["group"] for q in points]
    assert groups[0] == groups[2] and groups[1] == groups[3] and groups[0] != groups[1]
    assert points[0]["repeats"]["metrics"] is None
    assert len(points[3]["repeats"]["metrics"]["request_throughput"]["values"]) == 2
    runs = [load_typed_result(f) for f in _results(tmp_path)]
    assert len({r.server.log_file for r in runs if r.server}) == 1  # one launch
