"""The tiny models of the newer architectures (catalog/tinymodel.py): what is generated, how
``--model`` resolves them, and which weights a run loads for them."""

from __future__ import annotations

import json

import pytest

from infer_prof.catalog.models import known_aliases, resolve_model
from infer_prof.catalog.tinymodel import TINY_ARCHS, ensure_tiny_llama, ensure_tiny_model
from infer_prof.catalog.weights import choose_weights

#: The engine's model class and the config's model_type for each tiny model.
EXPECTED = {
    "tiny-mixtral": ("MixtralForCausalLM", "mixtral"),
    "tiny-qwen3-moe": ("Qwen3MoeForCausalLM", "qwen3_moe"),
    "tiny-mistral-sw": ("MistralForCausalLM", "mistral"),
    "tiny-gemma3": ("Gemma3ForCausalLM", "gemma3_text"),
    "tiny-gpt-oss": ("GptOssForCausalLM", "gpt_oss"),
    "tiny-deepseek-v2": ("DeepseekV2ForCausalLM", "deepseek_v2"),
    "tiny-qwen3-next": ("Qwen3NextForCausalLM", "qwen3_next"),
    "tiny-granite-h": ("GraniteMoeHybridForCausalLM", "granitemoehybrid"),
}
#: Layers of each tiny model (2 unless a hybrid's pattern needs more: Qwen3-Next's 3:1).
LAYERS = {"tiny-qwen3-next": 4}


def test_every_tiny_architecture_is_listed() -> None:
    assert sorted(TINY_ARCHS) == sorted(EXPECTED)
    aliases = known_aliases()
    assert aliases[0] == "tiny-llama" and set(EXPECTED) <= set(aliases)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tiny_arch_is_a_config_and_tiny_llamas_tokenizer(name: str) -> None:
    folder = ensure_tiny_model(name)
    config = json.loads((folder / "config.json").read_text())
    architecture, model_type = EXPECTED[name]
    assert config["architectures"] == [architecture] and config["model_type"] == model_type
    assert (config["hidden_size"], config["num_hidden_layers"], config["vocab_size"]) == (
        256, LAYERS.get(name, 2), 512)
    assert not list(folder.glob("*.safetensors"))  # no weights: the engine makes random ones
    tokenizer = ensure_tiny_llama() / "tokenizer.json"
    assert (folder / "tokenizer.json").read_bytes() == tokenizer.read_bytes()
    assert ensure_tiny_model(name) == folder  # cached: the second call generates nothing


def test_shapes_that_make_each_architecture() -> None:
    cfg = {n: json.loads((ensure_tiny_model(n) / "config.json").read_text()) for n in EXPECTED}
    assert (cfg["tiny-mixtral"]["num_local_experts"], cfg["tiny-mixtral"]["num_experts_per_tok"]
            ) == (8, 2)
    assert (cfg["tiny-qwen3-moe"]["num_experts"], cfg["tiny-qwen3-moe"]["moe_intermediate_size"]
            ) == (16, 128)
    assert cfg["tiny-mistral-sw"]["sliding_window"] == 256
    assert cfg["tiny-gemma3"]["layer_types"] == ["sliding_attention", "full_attention"]
    assert cfg["tiny-gpt-oss"]["layer_types"] == ["sliding_attention", "full_attention"]
    # the CPU MLA kernel takes only DeepSeek's latent width: kv_lora_rank + rope = 576
    v2 = cfg["tiny-deepseek-v2"]
    assert v2["kv_lora_rank"] + v2["qk_rope_head_dim"] == 576
    # hybrids: three Gated DeltaNet layers to one attention layer, GDN head dims 128 (vLLM-CPU's
    # GDN kernels refuse 8 and 32); a Mamba2 layer beside an attention layer
    q3n = cfg["tiny-qwen3-next"]
    assert q3n["layer_types"] == ["linear_attention"] * 3 + ["full_attention"]
    assert (q3n["linear_key_head_dim"], q3n["linear_value_head_dim"], q3n["head_dim"]) == (
        128, 128, 64)
    granite = resolve_model("tiny-granite-h").spec
    assert granite is not None and granite.attention_kinds() == ("linear", "full")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tiny_arch_resolves_and_loads_random_weights(name: str) -> None:
    model = resolve_model(name)
    assert (model.source, model.has_tokenizer, model.hub_id) == ("tiny", True, None)
    assert model.spec is not None and model.spec.hidden_size == 256
    decision = choose_weights(model, None)
    assert (decision.weights, decision.load_format, decision.error) == ("random", "dummy", None)
    assert "no weight files" in decision.reason
    # a load format given explicitly is obeyed, as for any model
    assert choose_weights(model, "auto").load_format == "auto"
    assert choose_weights(model, None, require_weights=True).error


def test_tiny_llama_keeps_its_own_weights() -> None:
    decision = choose_weights(resolve_model("tiny-llama"), None)
    assert (decision.weights, decision.origin, decision.load_format) == ("real", "local", None)
