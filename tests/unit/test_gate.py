"""The earlier (within-run) regression gate's pieces on hand-made data: samples from records,
thinning, the rule for tail percentiles, verdicts, JUnit/Markdown output, thresholds, and recording
a result."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import typer

from infer_prof.cli.regress import parse_thresholds
from infer_prof.core.analysis.regression import Significance
from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.measurement.stats import percentile
from infer_prof.report.junit import junit_xml
from infer_prof.report.markdown import regress_markdown
from infer_prof.results import history
from infer_prof.results.document import decode_result as typed
from infer_prof.results.gate import (
    RunData,
    evaluate_within_run,
    samples_from_records,
    thin,
    too_few_beyond,
    verdict,
)
from infer_prof.results.identity import config_fingerprint
from infer_prof.results.loading import record_result

MS = 1_000_000


def rec(index: int, send: int, chunks: list[int], tokens: int, **kw: Any) -> RequestRecord:
    return RequestRecord(
        index=index,
        input_len=8,
        max_tokens=tokens,
        send_ns=send,
        chunk_ns=chunks,
        chunk_tokens=[1] * len(chunks),
        done_ns=chunks[-1] if chunks else None,
        output_tokens=tokens,
        prompt_tokens=8,
        **kw,
    )


def test_samples_from_records_hand_computed() -> None:
    records = [
        # TTFT 20 ms, then gaps of 5 and 7 ms: E2E 32, TPOT (32-20)/2 = 6
        rec(0, 0, [20 * MS, 25 * MS, 32 * MS], 3),
        # one token: TPOT undefined, no ITL
        rec(1, 100 * MS, [110 * MS], 1),
        rec(2, 0, [1 * MS, 2 * MS], 2, warmup=True),  # warm-up: left out
        rec(3, 0, [], 0, error="timeout"),  # failed: left out
    ]
    s = samples_from_records(records)
    assert s["ttft_ms"] == [20.0, 10.0]
    assert s["e2e_ms"] == [32.0, 10.0]
    assert s["tpot_ms"] == [6.0]
    assert s["itl_ms"] == [5.0, 7.0]


def test_thin_keeps_small_samples_and_the_percentiles_of_large_ones() -> None:
    assert thin([3.0, 1.0, 2.0], 5) == [3.0, 1.0, 2.0]
    rng = random.Random(3)
    xs = [rng.lognormvariate(1.0, 0.5) for _ in range(20_000)]
    t = thin(xs, 2001)
    assert len(t) == 2001
    assert t == sorted(t) and t[0] == min(xs) and t[-1] == max(xs)
    for q in (50.0, 90.0, 99.0):
        full, thinned = percentile(xs, q), percentile(t, q)
        assert full is not None and thinned is not None
        assert thinned == pytest.approx(full, rel=1e-3)


def test_too_few_beyond_tail_percentiles_only() -> None:
    assert too_few_beyond("p99", 60, 60)  # 0.6 values beyond p99
    assert not too_few_beyond("p99", 2000, 3000)  # 20 beyond p99 on the smaller side
    assert too_few_beyond("p99", 1999, 3000)
    assert not too_few_beyond("p50", 10, 10)
    assert too_few_beyond("p90", 100, 1000) and not too_few_beyond("p90", 200, 1000)
    assert not too_few_beyond("mean", 5, 5)


def test_thin_tail_is_reported_but_never_a_regression() -> None:
    out = {
        c.name: c for c in evaluate_within_run([_side(1, 1.0, 1000.0)], [_side(2, 1.3, 1000.0)],
                                    significance=Significance(n_boot=200))
    }
    p99 = out["tpot_ms.p99"]
    assert p99.change_pct is not None and p99.change_pct > 25
    assert p99.crosses_threshold and not p99.significant and not p99.regression
    assert "too few samples beyond p99" in p99.note
    assert verdict(p99) == "worse, not significant"
    assert out["tpot_ms.p50"].regression


def _side(seed: int, scale: float, tput: float, n: int = 300) -> RunData:
    rng = random.Random(seed)
    samples = {
        "ttft_ms": [rng.gauss(50.0, 2.0) for _ in range(n)],
        "tpot_ms": [rng.gauss(10.0 * scale, 0.3) for _ in range(n)],
        "itl_ms": [rng.gauss(10.0 * scale, 1.0) for _ in range(4 * n)],
        "e2e_ms": [rng.gauss(50.0 + 1270.0 * scale, 20.0) for _ in range(n)],
    }
    return RunData(
        run_id=f"r{seed}",
        source=f"r{seed}",
        values={"request_throughput": tput / 128, "output_throughput": tput},
        samples=samples,
    )


def test_planted_ten_percent_slowdown_is_caught() -> None:
    out = {c.name: c for c in evaluate_within_run([_side(1, 1.0, 1000.0)], [_side(2, 1.1, 910.0)],
                                       significance=Significance(n_boot=400))}
    for name in ("tpot_ms.p50", "itl_ms.p50", "e2e_ms.p50", "output_throughput"):
        assert out[name].regression, name
        assert verdict(out[name]) == "REGRESSION"
    assert out["tpot_ms.p50"].change_pct == pytest.approx(10.0, abs=1.0)
    assert out["output_throughput"].significant is None  # one run a side: threshold alone
    assert not out["ttft_ms.p50"].regression  # TTFT was not slowed
    assert [c.name for c in out.values()][:2] == ["request_throughput", "output_throughput"]


def test_same_distribution_is_not_flagged() -> None:
    out = evaluate_within_run([_side(1, 1.0, 1000.0)], [_side(2, 1.0, 1003.0)],
                   significance=Significance(n_boot=400))
    assert [c.name for c in out if c.regression] == []
    assert len(out) == 2 + 8  # no cost or energy on either side: not compared


def test_history_style_sides_use_per_run_values() -> None:
    base = [
        RunData(f"h{i}", "h", {"output_throughput": v, "ttft_ms.p99": 40.0 + i % 2})
        for i, v in enumerate([1000.0, 1010.0, 990.0, 1005.0, 995.0])
    ]
    cur = [RunData("c", "c", {"output_throughput": 850.0, "ttft_ms.p99": 40.5})]
    out = {c.name: c for c in evaluate_within_run(base, cur)}
    assert set(out) == {"output_throughput", "ttft_ms.p99"}
    assert out["output_throughput"].regression
    assert "prediction-interval" in out["output_throughput"].method
    assert not out["ttft_ms.p99"].regression


def test_thresholds_parse_and_apply() -> None:
    assert parse_thresholds(["5%", "ttft_ms.p99=10%", "itl_ms.*=20"]) == {
        "*": 5.0,
        "ttft_ms.p99": 10.0,
        "itl_ms.*": 20.0,
    }
    with pytest.raises(typer.Exit):
        parse_thresholds(["ten"])
    with pytest.raises(typer.Exit):
        parse_thresholds(["=5%"])
    out = {
        c.name: c
        for c in evaluate_within_run(
            [_side(1, 1.0, 1000.0)],
            [_side(2, 1.1, 910.0)],
            thresholds={"tpot_ms.*": 15.0},
            default_threshold_pct=12.0,
            significance=Significance(n_boot=400),
        )
    }
    assert not out["tpot_ms.p50"].regression and out["tpot_ms.p50"].threshold_pct == 15.0
    assert not out["output_throughput"].regression  # -9 % is under 12 %


def test_junit_and_markdown_outputs_parse() -> None:
    comps = evaluate_within_run([_side(1, 1.0, 1000.0)], [_side(2, 1.1, 910.0)],
                     significance=Significance(n_boot=400))
    root = ET.fromstring(junit_xml(comps, properties={"baseline": "a"}))
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == len(comps) == int(suite.get("tests", "0"))
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert failed == {c.name for c in comps if c.regression}
    assert int(suite.get("failures", "-1")) == len(failed) > 0
    md = regress_markdown(comps, [verdict(c) for c in comps], "a", "b", ["note one"])
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert len(table) == 2 + len(comps)
    assert all(line.count("|") == 11 for line in table)
    assert "**REGRESSION**" in md and "- note one" in md


def _result(run_id: str, started: str, tput: float) -> dict[str, Any]:
    return {
        "kind": "infer-prof.run",
        "schema_version": 1,
        "run_id": run_id,
        "started_at": started,
        "complete": True,
        "config": {"model": "tiny-llama", "concurrency": 4, "input_len": 32, "output_len": 16},
        "labels": {"instance": "a"},
        "model": {"name": "tiny-llama"},
        "environment": {"gpu_name": None, "cpu": "Xeon", "git_revision": "abc"},
        "summary": {"output_throughput": tput, "ttft_ms": {"p99": float("nan")}},
        "cost": {"available": True, "usd_per_million_output_tokens": 1.5, "provider": "x"},
        "energy": None,
    }


def test_record_result_stores_summary_cost_and_fingerprint(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    r = _result("run-1", "2026-01-01T02:00:00+00:00", 500.0)
    fp = record_result(db, r, tmp_path / "run-1.json")
    assert fp == config_fingerprint(typed(r))
    (row,) = history.list_runs(db)
    assert row.run_id == "run-1" and row.config_fingerprint == fp
    assert row.gpu == "cpu" and row.model == "tiny-llama" and row.concurrency == 4
    assert row.labels == {"instance": "a"} and row.git_rev == "abc"
    assert row.result_path == str(tmp_path / "run-1.json")
    m = row.metrics()
    assert m["output_throughput"] == 500.0
    assert m["cost.usd_per_million_output_tokens"] == 1.5
    assert "ttft_ms.p99" not in m  # NaN: not measured, not stored
