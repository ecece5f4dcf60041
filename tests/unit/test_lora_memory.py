"""The LoRA buffers vLLM reserves before the KV cache (:mod:`infer_prof.core.planning.lora_memory`),
worked by hand, and the plan that takes them from the KV cache.

llama-2-7b: 32 layers, hidden H 4,096, 32 heads of 128 (q = kv = 4,096: no GQA), intermediate
I 11,008, vocabulary 32,000. 4 adapters (``--max-loras 4``) of rank 16, bf16 (2 bytes). vLLM
0.32 wraps every linear layer and, for LlamaForCausalLM, the embedding and the LM head; each
matrix of input ``in`` and output ``out`` holds A ``(4, 1, 16, in)`` and B ``(4, 1, out, 16)``.
"""

from __future__ import annotations

import json
from dataclasses import replace

from typer.testing import CliRunner

from infer_prof.catalog.models import resolve_model
from infer_prof.cli import app
from infer_prof.core.catalog.gpus import GIB
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.planning.lora_memory import LoraSlots, lora_buffer_bytes
from infer_prof.core.planning.planner import PlanRequest, plan
from infer_prof.core.planning.precisions import EngineCaps

H, Q, KV, INTER, V, LAYERS = 4096, 4096, 4096, 11008, 32000, 32


def spec(name: str) -> ModelSpec:
    model = resolve_model(name, create_tiny=False).spec
    assert model is not None
    return model


def test_llama_2_7b_with_4_adapters_of_rank_16_by_hand():
    # per layer and adapter slot, (in + out) of every matrix, times the rank:
    per_layer = 16 * (
        (H + Q) + (H + KV) + (H + KV)  # q, k, v: three slices of qkv_proj, each with an A
        + (Q + H)                      # o_proj
        + (H + INTER) + (H + INTER)    # gate, up: two slices of gate_up_proj
        + (INTER + H))                 # down_proj
    assert per_layer == 1_249_280
    linear = 4 * per_layer * LAYERS
    assert linear == 159_907_840  # elements
    embedding = 4 * 16 * ((V + H) + (H + V))  # embed_tokens A (V x r), B (H x r); lm_head
    assert embedding == 4_620_288
    b = lora_buffer_bytes(spec("llama-2-7b"), LoraSlots(max_loras=4, max_rank=16))
    assert (b.linear_bytes, b.embedding_bytes) == (2 * linear, 2 * embedding)
    assert b.bytes == 329_056_256  # 313.8 MiB
    # the module docstring's closed form: N r (7 H + 2 q + 2 kv + 3 I) a layer
    assert per_layer == 16 * (7 * H + 2 * Q + 2 * KV + 3 * INTER)


def test_tensor_parallelism_splits_one_side_of_each_matrix():
    tp = 2
    per_layer = 16 * (3 * H + (Q + 2 * KV) // tp   # qkv: A whole, B split
                      + Q // tp + H                 # o (row-parallel): A split, B whole
                      + 2 * H + 2 * INTER // tp     # gate, up
                      + INTER // tp + H)            # down (row-parallel)
    embedding = 4 * 16 * 2 * (V + H)  # the unpadded vocabulary, whole on every GPU
    b = lora_buffer_bytes(spec("llama-2-7b"), LoraSlots(4, 16), tp=tp)
    assert b.bytes == 2 * (4 * per_layer * LAYERS + embedding) == 227_868_672


def test_the_architecture_decides_what_is_wrapped():
    # MistralForCausalLM declares no embedding_modules: linear layers only
    mistral = lora_buffer_bytes(spec("mistral-7b"), LoraSlots(4, 16))
    assert mistral.embedding_bytes == 0 and mistral.bytes == mistral.linear_bytes
    # Phi-3's packed qkv_proj and gate_up_proj are one slice each: one A of hidden width,
    # where separate q, k, v (gate, up) have three (two)
    phi = spec("phi-4")
    fused = lora_buffer_bytes(phi, LoraSlots(1, 8))
    per_layer = 8 * ((phi.hidden_size + phi.q_dim + 2 * phi.kv_dim)
                     + (phi.q_dim + phi.hidden_size)
                     + (phi.hidden_size + 2 * phi.intermediate_size)
                     + (phi.intermediate_size + phi.hidden_size))
    assert fused.linear_bytes == 2 * per_layer * phi.num_layers
    # MoE: every expert's gate, up and down, and the router (replicated), per slot
    mixtral = spec("mixtral-8x7b")
    e = mixtral.moe
    assert e is not None
    moe = lora_buffer_bytes(mixtral, LoraSlots(1, 8))
    h, i, q, kv = mixtral.hidden_size, e.expert_intermediate, mixtral.q_dim, mixtral.kv_dim
    per_layer = 8 * (3 * h + q + 2 * kv + q + h
                     + e.num_experts * 3 * (h + i) + (h + e.num_experts))
    assert moe.linear_bytes == 2 * per_layer * mixtral.num_layers
    # latent attention and hybrid layers are not modelled: said, not guessed
    nxt = lora_buffer_bytes(spec("qwen3-next-80b-a3b"), LoraSlots(4, 16))
    assert nxt.bytes is None and "Qwen3NextForCausalLM" in nxt.note


def test_the_plan_takes_the_buffers_from_the_kv_cache():
    model = spec("llama-2-7b")
    req = PlanRequest(model, None, memory_budget_bytes=24 * GIB, concurrency=8,
                      caps=EngineCaps(build="cpu", vllm_version=(0, 32, 0)))
    base = plan(req)
    with_lora = plan(replace(req, lora=LoraSlots(4, 16)))
    assert base.memory is not None and with_lora.memory is not None
    assert (base.memory.lora_bytes, with_lora.memory.lora_bytes) == (0, 329_056_256)
    assert base.memory.kv_cache_bytes - with_lora.memory.kv_cache_bytes == 329_056_256
    assert with_lora.memory.needed_bytes - base.memory.needed_bytes == 329_056_256
    assert with_lora.memory.kv_tokens < base.memory.kv_tokens
    assert any("313.8 MiB per GPU of adapter buffers" in n for n in with_lora.notes)
    # the JSON form (the result's plan section) carries it
    assert with_lora.to_dict()["memory"]["lora_bytes"] == 329_056_256


def test_plan_prints_the_lora_line_and_refuses_a_rank_vllm_does_not_take():
    runner = CliRunner()
    out = runner.invoke(app, ["plan", "--model", "llama-2-7b", "--gpu", "H100-SXM",
                              "--max-loras", "4", "--max-lora-rank", "16"],
                        env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "LoRA buffers 0.31" in out.output  # the breakdown line
    header = next(line for line in out.output.splitlines() if "precision" in line)
    assert "LoRA" in header  # and its column
    doc = json.loads(runner.invoke(app, ["plan", "--model", "llama-2-7b", "--gpu", "H100-SXM",
                                         "--max-loras", "4", "--json"]).output)
    assert doc["memory"]["lora_bytes"] == 329_056_256
    bad = runner.invoke(app, ["plan", "--model", "llama-2-7b", "--gpu", "H100-SXM",
                              "--max-loras", "2", "--max-lora-rank", "12"])
    assert bad.exit_code == 2
    assert "--max-lora-rank 12 is not one vLLM takes" in bad.output


def test_the_tiny_model_the_vllm_check_uses():
    """tiny-llama (2 layers, H 256, 4 heads and 2 KV heads of 64, I 688, vocabulary 512) with
    2 adapters of rank 8: what tests/e2e/test_lora_memory_vllm.py finds vLLM allocating."""
    per_layer = 8 * ((256 + 256) + 2 * (256 + 128) + (256 + 256) + 3 * (256 + 688))
    embedding = 8 * 2 * (512 + 256)
    b = lora_buffer_bytes(spec("tiny-llama"), LoraSlots(2, 8))
    assert b.bytes == 2 * 2 * (per_layer * 2 + embedding) == 345_088
