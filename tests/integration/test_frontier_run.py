"""`run --frontier --endpoint` against the synthetic server slowed by load in a known way
(ITL = itl_ms + b x streams in service): the points, the precision stop, the answer at a
target, and bad input (one line, exit 2, nothing measured lost)."""

import json

import pytest

from .conftest import cli

pytestmark = pytest.mark.integration

TTFT_MS, ITL_MS, SLOPE_MS, TOKENS = 20.0, 5.0, 2.0, 16
BASE = ("run", "--model", "llama-2-7b", "--no-progress", "--no-history",
        "--input-len", "16", "--output-len", str(TOKENS))


def exact(c: int) -> tuple[float, float]:
    """(interactivity tok/s/user, output tok/s) of c closed-loop streams on that server."""
    itl = ITL_MS + SLOPE_MS * c
    return 1000.0 / itl, c * TOKENS / ((TTFT_MS + (TOKENS - 1) * itl) / 1000.0)


def _sweep(folder):
    files = list(folder.glob("*.sweep.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


def test_frontier_measures_each_point_until_precise(synthetic, tmp_path):
    server = synthetic("--itl-per-stream-ms", str(SLOPE_MS), ttft_ms=TTFT_MS, itl_ms=ITL_MS,
                       tokens=TOKENS)
    target = exact(3)[0]
    p = cli(*BASE, "--endpoint", server.url, "--frontier", "--max-concurrency", "4",
            "--target-interactivity", f"{target:.3f}", "--gpu", "H100-SXM",
            "--price-per-hour", "2.0", "--results-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    f = _sweep(tmp_path)["frontier"]
    assert [pt["concurrency"] for pt in f["points"]] == [1, 2, 4]
    assert f["stopped_because"].startswith("max_concurrency")
    assert f["gpus"] == 1 and f["usd_per_gpu_hour"] == 2.0
    for pt in f["points"]:
        want_inter, want_out = exact(int(pt["concurrency"]))
        assert pt["interactivity"] == pytest.approx(want_inter, rel=0.03)
        assert pt["output_tok_s_per_gpu"] == pytest.approx(want_out, rel=0.05)
        prec = pt["precision"]
        # a steady server is known to ±2 % long before the 30 s / 5000-request ceiling
        assert prec["stopped_by"] == "precision" and prec["reached"]
        assert prec["output_throughput"]["rel_half_width"] <= 0.02
        assert prec["tpot_p50_ms"]["rel_half_width"] <= 0.02
        assert prec["seconds"] < 20 and pt["requests"] >= 20
        assert pt["pareto"]
    a = f["at_target"]
    assert a["interpolated"] and sorted(a["between"]) == [2.0, 4.0]
    assert a["output_tok_s_per_gpu"] == pytest.approx(exact(3)[1], rel=0.05)
    assert a["usd_per_million_output_tokens"] == pytest.approx(
        2.0 / (a["output_tok_s_per_gpu"] * 3600 / 1e6))
    assert "frontier" in p.stdout and "interpolated between 2 and 4" in p.stdout
    # the last point's result carries the frontier too (compare --target-interactivity reads it)
    last = json.loads(next(tmp_path.glob("*-c4.json")).read_text())
    assert last["frontier"]["at_target"] == a and last["kind"] == "infer-prof.run"


def test_target_out_of_reach_says_so_and_keeps_every_point(synthetic, tmp_path):
    server = synthetic("--itl-per-stream-ms", str(SLOPE_MS), ttft_ms=TTFT_MS, itl_ms=ITL_MS,
                       tokens=TOKENS)
    p = cli(*BASE, "--endpoint", server.url, "--frontier", "--concurrency", "1,2",
            "-n", "8", "--warmup-requests", "1", "--target-interactivity", "1000",
            "--results-dir", str(tmp_path))
    assert p.returncode == 2, p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "above the front" in errors[0]
    assert "not extrapolated" in errors[0]
    f = _sweep(tmp_path)["frontier"]
    assert len(f["points"]) == 2 and f["at_target"] is None
    assert f["target"]["reached"] is False
    assert all(pt["precision"] is None and pt["requests"] == 8 for pt in f["points"])
    assert len(list(tmp_path.glob("*-c[12].json"))) == 2


@pytest.mark.parametrize("extra, words", [
    (("--frontier", "--find-max", "--slo", "ttft_p99=100"), "--find-max"),
    (("--target-interactivity", "20"), "add --frontier"),
    (("--frontier", "--target-interactivity", "-3"), "positive"),
])
def test_bad_combinations_exit_2_before_anything_starts(tmp_path, extra, words):
    p = cli(*BASE, "--endpoint", "http://127.0.0.1:9", *extra, "--results-dir", str(tmp_path),
            timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().startswith("error:") and words in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*.json"))


def test_open_loop_frontier_varies_the_rate_and_stops_on_tpot_precision(synthetic, tmp_path):
    server = synthetic(ttft_ms=TTFT_MS, itl_ms=ITL_MS, tokens=TOKENS)
    p = cli(*BASE, "--endpoint", server.url, "--frontier", "--rate", "10,20",
            "--results-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    f = _sweep(tmp_path)["frontier"]
    assert f["loop"] == "open" and f["variable"].startswith("rate")
    assert [pt["concurrency"] for pt in f["points"]] == [10.0, 20.0]
    assert f["stopped_because"].startswith("list")
    for pt in f["points"]:
        prec = pt["precision"]
        # an open loop's throughput follows its Poisson arrivals: only TPOT p50 must be precise
        assert prec["throughput_required"] is False
        assert prec["stopped_by"] == "precision" and prec["tpot_p50_ms"]["rel_half_width"] <= 0.02
        assert pt["interactivity"] == pytest.approx(1000.0 / ITL_MS, rel=0.03)
    assert len(list(tmp_path.glob("*-r10.json")) + list(tmp_path.glob("*-r20.json"))) == 2


def test_frontier_over_the_nightly_suite_one_per_member(synthetic, tmp_path):
    server = synthetic("--itl-per-stream-ms", "1", ttft_ms=10.0, itl_ms=3.0)
    p = cli("run", "--model", "llama-3.1-8b", "--no-progress", "--no-history", "--endpoint",
            server.url, "--frontier", "--suite", "nightly", "--scale", "tiny",
            "--results-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    sweep = _sweep(tmp_path)
    members = [(f["workload"], f["loop"]) for f in sweep["frontiers"]]
    assert members == [("fixed-512-128", "closed"), ("chat", "closed"), ("chat", "open"),
                       ("rag", "closed"), ("codegen", "closed")]
    assert all(len(f["points"]) == 2 for f in sweep["frontiers"])
    assert sweep["frontier"] is None and "workload codegen (closed loop)" in p.stdout


def test_a_frontier_priced_as_a_rented_instance(synthetic, tmp_path, monkeypatch):
    """--instance prices every point: the frontier's $/GPU-hour is the instance's price over its
    GPUs, its source is named, and each point's $/1M is the point result's cost when the
    instance's GPUs are filled with copies of the engine (cost.filled)."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.sky/catalogs: the shipped snapshot
    server = synthetic("--itl-per-stream-ms", str(SLOPE_MS), ttft_ms=TTFT_MS, itl_ms=ITL_MS,
                       tokens=TOKENS)
    p = cli(*BASE, "--endpoint", server.url, "--frontier", "--concurrency", "1,2", "-n", "8",
            "--warmup-requests", "1", "--instance", "aws:p5.48xlarge:us-east-1",
            "--results-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    f = _sweep(tmp_path)["frontier"]
    per_gpu = f["usd_per_gpu_hour"]
    assert f["price"]["instance_type"] == "p5.48xlarge" and f["price"]["tier"] == "on-demand"
    assert f["price"]["cloud"] == "aws" and f["price"]["region"] == "us-east-1"
    for pt in f["points"]:
        c = int(pt["concurrency"])
        result = json.loads(next(tmp_path.glob(f"*-c{c}.json")).read_text())
        cost = result["cost"]
        assert per_gpu == pytest.approx(cost["usd_per_hour"] / 8)
        assert pt["usd_per_million_output_tokens"] == pytest.approx(
            per_gpu / (pt["output_tok_s_per_gpu"] * 3600 / 1e6))
        assert pt["usd_per_million_output_tokens"] == pytest.approx(
            cost["filled"]["usd_per_million_output_tokens"])


def test_frontier_output_names_the_frontier_file(synthetic, tmp_path, monkeypatch):
    """--output FILE: the sweep summary (the frontier) is FILE, each point's result beside it
    as <FILE stem>-<point>.json; nothing lands in the results folder (or the working one)."""
    server = synthetic("--itl-per-stream-ms", str(SLOPE_MS), ttft_ms=TTFT_MS, itl_ms=ITL_MS,
                       tokens=TOKENS)
    results, out = tmp_path / "results", tmp_path / "asked" / "front.json"
    p = cli(*BASE, "--endpoint", server.url, "--frontier", "--concurrency", "1,2", "-n", "8",
            "--warmup-requests", "1", "--results-dir", str(results), "--output", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["kind"] == "infer-prof.sweep"
    assert [pt["concurrency"] for pt in doc["frontier"]["points"]] == [1, 2]
    points = sorted(q.name for q in out.parent.glob("front-*.json"))
    assert points == ["front-c1.json", "front-c2.json"]
    assert f"sweep: {out}" in p.stderr
    assert not results.exists() or not list(results.glob("*.json"))
    # given again, the file is refused before anything runs (exit 2), unless --overwrite
    again = cli(*BASE, "--endpoint", server.url, "--frontier", "--concurrency", "1,2",
                "--output", str(out), timeout=60)
    assert again.returncode == 2 and "--overwrite" in again.stderr


def test_expected_cost_said_before_and_max_cost_refuses_before_anything_runs(synthetic, tmp_path):
    """The rented time and cost are said before the frontier starts; --max-cost below them (or
    with no price to check it by) refuses with one line, exit 2, nothing measured or written."""
    server = synthetic("--itl-per-stream-ms", str(SLOPE_MS), ttft_ms=TTFT_MS, itl_ms=ITL_MS,
                       tokens=TOKENS)
    priced = ("--endpoint", server.url, "--frontier", "--gpu", "H100-SXM", "--price-per-hour",
              "2.0", "--results-dir", str(tmp_path))
    # until precise, 1, 2, 4 streams: each point at its 35 s ceiling, $2/h -> about $0.06
    p = cli(*BASE, *priced, "--max-concurrency", "4", "--max-cost", "0.01", timeout=60)
    assert p.returncode == 2, p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "above --max-cost 0.01" in errors[0], p.stderr
    assert "expected rented time 1.8 min" in p.stderr and "3 points" in p.stderr
    assert not list(tmp_path.glob("*.json"))
    p = cli(*BASE, "--endpoint", server.url, "--frontier", "--max-cost", "5",
            "--results-dir", str(tmp_path), timeout=60)  # no --gpu, no price: cannot be checked
    assert p.returncode == 2 and "--max-cost 5 cannot be checked" in p.stderr
    assert not list(tmp_path.glob("*.json"))
    p = cli(*BASE, *priced, "--concurrency", "1,2", "-n", "8", "--warmup-requests", "1",
            "--max-cost", "1")
    assert p.returncode == 0, p.stderr
    assert "2 points); expected cost $" in p.stderr and "--price-per-hour" in p.stderr
    f = _sweep(tmp_path)["frontier"]
    assert len(f["points"]) == 2
    expected = f["expected_cost"]  # recorded beside what was measured
    assert len(expected["points_s"]) == 2 and expected["usd_per_hour"] == 2.0
    assert expected["usd"] == pytest.approx(expected["seconds"] / 3600 * 2.0)


def test_concurrencies_from_the_estimate_are_the_ones_measured(synthetic, tmp_path):
    """--concurrency-from-estimate: the levels said before the run (from the H100's predicted
    curve for llama-2-7b, capped by --max-concurrency) are exactly the points measured, as a
    list (no plateau stop), and fewer than the doubling would measure."""
    server = synthetic("--itl-per-stream-ms", str(SLOPE_MS), ttft_ms=TTFT_MS, itl_ms=ITL_MS,
                       tokens=TOKENS)
    p = cli(*BASE, "--endpoint", server.url, "--frontier", "--gpu", "H100-SXM",
            "--target-interactivity", "100", "--concurrency-from-estimate",
            "--max-concurrency", "16", "-n", "8", "--warmup-requests", "1",
            "--results-dir", str(tmp_path))
    said = [line for line in p.stderr.splitlines() if line.startswith("frontier from the estimate")]
    assert len(said) == 1, p.stderr
    listed = said[0].split("measuring ")[1].split(" (")[0]
    levels = [float(x) for x in listed.split(", ")]
    f = _sweep(tmp_path)["frontier"]
    assert [pt["concurrency"] for pt in f["points"]] == levels
    assert levels[0] == 1 and levels[-1] == 16 and len(levels) < 5  # doubling: 1..16 is 5
    assert f["stopped_because"].startswith("list")
    # this server's interactivity falls from 143 (1 stream) to 27 (16): 100 is bracketed
    assert p.returncode == 0, p.stderr
    assert f["at_target"] is not None and f["levels_from_estimate"] in said[0]
