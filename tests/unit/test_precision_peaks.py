"""The tensor peak a precision's matrices run at (infer_prof/core/estimate/peaks.py): MXFP4's
MoE multiplies at its activations' precision, not at the FP4 rate, NVFP4 at the FP4 rate."""

from __future__ import annotations

import pytest

from infer_prof.catalog.gpus import catalog
from infer_prof.catalog.models import resolve_model
from infer_prof.catalog.published_results import parse_published_results, published_results
from infer_prof.core.catalog.roofline import attention_flops_per_token
from infer_prof.core.estimate.decode_step import step_cost
from infer_prof.core.estimate.deployment import Deployment
from infer_prof.core.estimate.factors import HOPPER_FIT
from infer_prof.core.estimate.peaks import peak_tflops

B200 = catalog()["B200"]
H200 = catalog()["H200"]


def test_mxfp4_multiplies_at_16_bit_by_default_and_fp8_with_mxfp8_activations() -> None:
    assert B200.fp4_tflops and B200.fp8_tflops and B200.bf16_tflops
    assert peak_tflops(B200, "nvfp4") == B200.fp4_tflops
    assert peak_tflops(B200, "mxfp4") == B200.bf16_tflops
    assert peak_tflops(B200, "mxfp4", "mxfp8") == B200.fp8_tflops
    # Hopper has no FP4 math: MXFP4 unpacks to 16-bit there whatever the setting of the B200's
    assert peak_tflops(H200, "mxfp4") == H200.bf16_tflops
    with pytest.raises(ValueError, match="mxfp4_activations"):
        peak_tflops(B200, "mxfp4", "fp4")


def test_a_prefill_step_of_gpt_oss_on_a_b200_is_compute_bound_at_the_activations_rate() -> None:
    arch = resolve_model("gpt-oss-120b", create_tiny=False, fetch=False).spec

    f = HOPPER_FIT
    att_p = 8000 * attention_flops_per_token(arch, 4000)
    att_d = attention_flops_per_token(arch, 1000)

    def compute_s(activations: str) -> tuple[float, float]:
        d = Deployment(arch=arch, gpu=B200, precision="mxfp4", factors=f,
                       mxfp4_activations=activations)
        s = step_cost(d, batch=1, context=1000, prefill_tokens=8000, prefill_context=4000)
        # by hand: the weights' matrices at the activations' peak, attention at the 16-bit one
        peak = (B200.fp8_tflops if activations == "mxfp8" else B200.bf16_tflops) * 1e12
        att = B200.bf16_tflops * 1e12
        hand = ((s.decode_flops - att_d) / (peak * f.mfu_decode)
                + (s.prefill_flops - att_p) / (peak * f.mfu_prefill)
                + att_d / (att * f.mfu_decode) + att_p / (att * f.mfu_prefill))
        return s.compute_s, hand

    for activations in ("bf16", "mxfp8"):
        got, hand = compute_s(activations)
        assert got == pytest.approx(hand)
    # the FP4 rate would be twice the fp8 one: the 16-bit step takes longer than both
    assert compute_s("bf16")[0] > 1.5 * compute_s("mxfp8")[0]


def test_published_points_say_which_ran_mxfp8_activations() -> None:
    pts = published_results().points
    mxfp8 = [p for p in pts if p.mxfp4_activations == "mxfp8"]
    # InferenceMAX's B200 vLLM runs (VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 in its scripts)
    assert mxfp8 and all(p.gpu == "B200" and p.precision == "mxfp4" and p.engine == "vllm"
                         for p in mxfp8)
    assert all("VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1" in p.note for p in mxfp8)
    bad = ('{"points": [{"id": "x", "source": {"title": "t"}, "engine": "vllm", "gpu": "B200", '
           '"gpu_count": 1, "model": "gpt-oss-120b", "precision": "mxfp4", "input_len": 1, '
           '"output_len": 1, "load": "closed-loop", "output_tok_s": 1, '
           '"output_tok_s_per_gpu": 1, "split": "fit", "mxfp4_activations": "fp4"}]}')
    with pytest.raises(ValueError, match="point x"):
        parse_published_results(bad)
