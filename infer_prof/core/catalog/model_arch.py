"""The per-layer structure of a decoder, read from config.json as vLLM builds the model.

Pure: a config dictionary in, frozen dataclasses out; no I/O. :class:`ModelSpec`
(:mod:`infer_prof.core.catalog.models`) holds what this module reads; the tensors that follow
from it are :mod:`infer_prof.core.catalog.model_tensors`, the KV cache they need
:mod:`infer_prof.core.catalog.kv_layout`.

What is read, and where vLLM reads the same (``vllm/model_executor/models/<arch>.py``):

- nesting: a multimodal config (Gemma-3, Llama-4, Mistral-3) keeps the decoder in
  ``text_config``; its ``vision_config`` is a SigLIP-style vision tower (counted in the weights).
- attention per layer (:data:`ATTENTION_KINDS`): ``full``; ``sliding`` (a window of
  ``sliding_window`` tokens: ``layer_types``, else Gemma's ``sliding_window_pattern`` (every
  n-th layer full), else ``sliding_window`` on every layer unless ``use_sliding_window`` is
  false); ``chunked`` (Llama-4's local attention in chunks of ``attention_chunk_size`` on the
  layers that use RoPE, ``no_rope_layers``); ``mla`` (DeepSeek-V2/V3: ``kv_lora_rank``,
  ``q_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``).
- MLP per layer: dense gated, or mixture of experts (:class:`MoeSpec`): routed experts
  (``num_local_experts`` / ``num_experts`` / ``n_routed_experts``), top-k
  (``num_experts_per_tok`` / ``experts_per_token``), expert width (``moe_intermediate_size``,
  else ``intermediate_size``), shared experts (DeepSeek ``n_shared_experts`` x expert width;
  Qwen2-MoE ``shared_expert_intermediate_size`` with its sigmoid gate; Llama-4 one of
  ``intermediate_size``), which layers are sparse (DeepSeek ``first_k_dense_replace`` and
  ``moe_layer_freq``; Qwen-MoE ``mlp_only_layers`` and ``decoder_sparse_step``; Llama-4
  ``interleave_moe_layer_step``), the router (a ``experts x hidden`` linear; gpt-oss with a bias;
  DeepSeek-V3's ``e_score_correction_bias`` under ``topk_method: noaux_tc``).
- ``head_dim`` when given (Qwen3, Gemma-3, Mistral-Small), else ``hidden / heads``;
  ``tie_word_embeddings`` (default true for Gemma, as transformers' config classes say, else
  false); attention biases; Qwen3/Gemma-3 q/k norms; gpt-oss attention sinks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ATTENTION_KINDS = ("full", "sliding", "chunked", "mla")
"""Kinds of attention layer: what each keeps in the KV cache is
:mod:`infer_prof.core.catalog.kv_layout`."""

_GEMMA = ("gemma", "gemma2", "gemma3", "gemma3_text")

GEMMA3_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131_072,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
}
"""Defaults of transformers' ``Gemma3TextConfig`` (models/gemma3/configuration_gemma3.py):
Gemma-3's published config.json files leave some of these out of ``text_config``."""

SIGLIP_VISION_DEFAULTS: dict[str, Any] = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_channels": 3,
    "image_size": 224,
    "patch_size": 16,
}
"""Defaults of transformers' ``SiglipVisionConfig`` (models/siglip/configuration_siglip.py)."""


class ConfigFieldError(ValueError):
    """A config.json that lacks a field its architecture needs; the message names the field."""


@dataclass(frozen=True)
class MoeSpec:
    """A mixture-of-experts MLP: ``num_experts`` routed experts of width ``expert_intermediate``
    (each a gated MLP: gate, up, down), ``top_k`` of them per token; ``shared_intermediate`` the
    total width of the always-on shared expert(s) (0: none) and ``shared_gate`` its sigmoid gate
    (Qwen2-MoE); ``router_bias`` (gpt-oss), ``expert_bias`` (gpt-oss: biases on the expert
    projections), ``score_bias`` (DeepSeek-V3's per-expert correction bias); ``gated`` False
    when the experts (and shared experts) are an up and a down projection only (Nemotron-H's
    squared ReLU)."""

    num_experts: int
    top_k: int
    expert_intermediate: int
    shared_intermediate: int = 0
    shared_gate: bool = False
    router_bias: bool = False
    expert_bias: bool = False
    score_bias: bool = False
    gated: bool = True

    def expected_distinct(self, batch: float) -> float:
        """Expected distinct experts one layer reads in a decode step of ``batch`` tokens, each
        routed to ``top_k`` of ``num_experts`` uniformly at random:
        ``E x (1 - (1 - k/E)^B)`` (``0`` for an empty batch, at most ``E``)."""
        if batch <= 0:
            return 0.0
        e, k = self.num_experts, self.top_k
        return e * (1.0 - (1.0 - k / e) ** batch)


@dataclass(frozen=True)
class MlaSpec:
    """DeepSeek's multi-head latent attention: queries through a rank-``q_lora_rank`` bottleneck
    (0: a plain ``q_proj``), keys and values through one latent of ``kv_lora_rank`` plus a shared
    RoPE key of ``qk_rope_head_dim``; per head ``qk_nope_head_dim + qk_rope_head_dim`` for Q/K and
    ``v_head_dim`` for V. The KV cache holds the latent and the RoPE key only."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def qk_head_dim(self) -> int:
        """Width of one head's query/key: nope + rope."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def latent_width(self) -> int:
        """Elements a token keeps per layer in the KV cache: ``kv_lora_rank + qk_rope_head_dim``."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True)
class VisionSpec:
    """A SigLIP-style vision tower and its projector into the decoder (Gemma-3, Llama-4,
    Mistral-3): counted in the weights; it adds no KV cache. ``projector_params`` is the
    projector's size."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_channels: int
    image_size: int
    patch_size: int
    projector_params: int

    def params(self) -> int:
        """Parameters: patch embedding (conv + bias), position embedding, per layer q/k/v/o with
        biases, two LayerNorms with biases and a biased two-layer MLP, the final LayerNorm, and
        the projector."""
        h, i = self.hidden_size, self.intermediate_size
        patches = (self.image_size // self.patch_size) ** 2
        embed = h * self.num_channels * self.patch_size**2 + h + patches * h
        layer = 4 * (h * h + h) + 2 * 2 * h + (h * i + i) + (i * h + h)
        return embed + self.num_layers * layer + 2 * h + self.projector_params


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The decoder's part of a config: ``text_config`` (with transformers' Gemma-3 defaults where
    the file leaves them out) when there is one, else the config itself; the top level's
    ``quantization_config`` and ``architectures`` are kept."""
    inner = config.get("text_config")
    if not isinstance(inner, dict):
        return config
    out = dict(GEMMA3_TEXT_DEFAULTS) if inner.get("model_type") == "gemma3_text" else {}
    out.update(inner)
    for key in ("quantization_config", "architectures", "tie_word_embeddings"):
        if key in config and key not in inner:
            out[key] = config[key]
    return out


def need(config: dict[str, Any], *keys: str) -> Any:
    """The first of ``keys`` the config has (not null); :class:`ConfigFieldError` naming the
    first key when none is there."""
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    raise ConfigFieldError(f"lacks the field {keys[0]!r}")


def read_moe(cfg: dict[str, Any]) -> MoeSpec | None:
    """The routed experts of a config, or None for a dense model."""
    experts = next((cfg[k] for k in ("num_local_experts", "num_experts", "n_routed_experts")
                    if cfg.get(k)), 0)
    if not experts:
        return None
    model_type = str(cfg.get("model_type", ""))
    top_k = int(need(cfg, "num_experts_per_tok", "experts_per_token"))
    if model_type.startswith(("deepseek", "qwen2_moe", "qwen3_moe", "kimi")):
        width = int(need(cfg, "moe_intermediate_size"))
    else:
        width = int(cfg.get("moe_intermediate_size") or need(cfg, "intermediate_size"))
    shared, shared_gate = 0, False
    if cfg.get("n_shared_experts"):
        shared = int(cfg["n_shared_experts"]) * width
    if cfg.get("shared_expert_intermediate_size"):
        shared, shared_gate = int(cfg["shared_expert_intermediate_size"]), True
    if model_type.startswith("llama4"):
        shared = width  # Llama4MoE: one shared expert of the experts' width
    return MoeSpec(
        num_experts=int(experts), top_k=top_k, expert_intermediate=width,
        shared_intermediate=shared, shared_gate=shared_gate,
        router_bias=model_type == "gpt_oss", expert_bias=model_type == "gpt_oss",
        score_bias=cfg.get("topk_method") == "noaux_tc")


def moe_layers(cfg: dict[str, Any], num_layers: int, moe: MoeSpec | None) -> tuple[bool, ...]:
    """Which layers have the MoE MLP (the others a dense one), as each model's vLLM code picks:
    DeepSeek ``i >= first_k_dense_replace and i % moe_layer_freq == 0``; Qwen-MoE
    ``i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0``; Llama-4
    ``(i + 1) % interleave_moe_layer_step == 0``; otherwise every layer."""
    if moe is None:
        return (False,) * num_layers
    if "first_k_dense_replace" in cfg or "moe_layer_freq" in cfg:
        first = int(cfg.get("first_k_dense_replace") or 0)
        freq = int(cfg.get("moe_layer_freq") or 1)
        return tuple(i >= first and i % freq == 0 for i in range(num_layers))
    if "decoder_sparse_step" in cfg or "mlp_only_layers" in cfg:
        step = int(cfg.get("decoder_sparse_step") or 1)
        dense = set(cfg.get("mlp_only_layers") or ())
        return tuple(i not in dense and (i + 1) % step == 0 for i in range(num_layers))
    if cfg.get("model_type") == "jamba":
        period, offset = int(cfg.get("expert_layer_period", 2)), int(
            cfg.get("expert_layer_offset", 1))
        return tuple(i % period == offset for i in range(num_layers))
    if "interleave_moe_layer_step" in cfg:
        step = int(cfg.get("interleave_moe_layer_step") or 1)
        return tuple((i + 1) % step == 0 for i in range(num_layers))
    return (True,) * num_layers


def read_mla(cfg: dict[str, Any]) -> MlaSpec | None:
    """DeepSeek's latent attention (``kv_lora_rank`` present), or None."""
    if cfg.get("kv_lora_rank") is None:
        return None
    return MlaSpec(
        q_lora_rank=int(cfg.get("q_lora_rank") or 0),
        kv_lora_rank=int(cfg["kv_lora_rank"]),
        qk_nope_head_dim=int(need(cfg, "qk_nope_head_dim")),
        qk_rope_head_dim=int(need(cfg, "qk_rope_head_dim")),
        v_head_dim=int(need(cfg, "v_head_dim")),
    )


def layer_attention(cfg: dict[str, Any], num_layers: int,
                    mla: MlaSpec | None) -> tuple[tuple[str, ...], int | None]:
    """(attention kind per layer, window in tokens or None) as vLLM builds the layers."""
    if mla is not None:
        return ("mla",) * num_layers, None
    model_type = str(cfg.get("model_type", ""))
    types = cfg.get("layer_types")
    window = cfg.get("sliding_window")
    if model_type.startswith("llama4") and cfg.get("attention_chunk_size"):
        rope = cfg.get("no_rope_layers") or [
            int((i + 1) % 4 != 0) for i in range(num_layers)]  # Llama4TextConfig's default
        kinds = tuple("chunked" if rope[i] else "full" for i in range(num_layers))
        return kinds, int(cfg["attention_chunk_size"])
    if isinstance(types, list) and types:
        if len(types) != num_layers:
            raise ConfigFieldError(
                f"has {len(types)} layer_types for {num_layers} layers (num_hidden_layers)")
        unknown = sorted({str(t) for t in types if "sliding" not in str(t)
                          and t not in ("full_attention", "attention")})
        if unknown:
            raise ConfigFieldError(
                f"has layer_types value(s) {', '.join(map(repr, unknown))} the planner cannot "
                "read for its model_type (known: 'full_attention', 'sliding_attention')")
        kinds = tuple("sliding" if "sliding" in str(t) else "full" for t in types)
        if "sliding" in kinds:
            return kinds, int(need(cfg, "sliding_window"))
        return kinds, None
    if model_type in ("gemma3", "gemma3_text"):
        pattern = int(cfg.get("sliding_window_pattern") or 6)
        kinds = tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in range(num_layers))
        return kinds, int(need(cfg, "sliding_window"))
    if model_type == "gemma2":
        kinds = tuple("sliding" if i % 2 == 0 else "full" for i in range(num_layers))
        return kinds, int(need(cfg, "sliding_window"))
    if window and cfg.get("use_sliding_window", True) is not False:
        return ("sliding",) * num_layers, int(window)
    return ("full",) * num_layers, None


def count_field(cfg: Mapping[str, object], key: str) -> int:
    """The field ``key`` as ``int()`` reads it, 0 when absent, null, 0 or empty;
    :class:`ConfigFieldError` naming it when it is not a number (a list, an object)."""
    value = cfg.get(key) or 0
    if not isinstance(value, (int, float, str)):
        raise ConfigFieldError(f"has {key} {value!r}, which is not a number")
    return int(value)


def nemotron_h_moe(cfg: Mapping[str, object], moe: MoeSpec | None) -> MoeSpec | None:
    """Nemotron-H's experts (vLLM ``nemotron_h.py`` ``NemotronHMoE``): ``n_routed_experts`` of
    ``moe_intermediate_size``, each an up and a down projection (no gate), shared experts of
    ``moe_shared_expert_intermediate_size x n_shared_experts``, the router's per-expert
    correction bias."""
    if moe is None:
        return None
    shared = (count_field(cfg, "moe_shared_expert_intermediate_size")
              * count_field(cfg, "n_shared_experts"))
    return MoeSpec(num_experts=moe.num_experts, top_k=moe.top_k,
                   expert_intermediate=moe.expert_intermediate, shared_intermediate=shared,
                   score_bias=True, gated=False)


def granite_moe(cfg: Mapping[str, object], moe: MoeSpec | None) -> MoeSpec | None:
    """Granite-4.0-H's MLP (vLLM ``granitemoehybrid.py``): experts of ``intermediate_size``
    when ``num_local_experts > 0`` beside an ungated-by-router shared MLP of
    ``shared_intermediate_size``; without experts, None (a dense MLP of the shared width)."""
    if moe is None:
        return None
    shared = count_field(cfg, "shared_intermediate_size")
    return MoeSpec(num_experts=moe.num_experts, top_k=moe.top_k,
                   expert_intermediate=moe.expert_intermediate, shared_intermediate=shared)


def tied_default(model_type: str) -> bool:
    """``tie_word_embeddings`` when the config leaves it out: true for Gemma (its config classes
    default to it), false otherwise (Llama, Mistral, Qwen, DeepSeek and gpt-oss set it false)."""
    return model_type in _GEMMA


def read_vision(config: dict[str, Any], text_hidden: int) -> VisionSpec | None:
    """Gemma-3's SigLIP vision tower and projector (``vision hidden x text hidden`` plus an
    RMSNorm of the vision width), or None: other vision towers (Llama-4, Mistral-3) are not
    counted (:func:`uncounted_vision` says so)."""
    vision = config.get("vision_config")
    if not isinstance(vision, dict) or config.get("model_type") != "gemma3":
        return None
    v = dict(SIGLIP_VISION_DEFAULTS)
    v.update({k: val for k, val in vision.items() if val is not None})
    hidden = int(v["hidden_size"])
    projector = hidden * text_hidden + hidden
    return VisionSpec(
        hidden_size=hidden, intermediate_size=int(v["intermediate_size"]),
        num_layers=int(v["num_hidden_layers"]), num_channels=int(v["num_channels"]),
        image_size=int(v["image_size"]), patch_size=int(v["patch_size"]),
        projector_params=projector)


def uncounted_vision(config: dict[str, Any]) -> str:
    """A note when the config has a vision tower this module does not count (not Gemma-3's),
    else ``""``."""
    if isinstance(config.get("vision_config"), dict) and config.get("model_type") != "gemma3":
        return (f"the {config.get('model_type', '?')} vision tower is not counted in the "
                "weights (only the decoder is)")
    return ""
