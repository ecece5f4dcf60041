"""benchmarks/estimate_ttft.py: the estimate's TTFT against published TTFT, by source and
concurrency band (the numbers are the benchmark's; this checks what it computes)."""

from __future__ import annotations

import json

import pytest

from infer_prof.catalog.published_results import published_results
from tests.benchmark_scripts import load_benchmark

bench = load_benchmark("estimate_ttft")


def test_every_vllm_closed_loop_point_with_a_ttft_is_compared_once() -> None:
    rows = bench.rows(published_results().points)
    assert len(rows) >= 200 and len({r.id for r in rows}) == len(rows)
    for r in rows:
        assert r.measured_ms > 0 and r.predicted_ms > 0
        assert r.error_pct == pytest.approx((r.predicted_ms / r.measured_ms - 1) * 100)
    assert {bench.band(r) for r in rows} == {label for _, _, label in bench.BANDS}


def test_stats_are_of_the_absolute_and_the_signed_error() -> None:
    s = bench.stats([-50.0, 10.0, 100.0])
    assert (s.n, s.median_abs_error_pct, s.median_error_pct) == (3, 50.0, 10.0)
    assert bench.stats([]) is None


def test_json_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["overall"]["n"] == len(doc["rows"])
    assert set(doc["by_band"]) <= {label for _, _, label in bench.BANDS}
