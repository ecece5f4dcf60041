"""Planner against hand-computed cases. Every byte figure is worked out here from the config
numbers, not by calling the planner's own helpers.

Shared arithmetic (bytes; GiB = 2**30), the GPU model following vLLM 0.26.0 (issue 11):
- budget = round(0.9 x memory), memory = the catalog's cuda_visible_gib (what CUDA reports:
  H100/A100 80GB 79.18, RTX 4090 23.52, H200 139.55, A100 40GB PCIe 39.59, SXM 39.39,
  L40S 44.53) as
  int(gib x 2**30)
- kv_cache = budget - weights - non_torch - activation; non_torch = round(0.22 GiB) on one GPU
  (+0.5 GiB when tensor parallel); 0 for a CPU memory budget
- GPU activation = T x (13 x hidden / 2 + 6 x intermediate / tp) + 2 x S x vocab, with the
  server defaults (T, S): A100 or < 70 GiB -> (2048, 256); >= 70 GiB -> (8192, 1024)
- CPU activation (memory budget) = 2 x T x (4 x hidden + 3 x intermediate) + 8 x S x vocab,
  (T, S) = (2048, 128)
- KV blocks of 16 tokens; a 768-token sequence (512 in + 256 out) takes 48 blocks

Changed deliberately in issue 11 (budget from the CUDA-visible total instead of the nominal
memory; overhead 0.22 GiB + calibrated activation instead of 1 GiB + the old estimate): the
expected figures of every GPU case below and of the grid.
"""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from infer_prof.catalog.gpus import DetectedGpu, catalog, find_gpu
from infer_prof.catalog.models import resolve_model
from infer_prof.cli.plan import parse_bytes, plan_command
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.planning.memory import kv_bytes_per_token, weight_bytes
from infer_prof.core.planning.plan_result import MemoryBreakdown, Plan
from infer_prof.core.planning.planner import PlanRequest, plan
from infer_prof.core.planning.precisions import PlanError, normalize_precision
from infer_prof.run.engine_setup import planned_engine_version
from infer_prof.servers.vllm_args import vllm_engine_args


def engine_args(p: Plan) -> dict:
    """The plan's settings as vLLM spells them (the engine arguments the plan used to hold)."""
    return vllm_engine_args(p.settings, planned_engine_version(p))

GIB = 2**30
MIB = 2**20


def mem(p: Plan) -> MemoryBreakdown:
    assert p.memory is not None
    return p.memory


def spec(name: str) -> ModelSpec:
    s = resolve_model(name).spec
    assert s is not None
    return s


# ---- the four models, by hand ------------------------------------------------------------
# per-layer linear = hidden x (q + 2 kv) + q x hidden + 3 x hidden x intermediate
L7_LINEAR = 32 * (4096 * (4096 + 2 * 4096) + 4096 * 4096 + 3 * 4096 * 11008)  # 6_476_005_376
L7_EMB = 2 * 32000 * 4096  # embed + lm_head, untied
L7_NORMS = 2 * 4096 * 32 + 4096
L13_LINEAR = 40 * (5120 * (5120 + 2 * 5120) + 5120 * 5120 + 3 * 5120 * 13824)
L13_EMB = 2 * 32000 * 5120
L13_NORMS = 2 * 5120 * 40 + 5120
L70_LINEAR = 80 * (8192 * (8192 + 2 * 1024) + 8192 * 8192 + 3 * 8192 * 28672)  # 68_451_041_280
L70_EMB = 2 * 32000 * 8192
L31_70_EMB = 2 * 128256 * 8192
L70_NORMS = 2 * 8192 * 80 + 8192

# KV bytes per token (bf16): 2 x layers x kv_heads x head_dim x 2
KV7 = 2 * 32 * 32 * 128 * 2  # 524_288
KV13 = 2 * 40 * 40 * 128 * 2  # 819_200
KV70 = 2 * 80 * 8 * 128 * 2  # 327_680

# activation with (T, S): T (13 H / 2 + 6 I) + 2 S V
ACT7_SMALL = 2048 * (13 * 4096 // 2 + 6 * 11008) + 2 * 256 * 32000  # 206_176_256
ACT13_SMALL = 2048 * (13 * 5120 // 2 + 6 * 13824) + 2 * 256 * 32000  # 254_410_752
ACT70_SMALL = 2048 * (13 * 8192 // 2 + 6 * 28672) + 2 * 256 * 32000  # 477_757_440
ACT70_BIG = 8192 * (13 * 8192 // 2 + 6 * 28672) + 2 * 1024 * 32000  # 1_911_029_760

NON_TORCH = round(0.22 * GIB)  # 236_223_201
BUDGET_80 = round(0.9 * int(79.18 * GIB))  # 0.9 x 85_018_877_624 = 76_516_989_862
BUDGET_24 = round(0.9 * int(23.52 * GIB))  # 0.9 x 25_254_407_700 = 22_728_966_930
BUDGET_141 = round(0.9 * int(139.55 * GIB))  # 0.9 x 149_840_671_539 = 134_856_604_385


def test_model_parameter_counts_by_hand():
    assert L7_LINEAR + L7_EMB + L7_NORMS == 6_738_415_616 == spec("llama-2-7b").param_count()
    assert L13_LINEAR + L13_EMB + L13_NORMS == 13_015_864_320 == spec("llama-2-13b").param_count()
    assert L70_LINEAR + L70_EMB + L70_NORMS == 68_976_648_192 == spec("llama-2-70b").param_count()
    assert (L70_LINEAR + L31_70_EMB + L70_NORMS == 70_553_706_496
            == spec("llama-3.1-70b").param_count())


def test_weight_bytes_per_precision_by_hand():
    m = spec("llama-2-70b")
    other16 = 2 * (L70_EMB + L70_NORMS)  # embeddings, lm_head, norms stay 16-bit
    assert weight_bytes(m, "bf16") == 2 * (L70_LINEAR + L70_EMB + L70_NORMS) == 137_953_296_384
    # fp8: 1 B per linear weight + 7 fp32 per-tensor scales per layer
    assert weight_bytes(m, "fp8") == L70_LINEAR + 7 * 4 * 80 + other16 == 69_502_257_344
    # nf4: 0.5 B + 4/64 (fp32 absmax per 64 weights; vLLM undoes the nested statistics)
    assert L70_LINEAR % 16 == 0
    nf4 = L70_LINEAR // 2 + L70_LINEAR // 16
    assert weight_bytes(m, "bnb-nf4") == nf4 + other16 == 39_554_924_544
    # AWQ/GPTQ group 128: 0.5 B + fp16 scale/128 + 4-bit zero/128
    awq = L70_LINEAR // 2 + 2 * L70_LINEAR // 128 + L70_LINEAR // 256
    assert weight_bytes(m, "awq") == weight_bytes(m, "gptq") == awq + other16
    # tensor parallel 2: linear and embeddings split, norms replicated
    assert weight_bytes(m, "bf16", tp=2) == L70_LINEAR + L70_EMB + 2 * L70_NORMS


def test_kv_bytes_per_token_by_hand():
    assert kv_bytes_per_token(spec("llama-2-7b")) == KV7
    assert kv_bytes_per_token(spec("llama-2-13b")) == KV13
    assert kv_bytes_per_token(spec("llama-2-70b")) == KV70
    assert kv_bytes_per_token(spec("llama-2-70b"), tp=2) == KV70 // 2
    # 16 GPUs > 8 KV heads: each GPU keeps one (replicated) head
    assert kv_bytes_per_token(spec("llama-2-70b"), tp=16) == 2 * 80 * 1 * 128 * 2
    assert kv_bytes_per_token(spec("llama-2-70b"), kv_dtype_bytes=1) == KV70 // 2


# ---- detailed cases -----------------------------------------------------------------------


def test_budget_literals():
    assert ACT7_SMALL == 206_176_256 and ACT13_SMALL == 254_410_752
    assert ACT70_SMALL == 477_757_440 and ACT70_BIG == 1_911_029_760
    assert NON_TORCH == 236_223_201
    assert (BUDGET_80, BUDGET_24, BUDGET_141) == (76_516_989_862, 22_728_966_930,
                                                  134_856_604_385)


def test_llama2_7b_on_a100_80gb_sxm_bf16_holds_128():
    weights = 2 * (L7_LINEAR + L7_EMB + L7_NORMS)  # 13_476_831_232
    kv_cache = BUDGET_80 - weights - NON_TORCH - ACT7_SMALL  # 62_597_759_173
    blocks = kv_cache // (16 * KV7)  # 7462
    p = plan(PlanRequest(spec("llama-2-7b"), find_gpu("A100-80GB-SXM"), concurrency=128))
    m = mem(p)
    assert p.precision == "bf16" and p.fits_load and p.rejections == ()
    assert (m.budget_bytes, m.weights_bytes, m.activation_bytes) == (BUDGET_80, weights, ACT7_SMALL)
    assert m.fixed_overhead_bytes == NON_TORCH
    assert m.kv_cache_bytes == kv_cache == 62_597_759_173
    assert m.kv_blocks == blocks == 7462
    assert m.max_sequences == 7462 // 48 == 155
    assert m.kv_needed_bytes == 128 * 48 * 16 * KV7
    assert engine_args(p) == {"dtype": "auto", "tensor_parallel_size": 1,
                             "gpu_memory_utilization": 0.9}
    assert p.warnings == () and p.queued == 0 and p.running_at_once == 128
    assert p.memory_source == "catalog: A100-80GB-SXM cuda_visible_gib 79.18"
    assert p.assumptions["overhead_model_vllm"] == "0.26.0"


def test_llama2_70b_on_a100_80gb_sxm_picks_bitsandbytes():
    nf4 = L70_LINEAR // 2 + L70_LINEAR // 16 + 2 * (L70_EMB + L70_NORMS)
    kv_cache = BUDGET_80 - nf4 - NON_TORCH - ACT70_SMALL  # 36_248_084_677
    p = plan(PlanRequest(spec("llama-2-70b"), find_gpu("A100-80GB-SXM"), concurrency=128,
             input_len=512, output_len=256))
    m = mem(p)
    assert p.precision == "bnb-nf4" and p.fits_load
    assert m.weights_bytes == nf4 == 39_554_924_544
    assert m.kv_cache_bytes == kv_cache == 36_248_084_677
    assert m.kv_blocks == kv_cache // (16 * KV70) == 6913
    assert m.max_sequences == 6913 // 48 == 144
    assert m.kv_needed_bytes == 128 * 48 * 16 * KV70 == 30 * GIB
    assert engine_args(p)["quantization"] == "bitsandbytes"
    assert "load_format" not in engine_args(p)  # vLLM >= 0.8 infers it (0.32 + vllm-bnb-plugin)
    rejected = {c.precision: c.reason for c in p.rejections}
    assert list(rejected) == ["bf16", "fp8", "int8"]
    assert "exceed the 71.26 GiB budget" in rejected["bf16"]
    assert "compute capability >= 8.9" in rejected["fp8"] and "8.0" in rejected["fp8"]
    assert "MoE" in rejected["int8"]


def test_llama2_70b_on_h200_fp8():
    fp8 = L70_LINEAR + 7 * 4 * 80 + 2 * (L70_EMB + L70_NORMS)  # 69_502_257_344
    kv_cache = BUDGET_141 - fp8 - NON_TORCH - ACT70_BIG  # 63_207_094_080
    p = plan(PlanRequest(spec("llama-2-70b"), find_gpu("H200"), concurrency=128))
    assert p.precision == "fp8" and p.fits_load
    assert mem(p).activation_bytes == ACT70_BIG
    assert mem(p).kv_cache_bytes == kv_cache == 63_207_094_080
    assert mem(p).max_sequences == (kv_cache // (16 * KV70)) // 48 == 251
    assert engine_args(p)["quantization"] == "fp8_per_tensor"  # vLLM 0.32 refuses online "fp8"
    assert engine_args(plan(PlanRequest(spec("llama-2-70b"), find_gpu("H200"), concurrency=128,
                            vllm_version=(0, 10, 1))))["quantization"] == "fp8"


def test_llama2_13b_on_rtx4090_fp8_because_bf16_weights_exceed_budget():
    bf16 = 2 * (L13_LINEAR + L13_EMB + L13_NORMS)  # 26_031_728_640 > 22_728_966_930
    fp8 = L13_LINEAR + 7 * 4 * 40 + 2 * (L13_EMB + L13_NORMS)  # 13_343_960_160
    kv_cache = BUDGET_24 - fp8 - NON_TORCH - ACT13_SMALL  # 8_894_372_817
    p = plan(PlanRequest(spec("llama-2-13b"), find_gpu("RTX-4090"), concurrency=1))
    assert bf16 > BUDGET_24
    assert p.precision == "fp8" and p.fits_load
    assert mem(p).kv_cache_bytes == kv_cache == 8_894_372_817
    assert mem(p).max_sequences == (kv_cache // (16 * KV13)) // 48 == 14
    assert [c.precision for c in p.rejections] == ["bf16"]


def test_llama2_70b_on_h100_choice_depends_on_the_load():
    fp8 = L70_LINEAR + 7 * 4 * 80 + 2 * (L70_EMB + L70_NORMS)
    nf4 = L70_LINEAR // 2 + L70_LINEAR // 16 + 2 * (L70_EMB + L70_NORMS)
    fp8_kv = BUDGET_80 - fp8 - NON_TORCH - ACT70_BIG  # 4_867_479_557: 19 sequences
    nf4_kv = BUDGET_80 - nf4 - NON_TORCH - ACT70_BIG  # 34_814_812_357: 138 sequences
    one = plan(PlanRequest(spec("llama-2-70b"), find_gpu("H100-SXM"), concurrency=1))
    many = plan(PlanRequest(spec("llama-2-70b"), find_gpu("H100-SXM"), concurrency=128))
    assert (one.precision, mem(one).max_sequences) == ("fp8", (fp8_kv // (16 * KV70)) // 48)
    assert mem(one).max_sequences == 19
    assert (many.precision, mem(many).max_sequences) == ("bnb-nf4", (nf4_kv // (16 * KV70)) // 48)
    assert mem(many).max_sequences == 138
    fp8_rejection = next(c for c in many.rejections if c.precision == "fp8")
    assert "holds 19 sequences" in fp8_rejection.reason and "needs 128" in fp8_rejection.reason


def test_llama2_7b_on_rtx4090_at_128_runs_bf16_and_warns_about_queueing():
    kv_cache = BUDGET_24 - 2 * (L7_LINEAR + L7_EMB + L7_NORMS) - NON_TORCH - ACT7_SMALL
    assert kv_cache == 8_809_736_241
    p = plan(PlanRequest(spec("llama-2-7b"), find_gpu("RTX-4090"), concurrency=128,
             catalog=list(catalog().values())))
    assert p.precision == "bf16" and p.fits and not p.fits_load
    assert mem(p).max_sequences == (kv_cache // (16 * KV7)) // 48 == 21
    assert (p.running_at_once, p.queued) == (21, 107)
    assert any("only 21 of the 128" in w and "21 run at once and 107 wait" in w
               for w in p.warnings)
    assert p.queue_message() is not None and "21 of the 128" in (p.queue_message() or "")
    assert any(n.startswith("bnb-nf4 would hold") for n in p.notes)
    # 4 GPUs: weights 2 x linear / 4 + 2 x emb / 4 + 2 x norms = 3_369_607_168 per GPU;
    # activation 2048 x (13 x 4096 / 2 + 6 x 11008 / 4) + 2 x 256 x 32000;
    # KV = 22_728_966_930 - 3_369_607_168 - (0.22 + 0.5) GiB - activation = 18_481_539_121
    # -> // (16 x 524_288 / 4) -> 183 sequences (2 GPUs hold 74 at bf16)
    kv4 = BUDGET_24 - (2 * L7_LINEAR // 4 + 2 * L7_EMB // 4 + 2 * L7_NORMS) \
        - (NON_TORCH + GIB // 2) - (2048 * (13 * 4096 // 2 + 6 * 11008 // 4) + 2 * 256 * 32000)
    assert kv4 == 18_481_539_121
    assert (kv4 // (16 * KV7 // 4)) // 48 == 183
    assert "4 x RTX-4090 (tensor parallel 4) hold the whole load at bf16: 183 sequences" in \
        p.suggestions


def test_llama31_70b_on_rtx4090_nothing_fits_and_says_what_would():
    nf4 = L70_LINEAR // 2 + L70_LINEAR // 16 + 2 * (L31_70_EMB + L70_NORMS)
    assert nf4 == 42_709_041_152 > BUDGET_24
    p = plan(PlanRequest(spec("llama-3.1-70b"), find_gpu("RTX-4090"), concurrency=128,
             catalog=list(catalog().values())))
    assert not p.fits and p.precision is None and engine_args(p) == {}
    assert [c.label for c in p.rejections] == ["bf16", "fp8", "int8", "bnb-nf4", "bf16 + fp8 KV",
                                               "fp8 + fp8 KV", "bnb-nf4 + fp8 KV"]
    joined = "\n".join(p.suggestions)
    assert "4 x RTX-4090 (tensor parallel 4) hold the whole load at bnb-nf4" in joined
    assert "one A100-80GB-PCIe (80 GiB" in joined
    json.dumps(p.to_dict())  # serializable


def test_tensor_parallel_splits_weights_and_kv():
    bf16_per_gpu = L70_LINEAR + L70_EMB + 2 * L70_NORMS  # 68_977_967_104
    act = 2048 * (13 * 8192 // 2 + 6 * 28672 // 2) + 2 * 256 * 32000  # 301_596_672
    fixed = NON_TORCH + GIB // 2
    bf16_kv = BUDGET_80 - bf16_per_gpu - fixed - act  # 6_464_331_973: 51 sequences
    nf4 = L70_LINEAR * 9 // (16 * 2) + L70_EMB + 2 * L70_NORMS  # 19_778_781_184
    nf4_kv = BUDGET_80 - nf4 - fixed - act  # 55_663_517_893
    p = plan(PlanRequest(spec("llama-2-70b"), find_gpu("A100-80GB-SXM"), gpus=2, concurrency=128))
    bf16 = p.candidates[0].memory
    assert act == 301_596_672
    assert (bf16.weights_bytes, bf16.kv_cache_bytes) == (bf16_per_gpu, bf16_kv)
    assert bf16.kv_cache_bytes == 6_464_331_973
    assert bf16.max_sequences == (bf16_kv // (16 * KV70 // 2)) // 48 == 51
    # bf16 would queue; the highest precision that holds the whole load is nf4
    assert p.precision == "bnb-nf4"
    assert (mem(p).weights_bytes, mem(p).kv_cache_bytes) == (nf4, nf4_kv)
    assert mem(p).max_sequences == (nf4_kv // (16 * KV70 // 2)) // 48 == 442
    assert engine_args(p)["tensor_parallel_size"] == 2
    assert any("does not reduce it" in n for n in p.notes)


def test_tensor_parallel_must_divide_heads():
    with pytest.raises(PlanError, match="32 attention heads"):
        plan(PlanRequest(spec("llama-2-7b"), find_gpu("RTX-4090"), gpus=3))


# ---- the 4 x 8 x 2 grid --------------------------------------------------------------------
# (precision chosen, sequences of 768 tokens that fit) per GPU at concurrency 1 and 128.
# None = nothing fits. Checked against the hand arithmetic in `_by_hand` below.
GRID: dict[str, dict[str, list[tuple[str, int] | None]]] = {
    "llama-2-7b": {
        "RTX-4090": [("bf16", 21), ("bf16", 21)],
        "A100-40GB-PCIe": [("bf16", 60), ("bf16", 60)],
        "A100-40GB-SXM": [("bf16", 59), ("bf16", 59)],
        "A100-80GB-PCIe": [("bf16", 155), ("bf16", 155)],
        "A100-80GB-SXM": [("bf16", 155), ("bf16", 155)],
        "L40S": [("bf16", 72), ("bf16", 72)],
        "H100-SXM": [("bf16", 153), ("bf16", 153)],
        "H200": [("bf16", 298), ("bf16", 298)],
    },
    "llama-2-13b": {
        "RTX-4090": [("fp8", 14), ("fp8", 14)],
        "A100-40GB-PCIe": [("bf16", 18), ("bf16", 18)],
        "A100-40GB-SXM": [("bf16", 18), ("bf16", 18)],
        "A100-80GB-PCIe": [("bf16", 79), ("bf16", 79)],
        "A100-80GB-SXM": [("bf16", 79), ("bf16", 79)],
        "L40S": [("bf16", 26), ("bf16", 26)],
        "H100-SXM": [("bf16", 78), ("bf16", 78)],
        "H200": [("bf16", 170), ("bf16", 170)],
    },
    "llama-2-70b": {
        "RTX-4090": [None, None],
        "A100-40GB-PCIe": [None, None],
        "A100-40GB-SXM": [None, None],
        "A100-80GB-PCIe": [("bnb-nf4", 144), ("bnb-nf4", 144)],
        "A100-80GB-SXM": [("bnb-nf4", 144), ("bnb-nf4", 144)],
        "L40S": [("bnb-nf4", 10), ("bnb-nf4", 10)],
        "H100-SXM": [("fp8", 19), ("bnb-nf4", 138)],
        "H200": [("fp8", 251), ("fp8", 251)],
    },
    "llama-3.1-70b": {
        "RTX-4090": [None, None],
        "A100-40GB-PCIe": [None, None],
        "A100-40GB-SXM": [None, None],
        "A100-80GB-PCIe": [("bnb-nf4", 131), ("bnb-nf4", 131)],
        "A100-80GB-SXM": [("bnb-nf4", 131), ("bnb-nf4", 131)],
        "L40S": [None, None],
        "H100-SXM": [("fp8", 6), ("fp8", 6)],
        "H200": [("fp8", 237), ("fp8", 237)],
    },
}

_SHAPES = {  # layers, hidden, heads, kv heads, intermediate, vocab
    "llama-2-7b": (32, 4096, 32, 32, 11008, 32000),
    "llama-2-13b": (40, 5120, 40, 40, 13824, 32000),
    "llama-2-70b": (80, 8192, 64, 8, 28672, 32000),
    "llama-3.1-70b": (80, 8192, 64, 8, 28672, 128256),
}
_GPUS = {  # CUDA-visible GiB, cc >= 8.9, vLLM default (T, S)
    "RTX-4090": (23.52, True, (2048, 256)),
    "A100-40GB-PCIe": (39.59, False, (2048, 256)),
    "A100-40GB-SXM": (39.39, False, (2048, 256)),
    "A100-80GB-PCIe": (79.18, False, (2048, 256)),
    "A100-80GB-SXM": (79.18, False, (2048, 256)),
    "L40S": (44.53, True, (2048, 256)),
    "H100-SXM": (79.18, True, (8192, 1024)),
    "H200": (139.55, True, (8192, 1024)),
}


def _by_hand(model: str, gpu: str, concurrency: int) -> tuple[str, int] | None:
    layers, h, heads, kv_heads, inter, vocab = _SHAPES[model]
    memory, fp8_ok, (t, s) = _GPUS[gpu]
    head_dim = h // heads
    linear = layers * (h * (h + 2 * kv_heads * head_dim) + h * h + 3 * h * inter)
    other16 = 2 * (2 * vocab * h + 2 * h * layers + h)
    weights = {
        "bf16": 2 * linear + other16,
        "fp8": linear + 28 * layers + other16,
        "bnb-nf4": -(-linear * 9 // 16) + other16,
    }
    budget = round(0.9 * int(memory * GIB))
    act = t * (13 * h // 2 + 6 * inter) + 2 * s * vocab
    block = 16 * 2 * layers * kv_heads * head_dim * 2
    order = ["bf16", "fp8", "bnb-nf4"] if fp8_ok else ["bf16", "bnb-nf4"]  # int8: never (dense)
    seqs = {p: max(0, budget - weights[p] - NON_TORCH - act) // block // 48 for p in order}
    full = [p for p in order if seqs[p] >= concurrency]
    runs = [p for p in order if seqs[p] >= 1]
    if not (full or runs):
        return None
    pick = (full or runs)[0]
    return pick, seqs[pick]


@pytest.mark.parametrize("model", list(GRID))
@pytest.mark.parametrize("gpu", list(_GPUS))
@pytest.mark.parametrize("concurrency", [1, 128])
def test_grid_matches_hand_arithmetic_and_planner(model, gpu, concurrency):
    expected = GRID[model][gpu][0 if concurrency == 1 else 1]
    assert _by_hand(model, gpu, concurrency) == expected
    p = plan(PlanRequest(spec(model), find_gpu(gpu), concurrency=concurrency, input_len=512,
                         output_len=256))
    got = (p.precision, mem(p).max_sequences) if p.fits else None
    assert got == expected
    assert p.fits_load == (expected is not None and expected[1] >= concurrency)


@pytest.mark.parametrize("gpu", ["A100-40GB-PCIe", "A100-80GB-PCIe", "A100-40GB-SXM",
                                 "A100-80GB-SXM"])
@pytest.mark.parametrize("model", list(GRID))
@pytest.mark.parametrize("concurrency", [1, 8, 32, 128, 512])
def test_fp8_is_never_chosen_on_a100(gpu, model, concurrency):
    p = plan(PlanRequest(spec(model), find_gpu(gpu), concurrency=concurrency))
    assert p.precision != "fp8"
    assert not next(c for c in p.candidates if c.precision == "fp8").available


def test_forced_fp8_on_a100_warns_it_is_weight_only_and_cpu_refuses():
    p = plan(PlanRequest(spec("llama-2-7b"), find_gpu("A100-80GB-SXM"), quantization="fp8"))
    assert p.precision == "fp8" and any("W8A16" in w for w in p.warnings)
    with pytest.raises(PlanError, match="fp8"):
        plan(PlanRequest(spec("llama-2-7b"), None, memory_budget_bytes=64 * GIB,
                         quantization="fp8"))


def test_forced_int8_is_planned_at_16_bit_size_honestly():
    p = plan(PlanRequest(spec("llama-2-7b"), find_gpu("A100-80GB-SXM"),
             quantization="int8_per_channel_weight_only"))
    assert p.precision == "int8"
    assert mem(p).weights_bytes == 2 * (L7_LINEAR + L7_EMB + L7_NORMS)
    assert engine_args(p)["quantization"] == "int8_per_channel_weight_only"
    assert any("MoE" in w for w in p.warnings)


def test_normalize_precision():
    assert normalize_precision("bitsandbytes") == "bnb-nf4"
    assert normalize_precision("FP16") == "bf16"
    assert normalize_precision("fp8_per_tensor") == "fp8"
    assert normalize_precision("Auto") == "auto"
    with pytest.raises(PlanError, match="unknown quantization"):
        normalize_precision("int3")


# ---- the tiny model on a CPU memory budget --------------------------------------------------

TINY = ModelSpec(name="tiny", hub_id=None, architecture="LlamaForCausalLM", num_layers=2,
                 hidden_size=256, num_attention_heads=4, num_kv_heads=2, vocab_size=512,
                 intermediate_size=688, max_position_embeddings=2048, head_dim=64)
TINY_LINEAR = 2 * (256 * (256 + 2 * 128) + 256 * 256 + 3 * 256 * 688)  # 1_449_984
TINY_OTHER16 = 2 * (2 * 512 * 256 + 2 * 256 * 2 + 256)  # 526_848
TINY_BF16 = 2 * TINY_LINEAR + TINY_OTHER16  # 3_426_816
TINY_NF4 = TINY_LINEAR * 9 // 16 + TINY_OTHER16  # 815_616 + 526_848 = 1_342_464 (vLLM: same)
TINY_ACT = 2 * 2048 * (4 * 256 + 3 * 688) + 8 * 128 * 512  # CPU defaults: 13_172_736
TINY_BLOCK = 16 * 2 * 2 * 2 * 64 * 2  # 16 tokens x 1024 B


def test_tiny_model_on_small_cpu_budget_chooses_bitsandbytes():
    budget = 16 * MIB  # 16_777_216
    # bf16: 16_777_216 - 3_426_816 - 13_172_736 = 177_664 B -> 10 blocks, a sequence needs 48
    assert (budget - TINY_BF16 - TINY_ACT) // TINY_BLOCK == 10
    # nf4: 16_777_216 - 1_342_464 - 13_172_736 = 2_262_016 B -> 138 blocks -> 2 sequences
    nf4_kv = budget - TINY_NF4 - TINY_ACT
    assert TINY_LINEAR * 9 % 16 == 0
    assert nf4_kv == 2_262_016 and nf4_kv // TINY_BLOCK == 138
    p = plan(PlanRequest(TINY, None, memory_budget_bytes=budget, concurrency=1))
    assert p.precision == "bnb-nf4" and p.fits_load
    assert mem(p).weights_bytes == TINY_NF4 == 1_342_464
    assert mem(p).activation_bytes == TINY_ACT and mem(p).fixed_overhead_bytes == 0
    assert mem(p).kv_cache_bytes == nf4_kv
    assert mem(p).max_sequences == 138 // 48 == 2
    assert engine_args(p) == {"dtype": "auto", "tensor_parallel_size": 1,
                             "quantization": "bitsandbytes",
                             "kv_cache_memory_bytes": 138 * TINY_BLOCK}
    reasons = {c.precision: c.reason for c in p.rejections}
    assert "not one sequence of 768 tokens" in reasons["bf16"]
    assert "no" in reasons["fp8"] and "memory-budget" in reasons["fp8"]


def test_tiny_model_with_one_more_mib_runs_bf16():
    # 17 MiB: 17_825_792 - 3_426_816 - 13_172_736 = 1_226_240 B -> 74 blocks -> 1 sequence
    p = plan(PlanRequest(TINY, None, memory_budget_bytes=17 * MIB, concurrency=1))
    assert (p.precision, mem(p).max_sequences) == ("bf16", 74 // 48)


def test_no_device_is_a_plan_error():
    with pytest.raises(PlanError, match="--gpu"):
        plan(PlanRequest(TINY, None))


# ---- CLI ------------------------------------------------------------------------------------


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(plan_command)
    return app


def _run(args, **kwargs):
    kwargs.setdefault("env", {"COLUMNS": "200"})  # a line per sentence (80 columns: test_narrow)
    return CliRunner().invoke(_app(), args, **kwargs)


def test_cli_issue_example():
    r = _run(["--model", "llama-2-70b", "--gpu", "A100-80GB-SXM", "--concurrency", "128",
              "--input-len", "512", "--output-len", "256"])
    assert r.exit_code == 0, r.output
    assert "bitsandbytes 4-bit" in r.output
    assert "144 sequences" in r.output
    assert "rejected bf16" in r.output and "rejected fp8" in r.output
    assert '"quantization": "bitsandbytes"' in r.output


def test_cli_json():
    r = _run(["--model", "llama-2-70b", "--gpu", "a100 80gb sxm", "--concurrency", "128",
              "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["precision"] == "bnb-nf4"
    assert d["memory"]["weights_bytes"] == 39_554_924_544
    assert d["engine_args"]["quantization"] == "bitsandbytes"
    assert [c["precision"] for c in d["rejections"]] == ["bf16", "fp8", "int8"]


def test_cli_nothing_fits_exits_1_with_suggestions():
    r = _run(["--model", "llama-3.1-70b", "--gpu", "RTX-4090", "--concurrency", "128"])
    assert r.exit_code == 1
    assert "nothing fits" in r.output and "4 x RTX-4090" in r.output
    assert "to hold the whole load:" in r.output


def test_cli_without_gpu_or_budget_says_to_pass_gpu(monkeypatch):
    monkeypatch.setattr("infer_prof.cli.plan.detect_gpus", lambda: [])
    r = _run(["--model", "llama-2-7b"])
    assert r.exit_code == 2
    assert "--gpu" in r.stderr


def test_cli_uses_detected_gpus_and_the_memory_cuda_reports(monkeypatch):
    h100 = find_gpu("H100-SXM")
    found = [DetectedGpu("NVIDIA H100 80GB HBM3", h100, 85_520_809_984)] * 2
    monkeypatch.setattr("infer_prof.cli.plan.detect_gpus", lambda: found)
    monkeypatch.setattr("infer_prof.run.engine_setup.cuda_total_memory", lambda i: 85_017_755_648)
    r = _run(["--model", "llama-2-70b", "--concurrency", "64", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["gpu"] == "H100-SXM" and d["gpu_count"] == 2
    assert d["memory_per_gpu_bytes"] == 85_017_755_648
    assert d["budget_per_gpu_bytes"] == round(0.9 * 85_017_755_648)
    assert d["memory_source"].startswith("CUDA total of the detected NVIDIA H100 80GB HBM3")
    # without libcuda: NVML's total less the 0.47 GiB NVML-CUDA gap measured on the H100
    monkeypatch.setattr("infer_prof.run.engine_setup.cuda_total_memory", lambda i: None)
    d = json.loads(_run(["--model", "llama-2-70b", "--concurrency", "64", "--json"]).stdout)
    assert d["memory_per_gpu_bytes"] == 85_520_809_984 - round((79.65 - 79.18) * GIB)
    assert d["memory_per_gpu_bytes"] == 85_016_151_327
    assert d["memory_source"].startswith("NVML total of the detected")


def test_cli_bad_input_exits_2():
    assert _run(["--model", "llama-2-7b", "--gpu", "GTX-970"]).exit_code == 2
    assert _run(["--model", "llama-2-7b", "--gpu", "H100", "--gpus", "3"]).exit_code == 2
    r = _run(["--model", "llama-2-7b", "--memory-budget", "lots"])
    assert r.exit_code == 2 and "--memory-budget" in r.stderr


def test_cli_tiny_model_dir_with_memory_budget(tmp_path):
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
              "intermediate_size": 688, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 2048}
    (tmp_path / "config.json").write_text(json.dumps(config))
    r = _run(["--model", str(tmp_path), "--memory-budget", "16MiB", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["precision"] == "bnb-nf4" and d["device"] == "memory-budget"
    assert d["engine_args"]["kv_cache_memory_bytes"] == 138 * TINY_BLOCK


@pytest.mark.parametrize(
    ("text", "expected"),
    [("24GiB", 24 * GIB), ("512MiB", 512 * MIB), ("16GB", 16 * 10**9), ("1.5GiB", 3 * GIB // 2),
     ("1024", 1024), ("2 gib", 2 * GIB)],
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


def test_parse_bytes_rejects_nonsense():
    with pytest.raises(ValueError):
        parse_bytes("12 parsecs")
