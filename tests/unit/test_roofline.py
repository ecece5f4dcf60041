"""Roofline arithmetic against hand-computed cases (infer_prof.core.roofline).

llama-2-7b (config in infer_prof/data/models.json): 32 layers, hidden 4096, 32 heads = 32 KV
heads, head_dim 128, intermediate 11008, vocab 32000, untied embeddings.
  params        = 32 x (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096) + 2 x 32000 x 4096 + 4096
                = 6,738,415,616  -> fp16 weights 13,476,831,232 bytes (~13.48e9 B)
  linear params = 32 x (4 x 4096^2 + 3 x 4096 x 11008) = 6,476,005,376
  KV bytes/token (fp16) = 2 x 32 layers x 32 KV heads x 128 x 2 B = 524,288
H100-SXM: 3.35e12 B/s HBM3 bandwidth, 989e12 dense fp16 FLOP/s.
"""

from __future__ import annotations

import json

import pytest

from infer_prof.core.modelspec import ModelSpec
from infer_prof.core.roofline import (
    causal_mean_context,
    decode_bandwidth_ceiling,
    decode_bytes_per_step,
    decode_flops_per_token,
    mbu,
    mfu,
    prefill_flops_per_token,
    roofline_report,
)
from infer_prof.models import registry

BW = 3.35e12
PEAK = 989e12
WEIGHTS = 13_476_831_232
KV = 524_288


@pytest.fixture(scope="module")
def llama7b() -> ModelSpec:
    return ModelSpec.from_config(registry()["llama-2-7b"]["config"], name="llama-2-7b")


def test_fixture_numbers_match_spec(llama7b):
    assert llama7b.param_count() * 2 == WEIGHTS
    assert llama7b.linear_params() == 6_476_005_376
    assert llama7b.kv_cache_bytes_per_token(2) == KV


def test_decode_ceiling_batch1_weights_only():
    # 3.35e12 B/s / 13,476,831,232 B per step = 248.5748 steps/s = tokens/s at batch 1
    step = decode_bytes_per_step(WEIGHTS, KV, batch_size=1, mean_context_len=0)
    assert step == WEIGHTS
    assert decode_bandwidth_ceiling(step, BW, batch_size=1) == pytest.approx(248.5747534, rel=1e-9)


def test_decode_ceiling_includes_kv_cache():
    # batch 1 at context 1024: 13,476,831,232 + 1024 x 524,288 = 14,013,702,144 B per step
    # -> 3.35e12 / 14,013,702,144 = 239.0517 tok/s
    step = decode_bytes_per_step(WEIGHTS, KV, batch_size=1, mean_context_len=1024)
    assert step == 14_013_702_144
    assert decode_bandwidth_ceiling(step, BW, 1) == pytest.approx(239.0517485, rel=1e-9)
    # batch 32 at context 512: 13,476,831,232 + 32 x 512 x 524,288 = 22,066,765,824 B
    # -> 32 x 3.35e12 / 22,066,765,824 = 4857.984 tok/s
    step = decode_bytes_per_step(WEIGHTS, KV, batch_size=32, mean_context_len=512)
    assert step == 22_066_765_824
    assert decode_bandwidth_ceiling(step, BW, 32) == pytest.approx(4857.984213, rel=1e-9)


def test_mbu():
    # 200 tok/s at batch 1: 200 steps/s x 13,476,831,232 B = 2.6954e12 B/s; / 3.35e12 = 0.80459
    assert mbu(200.0, 1, WEIGHTS, BW) == pytest.approx(0.8045869392, rel=1e-9)
    # same bytes/s at batch 32 needs 32x the tokens: 6400 tok/s -> 200 steps/s -> same MBU
    assert mbu(6400.0, 32, WEIGHTS, BW) == pytest.approx(0.8045869392, rel=1e-9)


def test_prefill_flops_and_mfu(llama7b):
    # prompt of 1023 tokens: mean causal context (1023 + 1) / 2 = 512
    assert causal_mean_context(1023) == 512.0
    # 2 x 6,476,005,376 + 4 x 32 layers x 512 x 4096 = 12,952,010,752 + 268,435,456
    flops = prefill_flops_per_token(llama7b, 512)
    assert flops == 13_220_446_208
    # MFU at 30,000 prompt tok/s: 30000 x 13,220,446,208 / 989e12 = 0.401025
    assert mfu(30_000.0, flops, PEAK) == pytest.approx(0.4010246575, rel=1e-9)


def test_decode_flops_includes_lm_head(llama7b):
    # 2 x 6,476,005,376 + 2 x 32000 x 4096 (LM head) + 4 x 32 x 0 x 4096 = 13,214,154,752
    assert decode_flops_per_token(llama7b, 0) == 13_214_154_752


def test_report_batch1_h100(llama7b):
    rep = roofline_report(
        llama7b,
        WEIGHTS,
        KV,
        BW,
        PEAK,
        batch_size=1,
        mean_context_len=0,
        output_tokens_per_s=200.0,
        prefill_tokens_per_s=30_000.0,
        mean_prompt_len=1023,
    )
    json.dumps(rep)  # JSON-serializable
    assert rep["decode_bandwidth_ceiling_tokens_per_s"] == pytest.approx(248.5747534, rel=1e-9)
    assert rep["decode_bound"] == "memory"
    assert rep["decode_ceiling_tokens_per_s"] == rep["decode_bandwidth_ceiling_tokens_per_s"]
    assert rep["decode_step_time_min_s"] == pytest.approx(WEIGHTS / BW, rel=1e-12)
    assert rep["mbu_pct"] == pytest.approx(80.45869392, rel=1e-9)
    assert rep["achieved_bytes_per_s"] == pytest.approx(200.0 * WEIGHTS, rel=1e-12)
    # 989e12 / 13,220,446,208 = 74,808.37 prompt tok/s
    assert rep["prefill_ceiling_tokens_per_s"] == pytest.approx(74_808.36762, rel=1e-9)
    assert rep["mfu_pct"] == pytest.approx(40.10246575, rel=1e-9)
    assert rep["decode_above_ceiling"] is False
    assert rep["prefill_above_ceiling"] is False
    assert rep["above_ceiling"] is False


def test_report_flags_throughput_above_ceiling(llama7b):
    # 300 tok/s at batch 1 is more than the 248.6 tok/s the bandwidth allows: measurement error
    rep = roofline_report(llama7b, WEIGHTS, KV, BW, PEAK, 1, 0, output_tokens_per_s=300.0)
    assert rep["decode_above_ceiling"] is True
    assert rep["above_ceiling"] is True
    assert rep["mbu"] > 1.0
    # prefill above its 74,808 tok/s compute ceiling is flagged the same way
    rep = roofline_report(
        llama7b,
        WEIGHTS,
        KV,
        BW,
        PEAK,
        1,
        0,
        output_tokens_per_s=100.0,
        prefill_tokens_per_s=80_000.0,
        mean_prompt_len=1023,
    )
    assert rep["decode_above_ceiling"] is False
    assert rep["prefill_above_ceiling"] is True
    assert rep["above_ceiling"] is True


def test_report_large_batch_is_compute_bound(llama7b):
    # batch 1024, weights only: bandwidth ceiling 1024 x 3.35e12 / 13,476,831,232 = 254,540.5
    # compute ceiling 989e12 / 13,214,154,752 = 74,843.98 -> the lower one binds
    rep = roofline_report(llama7b, WEIGHTS, KV, BW, PEAK, 1024, 0, output_tokens_per_s=80_000.0)
    assert rep["decode_bandwidth_ceiling_tokens_per_s"] == pytest.approx(254_540.5475, rel=1e-9)
    assert rep["decode_compute_ceiling_tokens_per_s"] == pytest.approx(74_843.98500, rel=1e-9)
    assert rep["decode_bound"] == "compute"
    assert rep["above_ceiling"] is True  # 80,000 > 74,844


def test_report_nulls_where_not_computable(llama7b):
    # unknown GPU (no bandwidth, no peak) and no measurement: numbers that need them are null
    rep = roofline_report(llama7b, WEIGHTS, KV, None, None, 8, 100, output_tokens_per_s=None)
    json.dumps(rep)
    assert rep["decode_bytes_per_step"] == WEIGHTS + 8 * 100 * KV
    for key in (
        "decode_bandwidth_ceiling_tokens_per_s",
        "decode_ceiling_tokens_per_s",
        "mbu",
        "mbu_pct",
        "prefill_ceiling_tokens_per_s",
        "mfu",
        "above_ceiling",
        "decode_above_ceiling",
    ):
        assert rep[key] is None, key
    # batch size unknown: no decode numbers at all
    rep = roofline_report(llama7b, WEIGHTS, KV, BW, PEAK, None, 100, output_tokens_per_s=50.0)
    assert rep["decode_bytes_per_step"] is None
    assert rep["mbu"] is None
    assert rep["above_ceiling"] is None


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        decode_bytes_per_step(WEIGHTS, KV, batch_size=-1, mean_context_len=0)
    with pytest.raises(ValueError):
        decode_bandwidth_ceiling(WEIGHTS, 0.0, 1)
