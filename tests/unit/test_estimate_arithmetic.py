"""The estimate's arithmetic against hand-computed cases (issue 37): a memory-bound decode step,
a compute-bound prefill, a mixture of experts at batch 1 and 256, a tensor-parallel
all-reduce, the closed loop's rates; and the Hopper defaults against the H100 runs they were
fitted on (../shared/measurements/h100-2026-11-23.csv)."""

from __future__ import annotations

import msgspec
import pytest

from infer_prof.catalog.gpus import find_gpu
from infer_prof.catalog.models import resolve_model
from infer_prof.core.estimate.collectives import allreduce_step_s, ring_allreduce_s
from infer_prof.core.estimate.decode_step import step_cost
from infer_prof.core.estimate.deployment import Deployment
from infer_prof.core.estimate.factors import HOPPER_FIT, StepFactors, default_factors
from infer_prof.core.estimate.frontier_model import (
    concurrency_levels,
    predict_frontier,
    predict_point,
)
from infer_prof.core.estimate.prefill import chunks, prefill_s

H100 = find_gpu("H100-SXM")  # 3,350 GB/s, 989.5 bf16 TFLOP/s
LLAMA = resolve_model("llama-2-7b").spec
MIXTRAL = resolve_model("mixtral-8x7b").spec


def D(arch, gpu, **kw) -> Deployment:  # noqa: N802 - reads as the deployment it builds
    """A deployment of ``arch`` on ``gpu`` (keywords as :class:`Deployment`'s)."""
    return Deployment(arch=arch, gpu=gpu, **kw)


#: Round factors, so the hand arithmetic below stays readable.
HALF = StepFactors(mbu=0.5, mbu_kv=0.5, mfu_decode=0.5, mfu_prefill=0.5, step_overhead_ms=1.0,
                   allreduce_efficiency=1.0, allreduce_latency_us=10.0, family="test",
                   source="round numbers for hand arithmetic")


def test_memory_bound_decode_step_by_hand():
    # llama-2-7b bf16, batch 1, context 576 on one H100 SXM:
    #   weights  = 2 B x 6,738,415,616 params               = 13,476,831,232 B
    #   KV       = 576 tokens x 2 (K, V) x 32 layers x 32 heads x 128 x 2 B = 576 x 524,288
    #                                                       =    301,989,888 B
    #   memory   = 13,778,821,120 B / (3.35e12 B/s x 0.5)   = 8.22616 ms
    #   compute  = (2 x 6,476,005,376 linear + 2 x 32,000 x 4,096 LM head
    #               + 4 x 32 layers x 576 x 4,096) FLOP = 13,516,144,640 FLOP
    #              / (989.5e12 x 0.5)                       = 0.02732 ms  -> memory bound
    #   step     = 8.22616 + 1 ms overhead                  = 9.22616 ms
    s = step_cost(D(LLAMA, H100, gpu_count=1, precision="bf16", factors=HALF), batch=1, context=576)
    assert s.weight_bytes == 13_476_831_232
    assert s.kv_bytes == 301_989_888
    assert s.decode_flops == 13_516_144_640
    assert s.memory_s * 1e3 == pytest.approx(8.22616, abs=1e-5)
    assert s.compute_s * 1e3 == pytest.approx(0.027320, abs=1e-6)
    assert s.bound == "memory"
    assert s.time_s * 1e3 == pytest.approx(9.22616, abs=1e-5)


def test_compute_bound_prefill_by_hand():
    # one 2,048-token prompt of llama-2-7b, alone (no decode batch), one chunk (budget 8,192):
    #   FLOPs    = 2,048 x (2 x 6,476,005,376 + 4 x 32 x (2,048 + 1) / 2 x 4,096)
    #            = 2,048 x (12,952,010,752 + 537,133,056) = 2,048 x 13,489,143,808
    #            = 27,625,766,518,784 FLOP
    #   compute  = / (989.5e12 x 0.5) = 55.8378 ms; weights 13.48e9 B / 1.675e12 = 8.05 ms
    #   -> compute bound; + 1 ms overhead = 56.8378 ms
    assert chunks(2048, 8192, 0) == [2048]
    t = prefill_s(D(LLAMA, H100, gpu_count=1, precision="bf16", max_num_batched_tokens=8192,
                    factors=HALF),
                  input_len=2048, decode_batch=0, decode_context=0)
    assert t * 1e3 == pytest.approx(56.8378, abs=1e-3)
    s = step_cost(D(LLAMA, H100, gpu_count=1, precision="bf16", factors=HALF),
                  batch=0, context=0, prefill_tokens=2048, prefill_context=1024.5)
    assert s.bound == "compute"
    assert s.prefill_flops == pytest.approx(27_625_766_518_784)


def test_an_fp8_model_multiplies_its_weights_at_the_fp8_peak_and_attends_at_the_kv_caches():
    # the prompt of test_compute_bound_prefill_by_hand in fp8 W8A8 on one H100 SXM
    # (fp8 peak 1,979 TFLOP/s, 16-bit 989.5):
    #   weights' FLOPs   = 2,048 x 12,952,010,752        = 26,525,718,020,096 FLOP
    #   attention FLOPs  = 2,048 x 537,133,056            =  1,100,048,498,688 FLOP
    #   16-bit KV cache: 26.5257e12 / (1979e12 x 0.5) + 1.10005e12 / (989.5e12 x 0.5)
    #                  = 26.8072 + 2.22344 = 29.0307 ms
    #   fp8 KV cache (FlashAttention 3 attends in fp8): 26.8072 + 1.11172 = 27.9189 ms
    def compute_ms(kv_bytes: float) -> float:
        d = D(LLAMA, H100, gpu_count=1, precision="fp8", factors=HALF, kv_dtype_bytes=kv_bytes)
        return step_cost(d, batch=0, context=0, prefill_tokens=2048,
                         prefill_context=1024.5).compute_s * 1e3
    assert compute_ms(2.0) == pytest.approx(29.0307, abs=1e-3)
    assert compute_ms(1.0) == pytest.approx(27.9189, abs=1e-3)
    # an Ampere GPU has no fp8 math: its fp8 KV cache attends in 16-bit
    a100 = find_gpu("A100-80GB-SXM")
    def a100_ms(kv_bytes: float) -> float:
        d = D(LLAMA, a100, gpu_count=1, precision="bf16", factors=HALF, kv_dtype_bytes=kv_bytes)
        return step_cost(d, batch=0, context=0, prefill_tokens=2048,
                         prefill_context=1024.5).compute_s
    assert a100_ms(1.0) == pytest.approx(a100_ms(2.0))


def test_prefill_is_chunked_beside_the_decode_batch():
    # budget 2,048 tokens a step, 48 decoding: 2,000 prompt tokens a step
    assert chunks(5000, 2048, 48) == [2000, 2000, 1000]
    assert chunks(10, 8, 100) == [1] * 10  # a full step still takes one prompt token


def test_moe_reads_two_of_eight_experts_at_batch_1_and_all_at_256():
    # mixtral-8x7b bf16: 93,405,585,408 B of weights, of which routed experts
    # 32 layers x 8 experts x 3 x 4,096 x 14,336 x 2 B = 90,194,313,216 B.
    # batch 1, top-2 of 8: 8 x (1 - (6/8)^1) = 2 experts a layer, so 6/8 of the experts unread:
    #   93,405,585,408 - 0.75 x 90,194,313,216 = 25,759,850,496 B
    one = step_cost(D(MIXTRAL, H100, gpu_count=1, precision="bf16", factors=HALF),
                    batch=1, context=0)
    assert MIXTRAL.moe is not None and MIXTRAL.moe.expected_distinct(1) == 2.0
    assert one.weight_bytes == pytest.approx(25_759_850_496)
    # batch 256: 8 x (1 - 0.75^256) = 8 - 8 x 1e-32: every expert of every layer
    full = step_cost(D(MIXTRAL, H100, gpu_count=1, precision="bf16", factors=HALF),
                     batch=256, context=0)
    assert MIXTRAL.moe.expected_distinct(256) == pytest.approx(8.0)
    assert full.weight_bytes == pytest.approx(93_405_585_408)
    # the step's prompt tokens route to experts too: 1 decode + 3 prompt tokens reach
    # 8 x (1 - 0.75^4) = 5.46875 experts
    mixed = step_cost(D(MIXTRAL, H100, gpu_count=1, precision="bf16", factors=HALF),
                      batch=1, context=0, prefill_tokens=3, prefill_context=2)
    assert mixed.weight_bytes == pytest.approx(93_405_585_408 - 0.75**4 * 90_194_313_216)


def test_tensor_parallel_allreduce_by_hand():
    # 128 tokens x hidden 8,192 x 2 B = 2,097,152 B over 4 GPUs, 450 GB/s a direction:
    #   ring: 2 x 3/4 x 2,097,152 B / 450e9 B/s = 6.99051 us, + 10 us latency = 16.99051 us
    #   a step of 80 layers x 2 all-reduces = 160 x 16.99051 us = 2.718481 ms
    assert ring_allreduce_s(2_097_152, 4, 450e9, 1.0, 10e-6) * 1e6 == pytest.approx(16.99051,
                                                                                      abs=1e-5)
    step = allreduce_step_s(tokens=128, hidden=8192, layers=80, gpus=4, link_bytes_per_s=450e9,
                            efficiency=1.0, latency_s=10e-6)
    assert step is not None and step * 1e3 == pytest.approx(2.718481, abs=1e-6)
    assert allreduce_step_s(tokens=128, hidden=8192, layers=80, gpus=1, link_bytes_per_s=None,
                            efficiency=1.0, latency_s=10e-6) == 0.0
    # no interconnect figure: unknown, never invented
    assert allreduce_step_s(tokens=128, hidden=8192, layers=80, gpus=4, link_bytes_per_s=None,
                            efficiency=1.0, latency_s=10e-6) is None


def test_tensor_parallel_splits_the_step_and_counts_the_allreduce_only_with_a_link():
    one = step_cost(D(LLAMA, H100, gpu_count=1, precision="bf16", factors=HALF),
                    batch=8, context=576)
    two = step_cost(D(LLAMA, H100, gpu_count=2, precision="bf16", factors=HALF, link_gbps=900),
                    batch=8, context=576)
    assert two.weight_bytes == pytest.approx(one.weight_bytes / 2, rel=1e-4)
    assert two.kv_bytes == pytest.approx(one.kv_bytes / 2)
    assert two.allreduce_s is not None and two.allreduce_s > 0
    p = predict_point(D(LLAMA, H100, gpu_count=2, precision="bf16", factors=HALF),
                      input_len=512, output_len=128, concurrency=8)
    assert not p.allreduce_counted and p.allreduce_ms is None


def test_closed_loop_rates_follow_from_ttft_and_tpot():
    # R = TTFT + (O - 1) x TPOT; output tok/s per GPU = C x O / R / n
    p = predict_point(D(LLAMA, H100, gpu_count=1, precision="bf16", factors=HALF),
                      input_len=512, output_len=128, concurrency=16)
    r_s = (p.ttft_ms_p50 + 127 * p.tpot_ms_p50) / 1e3
    assert p.output_tok_s_per_gpu == pytest.approx(16 * 128 / r_s)
    assert p.total_tok_s_per_gpu == pytest.approx(16 * 640 / r_s)
    assert p.interactivity == pytest.approx(1000 / p.tpot_ms_p50)
    # at one stream nothing waits: TTFT is the prompt's own step
    one = predict_point(D(LLAMA, H100, gpu_count=1, precision="bf16", factors=HALF),
                        input_len=512, output_len=128, concurrency=1)
    alone = prefill_s(D(LLAMA, H100, gpu_count=1, precision="bf16", max_num_batched_tokens=8192,
                        factors=HALF),
                      input_len=512, decode_batch=0, decode_context=576)
    assert one.ttft_ms_p50 == pytest.approx(alone * 1e3)


def test_frontier_runs_to_the_kv_limit_and_trades_interactivity_for_throughput():
    assert concurrency_levels(100) == [1, 2, 4, 8, 16, 32, 64, 100]
    assert concurrency_levels(64) == [1, 2, 4, 8, 16, 32, 64]
    assert concurrency_levels(0) == []
    pts = predict_frontier(D(LLAMA, H100, gpu_count=1, precision="bf16", factors=HOPPER_FIT),
                           input_len=512, output_len=128, max_concurrency=128)
    tput = [p.output_tok_s_per_gpu for p in pts]
    inter = [p.interactivity for p in pts]
    assert tput == sorted(tput) and inter == sorted(inter, reverse=True)


@pytest.mark.parametrize(("precision", "concurrency", "out_tok_s", "tpot_ms"), [
    ("bf16", 1, 160.1, 6.17), ("bf16", 32, 2649, 10.25), ("bf16", 128, 4258, 25.72),
    ("fp8", 128, 5128, 21.27),
])
def test_hopper_defaults_reproduce_the_h100_runs(precision, concurrency, out_tok_s, tpot_ms):
    # ../shared/measurements/h100-2026-11-23.csv, llama-2-7b, 512 in / 128 out, vLLM 0.26.0
    p = predict_point(D(LLAMA, H100, gpu_count=1, precision=precision,
                        factors=default_factors(H100)),
                      input_len=512, output_len=128, concurrency=concurrency)
    assert p.output_tok_s_per_gpu == pytest.approx(out_tok_s, rel=0.10)
    assert p.tpot_ms_p50 == pytest.approx(tpot_ms, rel=0.10)


def test_default_factors_say_where_they_come_from():
    assert default_factors(H100) is HOPPER_FIT
    assert "h100-2026-11-23.csv" in HOPPER_FIT.source
    a100 = default_factors(find_gpu("A100-80GB-SXM"))
    assert a100.family == "Ampere" and "no Ampere GPU measured" in a100.source
    assert default_factors(find_gpu("MI300X")).family == "CDNA3"
    with pytest.raises(ValueError, match="mbu"):
        msgspec.structs.replace(HALF, mbu=1.5).__post_init__()


def test_above_the_kv_limit_requests_queue_and_wait_in_ttft():
    # 64 streams where 16 run at once: the rates of 16, and by Little's law
    # R_64 = 64 / lambda_16 = 4 x R_16, the extra wait all in TTFT
    kw = {"input_len": 512, "output_len": 128}
    m = predict_point(D(LLAMA, H100, factors=HALF), concurrency=16, **kw)
    q = predict_point(D(LLAMA, H100, factors=HALF, max_running=16), concurrency=64, **kw)
    assert q.concurrency == 64
    assert q.output_tok_s_per_gpu == m.output_tok_s_per_gpu and q.tpot_ms_p50 == m.tpot_ms_p50
    r16 = m.ttft_ms_p50 + 127 * m.tpot_ms_p50
    assert q.ttft_ms_p50 + 127 * q.tpot_ms_p50 == pytest.approx(4 * r16)
    assert predict_point(D(LLAMA, H100, factors=HALF, max_running=16), concurrency=8,
                         **kw) == predict_point(D(LLAMA, H100, factors=HALF), concurrency=8, **kw)


def test_interconnect_figures_name_catalog_gpus_and_their_stated_figure():
    from infer_prof.catalog.gpus import catalog
    from infer_prof.catalog.interconnects import interconnects, link_gbps

    links = interconnects()
    assert links["H100-SXM"].bidirectional_gbps == 900
    for key, link in links.items():
        g = catalog()[key]  # a catalog key
        assert g.nvlink or link.topology == "mesh", key
        figure = f"{link.bidirectional_gbps:g}"
        stated = figure in link.source or f"{link.bidirectional_gbps / 1000:g} TB/s" in link.source
        assert stated or "2x 900" in link.source, (key, link.source)
    assert link_gbps("H100-SXM", 8) == 900 and link_gbps("H100-SXM", 16) is None
    assert link_gbps("L40S", 2) is None and link_gbps("A100-80GB-PCIe", 2) is None
    # MI300X: one 128 GB/s Infinity Fabric link to each peer, all used at once
    assert links["MI300X"].topology == "mesh"
    assert link_gbps("MI300X", 2) == 128 and link_gbps("MI300X", 8) == 7 * 128
