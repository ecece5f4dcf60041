"""compare, regress and history as a user runs them, on result files made by real runs against
the synthetic server (a real socket; known delays): a planted 30 % slowdown of the inter-token
delay (20 ms -> 26 ms) must fail the gate, two runs of one configuration must pass it."""

from __future__ import annotations

import copy
import csv
import io
import json
import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from infer_prof.results.document import decode_result as typed
from infer_prof.results.identity import config_fingerprint
from infer_prof.results.loading import record_result
from infer_prof.results.store import write_result
from infer_prof.run.calibrate import start_synthetic
from tests.integration.conftest import cli


def _run(url: str, folder: Path, label: str, concurrency: int = 4) -> Path:
    p = cli(
        "run",
        "--endpoint",
        url,
        "--model",
        "llama-2-7b",
        "-c",
        str(concurrency),
        "-n",
        "60",
        "--input-len",
        "32",
        "--output-len",
        "16",
        "--results-dir",
        str(folder),
        "--label",
        f"instance={label}",
        "--no-progress",
        "--no-history",
    )
    assert p.returncode == 0, p.stderr
    (path,) = [q for q in folder.glob("*.json")]
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """a1, a2: two runs against one server (TTFT 20 ms, ITL 20 ms); b: ITL 26 ms (30 % slower,
    far beyond what a loaded 2-core machine's scheduling adds between two runs); c: the first
    server at concurrency 8 (different settings)."""
    root = tmp_path_factory.mktemp("cmp")
    out: dict[str, Path] = {}
    base = start_synthetic(20.0, 20.0, 16)
    try:
        out["a1"] = _run(base.url, root / "a1", "a1")
        out["a2"] = _run(base.url, root / "a2", "a2")
        out["c"] = _run(base.url, root / "c", "c", concurrency=8)
    finally:
        base.stop()
    slow = start_synthetic(20.0, 26.0, 16)
    try:
        out["b"] = _run(slow.url, root / "b", "b")
    finally:
        slow.stop()
    return out


def test_planted_slowdown_fails_the_gate_with_junit_failures(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    p = cli(
        "regress",
        "--baseline",
        str(runs["a1"]),
        "--current",
        str(runs["b"].parent),  # a folder works too
        "--junit",
        str(junit),
        "--markdown",
        str(md),
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert "REGRESSION" in p.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    failed = {c.get("name") for c in suite.findall("testcase") if c.find("failure") is not None}
    # every token after the first is 30 % later: TPOT, and E2E (20 + 15 x 20 -> 20 + 15 x 26 ms)
    assert {"tpot_ms.p50", "e2e_ms.p50"} <= failed
    assert "ttft_ms.p50" not in failed
    assert "**REGRESSION**" in md.read_text()


def test_same_configuration_twice_passes_the_gate(runs: dict[str, Path], tmp_path: Path) -> None:
    junit = tmp_path / "gate.xml"
    p = cli(
        "regress",
        "--baseline",
        str(runs["a1"]),
        "--current",
        str(runs["a2"]),
        "--junit",
        str(junit),
        "--json",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    payload = json.loads(p.stdout)
    assert payload["regression"] is False and payload["regressions"] == []
    names = [m["name"] for m in payload["metrics"]]
    assert names[:2] == ["request_throughput", "output_throughput"]
    assert "itl_ms.p99" in names
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"


def test_regress_bad_input_exits_2(runs: dict[str, Path], tmp_path: Path) -> None:
    p = cli("regress", "--baseline", str(runs["a1"]), "--current", str(runs["c"]))
    assert p.returncode == 2
    assert "concurrency" in p.stderr and "--force" in p.stderr
    p = cli("regress", "--baseline", str(tmp_path / "nothing"), "--current", str(runs["a1"]))
    assert p.returncode == 2 and "no such file" in p.stderr
    p = cli("regress", "--baseline", str(runs["a1"]), "--current", str(runs["a2"]), "-t", "x")
    assert p.returncode == 2 and "--threshold" in p.stderr


def test_compare_refuses_differing_settings_unless_forced(runs: dict[str, Path]) -> None:
    p = cli("compare", str(runs["a1"]), str(runs["c"]))
    assert p.returncode == 2
    assert "concurrency: 4" in p.stderr and "8" in p.stderr and "--force" in p.stderr
    p = cli("compare", str(runs["a1"]), str(runs["c"]), "--force", "--format", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["differing_fields"]["concurrency"] == [4, 8]


def test_compare_outputs_parse(runs: dict[str, Path]) -> None:
    args = (str(runs["a1"]), str(runs["b"]))
    p = cli("compare", *args, "--format", "csv")
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    assert [r["label"] for r in rows] == ["instance=a1", "instance=b"]
    assert float(rows[0]["tpot_p50"]) < float(rows[1]["tpot_p50"])
    assert "tpot_p50" in rows[0]["best_in"].split(";")  # the faster run is best
    assert rows[0]["usd_per_hour"] == ""  # no price on a CPU run: empty, not 0

    p = cli("compare", *args, "--format", "json")
    data = json.loads(p.stdout)
    assert len(data["rows"]) == 2 and data["best"]["tpot_p50"] == [0]
    assert data["rows"][0]["gpu"] == "cpu" and data["rows"][0]["concurrency"] == 4

    p = cli("compare", *args, "--format", "markdown")
    table = [line for line in p.stdout.splitlines() if line.startswith("|")]
    assert len(table) == 4 and len({line.count("|") for line in table}) == 1
    assert "**" in table[2] and "n/a" in table[2]

    p = cli("compare", str(runs["a1"].parent.parent / "*" / "*.json"), "--force")
    assert p.returncode == 0, p.stderr
    assert "instance=a1" in p.stdout and "instance=c" in p.stdout and "*" in p.stdout


def _variant(result: dict[str, Any], i: int, tput: float) -> dict[str, Any]:
    r = copy.deepcopy(result)
    r["run_id"] = f"night-{i:02d}"
    r["started_at"] = f"2026-01-{i + 1:02d}T02:00:00+00:00"
    r["summary"]["output_throughput"] = tput
    return r


def test_history_lists_runs_and_shows_a_planted_change_point(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    db = tmp_path / "history.sqlite"
    base = json.loads(runs["a1"].read_text())
    rng = random.Random(7)
    # 14 nights: output throughput ~1000 tok/s, then 20 % lower from night 8 on
    values = [1000.0 + rng.gauss(0, 5) for _ in range(8)] + [
        800.0 + rng.gauss(0, 5) for _ in range(6)
    ]
    for i, v in enumerate(values):
        record_result(db, _variant(base, i, v), None)
    record_result(db, json.loads(runs["c"].read_text()), runs["c"])

    p = cli("history", "--db", str(db), "--json", "--limit", "0")
    assert p.returncode == 0, p.stderr
    listed = json.loads(p.stdout)
    assert len(listed) == 15
    assert listed[0]["run_id"] == json.loads(runs["c"].read_text())["run_id"]  # newest first
    assert listed[1]["run_id"] == "night-13"
    p = cli("history", "--db", str(db), "--label", "instance=c", "--json")
    assert [r["concurrency"] for r in json.loads(p.stdout)] == [8]

    # two configurations: --metric needs one named
    p = cli("history", "--db", str(db), "--metric", "output_throughput")
    assert p.returncode == 2 and "--fingerprint" in p.stderr
    p = cli(
        "history", "--db", str(db), "--metric", "output_throughput", "--config", str(runs["a1"])
    )
    assert p.returncode == 0, p.stderr
    marked = [line for line in p.stdout.splitlines() if "<<" in line]
    assert len(marked) == 1 and "night-08" in marked[0] and "worse" in marked[0]
    assert re.search(r"<< -(19|20)\.\d%", marked[0]), marked[0]
    fp = config_fingerprint(typed(base))
    p = cli(
        "history", "--db", str(db), "--metric", "output_throughput", "--fingerprint", fp, "--json"
    )
    trend = json.loads(p.stdout)
    assert [pt["value"] for pt in trend["points"]] == pytest.approx(values)
    (cp,) = trend["change_points"]
    assert cp["index"] == 8 and cp["run_id"] == "night-08"
    assert cp["change_pct"] == pytest.approx(-20.0, abs=1.5)

    # the gate against the history: the last 5 nights (all ~800) vs a run at 1000 tok/s is fine;
    # vs a current run at 700 tok/s it is a regression
    for tput, code in ((800.0, 0), (700.0, 1)):
        cur = _variant(base, 20, tput)
        cur_path = tmp_path / f"cur-{int(tput)}.json"
        write_result(cur_path, cur)
        p = cli(
            "regress",
            "--baseline",
            "history:5",
            "--history",
            str(db),
            "--current",
            str(cur_path),
            "--json",
        )
        assert p.returncode == code, p.stdout + p.stderr
        out = {m["name"]: m for m in json.loads(p.stdout)["metrics"]}
        assert out["output_throughput"]["n_baseline"] == 5
        assert out["output_throughput"]["regression"] is (code == 1)


def test_confirm_fails_only_when_the_rerun_agrees(runs: dict[str, Path], tmp_path: Path) -> None:
    # the slow run looked regressed; a rerun at the old speed (a2) does not agree: passes
    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    p = cli("regress", "--baseline", str(runs["a1"]), "--current", str(runs["b"]),
            "--confirm", str(runs["a2"]), "--junit", str(junit), "--markdown", str(md))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "not confirmed by the rerun" in p.stdout
    text = md.read_text()
    assert "| rerun | rerun change |" in text and "the rerun did not: passes" in text
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
    out = {c.get("name"): c.findtext("system-out") or "" for c in suite.findall("testcase")}
    assert "confirming rerun" in out["tpot_ms.p50"] and "not a regression" in out["tpot_ms.p50"]
    # a rerun as slow as the first measurement agrees: fails, both measurements shown
    p = cli("regress", "--baseline", str(runs["a1"]), "--current", str(runs["b"]),
            "--confirm", str(runs["b"]), "--junit", str(junit), "--markdown", str(md))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "REGRESSION, confirmed" in p.stdout
    failed = [c for c in ET.parse(junit).iter("testcase") if c.find("failure") is not None]
    assert "tpot_ms.p50" in {c.get("name") for c in failed}
    assert "in the confirming rerun" in (failed[0].find("failure").get("message") or "")
    assert "**REGRESSION, confirmed**" in md.read_text()


def test_the_earlier_within_run_gate_is_kept_to_compare(runs: dict[str, Path]) -> None:
    p = cli("regress", "--baseline", str(runs["a1"]), "--current", str(runs["b"]),
            "--within-run", "--json")
    assert p.returncode == 1, p.stdout + p.stderr
    tpot = next(m for m in json.loads(p.stdout)["metrics"] if m["name"] == "tpot_ms.p50")
    assert tpot["statistic"] == "p50" and "bootstrap" in tpot["method"]
    p = cli("regress", "--baseline", str(runs["a1"]), "--current", str(runs["a2"]),
            "--assumed-spread", "ten")
    assert p.returncode == 2 and "--assumed-spread" in p.stderr


def test_a_launch_spread_stored_in_the_history_replaces_the_assumed_one(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    from infer_prof.results import history
    from infer_prof.results.schema import load_result

    db = tmp_path / "h.sqlite"
    fp = config_fingerprint(typed(load_result(runs["b"])))
    history.record_launch_spread(db, fp, "tpot_ms.p50", 0.5, 8, source="run --repeat-relaunch")
    p = cli("regress", "--baseline", str(runs["a1"]), "--current", str(runs["b"]),
            "--history", str(db), "--json")
    metrics = {m["name"]: m for m in json.loads(p.stdout)["metrics"]}
    tpot = metrics["tpot_ms.p50"]
    assert tpot["spread_basis"] == (
        f"launch spread measured on 8 launches, run --repeat-relaunch, in {db}")
    assert not tpot["regression"] and tpot["detectable_pct"] > 100  # 50 % between launches
    assert metrics["e2e_ms.p50"]["spread_basis"] == "assumed 2.0 %, not measured"
    assert metrics["e2e_ms.p50"]["regression"] and p.returncode == 1
