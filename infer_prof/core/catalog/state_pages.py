"""How vLLM 0.32 pages a hybrid model's cache: per-token KV of the attention layers and the
per-sequence state of the linear/Mamba layers in one pool of equal pages. Pure: no I/O.

Read from vLLM 0.32 (``vllm/platforms/interface.py`` ``_align_hybrid_block_size``,
``vllm/v1/core/kv_cache_utils.py``, ``vllm/v1/kv_cache_interface.py`` ``MambaSpec``):

1. One attention layer's page for one token is ``a = 2 x KV heads / tp x head_dim x b``; one
   linear layer's state is ``s = conv x conv bytes + ssm x ssm bytes``
   (:meth:`~infer_prof.core.catalog.hybrid_layers.LinearMixer.state_bytes`).
2. The block size grows until an attention page holds a state: ``block = A x ceil(s / (A x
   a))`` with ``A = max(kernel block alignment, default block size)`` (GPU, FlashAttention:
   ``MultipleOf(16)`` and 16; vLLM-CPU: ``MultipleOf(32)`` and 128), and never below the default
   block size. The state page is padded up to the attention page ``block x a`` (vLLM logs
   "Padding mamba page size by N%").
3. Layers are grouped by kind into groups of ``g`` layers, ``g`` the fewest layers of a kind (the
   most when no kind has 1.5 x the fewest); a kind whose count ``g`` does not divide is padded
   with empty layers (``_get_kv_cache_groups_uniform_page_size``). All groups draw blocks from one
   pool; a block index costs ``g`` pages.
4. A sequence of ``n`` tokens holds ``ceil(n / block)`` blocks in each attention group and, per
   linear group, 1 block without prefix caching or 2 with it (``mamba_cache_mode`` "align",
   vLLM's default for hybrid models, which enable prefix caching by default), plus 1 for a Mamba2
   mixer's prefill checkpoint in "align" mode (``MambaMixer2.get_kv_cache_spec``).
   Its bytes: ``attention layers x ceil(n / block) x page + linear layers x pages x page``
   (both counts after padding), which is what vLLM's logged "Maximum concurrency" divides into.

The recurrent state's dtype (``mamba_ssm_cache_dtype`` "auto"): the model's dtype, except
Nemotron-H's float32 default (``NemotronHForCausalLMConfig``) and vLLM-CPU on a CPU with
AVX512-BF16, which resets it to float32 (``vllm/platforms/cpu.py``). The conv state is in the
model's dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infer_prof.core.catalog.models import ModelSpec

GPU_KERNEL_BLOCK = 16
"""Block alignment of vLLM's GPU attention backends (FlashAttention: ``MultipleOf(16)``), and
the default block size there."""

CPU_KERNEL_BLOCK = 32
"""vLLM-CPU's attention kernel block alignment (``CPUAttentionBackend``: ``MultipleOf(32)``)."""

CPU_DEFAULT_BLOCK = 128
"""vLLM-CPU's default ``--block-size`` (``CpuPlatform.check_and_update_config``)."""


@dataclass(frozen=True)
class HybridPaging:
    """The page layout of a hybrid model on one GPU (module docstring for every formula).

    ``block_size`` tokens per attention block; ``page_bytes`` one page (an attention layer's
    block, and a linear layer's padded state); ``state_bytes`` one linear layer's state before
    padding; ``state_pages`` pages a sequence holds per linear layer; ``group_size`` layers per
    KV cache group; ``attention_layers`` and ``linear_layers`` the counts after padding to whole
    groups."""

    block_size: int
    page_bytes: int
    state_bytes: int
    state_pages: int
    group_size: int
    attention_layers: int
    linear_layers: int

    @property
    def padding_pct(self) -> float:
        """How much vLLM pads a state page to the attention page, percent."""
        return 100.0 * (self.page_bytes - self.state_bytes) / self.state_bytes

    def state_bytes_per_sequence(self) -> int:
        """Bytes of pool one sequence's states take, whatever its length: ``linear layers x
        state pages x page``."""
        return self.linear_layers * self.state_pages * self.page_bytes

    def kv_bytes(self, tokens: int) -> int:
        """Bytes of pool the attention layers take for a sequence of ``tokens`` tokens:
        ``attention layers x ceil(tokens / block) x page``."""
        return self.attention_layers * -(-tokens // self.block_size) * self.page_bytes

    def sequence_bytes(self, tokens: int) -> int:
        """Bytes of pool one sequence of ``tokens`` tokens takes: KV plus states."""
        return self.kv_bytes(tokens) + self.state_bytes_per_sequence()

    def pool_bytes_per_block(self) -> int:
        """Bytes one block index costs in the pool: ``group_size x page``."""
        return self.group_size * self.page_bytes


def ssm_dtype_bytes(m: ModelSpec, *, on_cpu: bool = False, model_dtype_bytes: int = 2) -> int:
    """Bytes of one recurrent-state element as vLLM 0.32 defaults it (module docstring):
    4 on vLLM-CPU (an AVX512-BF16 CPU, as vLLM-CPU's supported x86 CPUs are) or when the family
    defaults to float32, else the model's dtype."""
    if on_cpu or (m.hybrid is not None and m.hybrid.ssm_dtype == "float32"):
        return 4
    return model_dtype_bytes


def _group_size(counts: list[int]) -> int:
    low, high = min(counts), max(counts)
    return high if high < 1.5 * low else low


def hybrid_paging(m: ModelSpec, tp: int = 1, kv_dtype_bytes: int = 2, *, on_cpu: bool = False,
                  prefix_caching: bool = True, model_dtype_bytes: int = 2) -> HybridPaging | None:
    """The page layout of a hybrid model on one of ``tp`` GPUs (None for a model without linear
    layers). ``on_cpu``: vLLM-CPU's block sizes and float32 state; ``prefix_caching``: vLLM's
    default for hybrid models (two state pages per linear layer, three for Mamba2)."""
    h = m.hybrid
    if h is None or not h.num_linear:
        return None
    attention = m.num_attention_layers()
    per_token = 2 * max(1, m.num_kv_heads // tp) * m.head_dim * kv_dtype_bytes
    state = h.linear.state_bytes(tp, model_dtype_bytes,
                                 ssm_dtype_bytes(m, on_cpu=on_cpu,
                                                 model_dtype_bytes=model_dtype_bytes))
    kernel, default = ((CPU_KERNEL_BLOCK, CPU_DEFAULT_BLOCK) if on_cpu
                       else (GPU_KERNEL_BLOCK, GPU_KERNEL_BLOCK))
    align = max(kernel, default)
    block = align * -(-state // (align * per_token)) if attention else default
    block = max(default, kernel * -(-block // kernel))
    page = block * per_token if attention else state
    pages = 1
    if prefix_caching:
        pages = 3 if h.linear.kind == "mamba2" else 2
    counts = [c for c in (attention, h.num_linear) if c]
    g = _group_size(counts)
    return HybridPaging(block_size=block, page_bytes=page, state_bytes=state, state_pages=pages,
                        group_size=g, attention_layers=-(-attention // g) * g,
                        linear_layers=-(-h.num_linear // g) * g)
