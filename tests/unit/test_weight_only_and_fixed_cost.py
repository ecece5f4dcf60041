"""Weight-only formats' dequantization cost and the per-step time tensor parallelism does not
shrink, checked by hand on the step model."""

from __future__ import annotations

import msgspec
import pytest

from infer_prof.catalog.gpus import catalog
from infer_prof.catalog.models import resolve_model
from infer_prof.core.estimate.decode_step import fixed_step_s, step_cost
from infer_prof.core.estimate.deployment import Deployment
from infer_prof.core.estimate.factors import HOPPER_FIT
from infer_prof.core.estimate.frontier_model import predict_point
from infer_prof.core.estimate.weight_only import WEIGHT_ONLY, weight_only_cost
from infer_prof.core.planning.memory import weight_bytes

ARCH = resolve_model("llama-3.1-8b", create_tiny=False, fetch=False).spec
H100 = catalog()["H100-SXM"]
A100 = catalog()["A100-80GB-SXM"]


def _d(precision: str, gpu=H100, n: int = 1, **factors: float) -> Deployment:
    f = msgspec.structs.replace(HOPPER_FIT, **factors) if factors else HOPPER_FIT
    return Deployment(arch=ARCH, gpu=gpu, gpu_count=n, precision=precision, factors=f,
                      link_gbps=900.0 if n > 1 else None)


def test_small_batch_reads_packed_weights_at_the_format_share() -> None:
    awq, bnb = step_cost(_d("awq"), batch=1, context=0), step_cost(_d("bnb-nf4"), batch=1,
                                                                     context=0)
    bw = H100.memory_bandwidth_gbps * 1e9
    assert awq.bound == "memory"
    assert awq.memory_s == pytest.approx(awq.weight_bytes / (bw * HOPPER_FIT.mbu * 0.98))
    assert bnb.memory_s == pytest.approx(bnb.weight_bytes / (bw * HOPPER_FIT.mbu * 0.7))
    assert awq.time_s < step_cost(_d("bf16"), batch=1, context=0).time_s < bnb.time_s * 3


def test_large_batch_pays_the_dequantization_per_flop() -> None:
    bf16 = step_cost(_d("bf16"), batch=512, context=0)
    awq = step_cost(_d("awq"), batch=512, context=0)
    assert bf16.bound == awq.bound == "compute"
    assert awq.compute_s == pytest.approx(bf16.compute_s / WEIGHT_ONLY["awq"].compute_share)


def test_fp8_runs_weight_only_where_the_gpu_has_no_fp8_math() -> None:
    assert weight_only_cost("fp8", H100) is None
    assert weight_only_cost("fp8", A100) is WEIGHT_ONLY["fp8-weight-only"]
    assert weight_only_cost("bf16", A100) is None


def test_fp4_runs_weight_only_where_the_gpu_has_no_fp4_math() -> None:
    """MXFP4 and NVFP4 on Hopper and Ampere unpack to 16-bit (Marlin): the int4 Marlin shares;
    on a B200, whose FP4 tensor cores multiply them, no dequantization cost."""
    b200 = catalog()["B200"]
    for precision in ("mxfp4", "nvfp4"):
        assert weight_only_cost(precision, H100) is WEIGHT_ONLY["fp4-weight-only"]
        assert weight_only_cost(precision, A100) is WEIGHT_ONLY["fp4-weight-only"]
        assert weight_only_cost(precision, b200) is None
    fp4 = WEIGHT_ONLY["fp4-weight-only"]
    assert (fp4.bandwidth_share, fp4.compute_share) == (WEIGHT_ONLY["awq"].bandwidth_share,
                                                        WEIGHT_ONLY["awq"].compute_share)
    oss = resolve_model("gpt-oss-120b", create_tiny=False, fetch=False).spec
    d = Deployment(arch=oss, gpu=H100, gpu_count=1, precision="mxfp4", factors=HOPPER_FIT)
    small = step_cost(d, batch=1, context=0)
    bw = H100.memory_bandwidth_gbps * 1e9
    assert small.memory_s == pytest.approx(small.weight_bytes / (bw * HOPPER_FIT.mbu * 0.98))


def test_fixed_step_time_counts_every_layer_whatever_the_gpu_count() -> None:
    f = msgspec.structs.replace(HOPPER_FIT, step_overhead_ms=0.3, layer_overhead_us=10.0)
    assert fixed_step_s(f, 32) == pytest.approx(0.3e-3 + 32 * 10e-6)
    one = step_cost(_d("bf16", step_overhead_ms=0.3, layer_overhead_us=10.0), batch=8,
                    context=512)
    four = step_cost(_d("bf16", n=4, step_overhead_ms=0.3, layer_overhead_us=10.0), batch=8,
                     context=512)
    assert one.overhead_s == four.overhead_s == pytest.approx(fixed_step_s(f, ARCH.num_layers))
    assert four.memory_s == pytest.approx(one.memory_s / 4, rel=0.02)


def test_each_decode_sequence_adds_its_time_to_the_step_whatever_the_gpu_count() -> None:
    """``sequence_overhead_us`` a decode sequence a step, paid whole by every GPU of the group:
    by hand, 0.3 ms + 32 layers x 10 us + 64 sequences x 15 us = 1.58 ms."""
    f = msgspec.structs.replace(HOPPER_FIT, step_overhead_ms=0.3, layer_overhead_us=10.0,
                                sequence_overhead_us=15.0)
    assert fixed_step_s(f, 32, 64) == pytest.approx(1.58e-3)
    assert fixed_step_s(f, 32) == pytest.approx(0.62e-3)  # no decode sequence: none of it
    kw = {"step_overhead_ms": 0.3, "layer_overhead_us": 10.0, "sequence_overhead_us": 15.0}
    one = step_cost(_d("bf16", **kw), batch=64, context=512)
    four = step_cost(_d("bf16", n=4, **kw), batch=64, context=512)
    base = step_cost(_d("bf16", step_overhead_ms=0.3, layer_overhead_us=10.0), batch=64,
                     context=512)
    assert one.overhead_s == four.overhead_s == pytest.approx(base.overhead_s + 64 * 15e-6)
    assert one.time_s == pytest.approx(base.time_s + 64 * 15e-6)
    prompt_only = step_cost(_d("bf16", **kw), batch=0, context=0, prefill_tokens=512,
                            prefill_context=256)
    assert prompt_only.overhead_s == pytest.approx(fixed_step_s(f, ARCH.num_layers))


def test_a_negative_time_per_sequence_is_refused() -> None:
    with pytest.raises(ValueError, match="sequence_overhead_us"):
        msgspec.structs.replace(HOPPER_FIT, sequence_overhead_us=-1.0)


@pytest.mark.parametrize("model", ["llama-2-7b", "llama-3.1-8b"])
@pytest.mark.parametrize("concurrency", [1, 8, 64])
def test_tp4_of_a_small_model_is_not_faster_per_gpu_than_tp1(model: str, concurrency: int) -> None:
    from infer_prof.catalog.estimate_factors import factors_for

    arch = resolve_model(model, create_tiny=False, fetch=False).spec
    kw = {"input_len": 1024, "output_len": 256, "concurrency": concurrency}
    for f in (HOPPER_FIT, factors_for(H100),
              msgspec.structs.replace(HOPPER_FIT, layer_overhead_us=8.0)):
        one = predict_point(Deployment(arch=arch, gpu=H100, factors=f), **kw)
        four = predict_point(Deployment(arch=arch, gpu=H100, gpu_count=4, factors=f,
                                        link_gbps=900.0), **kw)
        assert four.output_tok_s_per_gpu < one.output_tok_s_per_gpu
        assert four.interactivity > one.interactivity  # faster per user, slower per GPU


def test_the_shares_are_the_published_ratios_to_16_bit() -> None:
    # GPUStack, Qwen3-8B on one A100 80GB, vLLM 0.9.2, 1,000 ShareGPT prompts: tok/s
    bf16 = 10338.25
    assert WEIGHT_ONLY["awq"].compute_share == round(8066.03 / bf16, 2)  # AWQ Marlin
    assert WEIGHT_ONLY["gptq"].compute_share == round(8146.73 / bf16, 2)  # GPTQ-Marlin int4
    assert WEIGHT_ONLY["int8"].compute_share == round(7119.60 / bf16, 2)  # GPTQ-Marlin int8
    assert WEIGHT_ONLY["bnb-nf4"].compute_share == round(5916.34 / bf16, 2)  # bitsandbytes
    # Mistral-7B on one L4 at batch 1, vLLM 0.16.0: 61.4 (AWQ-Marlin) / 17.9 (FP16) tok/s for
    # the planner's 16-bit / AWQ weight bytes
    mistral = resolve_model("mistral-7b", create_tiny=False, fetch=False).spec
    ratio = weight_bytes(mistral, "bf16") / weight_bytes(mistral, "awq")
    assert WEIGHT_ONLY["awq"].bandwidth_share == round(61.4 / 17.9 / ratio, 2)
    # bitsandbytes ~20 against AWQ ~30 tok/s at one request (vLLM issue 22780), 9/16 against
    # 133/256 byte a weight: a share of AWQ's
    assert WEIGHT_ONLY["bnb-nf4"].bandwidth_share == pytest.approx(
        20 / 30 * (9 / 16) / (133 / 256) * WEIGHT_ONLY["awq"].bandwidth_share, abs=0.02)


def test_fp4_without_fp4_math_reads_and_multiplies_at_the_fitted_share() -> None:
    """``fp4_weight_only_share`` scales int4 Marlin's shares for MXFP4 on a GPU without FP4
    math (both the read and the multiply), and nothing else: not bf16 on that GPU, not MXFP4
    on a B200, whose FP4 tensor cores multiply it."""
    gpt = resolve_model("gpt-oss-120b", create_tiny=False, fetch=False).spec
    b200 = catalog()["B200"]

    def step(gpu, precision: str, share: float, batch: int):  # type: ignore[no-untyped-def]
        f = msgspec.structs.replace(HOPPER_FIT, fp4_weight_only_share=share)
        return step_cost(Deployment(arch=gpt, gpu=gpu, gpu_count=1, precision=precision,
                                    factors=f), batch=batch, context=0)

    fp4 = WEIGHT_ONLY["fp4-weight-only"]
    bw = H100.memory_bandwidth_gbps * 1e9
    one, half = step(H100, "mxfp4", 1.0, 1), step(H100, "mxfp4", 0.5, 1)
    assert one.memory_s == pytest.approx(
        one.weight_bytes / (bw * HOPPER_FIT.mbu * fp4.bandwidth_share))
    assert half.memory_s == pytest.approx(2 * one.memory_s)
    big_one, big_half = step(H100, "mxfp4", 1.0, 4096), step(H100, "mxfp4", 0.5, 4096)
    assert big_half.compute_s > 1.9 * big_one.compute_s  # the weights' FLOPs at half the rate
    assert step(H100, "bf16", 0.5, 1).time_s == step(H100, "bf16", 1.0, 1).time_s
    assert step(b200, "mxfp4", 0.5, 1).time_s == step(b200, "mxfp4", 1.0, 1).time_s
    with pytest.raises(ValueError, match="fp4_weight_only_share"):
        msgspec.structs.replace(HOPPER_FIT, fp4_weight_only_share=0.0)


def test_an_moe_layer_costs_its_fixed_time_a_step_and_a_dense_model_none() -> None:
    # core/estimate/moe_layer.py: 30 us a layer beyond the experts' reads (vLLM's benchmark_moe
    # at one token: 44.54 us for 37.7 MB of Qwen3-30B-A3B fp8 on an H100, 11.3 us at 3.35 TB/s)
    from infer_prof.core.estimate.moe_layer import MOE_LAYER_FIXED_US, MOE_LAYER_SOURCE, moe_fixed_s
    assert MOE_LAYER_FIXED_US == 30.0 and "pull/24700" in MOE_LAYER_SOURCE
    assert round(44.54 - 37.7e6 / 3.35e12 * 1e6) == 33  # the H100 row of the source, by hand
    qwen = resolve_model("qwen3-30b-a3b", create_tiny=False, fetch=False).spec
    gptoss = resolve_model("gpt-oss-120b", create_tiny=False, fetch=False).spec
    dense = resolve_model("llama-3.1-8b", create_tiny=False, fetch=False).spec
    assert moe_fixed_s(qwen) == pytest.approx(48 * 30e-6)  # 48 MoE layers: 1.44 ms a step
    assert moe_fixed_s(gptoss) == pytest.approx(36 * 30e-6)  # 36 layers: 1.08 ms
    assert moe_fixed_s(dense) == 0.0
