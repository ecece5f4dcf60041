"""The GPU memory vLLM reserves for LoRA adapters before it sizes the KV cache. Pure arithmetic.

With ``--enable-lora --max-loras N --max-lora-rank r`` vLLM wraps layers of the model in LoRA
layers while it loads the model, each holding zero-filled buffers for ``N`` adapters of rank
``r`` in the LoRA dtype (the model's dtype unless ``--lora-dtype``: ``LoRAConfig.
verify_with_model_config``). They are allocated inside ``load_model``'s memory profiler, so vLLM
charges them as model memory ("Model loading took ... GiB") and sizes the KV cache after them.
Read in vLLM 0.32 (``vllm/``):

- ``v1/worker/gpu_model_runner.py`` ``load_model``: ``load_lora_model`` runs inside
  ``DeviceMemoryProfiler``; its ``consumed_memory`` is ``model_memory_usage``, the weights
  figure ``gpu_worker.determine_available_memory`` subtracts from the budget.
- ``lora/model_manager.py`` ``_create_lora_modules``: without ``--lora-target-modules`` every
  supported module is wrapped, whatever the adapters adapt: every linear layer
  (``lora/utils.py`` ``get_supported_lora_modules``: each ``LinearBase``; the MoE runner) and
  the modules of the class's ``embedding_modules`` (``embed_tokens``; ``lm_head`` through
  ``LogitsProcessorWithLoRA``). Slots: ``lora_slots = max_loras``.
- ``lora/layers/base_linear.py``, ``column_parallel_linear.py``, ``row_parallel_linear.py``
  ``create_lora_weights``: per slice of a linear layer (q, k and v of ``qkv_proj`` and gate and
  up of ``gate_up_proj`` are slices, each with its own A, where the class's
  ``packed_modules_mapping`` packs them) ``lora_a_stacked`` ``(N, 1, r, in)`` and
  ``lora_b_stacked`` ``(N, 1, out, r)``; tensor parallelism splits ``out`` of a
  column-parallel layer and ``in`` of a row-parallel one (A of a column-parallel layer and B of a
  row-parallel one stay whole unless ``--fully-sharded-loras``).
- ``lora/layers/vocab_parallel_embedding.py``: ``(N, vocab, r)`` and ``(N, 1, hidden, r)``;
  ``lora/layers/logits_processor.py``: ``(N, 1, r, hidden)`` and ``(N, 1, vocab, r)``; the
  vocabulary is the unpadded one, whole on every GPU.
- ``lora/layers/fused_moe.py`` (2-D experts): per expert, gate and up as two slices and down as
  one, the same shapes as a dense MLP's with an expert axis: ``(N, E, r, in)``, ``(N, E, out, r)``.
- The profiling run's dummy adapters (``v1/worker/lora_model_runner_mixin.py``
  ``maybe_setup_dummy_loras``, rank ``min(r, 8)``) are built on the CPU
  (``model_manager.create_dummy_lora``: ``"cpu"``) and copied into these buffers: no more GPU
  memory. The punica wrapper's index tensors (``max_num_batched_tokens`` integers a few times)
  and the LoRA kernels' fp32 intermediates (``tokens x slices x r``, counted in the profile's
  activation peak) are under 2 MiB at 8,192 tokens and rank 16, and left out.

So, per GPU of ``tp``, with ``b`` the LoRA dtype's bytes::

    lora_bytes = b x N x r x [ sum over linear matrices of (in_A + out_B) x count
                               + 2 x (vocab + hidden)   if the class wraps the embeddings ]

``in_A`` is a matrix's input width (``/ tp`` for a row-parallel one: o_proj, down_proj),
``out_B`` its output width (``/ tp`` for a column-parallel one: q, k, v, gate, up), ``count``
the experts of an expert matrix (1 otherwise); a router is replicated. A packed module that is a
single slice (Phi-3's fused ``qkv_proj`` and ``gate_up_proj``) has one A where separate q, k, v
have three. For a dense Llama layer that is ``N x r x (7 H + (2 q + 2 kv + 3 I) / tp)``.

Worked, llama-2-7b (32 layers, H 4,096, q = kv = 4,096, I 11,008, vocab 32,000), 4 adapters of
rank 16, bf16, one GPU: per layer ``4 x 16 x (7 x 4,096 + 2 x 4,096 + 2 x 4,096 + 3 x 11,008) =
4,997,120`` elements, 159,907,840 for 32 layers; embeddings ``4 x 16 x 2 x (32,000 + 4,096) =
4,620,288``; ``2 x 164,528,128 = 329,056,256`` bytes (313.8 MiB) less KV cache.

The architectures of :data:`LORA_ARCHS` are those whose wrapping was read from vLLM 0.32's model
classes (``embedding_modules``, ``packed_modules_mapping``); for another the buffers are not
computed (:attr:`LoraBuffers.bytes` None, with the reason).
"""

from __future__ import annotations

from dataclasses import dataclass

from infer_prof.core.catalog.models import ModelSpec

LORA_DTYPE_BYTES = 2
"""The LoRA dtype's bytes: the model's dtype (bf16/fp16) unless ``--lora-dtype`` says otherwise."""

VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The ranks ``--max-lora-rank`` takes in vLLM 0.32 (``vllm/config/lora.py``: ``MaxLoRARanks``)."""

#: Matrices tensor parallelism splits along their input (row-parallel in vLLM): A is split.
ROW_PARALLEL = ("o_proj", "down_proj")
#: The linear tensor roles vLLM wraps (attention and MLP projections, experts, routers).
WRAPPED_ROLES = ("attention", "mlp", "experts", "shared", "router")


@dataclass(frozen=True)
class LoraArch:
    """How vLLM 0.32 wraps an architecture: ``embeddings``: the class's ``embedding_modules``
    name ``embed_tokens`` and ``lm_head`` (both get buffers); ``fused_qkv`` / ``fused_gate_up``:
    its ``packed_modules_mapping`` keeps ``qkv_proj`` / ``gate_up_proj`` as one slice (one A)."""

    embeddings: bool
    fused_qkv: bool = False
    fused_gate_up: bool = False


LORA_ARCHS: dict[str, LoraArch] = {
    "LlamaForCausalLM": LoraArch(embeddings=True),
    "MistralForCausalLM": LoraArch(embeddings=False),  # embedding_modules = {}
    "Qwen2ForCausalLM": LoraArch(embeddings=False),
    "Qwen3ForCausalLM": LoraArch(embeddings=True),
    "Phi3ForCausalLM": LoraArch(embeddings=True, fused_qkv=True, fused_gate_up=True),
    "MixtralForCausalLM": LoraArch(embeddings=True),
    "Qwen3MoeForCausalLM": LoraArch(embeddings=True),
}
"""Read from the classes of vLLM 0.32 (``vllm/model_executor/models/<name>.py``): their
``embedding_modules`` and ``packed_modules_mapping``. Dense decoders and the 2-D-expert MoE
models; latent attention (DeepSeek), hybrid layers (Qwen3-Next, Nemotron-H) and gpt-oss's 3-D
experts are left out (their LoRA layers have other shapes)."""


@dataclass(frozen=True)
class LoraSlots:
    """What vLLM is launched with: ``--max-loras`` (adapters in one batch, each a slot of
    buffers) and ``--max-lora-rank``."""

    max_loras: int
    max_rank: int


@dataclass(frozen=True)
class LoraBuffers:
    """The LoRA buffers on one GPU, bytes: ``linear_bytes`` the linear layers', ``embedding_bytes``
    the embedding's and LM head's; ``bytes`` their sum, None when the architecture's wrapping is
    not known (``note`` says so; the plan then counts none)."""

    slots: LoraSlots
    bytes: int | None
    linear_bytes: int = 0
    embedding_bytes: int = 0
    note: str = ""


def lora_buffer_bytes(model: ModelSpec, slots: LoraSlots, tp: int = 1,
                      dtype_bytes: int = LORA_DTYPE_BYTES) -> LoraBuffers:
    """The LoRA buffers vLLM 0.32 allocates on one of ``tp`` GPUs for ``slots`` (formula in the
    module docstring): ``dtype_bytes x N x r x`` the widths of every wrapped matrix."""
    arch = LORA_ARCHS.get(model.architecture)
    if arch is None or model.mla is not None or model.hybrid is not None:
        return LoraBuffers(slots, None, note=(
            f"LoRA buffers not computed for {model.architecture} (the planner knows vLLM's LoRA "
            f"layers of {', '.join(sorted(LORA_ARCHS))}): the KV cache is planned as if they "
            "took nothing"))
    widths = 0
    for g in model.tensors():
        if g.role not in WRAPPED_ROLES or g.cols == 1 or not (g.linear or g.role == "router"):
            continue
        if g.role == "router":
            a_in, b_out = g.cols, g.rows  # replicated
        elif g.name.endswith(ROW_PARALLEL):
            a_in, b_out = g.cols // tp, g.rows
        else:
            a_in, b_out = g.cols, g.rows // tp
        widths += (a_in + b_out) * g.count
    dense_layers = model.num_layers - model.num_moe_layers()
    if arch.fused_qkv:  # one A of hidden width for q, k and v together, not three
        widths -= 2 * model.hidden_size * model.num_layers
    if arch.fused_gate_up:
        widths -= model.hidden_size * dense_layers
    per_width = dtype_bytes * slots.max_loras * slots.max_rank
    embedding = 2 * (model.vocab_size + model.hidden_size) if arch.embeddings else 0
    linear_bytes, embedding_bytes = per_width * widths, per_width * embedding
    return LoraBuffers(slots, linear_bytes + embedding_bytes, linear_bytes, embedding_bytes)
