"""The expected-error interval a configuration is looked up by (family + precision + TP +
interconnect), from the held-out-by-source section of estimate_errors.json."""

from __future__ import annotations

import json

import msgspec
import pytest

from infer_prof.estimate.expected_error import (
    MIN_CELL_POINTS,
    WEIGHT_ONLY_FP8,
    ExpectedError,
    HeldOutErrors,
    HeldOutStats,
    interval_precision,
    load_expected_error,
    parse_errors,
)
from tests.unit.estimate_cli import no_sky_home, run  # noqa: F401 - no_sky_home: autouse


def _s(n: int, median: float, p90: float) -> HeldOutStats:
    return HeldOutStats(n, median, p90)


HELD = HeldOutErrors(
    overall=_s(100, 20.0, 60.0),
    by_family={"Hopper": _s(80, 12.0, 30.0), "Blackwell": _s(20, 50.0, 70.0)},
    by_precision={"bf16": _s(10, 8.0, 15.0), "mxfp4": _s(90, 22.0, 64.0)},
    by_tp={"1": _s(40, 30.0, 70.0), "2": _s(60, 15.0, 40.0)},
    by_interconnect={"none": _s(40, 30.0, 70.0), "link": _s(60, 15.0, 40.0)},
    by_cell={"Hopper|mxfp4|2|link": _s(MIN_CELL_POINTS, 9.0, 18.0),
             "Hopper|bf16|1|none": _s(2, 1.0, 2.0)},
    source="test")
ERRORS = ExpectedError(20.0, {"Hopper": 12.0}, "says", HELD)


def test_a_cell_with_enough_points_gives_its_own_figures() -> None:
    iv = ERRORS.interval("Hopper", "mxfp4", 2, "nvlink")
    assert (iv.median_pct, iv.p90_pct, iv.n, iv.validated) == (9.0, 18.0, MIN_CELL_POINTS, True)


def test_a_small_cell_takes_the_worst_of_its_groups() -> None:
    iv = ERRORS.interval("Hopper", "bf16", 1)
    # family 12/30, precision 8/15, TP1 30/70, interconnect none 30/70: the largest of each
    assert (iv.median_pct, iv.p90_pct, iv.validated) == (30.0, 70.0, True)


def test_a_small_cell_takes_its_family_and_precision_pair_when_worse() -> None:
    """A pair's figures hold every point of that family and precision, those a setup its GPU
    did not bound too (the family and precision groups leave them out): a row of that pair
    at a TP size the pair has no cell of is held to them; another precision is not."""
    held = msgspec.structs.replace(
        HELD, by_family_precision={"Hopper|mxfp4": _s(6, 150.0, 200.0)})
    errors = ExpectedError(20.0, {"Hopper": 12.0}, "says", held)
    iv = errors.interval("Hopper", "mxfp4", 1)
    assert (iv.median_pct, iv.p90_pct, iv.validated) == (150.0, 200.0, True)
    assert "Hopper mxfp4" in iv.basis
    assert errors.interval("Hopper", "bf16", 1).p90_pct == 70.0  # as without the pair
    assert errors.interval("Hopper", "mxfp4", 2, "nvlink").p90_pct == 18.0  # its cell


@pytest.mark.parametrize(("family", "precision", "tp", "link", "missing"), [
    ("Ampere", "bf16", 1, None, "GPU family Ampere"),
    ("Hopper", "awq", 1, None, "precision awq"),
    ("Hopper", "mxfp4", 4, "nvlink", "TP4"),
    ("Hopper", "mxfp4", 2, "pcie", "interconnect pcie"),
])
def test_a_configuration_without_held_out_points_is_unvalidated(
        family: str, precision: str, tp: int, link: str | None, missing: str) -> None:
    iv = ERRORS.interval(family, precision, tp, link)
    assert not iv.validated and missing in iv.missing
    assert (iv.median_pct, iv.p90_pct) == (20.0, 60.0)  # the overall figures, said so
    assert iv.describe().startswith("unvalidated: no held-out point of")


def test_bounds_are_the_measured_values_within_the_p90_error() -> None:
    iv = ERRORS.interval("Hopper", "mxfp4", 2, "nvlink")  # p90 18 %
    slow, fast = iv.throughput_bounds(118.0) or (0.0, 0.0)
    assert slow == pytest.approx(100.0) and fast == pytest.approx(118.0 / 0.82)


def test_format_validated_only_for_precisions_with_held_out_points() -> None:
    assert ERRORS.format_validated("mxfp4") and not ERRORS.format_validated("awq")
    assert not ExpectedError(None, {}, "x").format_validated("bf16")


def test_a_file_without_the_section_keeps_the_old_reading() -> None:
    e = parse_errors({"expected_error_pct": 7.0, "by_family": {"Hopper": 6.0}})
    assert e.for_family("Hopper") == 6.0 and e.held_out is None
    assert not e.interval("Hopper", "bf16", 1).validated
    assert parse_errors({"expected_error_pct": 7.0, "held_out": {"bad": 1}}).held_out is None


def test_the_shipped_file_has_the_held_out_section() -> None:
    e = load_expected_error()
    assert e.held_out is not None and e.held_out.overall.n > 100
    assert e.overall_pct == e.held_out.overall.median_abs_error_pct
    assert "held out" in e.held_out.source
    # weight-only formats without a held-out point are unvalidated (bitsandbytes); AWQ has the
    # A100 runs of ree2raz/inference-bench (vLLM 0.20.1, AWQ-Marlin), GPTQ the L40S runs of
    # TechBroMoho/quantized-llm-serving (vLLM 0.10.2, Marlin WNA16)
    assert not e.format_validated("bnb-nf4")
    assert e.format_validated("awq") and e.format_validated("gptq")
    assert e.format_validated("mxfp4") and e.format_validated("bf16")


def test_loso_helpers_group_ratios_and_versions() -> None:
    from tests.benchmark_scripts import load_benchmark
    loso = load_benchmark("estimate_loso")
    assert loso.version_at_least("0.13.0") and loso.version_at_least(">=0.10.1")
    assert not loso.version_at_least("0.9.2") and not loso.version_at_least(None)
    # the goal's set: a released vLLM >= 0.10; a pre-release build (preview wheel, nightly,
    # main) is scored apart, whatever its version reads
    from infer_prof.catalog.published_results import published_results
    points = {p.id: p for p in published_results().points}
    released = points["imax-vllm-gpt-oss-120b-h200-tp1-1024-1024-c4"]
    preview = points["gpu-conc-gpt-oss-20b-h200-c1"]  # committed before vLLM 0.10.1 shipped
    assert loso.in_goal_set(released) and not released.prerelease
    assert preview.prerelease and loso.version_at_least(preview.engine_version)
    assert not loso.in_goal_set(preview)
    assert not loso.in_goal_set(msgspec.structs.replace(released, engine_version="0.9.2"))
    assert not loso.in_goal_set(msgspec.structs.replace(released, prerelease=True))
    assert loso.interconnect("H100-SXM", 1) == "none"
    assert loso.interconnect("H100-SXM", 4) == "link"
    assert loso.interconnect("L40S", 2) == "pcie"

    def held(id_: str, gpu: str, tp: int, measured: float, predicted: float):
        return loso.Held(id=id_, source="s", gpu=gpu, family="Hopper", model="m",
                         precision="bf16", tp=tp, interconnect="", input_len=1, output_len=1,
                         concurrency=4, engine_version="0.13.0", goal_set=True,
                         measured=measured, predicted=predicted,
                         error_pct=(predicted / measured - 1) * 100)

    rows = [held("a-tp1-x", "H100-SXM", 1, 100.0, 100.0),
            held("a-tp4-x", "H100-SXM", 4, 50.0, 80.0),
            held("b-tp1-x", "H200", 1, 120.0, 90.0)]
    (tp,) = loso.tp_ratios(rows)
    assert (tp.measured, tp.predicted) == (0.5, 0.8) and tp.error_pct == pytest.approx(60.0)
    (pair,) = loso.gpu_pairs(rows)  # H100 vs H200 at TP1: measured slower, predicted faster
    assert not pair.order_right


def test_a_hybrid_models_row_is_held_to_the_hybrid_points_figures() -> None:
    with_hybrid = ExpectedError(20.0, {}, "says",
                                msgspec.structs.replace(HELD, hybrid=_s(9, 26.0, 64.0)))
    cell = with_hybrid.interval("Hopper", "mxfp4", 2, "nvlink")
    hy = with_hybrid.interval("Hopper", "mxfp4", 2, "nvlink", hybrid=True)
    assert (cell.median_pct, cell.p90_pct) == (9.0, 18.0)
    assert (hy.median_pct, hy.p90_pct, hy.n, hy.validated) == (26.0, 64.0, 5, True)
    assert "hybrid models (n=9)" in hy.basis
    # a worse configuration keeps its own figures where they are the larger
    wide = with_hybrid.interval("Blackwell", "mxfp4", 1, hybrid=True)
    assert (wide.median_pct, wide.p90_pct) == (50.0, 70.0)
    # no hybrid point held out: a hybrid's row is unvalidated, saying so
    none = ERRORS.interval("Hopper", "mxfp4", 2, "nvlink", hybrid=True)
    assert not none.validated and "a hybrid model" in none.missing


def test_estimate_shows_a_hybrid_models_rows_with_the_hybrid_interval() -> None:
    held = load_expected_error().held_out
    assert held is not None and held.hybrid is not None and held.hybrid.n >= 8
    r = run("--model", "nemotron-3-nano-30b-a3b", "--gpu", "H200", "--quantization", "fp8",
            "--input-len", "1024", "--output-len", "1024", "--target-interactivity", "20",
            "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["rows"]
    assert rows and all(row["expected_error"]["p90_abs_pct"] >= held.hybrid.p90_abs_error_pct
                        for row in rows)
    assert all("hybrid models" in row["expected_error"]["basis"] for row in rows)


def test_fp8_run_weight_only_is_a_precision_of_its_own() -> None:
    """fp8 on a GPU without FP8 math runs as W8A16 through Marlin (vLLM's support table):
    other kernels than W8A8's, so the fp8 points (W8A8 on Ada and Hopper) do not validate it.
    With no held-out point of its own it is unvalidated; fp8 on Hopper and bf16 on an A100
    stay validated."""
    assert interval_precision("fp8", weight_only=True) == WEIGHT_ONLY_FP8
    assert interval_precision("fp8", weight_only=False) == "fp8"
    assert interval_precision("awq", weight_only=True) == "awq"
    rows = []
    for precision in ("fp8", "bf16"):
        r = run("--model", "llama-3.1-8b", "--gpu", "A100-80GB-SXM", "--gpu", "H100-SXM",
                "--gpus", "1", "--quantization", precision, "--input-len", "1024",
                "--output-len", "256", "--target-interactivity", "20", "--all-configs",
                "--json")
        assert r.exit_code == 0, r.output
        rows += json.loads(r.output)["rows"]
    a100_fp8 = [x for x in rows if x["gpu"] == "A100-80GB-SXM" and x["precision"] == "fp8"]
    assert a100_fp8 and all(x["weight_only"] and not x["validated"] for x in a100_fp8)
    assert all(f"precision {WEIGHT_ONLY_FP8}" in x["expected_error"]["missing"]
               for x in a100_fp8)
    assert any(x["gpu"] == "H100-SXM" and x["precision"] == "fp8" and x["validated"]
               for x in rows)
    assert any(x["gpu"] == "A100-80GB-SXM" and x["precision"] == "bf16" and x["validated"]
               for x in rows)
