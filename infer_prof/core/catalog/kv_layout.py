"""What the KV cache holds per token, by kind of attention layer, as vLLM's (hybrid) KV cache
manager allocates it. Pure: no I/O.

Per layer and token, with ``b`` bytes per KV element:

- ``full`` and ``sliding``/``chunked`` attention: K and V, ``2 x max(1, kv_heads / tp) x
  head_dim x b`` on each of ``tp`` GPUs (vLLM replicates KV heads when there are more GPUs than
  heads).
- ``mla``: one latent, ``(kv_lora_rank + qk_rope_head_dim) x b``, the same on every GPU (vLLM's
  ``MLAAttentionSpec``: no separate K and V, not split by tensor parallelism).

How many tokens a layer keeps for one sequence of ``n`` tokens, in blocks of ``block`` tokens:
a full (or MLA) layer all of them, ``ceil(n / block)`` blocks; a sliding layer only its window
``w`` (vLLM's ``SlidingWindowManager`` frees blocks that fall out of it) plus the tokens one
scheduler step may bring in, ``T`` (``max_num_batched_tokens``: a prefill chunk is written before
the blocks behind the window are freed), ``ceil(min(w - 1 + T, n) / block) + 1`` blocks
(vLLM's ``SlidingWindowSpec.max_memory_usage_bytes``, which both its logged capacity and its
admission use); a chunked-local layer (Llama-4) at most ``ceil(min(w + T, n) / block)``
(``ChunkedLocalAttentionSpec``). With ``T = 0`` these are the steady-state holdings, ``ceil((w -
1) / block) + 1`` and ``ceil(w / block) + 1``. Every layer's blocks come from one pool of equal
pages (the hybrid allocator groups layers of one kind), so the bytes a sequence holds are the
sum over layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infer_prof.core.catalog.models import ModelSpec


@dataclass(frozen=True)
class KvGroup:
    """``layers`` decoder layers of one ``kind`` (``full``, ``sliding``, ``chunked``, ``mla``)
    that each keep ``bytes_per_token`` bytes per token on one GPU, for at most ``window``
    tokens of a sequence (None: all of them)."""

    kind: str
    layers: int
    bytes_per_token: int
    window: int | None

    def blocks(self, tokens: int, block: int, in_flight: int = 0) -> int:
        """Blocks of ``block`` tokens one layer of the group holds for a sequence of
        ``tokens`` tokens when a scheduler step may bring in ``in_flight`` tokens (see the
        module docstring)."""
        need = -(-tokens // block)
        if self.window is None:
            return need
        if self.kind == "chunked":
            if in_flight:
                return -(-min(self.window + in_flight, tokens) // block)
            return min(need, -(-self.window // block) + 1)
        if in_flight:  # vLLM reserves the +1 even for a sequence shorter than the window
            return -(-min(self.window - 1 + in_flight, tokens) // block) + 1
        return min(need, -(-(self.window - 1) // block) + 1)

    def tokens_read(self, context: float) -> float:
        """Tokens one layer reads per decoded token at a context of ``context`` tokens: all of
        them, or at most the window."""
        return context if self.window is None else min(context, float(self.window))


def kv_groups(m: ModelSpec, tp: int = 1, kv_dtype_bytes: int = 2) -> list[KvGroup]:
    """The model's layers grouped by what they keep in the KV cache, on one of ``tp`` GPUs."""
    return list(_kv_groups(m, tp, kv_dtype_bytes))


@lru_cache(maxsize=1024)
def _kv_groups(m: ModelSpec, tp: int, kv_dtype_bytes: int) -> tuple[KvGroup, ...]:
    """:func:`kv_groups`, computed once per model, split and element size (the estimate asks
    for it on every predicted engine step)."""
    if m.mla is not None:
        return (KvGroup("mla", m.num_layers, m.mla.latent_width * kv_dtype_bytes, None),)
    heads = max(1, m.num_kv_heads // tp)
    per_layer = 2 * heads * m.head_dim * kv_dtype_bytes
    kinds = m.attention_kinds()
    out = []
    for kind in ("full", "sliding", "chunked"):
        n = kinds.count(kind)
        if n:
            out.append(KvGroup(kind, n, per_layer, None if kind == "full" else m.sliding_window))
    return tuple(out)


def kv_bytes_per_token(m: ModelSpec, tp: int = 1, kv_dtype_bytes: int = 2) -> int:
    """KV bytes one token takes on one GPU when every layer keeps it (a context no longer than
    any window): the sum over layers. This is the page arithmetic vLLM sizes its pool with."""
    return sum(g.layers * g.bytes_per_token for g in kv_groups(m, tp, kv_dtype_bytes))


def kv_bytes_per_sequence(m: ModelSpec, tokens: int, tp: int = 1, kv_dtype_bytes: int = 2,
                          block: int = 16, in_flight: int = 0) -> int:
    """KV bytes one sequence of ``tokens`` tokens holds on one GPU, in whole blocks of
    ``block`` tokens, sliding layers keeping only their window plus the ``in_flight`` tokens
    of one scheduler step (``max_num_batched_tokens``; module docstring)."""
    return sum(g.layers * g.bytes_per_token * block * g.blocks(tokens, block, in_flight)
               for g in kv_groups(m, tp, kv_dtype_bytes))


def kv_bytes_read(m: ModelSpec, context: float, kv_dtype_bytes: float = 2.0) -> float:
    """KV bytes one decoded token reads (whole model, all GPUs) at a context of ``context``
    tokens: each attention layer's bytes per token x the tokens it attends to (at most its
    window), plus a hybrid model's linear-layer state, read once per sequence whatever the
    context (:func:`state_bytes_read`)."""
    total = 0.0
    for g in kv_groups(m, 1, 1):
        total += g.layers * g.bytes_per_token * kv_dtype_bytes * g.tokens_read(context)
    return total + state_bytes_read(m)


def state_bytes_moved(m: ModelSpec) -> float:
    """Bytes of a hybrid model's linear/Mamba state one decode step moves per sequence (whole
    model): ``2 x`` :func:`state_bytes_read`, the state read and the updated state written back
    in place. vLLM's recurrent updates store every element they load: ``selective_state_update``
    (Mamba2; ``vllm/model_executor/layers/mamba/ops/mamba_ssm.py``) loads each sequence's
    ``state`` tile and stores the updated one (``tl.store``) to the same cache slot, and the gated
    delta rule (``vllm/model_executor/layers/fla/ops/fused_recurrent.py``) reads ``h0`` and
    writes ``ht``. Unlike the KV cache, which a decode step only reads (and appends one token
    to), the state is rewritten whole each step. 0 for other models."""
    return 2.0 * state_bytes_read(m)


def state_bytes_read(m: ModelSpec) -> float:
    """Bytes of a hybrid model's linear/Mamba state one decode step reads per sequence (whole
    model): ``linear layers x state bytes`` in the dtypes vLLM keeps them on a GPU (conv state
    16-bit, recurrent state the family's default:
    :func:`~infer_prof.core.catalog.state_pages.ssm_dtype_bytes`); 0 for other models. It is
    the same at every context length."""
    from infer_prof.core.catalog.state_pages import ssm_dtype_bytes

    if m.hybrid is None:
        return 0.0
    return float(m.hybrid.num_linear * m.hybrid.linear.state_bytes(1, 2, ssm_dtype_bytes(m)))
