"""The estimate held out by source (benchmarks/estimate_loso.py) over the shipped published set:
each source's points predicted with factors fitted on the other sources. Today's figures are
asserted a little above what they are (docs/estimate.md, "Accuracy"), so a change that makes the
estimate generalise worse fails; and the shipped estimate_errors.json must be what the
computation gives (regenerated with the documented command)."""

from __future__ import annotations

import math

import msgspec
import pytest

from infer_prof.estimate.expected_error import load_expected_error
from tests.benchmark_scripts import load_benchmark

loso = load_benchmark("estimate_loso")
spreads = load_benchmark("pooling_spreads")


@pytest.fixture(scope="module")
def prepared() -> tuple[list, list]:
    """The predictable cases and the skipped ones (estimate_loso.cases), made once a module."""
    return loso.cases()


@pytest.fixture(scope="module")
def doc(prepared: tuple[list, list]) -> dict:
    found, skipped = prepared
    return loso.report(loso.held_out(found), skipped)


def test_held_out_errors_no_worse_than_today(doc: dict) -> None:
    # 2026-12-03, each family and GPU fit pooled towards its parent (published_fit.POOL_WEIGHT),
    # points their GPU did not bound and hybrid models' left out of the fits (gpu_bound.py,
    # published_fit.fitted_model), with vLLM issues 40838 and 30326's H200 gpt-oss-120b points,
    # MXFP4 without FP4 math at int4 Marlin's dequantization shares (weight_only.py), a family
    # without a fit of its own at the fitted families' precision-weighted mean
    # (published_fit.population_factors), InferenceMAX's and covehub/cove's points at the mean
    # lengths their client drew (0.9 x nominal), a third Ampere source
    # (ld-singh/ai-factory-ops-lab's RTX A6000), FP4 without FP4 math at a fitted share of int4
    # Marlin's rates pulled to 1 by its sources (published_fit.family_search), and
    # sariekr/gpu_conc's MI300X predicted since the planner runs MXFP4 on AMD (5 points its GPU
    # did not bound, 163-235 % too fast, scored), InferenceMAX's B200 points at the fp8 KV cache
    # its scripts served with, MXFP4's MoE at its activations' peak (16-bit, or fp8 where a source
    # set MXFP8 activations), not the FP4 one, and ten GPUs' CUDA-visible memory measured:
    # n=243, median 9.2 %, p90 28.7 %; with TechBroMoho/quantized-llm-serving's L40S (bf16, AWQ,
    # GPTQ) and tgarg01/silybench-data's dense H100 (Qwen3-8B bf16 and fp8, vLLM 0.30.0) points:
    # n=304, median 13.3 %, p90 31.5 %; with an MoE layer's fixed time set from vLLM's kernel
    # benchmark (core/estimate/moe_layer.py, 30 us a layer): n=304, median 8.5 %, p90 30.9 %;
    # with surya-koritala/Glyd's stock vLLM 0.30.0 Qwen3-8B at one user on L4, A100 40GB, H100
    # and GH200: n=308, median 8.3 %, p90 31.1 %; the goal's set the released builds only (the
    # 14 points of pre-release builds, sariekr/gpu_conc's gpt-oss runs before vLLM 0.10.1 shipped,
    # the recipes' PR 58 nightly and issue 30326's main, scored apart, still fitted where their
    # GPU bounded them): n=294, median 8.0 %, p90 23.1 %; with alexGitSpace/i-serve's MI300X
    # and Assailable-creepingwillow3548/i-serve's L40S (Qwen3-8B, vLLM 0.27.1, 4000/200; the
    # MI300X 35-155 % too fast): n=315, median 8.9 %, p90 27.0 %; with
    # globaledgepathway/voice-inference-benchmark's MI300X, H100 PCIe and GH200 (Llama-3.1-8B
    # bf16, 78 in / ~33 out, 1-32 users; a third CDNA3 source, whose MI300X at 4-16 users ran
    # slower than its GH200, so those three are not fitted): n=328, median 8.8 %, p90 27.4 %;
    # 2026-12-04, the pooling weight at the spreads measured again (published_fit.SOURCE_SPREAD
    # 0.26, FAMILY_SPREAD 0.24: POOL_WEIGHT 1.17, was 2): n=328, median 8.4 %, p90 25.1 %; with
    # a fitted time per sequence per step (StepFactors.sequence_overhead_us, free in the
    # parent's fit: published_fit.FREE_IN_PARENT) and the spreads measured again at 0.24 / 0.26
    # (POOL_WEIGHT 0.85): n=328, median 9.0 %, p90 24.1 % (the goal: 10 % / 25 %: met;
    # docs/estimate.md)
    s = doc["overall"]
    assert s.n >= 328
    assert s.median_abs_error_pct <= 9.3
    assert s.p90_abs_error_pct <= 24.4
    bound = doc["overall_gpu_bound"]  # today n=320, 8.7 %, 23.5 %
    assert bound.n == s.n - 8 and bound.p90_abs_error_pct <= 23.8
    # the groups below: the points their GPU bounded (the others on their own line)
    # sariekr/gpu_conc's MI300X (its B200: pre-release) and globaledgepathway's MI300X at 4-16
    assert doc["not_gpu_bound"].n == 8
    assert doc["prerelease"].n == 14
    fam = doc["by_family"]
    # today 6.5 (14.1 without the MoE layer's fixed time: the dense points and the MXFP4 MoE
    # ones each predicted from a fit the other kind dominates when held out)
    assert fam["Hopper"].median_abs_error_pct <= 6.8
    # today 9.6 (the B200 takes the fitted families' mean: InferenceMAX is its one fitted
    # source; 6.6 without the time per sequence, which predicts InferenceMAX's B200 1-3
    # points slower)
    assert fam["Blackwell"].median_abs_error_pct <= 9.9
    # today 46.5 over the 10 points their GPU bounded (AMD's MI300X TP8 of a dense 70B,
    # i-serve's MI300X VF on vLLM's default ROCm attention, globaledgepathway's MI300X at one
    # user: each held out leaves two CDNA3 sources; i-serve's 4000-token prompts at 8-64 users
    # 96-150 % too fast)
    assert fam["CDNA3"].median_abs_error_pct <= 47.0
    # today 10.7 (AccelMark's, ree2raz's and Glyd's A100, ai-factory-ops-lab's A6000: fitted
    # from the three left when one is held out; 19 points, so one point moves the median)
    assert fam["Ampere"].median_abs_error_pct <= 11.2
    assert doc["by_precision"]["bf16"].median_abs_error_pct <= 9.5  # today 9.0
    # today 10.6 (L4, L40S, RTX 4090; i-serve's L40S -7 to -12 %)
    assert fam["Ada"].median_abs_error_pct <= 11.1
    assert fam["Blackwell RTX"].median_abs_error_pct <= 24.5  # today 24.0 (RTX 5090/PRO 6000 AWQ)
    # sariekr/gpu_conc's B200 and MI300X, globaledgepathway's MI300X at 4-16 users; 9 hybrid points
    assert len(doc["not_fitted"]) == 21


def test_held_out_ratios_no_worse_than_today(doc: dict) -> None:
    tp = doc["tp_ratio"]
    assert tp["ratios"] >= 58 and tp["error"].median_abs_error_pct <= 5.6  # today 5.3
    pairs = doc["gpu_pairs"]
    # today 126/129, 97.7 % (the goal: 90 %; the three wrong: InferenceMAX's H100 and H200 at
    # TP8 and 4 streams, measured 0.8-2.2 % apart and predicted 0.1-0.4 % the other way)
    assert pairs["pairs"] >= 129 and pairs["share_pct"] >= 97.6
    assert pairs["apart"]["share_pct"] >= 99.9  # today 98/98 measured > 5 % apart


def test_every_fold_leaves_its_source_out_and_every_point_is_predicted_once(doc: dict) -> None:
    rows = doc["rows"]
    assert len({r.id for r in rows}) == len(rows)
    assert {r.source for r in rows} >= {
        "infer-prof's own runs on one H100 SXM, vLLM 0.26.0, 2026-11-23"}
    for r in doc["not_predicted"]:
        assert r["why"]


def test_the_shipped_errors_file_is_this_computation(doc: dict) -> None:
    held = load_expected_error().held_out
    assert held is not None, "run: python benchmarks/estimate_loso.py --write"
    assert held.overall.n == doc["overall"].n
    assert held.overall.median_abs_error_pct == pytest.approx(
        doc["overall"].median_abs_error_pct, abs=0.15)
    assert set(held.by_cell) == set(doc["by_cell"])
    assert held.hybrid is not None and held.hybrid.n == doc["hybrid"].n  # 8 (PR 58: pre-release)


def test_the_pooling_weight_stands_on_the_spreads_measured_today(
        doc: dict, prepared: tuple[list, list]) -> None:
    """POOL_WEIGHT is sigma_s^2 / tau^2, each measured as benchmarks/pooling_spreads.py does on
    the shipped data: a change of the data that moves either by more than its rounding fails
    until the constants are measured again (today 0.236 and 0.264)."""
    from infer_prof.estimate import published_fit

    sigma, medians = spreads.source_spread(doc["rows"])
    assert len(medians) >= 23
    assert sigma == pytest.approx(published_fit.SOURCE_SPREAD, abs=0.01)
    tau, families, parent = spreads.family_spread(prepared[0])
    assert parent == "Hopper" and len(families) >= 5
    assert tau == pytest.approx(published_fit.FAMILY_SPREAD, abs=0.01)
    implied = published_fit.SOURCE_SPREAD ** 2 / published_fit.FAMILY_SPREAD ** 2
    assert implied == pytest.approx(published_fit.POOL_WEIGHT)


def test_a_family_few_sources_measured_is_pulled_to_its_parents_fit(monkeypatch) -> None:
    """The fold without InferenceMAX (and the vLLM recipes' two points), with the GPU-bound
    check and the hybrid rule off (so that `sariekr/gpu_conc`'s B200 and Vultr's hybrid count):
    Blackwell's points are two sources' (`sariekr/gpu_conc`, Vultr), both slower
    than InferenceMAX's B200. Unpooled, those two setups alone drag its memory share down to
    less than 0.6 of Hopper's (today 0.35 against 0.74); pooled (POOL_WEIGHT / 2 for its 2
    sources), it stays less than half as far from Hopper's in log (today 0.53)."""
    from infer_prof.estimate import published_fit

    # the FP4 share's own pull (also POOL_WEIGHT / S) is not what this checks: off
    monkeypatch.setattr(published_fit, "family_search", lambda search, members: search)
    monkeypatch.setattr(published_fit, "inversions", lambda points: {})
    monkeypatch.setattr(published_fit, "fitted_model", lambda arch: True)  # Vultr's hybrid too
    found, _ = loso.cases()
    rest = [c for c in found if not c.point.source.title.startswith(
        ("SemiAnalysis InferenceMAX", "vllm-project/recipes"))]
    assert len({c.point.source.title for c in rest if c.family == "Blackwell"}) == 2
    pooled = published_fit.fit_cases(rest, "pooled", only=("Hopper", "Blackwell"))
    hopper, blackwell = pooled.families["Hopper"], pooled.families["Blackwell"]
    monkeypatch.setattr(published_fit, "POOL_WEIGHT", 1e-6)
    alone = published_fit.fit_cases(rest, "unpooled", only=("Hopper", "Blackwell"))
    assert alone.families["Blackwell"].mbu < 0.6 * hopper.mbu
    pooled_gap = abs(math.log(blackwell.mbu / hopper.mbu))
    assert pooled_gap < 0.5 * abs(math.log(alone.families["Blackwell"].mbu / hopper.mbu))
    # the parent is fitted the same way either way (only its source's date text differs)
    assert msgspec.structs.replace(alone.families["Hopper"], source=hopper.source) == hopper
