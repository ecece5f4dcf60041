"""The weight tensors of a model, as groups of equal shape: what a checkpoint holds and what vLLM
loads. Pure: a :class:`~infer_prof.core.catalog.models.ModelSpec` in, :class:`TensorGroup` rows
out; no I/O.

Per decoder layer (``H`` hidden, ``h`` heads, ``kv`` KV heads, ``d`` head_dim):

- attention: ``q_proj`` ``h d x H``, ``k_proj``/``v_proj`` ``kv d x H``, ``o_proj`` ``H x h d``;
  biases on q/k/v (Qwen2, gpt-oss, ``attention_bias``) and o (``attention_bias`` outside Qwen2);
  q/k RMSNorms of ``d`` (Qwen3, Gemma-3); attention sinks, one per head (gpt-oss).
- MLA (DeepSeek-V2/V3): ``q_proj`` ``h (nope+rope) x H``, or ``q_a_proj`` ``q_lora x H`` +
  ``q_a_layernorm`` + ``q_b_proj`` ``h (nope+rope) x q_lora``; ``kv_a_proj_with_mqa``
  ``(kv_lora + rope) x H`` + ``kv_a_layernorm``; ``kv_b_proj`` ``h (nope + v) x kv_lora``;
  ``o_proj`` ``H x h v``.
- dense MLP: gate, up ``I x H`` and down ``H x I``.
- MoE MLP: the router ``E x H`` (+ bias, + DeepSeek-V3's score correction bias), ``E`` experts
  of gate, up ``I_e x H`` and down ``H x I_e`` (+ biases for gpt-oss), the shared expert(s)
  ``I_s`` wide (+ Qwen2-MoE's ``1 x H`` shared-expert gate).
- norms: 2 RMSNorms of ``H`` (4 for Gemma-2/3).

Hybrid models (:mod:`~infer_prof.core.catalog.hybrid_layers`): a linear/Mamba layer has its
mixer's projections (``mixer``, linear) and small parameters (``mixer_param``: convolution,
decay, skip, biases) in place of attention; Qwen3-Next's gated attention a ``q_proj`` twice as
wide; a Nemotron-H layer is one block (a mixer, attention, or an MLP of ``up_proj`` and
``down_proj`` without a gate) behind one norm.

Outside the layers: the embedding ``V x H``, the LM head ``V x H`` unless tied, the final norm,
and Gemma-3's vision tower (:class:`~infer_prof.core.catalog.model_arch.VisionSpec`).

Each group says whether tensor parallelism splits it (``split``) and whether weight
quantization applies to it (``linear``: the projections, experts and shared experts; not the
routers, embeddings, norms, biases or sinks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infer_prof.core.catalog.models import ModelSpec

ROLES = ("attention", "mlp", "experts", "shared", "router", "embed", "lm_head", "norm", "bias",
         "sink", "vision", "mixer", "mixer_param")
"""What a tensor group is part of."""


@dataclass(frozen=True)
class TensorGroup:
    """``count`` tensors of ``rows x cols`` elements (``rows`` = output features; 1-D tensors
    have ``cols == 1``) named ``name`` (the first one's module path) with ``role`` (one of
    :data:`ROLES`), whether tensor parallelism splits them (``split``) and whether they are
    linear weights that weight quantization can apply to (``linear``)."""

    name: str
    rows: int
    cols: int
    count: int
    role: str
    split: bool = True
    linear: bool = False

    @property
    def params(self) -> int:
        """Elements in the group: ``rows x cols x count``."""
        return self.rows * self.cols * self.count


def _attention(m: ModelSpec, p: str) -> list[TensorGroup]:
    h, q, kv = m.hidden_size, m.q_dim, m.kv_dim
    a = f"{p}.self_attn"
    q_rows = 2 * q if m.hybrid is not None and m.hybrid.attention_gate else q
    out = [TensorGroup(f"{a}.q_proj", q_rows, h, 1, "attention", linear=True),
           TensorGroup(f"{a}.k_proj", kv, h, 1, "attention", linear=True),
           TensorGroup(f"{a}.v_proj", kv, h, 1, "attention", linear=True),
           TensorGroup(f"{a}.o_proj", h, q, 1, "attention", linear=True)]
    if m.attention_bias:
        out.append(TensorGroup(f"{a}.qkv_bias", q + 2 * kv, 1, 1, "bias"))
    if m.o_bias:
        out.append(TensorGroup(f"{a}.o_proj.bias", h, 1, 1, "bias", split=False))
    if m.qk_norm:
        out.append(TensorGroup(f"{a}.qk_norm", m.head_dim, 1, 2, "norm", split=False))
    if m.attention_sinks:
        out.append(TensorGroup(f"{a}.sinks", m.num_attention_heads, 1, 1, "sink"))
    return out


def _mla(m: ModelSpec, p: str) -> list[TensorGroup]:
    assert m.mla is not None
    x, h, heads = m.mla, m.hidden_size, m.num_attention_heads
    a = f"{p}.self_attn"
    out: list[TensorGroup] = []
    if x.q_lora_rank:
        out += [TensorGroup(f"{a}.q_a_proj", x.q_lora_rank, h, 1, "attention", False, True),
                TensorGroup(f"{a}.q_a_layernorm", x.q_lora_rank, 1, 1, "norm", split=False),
                TensorGroup(f"{a}.q_b_proj", heads * x.qk_head_dim, x.q_lora_rank, 1,
                            "attention", linear=True)]
    else:
        out.append(TensorGroup(f"{a}.q_proj", heads * x.qk_head_dim, h, 1, "attention",
                               linear=True))
    out += [TensorGroup(f"{a}.kv_a_proj_with_mqa", x.latent_width, h, 1, "attention", False,
                        True),
            TensorGroup(f"{a}.kv_a_layernorm", x.kv_lora_rank, 1, 1, "norm", split=False),
            TensorGroup(f"{a}.kv_b_proj", heads * (x.qk_nope_head_dim + x.v_head_dim),
                        x.kv_lora_rank, 1, "attention", linear=True),
            TensorGroup(f"{a}.o_proj", h, heads * x.v_head_dim, 1, "attention", linear=True)]
    return out


def _gated(name: str, hidden: int, width: int, count: int, role: str) -> list[TensorGroup]:
    return [TensorGroup(f"{name}.gate_proj", width, hidden, count, role, linear=True),
            TensorGroup(f"{name}.up_proj", width, hidden, count, role, linear=True),
            TensorGroup(f"{name}.down_proj", hidden, width, count, role, linear=True)]


def _plain(name: str, hidden: int, width: int, count: int, role: str) -> list[TensorGroup]:
    """An MLP of an up and a down projection, no gate (Nemotron-H's squared ReLU)."""
    return [TensorGroup(f"{name}.up_proj", width, hidden, count, role, linear=True),
            TensorGroup(f"{name}.down_proj", hidden, width, count, role, linear=True)]


def _moe(m: ModelSpec, p: str) -> list[TensorGroup]:
    assert m.moe is not None
    e, h = m.moe, m.hidden_size
    out = [TensorGroup(f"{p}.mlp.gate", e.num_experts, h, 1, "router", split=False)]
    if e.router_bias:
        out.append(TensorGroup(f"{p}.mlp.gate.bias", e.num_experts, 1, 1, "router", False))
    if e.score_bias:
        out.append(TensorGroup(f"{p}.mlp.gate.e_score_correction_bias", e.num_experts, 1, 1,
                               "router", split=False))
    mlp = _gated if e.gated else _plain
    out += mlp(f"{p}.mlp.experts", h, e.expert_intermediate, e.num_experts, "experts")
    if e.expert_bias:
        out.append(TensorGroup(f"{p}.mlp.experts.bias", 2 * e.expert_intermediate + h, 1,
                               e.num_experts, "bias"))
    if e.shared_intermediate:
        out += mlp(f"{p}.mlp.shared_experts", h, e.shared_intermediate, 1, "shared")
    if e.shared_gate:
        out.append(TensorGroup(f"{p}.mlp.shared_expert_gate", 1, h, 1, "router", split=False))
    return out


def _mixer(m: ModelSpec, i: int, p: str) -> list[TensorGroup]:
    """Layer ``i``'s token mixer: attention (MLA or not), a linear/Mamba mixer, or none."""
    kind = m.hybrid.mixers[i] if m.hybrid is not None else "attention"
    out: list[TensorGroup] = []
    if kind in ("linear", "both") and m.hybrid is not None:
        out += m.hybrid.linear.tensors(m.hidden_size, f"{p}.mixer")
    if kind in ("attention", "both"):
        out += _mla(m, p) if m.mla is not None else _attention(m, p)
    return out


def layer_groups(m: ModelSpec, i: int) -> list[TensorGroup]:
    """The tensors of decoder layer ``i`` (module paths ``model.layers.{i}...``)."""
    p = f"model.layers.{i}"
    out = _mixer(m, i, p)
    mlp = m.hybrid.mlps[i] if m.hybrid is not None and m.hybrid.mlps else "usual"
    if mlp == "plain":  # Nemotron-H: up and down, squared ReLU, no gate
        out += _plain(f"{p}.mixer", m.hidden_size, m.intermediate_size, 1, "mlp")
    elif mlp == "none":
        pass
    elif m.is_moe_layer(i):
        out += _moe(m, p)
    else:
        out += _gated(f"{p}.mlp", m.hidden_size, m.intermediate_size, 1, "mlp")
    out.append(TensorGroup(f"{p}.norms", m.hidden_size, 1, m.norms_per_layer, "norm", False))
    return out


def tensor_groups(m: ModelSpec) -> list[TensorGroup]:
    """Every weight tensor of the model, in groups (see the module docstring)."""
    h, v = m.hidden_size, m.vocab_size
    out = [TensorGroup("model.embed_tokens", v, h, 1, "embed")]
    for i in range(m.num_layers):
        out += layer_groups(m, i)
    out.append(TensorGroup("model.norm", h, 1, 1, "norm", split=False))
    if not m.tie_word_embeddings:
        out.append(TensorGroup("lm_head", v, h, 1, "lm_head"))
    if m.vision is not None:
        out.append(TensorGroup("vision_tower", m.vision.params(), 1, 1, "vision"))
    return out
