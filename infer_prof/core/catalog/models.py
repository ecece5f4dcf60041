"""Model architecture facts (the config.json numbers) and the arithmetic that follows from them.

Pure: no I/O. Loading configs from disk or the shipped registry lives in
``infer_prof.catalog.models``. What is read from a config, layer by layer, is
:mod:`infer_prof.core.catalog.model_arch`; the tensors it implies
:mod:`infer_prof.core.catalog.model_tensors`; the KV cache :mod:`infer_prof.core.catalog.kv_layout`;
a pre-quantized checkpoint's format :mod:`infer_prof.core.catalog.checkpoint_quant`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from infer_prof.core.catalog import model_arch as arch
from infer_prof.core.catalog.checkpoint_quant import CheckpointQuant, read_quantization
from infer_prof.core.catalog.hybrid_layers import HybridConfigError, HybridLayers, read_hybrid
from infer_prof.core.catalog.kv_layout import kv_bytes_per_token
from infer_prof.core.catalog.model_arch import MlaSpec, MoeSpec, VisionSpec
from infer_prof.core.catalog.model_tensors import TensorGroup, tensor_groups


@dataclass(frozen=True)
class ModelSpec:
    """The architecture numbers of a decoder-only transformer, as its config.json states them.

    The first fields are every decoder's; the rest describe what differs from a dense Llama
    (defaults: a dense Llama): ``attention_bias`` biases on q/k/v, ``o_bias`` on o;
    ``qk_norm`` RMSNorms on q and k (Qwen3, Gemma-3); ``norms_per_layer``; ``attention_sinks``
    (gpt-oss); ``layer_attention`` the attention kind of each layer (empty: all ``full``) with
    ``sliding_window`` the window of the sliding/chunked ones; ``moe`` the experts and
    ``moe_layers`` which layers have them (empty: all, when ``moe`` is set); ``mla`` latent
    attention; ``vision`` a counted vision tower; ``quant`` a pre-quantized checkpoint's format;
    ``hybrid`` the linear-attention / Mamba layers of a hybrid model and which layers attend
    (:mod:`~infer_prof.core.catalog.hybrid_layers`); ``notes`` what the spec leaves out.
    """

    name: str
    hub_id: str | None
    architecture: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    vocab_size: int
    intermediate_size: int
    max_position_embeddings: int
    head_dim: int
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    model_type: str = ""
    o_bias: bool = False
    qk_norm: bool = False
    norms_per_layer: int = 2
    attention_sinks: bool = False
    layer_attention: tuple[str, ...] = ()
    sliding_window: int | None = None
    moe: MoeSpec | None = None
    moe_layers: tuple[bool, ...] = ()
    mla: MlaSpec | None = None
    vision: VisionSpec | None = None
    quant: CheckpointQuant | None = None
    hybrid: HybridLayers | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def from_config(
        cls, config: dict[str, Any], *, name: str, hub_id: str | None = None
    ) -> ModelSpec:
        """Build a spec from a Hugging Face ``config.json`` dictionary (a multimodal one's
        ``text_config`` is the decoder). Raises ``ValueError`` naming the missing field or the
        unknown quantization method."""
        try:
            return _from_config(config, name=name, hub_id=hub_id)
        except KeyError as exc:
            raise ValueError(f"config.json of {name!r} lacks the field {exc.args[0]!r}") from None
        except (arch.ConfigFieldError, HybridConfigError) as exc:
            raise ValueError(f"config.json of {name!r} {exc}") from None
        except ValueError as exc:  # QuantConfigError and bad numbers
            raise ValueError(f"config.json of {name!r}: {exc}") from None

    @property
    def q_dim(self) -> int:
        """Width of the query (attention output): heads x head_dim (MLA: heads x (nope +
        rope))."""
        if self.mla is not None:
            return self.num_attention_heads * self.mla.qk_head_dim
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of one of the K or V projections: KV heads x head_dim."""
        return self.num_kv_heads * self.head_dim

    def attention_kinds(self) -> tuple[str, ...]:
        """The attention kind of each layer: ``full``, ``sliding``, ``chunked`` or ``mla``; in a
        hybrid model ``linear`` for a linear-attention/Mamba layer (a state per sequence, no KV)
        and ``none`` for a layer without a token mixer (Nemotron-H's MLP layers)."""
        if self.mla is not None:
            return ("mla",) * self.num_layers
        if self.hybrid is not None:  # Falcon-H1's "both" layers keep KV (and a state)
            return tuple("full" if k in ("attention", "both") else k
                         for k in self.hybrid.mixers)
        return self.layer_attention or ("full",) * self.num_layers

    def num_attention_layers(self) -> int:
        """Layers that keep K and V per token (all of them unless the model is hybrid)."""
        return sum(k not in ("linear", "none") for k in self.attention_kinds())

    def is_moe_layer(self, i: int) -> bool:
        """Whether layer ``i`` has the mixture-of-experts MLP."""
        if self.moe is None:
            return False
        return self.moe_layers[i] if self.moe_layers else True

    def num_moe_layers(self) -> int:
        """Layers with the mixture-of-experts MLP."""
        return sum(self.is_moe_layer(i) for i in range(self.num_layers))

    def tensors(self) -> tuple[TensorGroup, ...]:
        """Every weight tensor, in groups (:mod:`infer_prof.core.catalog.model_tensors`)."""
        return _tensors(self)

    def param_count(self) -> int:
        """Total parameters (what memory holds): every tensor group's elements."""
        return sum(t.params for t in self.tensors())

    def layer_params(self) -> int:
        """Parameters in the decoder layers, averaged per layer."""
        outside = ("embed", "lm_head", "vision")
        inside = sum(t.params for t in self.tensors() if t.role not in outside)
        return (inside - self.hidden_size) // self.num_layers  # minus the final norm

    def embedding_params(self) -> int:
        """Input embedding plus the LM head (counted once when the two are tied)."""
        emb = self.vocab_size * self.hidden_size
        return emb if self.tie_word_embeddings else 2 * emb

    def linear_params(self) -> int:
        """Parameters in the decoder layers' linear weights (what weight quantization shrinks):
        attention projections, dense MLPs, all experts and shared experts."""
        return _linear_params(self)

    def routed_expert_params(self) -> int:
        """Parameters of all routed experts (every MoE layer, every expert); 0 for a dense
        model."""
        return _routed_expert_params(self)

    def active_linear_params(self) -> int:
        """Linear parameters one token passes through: ``linear_params`` less the routed
        experts it is not sent to (``(E - k) / E`` of them)."""
        if self.moe is None:
            return self.linear_params()
        idle = self.routed_expert_params() * (self.moe.num_experts - self.moe.top_k)
        return self.linear_params() - idle // self.moe.num_experts

    def active_param_count(self) -> int:
        """Parameters one token uses (MoE: the top-k routed experts, the shared experts and
        every dense part): ``param_count`` less the experts it is not routed to."""
        return self.param_count() - (self.linear_params() - self.active_linear_params())

    def kv_cache_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV-cache bytes one token occupies when every layer keeps it: full/sliding layers
        ``2 (K and V) x KV heads x head_dim x bytes``, MLA layers ``(kv_lora_rank +
        qk_rope_head_dim) x bytes``, summed over layers (:mod:`~infer_prof.core.catalog.kv_layout`;
        sliding layers keep only their window of a longer sequence)."""
        return kv_bytes_per_token(self, 1, 1) * kv_dtype_bytes

    def flops_per_token(self) -> float:
        """Forward FLOPs per token, ignoring attention's context term: 2 x active parameters."""
        return 2.0 * self.active_param_count()

    def state_flops_per_token(self) -> float:
        """FLOPs of the linear layers' recurrences per token, whatever the context (0 for a
        model without them; :meth:`LinearMixer.flops_per_token` x linear layers)."""
        if self.hybrid is None:
            return 0.0
        return self.hybrid.num_linear * self.hybrid.linear.flops_per_token()


@cache
def _tensors(spec: ModelSpec) -> tuple[TensorGroup, ...]:
    return tuple(tensor_groups(spec))


@cache
def _linear_params(spec: ModelSpec) -> int:
    return sum(t.params for t in spec.tensors() if t.linear)


@cache
def _routed_expert_params(spec: ModelSpec) -> int:
    return sum(t.params for t in spec.tensors() if t.role == "experts")


def _from_config(config: dict[str, Any], *, name: str, hub_id: str | None) -> ModelSpec:
    cfg = arch.text_config(config)
    model_type = str(cfg.get("model_type") or config.get("model_type") or "")
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    blocks = cfg.get("layers_block_type")
    if cfg.get("num_hidden_layers") is None and isinstance(blocks, list) and blocks:
        layers = len(blocks)  # transformers 5's NemotronHConfig writes no num_hidden_layers
    else:
        layers = int(cfg["num_hidden_layers"])
    archs = config.get("architectures") or [config.get("model_type", "unknown")]
    moe = arch.read_moe(cfg)
    mla = arch.read_mla(cfg)
    hybrid = read_hybrid(cfg, layers, hidden)
    kinds: tuple[str, ...] = ()
    window: int | None = None
    if hybrid is None:
        kinds, window = arch.layer_attention(cfg, layers, mla)
    inter = cfg.get("intermediate_size_mlp") if model_type.startswith("llama4") else None
    inter = inter or cfg.get("intermediate_size")
    if model_type == "nemotron_h":  # experts only where the pattern has them ('E')
        moe = arch.nemotron_h_moe(cfg, moe) if hybrid and "moe" in hybrid.mlps else None
    if model_type == "granitemoehybrid":  # its dense MLP is the shared MLP
        moe = arch.granite_moe(cfg, moe)
        inter = cfg.get("shared_intermediate_size") if moe is None else inter
    if isinstance(inter, list):  # Nemotron-H: one width per MLP layer
        if len(set(inter)) != 1:
            raise arch.ConfigFieldError(f"has MLP widths {inter} (intermediate_size) that "
                                        "differ from layer to layer, which are not modelled")
        inter = inter[0]
    if inter is None:
        if moe is None or any(not m for m in arch.moe_layers(cfg, layers, moe)):
            raise KeyError("intermediate_size")
        inter = moe.expert_intermediate
    notes = tuple(n for n in (arch.uncounted_vision(config),) if n)
    qkv_bias = bool(cfg.get("attention_bias", model_type == "qwen2"))
    if model_type in ("qwen2", "qwen2_moe"):
        qkv_bias = True  # Qwen2Attention: q/k/v with bias, o without
    return ModelSpec(
        name=name,
        hub_id=hub_id,
        architecture=str(archs[0]),
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
        vocab_size=int(cfg["vocab_size"]),
        intermediate_size=int(inter),
        max_position_embeddings=int(cfg.get("max_position_embeddings") or 2048),
        head_dim=int(cfg.get("head_dim") or hidden // heads),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", arch.tied_default(model_type))),
        attention_bias=qkv_bias,
        model_type=model_type,
        o_bias=qkv_bias and model_type not in ("qwen2", "qwen2_moe"),
        qk_norm=model_type in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text", "qwen3_next",
                               "qwen3_5_text", "qwen3_5_moe_text"),
        norms_per_layer=(hybrid.norms_per_layer if hybrid is not None else
                         4 if model_type in ("gemma2", "gemma3", "gemma3_text") else 2),
        attention_sinks=model_type == "gpt_oss",
        layer_attention=kinds if any(k != "full" for k in kinds) else (),
        sliding_window=window,
        moe=moe,
        moe_layers=(() if moe is None else
                    tuple(x == "moe" for x in hybrid.mlps) if hybrid is not None and hybrid.mlps
                    else arch.moe_layers(cfg, layers, moe)),
        mla=mla,
        vision=arch.read_vision(config, hidden),
        quant=read_quantization(cfg),
        hybrid=hybrid,
        notes=notes,
    )
