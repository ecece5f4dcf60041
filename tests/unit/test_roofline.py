"""Roofline arithmetic against hand-computed cases (infer_prof.core.catalog.roofline).

llama-2-7b (config in infer_prof/catalog/data/models.json): 32 layers, hidden 4096, 32 heads = 32 KV
heads, head_dim 128, intermediate 11008, vocab 32000, untied embeddings.
  params        = 32 x (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096) + 2 x 32000 x 4096 + 4096
                = 6,738,415,616  -> fp16 weights 13,476,831,232 bytes (~13.48e9 B)
  linear params = 32 x (4 x 4096^2 + 3 x 4096 x 11008) = 6,476,005,376
  KV bytes/token (fp16) = 2 x 32 layers x 32 KV heads x 128 x 2 B = 524,288
H100-SXM: 3.35e12 B/s HBM3 bandwidth, 989e12 dense fp16 FLOP/s.
"""

from __future__ import annotations

import msgspec
import pytest

from infer_prof.catalog.gpus import catalog
from infer_prof.catalog.models import registry
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.catalog.roofline import (
    MBU_DEFINITIONS,
    RooflineInputs,
    causal_mean_context,
    decode_bandwidth_ceiling,
    decode_bytes_per_step,
    decode_flops_per_token,
    decode_step_mbu,
    mbu,
    mfu,
    prefill_flops_per_token,
    roofline_report,
)
from infer_prof.core.measurement import timeseries as ts
from infer_prof.core.planning.memory import kv_bytes_per_token, weight_bytes
from infer_prof.results.document import Summary
from infer_prof.results.document_base import Distribution
from infer_prof.run.economics import DecodeLoad, decode_batch, roofline_block

BW = 3.35e12
PEAK = 989e12
WEIGHTS = 13_476_831_232
KV = 524_288
UNREAD_1 = 2 * 4096 * (32000 - 1)
"""llama-2-7b's input embedding less the one row a step of one sequence gathers, bytes: what a
decode step holds and does not read (roofline.unread_weight_bytes)."""


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
        RooflineInputs(llama7b,
        WEIGHTS,
        KV,
        BW,
        PEAK,
        batch_size=1,
        mean_context_len=0,
        output_tokens_per_s=200.0,
        prefill_tokens_per_s=30_000.0,
        mean_prompt_len=1023),
    )
    msgspec.json.encode(rep)  # JSON-serializable
    # 3.35e12 / (13,476,831,232 - 262,135,808 unread embedding rows) = 253.5 tok/s
    read = WEIGHTS - UNREAD_1
    assert rep.decode_bandwidth_ceiling_tokens_per_s == pytest.approx(253.5056536, rel=1e-9)
    assert rep.decode_bound == "memory"
    assert rep.decode_ceiling_tokens_per_s == rep.decode_bandwidth_ceiling_tokens_per_s
    assert rep.decode_step_time_min_s == pytest.approx(read / BW, rel=1e-12)
    assert rep.mbu_pct == pytest.approx(78.89370402, rel=1e-9)
    assert rep.achieved_bytes_per_s == pytest.approx(200.0 * read, rel=1e-12)
    # 989e12 / 13,220,446,208 = 74,808.37 prompt tok/s
    assert rep.prefill_ceiling_tokens_per_s == pytest.approx(74_808.36762, rel=1e-9)
    assert rep.mfu_pct == pytest.approx(40.10246575, rel=1e-9)
    assert rep.decode_above_ceiling is False
    assert rep.prefill_above_ceiling is False
    assert rep.above_ceiling is False


def test_report_flags_throughput_above_ceiling(llama7b):
    # 300 tok/s at batch 1 is more than the 248.6 tok/s the bandwidth allows: measurement error
    rep = roofline_report(RooflineInputs(
        llama7b, WEIGHTS, KV, BW, PEAK, 1, 0, output_tokens_per_s=300.0))
    assert rep.decode_above_ceiling is True
    assert rep.above_ceiling is True
    assert rep.mbu > 1.0
    # prefill above its 74,808 tok/s compute ceiling is flagged the same way
    rep = roofline_report(
        RooflineInputs(llama7b,
        WEIGHTS,
        KV,
        BW,
        PEAK,
        1,
        0,
        output_tokens_per_s=100.0,
        prefill_tokens_per_s=80_000.0,
        mean_prompt_len=1023),
    )
    assert rep.decode_above_ceiling is False
    assert rep.prefill_above_ceiling is True
    assert rep.above_ceiling is True


def test_report_large_batch_is_compute_bound(llama7b):
    # batch 1024, weights only: bandwidth ceiling 1024 x 3.35e12 / (13,476,831,232 - 2 x 4096 x
    # (32,000 - 1,024) unread embedding rows) = 259,425.3
    # compute ceiling 989e12 / 13,214,154,752 = 74,843.98 -> the lower one binds
    rep = roofline_report(RooflineInputs(
        llama7b, WEIGHTS, KV, BW, PEAK, 1024, 0, output_tokens_per_s=80_000.0))
    assert rep.decode_bandwidth_ceiling_tokens_per_s == pytest.approx(259_425.2685, rel=1e-9)
    assert rep.decode_compute_ceiling_tokens_per_s == pytest.approx(74_843.98500, rel=1e-9)
    assert rep.decode_bound == "compute"
    assert rep.above_ceiling is True  # 80,000 > 74,844


def test_report_nulls_where_not_computable(llama7b):
    # unknown GPU (no bandwidth, no peak) and no measurement: numbers that need them are null
    rep = roofline_report(RooflineInputs(
        llama7b, WEIGHTS, KV, None, None, 8, 100, output_tokens_per_s=None))
    msgspec.json.encode(rep)
    assert rep.decode_bytes_per_step == WEIGHTS - 2 * 4096 * (32000 - 8) + 8 * 100 * KV
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
        assert getattr(rep, key) is None, key
    # batch size unknown: no decode numbers at all
    rep = roofline_report(RooflineInputs(
        llama7b, WEIGHTS, KV, BW, PEAK, None, 100, output_tokens_per_s=50.0))
    assert rep.decode_bytes_per_step is None
    assert rep.mbu is None
    assert rep.above_ceiling is None


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        decode_bytes_per_step(WEIGHTS, KV, batch_size=-1, mean_context_len=0)
    with pytest.raises(ValueError):
        decode_bandwidth_ceiling(WEIGHTS, 0.0, 1)


# ---------------------------------------------------------------- window vs decode-step MBU
# The H100 run of issue 11 (vLLM 0.26.0, H100 SXM, llama-2-7b bf16 dummy weights, 512 in /
# 128 out, ignore EOS). Inputs from the catalogs: weights 13,476,831,232 B, KV 524,288 B/token,
# 3,350 GB/s. Mean context while decoding L = 512 + 128 / 2 = 576 tokens, so each sequence
# adds 576 x 524,288 = 301,989,888 B of KV cache to a step.
#
# 128 streams: 4,258 output tok/s, ITL p50 19.4 ms. The 48.0 GB per step is the weights
# plus the KV of (48.0e9 - 13.477e9) / 301,989,888 = 114.3 sequences: the running gauge's mean
# that run reported (the issue gives the bytes, not the gauge; its 53 % window MBU follows from
# the same 114.3, while B = 128 would give 51.8 %).
#   bytes/step      = 13,476,831,232 + 114.3 x 301,989,888 = 47,994,275,430.4 B
#   window MBU      = 47,994,275,430.4 x (4,258 / 114.3) / 3.35e12 = 1.78792e12 / 3.35e12 = 53.37 %
#   decode-step MBU = 47,994,275,430.4 / 0.0194 s / 3.35e12 = 2.47393e12 / 3.35e12 = 73.85 %
# 1 stream: 160 output tok/s, TPOT 6.15 ms; the running gauge's time average was 0.90 (it read
# 0 between requests), but every decode step ran exactly one sequence:
#   bytes/step      = 13,476,831,232 + 1 x 301,989,888 = 13,778,821,120 B
#   decode-step MBU = 13,778,821,120 / 0.00615 s / 3.35e12 = 2.24046e12 / 3.35e12 = 66.88 %
#   window MBU      = 13,778,821,120 x 160 / 3.35e12 = 65.81 %   (batch 1)
#   the old figure  = (13,476,831,232 + 0.9 x 301,989,888) x (160 / 0.9) / 3.35e12 = 72.96 %

H100_IN, H100_OUT = 512, 128


@pytest.fixture(scope="module")
def h100_inputs(llama7b):
    gpu = catalog()["H100-SXM"]
    return {
        "weights": float(weight_bytes(llama7b, "bf16", 1)),
        "kv": float(kv_bytes_per_token(llama7b, 1, 2)),
        "bw": gpu.memory_bandwidth_gbps * 1e9,
        "context": H100_IN + H100_OUT / 2,
    }


def test_h100_inputs_from_the_catalogs(h100_inputs):
    assert h100_inputs == {
        "weights": 13_476_831_232.0,
        "kv": 524_288.0,
        "bw": 3.35e12,
        "context": 576.0,
    }


def test_h100_128_streams_window_and_decode_step_mbu(h100_inputs):
    i = h100_inputs
    step = decode_bytes_per_step(i["weights"], i["kv"], 114.3, i["context"])
    assert step == pytest.approx(47_994_275_430.4, rel=1e-12)  # 48.0 GB
    assert round(step / 1e9, 1) == 48.0
    window = mbu(4258.0, 114.3, step, i["bw"])
    assert window == pytest.approx(0.5337084258, rel=1e-9)
    assert round(100 * window) == 53  # what infer-prof printed
    decode = decode_step_mbu(step, 0.0194, i["bw"])
    assert decode == pytest.approx(0.7384870816, rel=1e-9)
    assert round(100 * decode) == 74


def test_h100_one_stream_batch_is_one_not_the_gauges_time_average(h100_inputs):
    i = h100_inputs
    # the running gauge scraped once a second, 0 in one scrape of ten: time average 0.90
    t = [float(k) for k in range(11)]
    running = [1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1]
    assert ts.time_weighted_mean(t, running) == pytest.approx(0.9, rel=1e-12)
    batch = ts.busy_mean(t, running)
    assert batch == 1.0
    step = decode_bytes_per_step(i["weights"], i["kv"], batch, i["context"])
    assert step == 13_778_821_120
    decode = decode_step_mbu(step, 0.00615, i["bw"])
    assert decode == pytest.approx(0.6687936474, rel=1e-9)
    assert round(100 * decode) == 67  # the figure from TPOT
    assert mbu(160.0, batch, step, i["bw"]) == pytest.approx(0.6580929490, rel=1e-9)
    # the old batch (0.90) invented 11 % more decode steps than ran: 73 %
    old_step = decode_bytes_per_step(i["weights"], i["kv"], 0.9, i["context"])
    assert round(100 * mbu(160.0, 0.9, old_step, i["bw"])) == 73


def _h100_summary(tps: float, itl_p50_ms: float | None, tpot_p50_ms: float) -> Summary:
    return Summary(
        output_throughput=tps,
        duration_s=30.0,
        total_prompt_tokens=round(30 * tps * H100_IN / H100_OUT),
        itl_ms=Distribution(p50=itl_p50_ms) if itl_p50_ms is not None else None,
        tpot_ms=Distribution(p50=tpot_p50_ms),
    )


def test_result_block_reports_both_mbus_with_their_sources(llama7b):
    """What a run's result holds (economics.roofline_block, as the runner calls it)."""
    gpu = catalog()["H100-SXM"]
    batch, source = decode_batch({"running_busy_mean": 114.3, "running_mean": 114.3}, 127.9, 128)
    assert (batch, source) == (114.3, "server_running_busy_mean")
    rep = roofline_block(
        llama7b, gpu, 1, "bf16", _h100_summary(4258.0, 19.4, 25.7),
        DecodeLoad(batch, 512, 128, source)
    )
    msgspec.json.encode(rep)
    assert rep.batch_size == 114.3 and rep.batch_source == "server_running_busy_mean"
    assert rep.mean_context_len == 576.0
    # 13,476,831,232 B of weights less 2 x 4096 x (32,000 - 114.3) B of embedding rows no token
    # of the step gathers, + 114.3 x 576 x 524,288 B of KV
    assert rep.decode_bytes_per_step == pytest.approx(47_733_067_776.0, rel=1e-12)
    assert rep.mbu_pct == pytest.approx(53.08037309, rel=1e-9)
    assert rep.decode_step_time_s == pytest.approx(0.0194, rel=1e-12)
    assert rep.decode_step_time_source == "itl_p50"  # not the TPOT p50 of 25.7 ms
    assert rep.decode_step_bytes_per_s == pytest.approx(47_733_067_776.0 / 0.0194, rel=1e-9)
    assert rep.decode_step_mbu_pct == pytest.approx(73.44678839, rel=1e-9)
    assert rep.definitions == MBU_DEFINITIONS
    assert "window" in rep.definitions["mbu"]
    assert "decode_step_time_s" in rep.definitions["decode_step_mbu"]

    # one stream: the busy mean of the gauge (1.0), not its time average (0.90); no ITL
    # recorded here, so the step time is the TPOT p50
    batch, source = decode_batch({"running_busy_mean": 1.0, "running_mean": 0.9}, 1.0, 1)
    rep = roofline_block(llama7b, gpu, 1, "bf16", _h100_summary(160.0, None, 6.15),
                         DecodeLoad(batch, 512, 128, source))
    assert rep.batch_size == 1.0
    assert rep.decode_step_time_source == "tpot_p50"
    assert rep.decode_step_mbu_pct == pytest.approx(65.60701523, rel=1e-9)
    assert rep.mbu_pct == pytest.approx(64.55730299, rel=1e-9)


def test_decode_batch_falls_back_to_the_client_then_the_asked_concurrency():
    assert decode_batch({}, 3.5, 4) == (3.5, "client_in_flight_busy_mean")
    assert decode_batch({"running_busy_mean": None}, None, 4) == (4.0, "asked_concurrency")


def test_decode_step_mbu_is_null_without_a_step_time(llama7b):
    rep = roofline_report(RooflineInputs(
        llama7b, WEIGHTS, KV, BW, PEAK, 1, 0, output_tokens_per_s=200.0))
    assert rep.mbu is not None
    assert rep.decode_step_mbu is None and rep.decode_step_time_source is None
    with pytest.raises(ValueError):
        decode_step_mbu(WEIGHTS, 0.0, BW)
