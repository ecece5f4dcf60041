"""`infer-prof estimate`: the JSON names scripts read, the ranking, the price arithmetic, the
80-column table, and one line + exit 2 for bad input (issue 37)."""

from __future__ import annotations

import json
import re
from importlib import resources

import msgspec
import pytest

from infer_prof.results.frontier_sections import AtTarget
from tests.unit.estimate_cli import no_sky_home, run  # noqa: F401 (autouse fixture)

GPUS = ("--gpu", "H100-SXM", "--gpu", "A100-80GB-SXM", "--gpu", "L40S")


@pytest.fixture(scope="module")
def doc():
    res = run("--model", "llama-2-7b", *GPUS, "--input-len", "512", "--output-len", "128",
              "--target-interactivity", "40", "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_json_names_scripts_read(doc):
    assert doc["kind"] == "estimate" and doc["predicted"] is True and doc["read_at"] == "target"
    assert {r["gpu"] for r in doc["rows"]} == {"H100-SXM", "A100-80GB-SXM", "L40S"}
    shipped = (resources.files("infer_prof.catalog.data") / "estimate_errors.json").is_file()
    for row in doc["rows"]:
        assert {"gpu", "gpu_count", "precision", "points", "at_target",
                "usd_per_million_output_tokens", "instance", "predicted",
                "expected_error_pct"} <= set(row)
        assert row["predicted"] is True
        if not shipped:
            assert row["expected_error_pct"] is None
        for p in row["points"]:
            assert {"concurrency", "output_tok_s_per_gpu", "interactivity", "ttft_ms_p50",
                    "tpot_ms_p50"} <= set(p)
        assert [p["concurrency"] for p in row["points"]][:3] == [1, 2, 4]
        if row["at_target"] is not None:  # the shape of a result file's frontier.at_target
            assert set(row["at_target"]) == set(AtTarget.__struct_fields__)
    if not shipped:
        assert doc["expected_error"] == "expected error: not yet validated"


def test_rows_cheapest_first_and_priced_as_design_says(doc):
    from infer_prof.estimate.document import Row
    from infer_prof.estimate.ranking import rank_key

    reached = [r for r in doc["rows"] if r["usd_per_million_output_tokens"] is not None]
    assert len(reached) >= 2
    keys = [rank_key(msgspec.convert(r, Row), doc["rank_by"]) for r in reached]
    assert keys == sorted(keys)  # validated rows by their slow end first, then the rest
    assert doc["rows"][: len(reached)] == reached  # rows without a read come last
    for r in reached:
        # $ per 1M = $/GPU-hour / (tokens/s per GPU x 3600 / 1e6)
        per_gpu_hour = r["instance"]["usd_per_gpu_hour"]
        tok_s = r["at_target"]["output_tok_s_per_gpu"]
        assert r["usd_per_million_output_tokens"] == pytest.approx(per_gpu_hour / (tok_s * 3.6e-3))
        assert r["tpot_ms_p50"] == pytest.approx(1000 / 40)
        # read between the predicted points around 40 tokens/s per user, never beyond them
        lo, hi = r["at_target"]["between"]
        pts = {p["concurrency"]: p for p in r["points"]}
        ys = sorted((pts[lo]["output_tok_s_per_gpu"], pts[hi]["output_tok_s_per_gpu"]))
        assert ys[0] <= tok_s <= ys[1]


def test_slo_read_and_instance_pricing():
    res = run("--model", "llama-2-7b", "--gpu", "H100-SXM", "--slo", "tpot_p99=20",
              "--instance", "aws:p5.48xlarge", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    (row,) = d["rows"]
    assert d["read_at"] == "slo" and row["tpot_ms_p50"] <= 20
    assert row["instance"]["cloud"] == "aws"
    assert row["instance"]["instance_type"] == "p5.48xlarge"
    # the best point meeting it: the next one up breaks the SLO
    faster = [p for p in row["points"] if p["tpot_ms_p50"] <= 20]
    assert row["at_target"]["total_tok_s_per_gpu"] == max(p["total_tok_s_per_gpu"] for p in faster)


def test_console_table_fits_80_columns_and_says_predicted():
    res = run("--model", "llama-2-7b", *GPUS, "--target-interactivity", "40", columns=80)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert "PREDICTED" in lines[0]
    assert any(line.startswith("factors for ") for line in lines)
    # the fitted factors (estimate_factors.json)
    assert "published vLLM closed-loop points" in res.stdout
    assert any("expected error" in line for line in lines)


def test_the_whole_markets_80_column_table_keeps_each_rows_error_and_cost():
    """Over the whole market the longest GPU, configuration and instance names are cut short
    with an ellipsis, so every row keeps its cost and its error interval (or 'unvalidated')."""
    res = run("--model", "llama-3.1-70b", "--input-len", "1024", "--output-len", "1024",
              "--target-interactivity", "30", columns=80)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    header = next(line for line in lines if line.lstrip().startswith("GPU"))
    assert "$/1M out" in header and "error" in header and "tok/s/GPU" in header
    rows = [line for line in lines[lines.index(header) + 2:] if line.strip()][:10]
    assert all(re.search(r"\d\.\d\d\s+(±\d+%|unvalidated)", row) for row in rows), rows


@pytest.mark.parametrize(("args", "says"), [
    (("--model", "llama-2-7b", "--gpu", "H10"), "unknown GPU 'H10'; nearest: "),
    (("--model", "no-such-model"), "unknown model 'no-such-model'"),
    (("--model", "llama-2-7b", "--input-len", "0"), "--input-len must be a positive integer"),
    (("--model", "llama-2-7b", "--target-interactivity", "-1"),
     "--target-interactivity must be a positive number"),
    (("--model", "llama-2-7b", "--quantization", "fp7"), "unknown quantization 'fp7'"),
    (("--model", "llama-2-7b", "--cloud", "awz"), "--cloud awz: no such cloud"),
    (("--model", "llama-3.1-70b", "--gpu", "L4", "--gpus", "1"),
     "llama-3.1-70b fits on none of the GPUs asked (L4)"),
    (("--model", "llama-2-7b", "--gpu", "H100-SXM", "--target-interactivity", "5000"),
     "no configuration reaches 5000 tokens/s per user"),
])
def test_bad_input_one_line_exit_2(args, says):
    res = run(*args)
    assert res.exit_code == 2, res.output
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and says in errors[0], res.stderr


def test_report_draws_predicted_frontiers_dashed_beside_measured(tmp_path):
    from infer_prof.estimate.curves import EstimateFileError, load_estimate, predicted_curves
    from infer_prof.report.frontier_section import frontier_section
    from tests.unit.test_report_frontier import _runs

    res = run("--model", "llama-2-7b", "--gpu", "H100-SXM", "--gpu", "L4", "--json")
    assert res.exit_code == 0, res.output
    path = tmp_path / "estimate.json"
    path.write_text(res.stdout)
    curves = predicted_curves(load_estimate(path))
    names = [f"{r['gpu_count']}x {r['gpu']}" if r["gpu_count"] > 1 else r["gpu"]
             for r in json.loads(res.stdout)["rows"]]
    assert [c.gpu for c in curves] == names
    plots: list = []
    html = frontier_section(_runs(), plots, target=60.0, predicted=curves)
    svg = plots[0].svg
    series = re.findall(r'data-series="([^"]+) · predicted"', svg)
    assert set(series) >= set(names)
    # dashed, and the measured fronts still there; the table reads measured curves only
    assert re.search(r'data-series="H100-SXM · predicted"><polyline [^>]*'
                     r'stroke-dasharray="6 3"', svg)
    assert 'data-series="H100-SXM · cloud=a · front"' in svg
    assert "predicted" not in html.split("frontier-at-target")[1]
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "something else"}')
    with pytest.raises(EstimateFileError, match="not an infer-prof estimate --json file"):
        load_estimate(bad)


def test_tensor_parallel_counts_the_allreduce_over_nvlink_and_over_pcie():
    res = run("--model", "llama-3.1-70b", "--gpu", "H100-SXM", "--gpu", "L40S", "--gpus",
              "4", "--input-len", "1024", "--output-len", "256", "--json")
    assert res.exit_code == 0, res.output
    rows = {r["gpu"]: r for r in json.loads(res.stdout)["rows"]}
    assert rows["H100-SXM"]["gpu_count"] == 4 == rows["L40S"]["gpu_count"]
    assert rows["H100-SXM"]["interconnect"] == "nvlink"
    assert not any("all-reduce" in n for n in rows["H100-SXM"]["notes"])
    assert rows["L40S"]["interconnect"] == "pcie" and rows["L40S"]["interconnect_gbps"] == 64
    assert any("all-reduce over PCIe (PCIe Gen4 x16" in n for n in rows["L40S"]["notes"])
    assert not any("not counted" in n for r in rows.values() for n in r["notes"])


@pytest.mark.parametrize(("extra", "heading"), [
    ((), "at each configuration's highest throughput"),
    (("--slo", "ttft_p99=2000"), "at the best point meeting"),
])
def test_the_table_reads_at_an_slo_or_at_the_highest_throughput(extra, heading):
    res = run("--model", "llama-2-7b", "--gpu", "H100-SXM", "--input-len", "512",
              "--output-len", "128", *extra)
    assert res.exit_code == 0, res.output
    assert heading in " ".join(res.stdout.split()) and "H100-SXM" in res.stdout


def test_an_moe_model_says_its_layers_fixed_time_and_a_dense_one_does_not():
    # core/estimate/moe_layer.py: 30 us a step for each MoE layer; qwen3-30b-a3b has 48
    res = run("--model", "qwen3-30b-a3b", "--gpu", "H100-SXM", "--target-interactivity", "30",
              columns=200)
    assert res.exit_code == 0, res.output
    line = next(x for x in res.stdout.splitlines() if x.startswith("MoE layers: "))
    assert "1.44 ms a step" in line and "48 x 30 us" in line
    doc = json.loads(run("--model", "qwen3-30b-a3b", "--gpu", "H100-SXM", "--json").stdout)
    assert doc["moe_layer_fixed_ms"] == pytest.approx(1.44)
    dense = run("--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--target-interactivity", "30",
                columns=200)
    assert dense.exit_code == 0 and "MoE layers: " not in dense.stdout
    assert json.loads(run("--model", "llama-3.1-8b", "--gpu", "H100-SXM",
                          "--json").stdout)["moe_layer_fixed_ms"] is None
