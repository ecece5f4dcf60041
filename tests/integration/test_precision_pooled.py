"""The precision stop of `run --frontier` over several client processes (`--client-processes
2`): against the synthetic server, a point stops once precise, long before the rule's ceiling,
and its `precision_stop` block agrees with the per-request records the run wrote."""

import json
import statistics

import pytest

from infer_prof.core.measurement.metrics import tpot_ns
from infer_prof.results.store import read_requests

from .conftest import cli

pytestmark = pytest.mark.integration

TTFT_MS, ITL_MS, SLOPE_MS, TOKENS = 20.0, 5.0, 2.0, 16
BASE = ("run", "--model", "llama-2-7b", "--no-progress", "--no-history",
        "--input-len", "16", "--output-len", str(TOKENS), "--client-processes", "2")


def _check_point(folder, name: str) -> tuple[dict, list]:
    """The point's result and its measured records, with the checks every point passes: two
    processes, measured until precise, and the block's figures those of the records."""
    result = json.loads(next(folder.glob(f"*-{name}.json")).read_text())
    recs = read_requests(next(folder.glob(f"*-{name}.requests.jsonl")))
    assert result["complete"] and result["client"]["processes"] == 2
    assert all(w["requests"] > 0 and w["error"] is None for w in result["client"]["workers"])
    prec = result["precision_stop"]
    assert prec["stopped_by"] == "precision" and prec["reached"]
    # a steady server is known to ±2 % long before the 30 s / 5000-request ceiling
    assert 5.0 <= prec["seconds"] < 20
    measured = [r for r in recs if not r.warmup and r.ok]
    assert prec["requests"] == len(measured) == result["summary"]["requests_completed"] >= 20
    tpots = sorted(t / 1e6 for r in measured if (t := tpot_ns(r)) is not None)
    assert prec["tpot_p50_ms"]["estimate"] == pytest.approx(statistics.median(tpots), abs=1e-4)
    assert prec["tpot_p50_ms"]["rel_half_width"] <= 0.02
    return result, measured


@pytest.mark.parametrize("warmup", [(), ("--warmup-requests", "4")],
                         ids=["warmed-under-the-load", "warm-up-requests-first"])
def test_closed_loop_over_two_processes_stops_when_precise(synthetic, tmp_path, warmup):
    server = synthetic("--itl-per-stream-ms", str(SLOPE_MS), ttft_ms=TTFT_MS, itl_ms=ITL_MS,
                       tokens=TOKENS)
    p = cli(*BASE, "--endpoint", server.url, "--frontier", "--concurrency", "4",
            "--max-concurrency", "4", *warmup, "--results-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    result, measured = _check_point(tmp_path, "c4")
    # the window starts where measuring does: a warm-up under the load, or the start gate
    assert result["warmup"]["ended_by"] == ("requests" if warmup else "steady")
    prec = result["precision_stop"]
    assert prec["throughput_required"] is True
    tp = prec["output_throughput"]
    assert tp["rel_half_width"] <= 0.02
    # the batch means of the workers' token arrivals: the throughput the records give
    assert tp["estimate"] == pytest.approx(result["summary"]["output_throughput"],
                                           rel=0.05)
    itl = ITL_MS + SLOPE_MS * 4
    exact = 4 * TOKENS / ((TTFT_MS + (TOKENS - 1) * itl) / 1000.0)
    assert tp["estimate"] == pytest.approx(exact, rel=0.05)
    assert {r.worker for r in measured} == {0, 1, 2, 3}  # all four streams, over two processes
    f = json.loads(next(tmp_path.glob("*.sweep.json")).read_text())["frontier"]
    assert f["points"][0]["precision"] == prec


def test_open_loop_over_two_processes_stops_on_tpot_precision(synthetic, tmp_path):
    server = synthetic(ttft_ms=TTFT_MS, itl_ms=ITL_MS, tokens=TOKENS)
    p = cli(*BASE, "--endpoint", server.url, "--frontier", "--rate", "10,20",
            "--max-concurrency", "8", "--results-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    for name in ("r10", "r20"):
        result, measured = _check_point(tmp_path, name)
        assert result["precision_stop"]["throughput_required"] is False
        # open loop: a record's worker is its process
        assert {r.worker for r in measured} == {0, 1}
