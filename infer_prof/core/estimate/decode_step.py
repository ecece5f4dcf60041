"""The time of one engine step of vLLM's continuous batching. Pure: no I/O.

One step runs ``B`` decode tokens (one per running sequence, each at a context of ``L``
tokens) and, with chunked prefill, ``p`` prompt tokens in the same forward pass. Per GPU of a
tensor-parallel group of ``n`` (weights, KV heads and FLOPs split ``n`` ways):

    flops_d  = B x decode_flops_per_token(L) / n
    flops_p  = p x prefill_flops_per_token(Lp) / n
    t_memory = W(B + p) / n / (bandwidth x mbu) + B x kv_read(L) x s_kv / (bandwidth x mbu_kv)
    t_compute= (flops_d - att_d) / (peak x mfu_decode) + (flops_p - att_p) / (peak x mfu_prefill)
             + att_d / (peak_att x mfu_decode) + att_p / (peak_att x mfu_prefill)
    t_step   = max(t_memory, t_compute) + t_allreduce + step_overhead + layers x layer_overhead
               + B x sequence_overhead + t_moe

- ``W(T)``: the weight bytes a step of ``T`` tokens reads (whole model, at the precision's
  size): every dense weight, and of each MoE layer's routed experts only those the ``T`` tokens
  are routed to, ``E x (1 - (1 - k/E)^T)`` of ``E`` in expectation (tokens route independently
  and uniformly; :func:`infer_prof.core.planning.memory.decode_weight_bytes`).
- ``kv_read(L)``: KV bytes one decoded token reads at context ``L`` (whole model), each layer at
  most its sliding window; MLA layers read their latent
  (:func:`infer_prof.core.catalog.kv_layout.kv_bytes_read`). ``s_kv`` the share one GPU holds:
  ``kv_bytes_per_token(tp=n) / kv_bytes_per_token(tp=1)`` (``1/n``, more when KV heads are
  replicated). A hybrid model's linear layers read their state once per sequence whatever
  ``L`` and write the updated state back, ``2 x state`` bytes
  (:func:`~infer_prof.core.catalog.kv_layout.state_bytes_moved`) in place of ``kv_read``'s one
  ``state``, split ``1/n``.
- ``decode_flops_per_token(L)`` = 2 x active linear params + 2 x vocab x hidden + attention;
  ``prefill_flops_per_token(Lp)`` = 2 x active linear params + attention at the mean attended
  context ``Lp`` (:mod:`infer_prof.core.catalog.roofline`).
- ``att_d``, ``att_p``: the attention part of ``flops_d`` and ``flops_p``
  (:func:`~infer_prof.core.catalog.roofline.attention_flops_per_token`). Attention multiplies
  at the KV cache's precision, whatever the weights': those FLOPs run at ``peak_att``
  (:func:`infer_prof.core.estimate.peaks.attention_peak_flops`: the 16-bit peak, the fp8 peak
  for an fp8 KV cache on a GPU with fp8 math); the weights' matrices at ``peak``, the
  precision's (:mod:`.peaks`: fp8 W8A8, NVFP4 at the FP4 peak on Blackwell, MXFP4's MoE at
  its activations' peak, 16-bit by default). ``bandwidth`` the GPU's.
- ``t_allreduce``: :mod:`.collectives` (0 on one GPU; unknown without a link figure, then left
  out and said so).
- weight-only formats (AWQ/GPTQ Marlin, fp8 without fp8 math, bitsandbytes) read their packed
  weights at ``bandwidth_share`` of the rate and multiply at ``compute_share`` of the 16-bit
  peak (:mod:`.weight_only`): the weights term of ``t_memory`` is divided by the one, the
  weights' FLOPs of ``t_compute`` (not the attention's) by the other. FP4 weights on a GPU
  without FP4 math take int4 Marlin's shares times the fitted ``fp4_weight_only_share``
  (:class:`~infer_prof.core.estimate.factors.StepFactors`), both.
- ``layer_overhead``: ``layers x layer_overhead_us``, the per-layer time tensor parallelism
  does not shrink; ``sequence_overhead``: ``sequence_overhead_us``, the time each decode
  sequence of the step adds beyond its bytes and FLOPs (:func:`fixed_step_s`).
- ``t_moe``: an MoE model's layers, each a fixed time beyond its weight reads, set from vLLM's
  kernel benchmark (:func:`infer_prof.core.estimate.moe_layer.moe_fixed_s`: 30 us a layer).

The step is "memory" bound when ``t_memory >= t_compute``, else "compute" bound.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from infer_prof.core.catalog import kv_layout
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.catalog.roofline import (
    attention_flops_per_token,
    decode_flops_per_token,
    prefill_flops_per_token,
)
from infer_prof.core.estimate.collectives import allreduce_step_s
from infer_prof.core.estimate.deployment import Deployment
from infer_prof.core.estimate.factors import StepFactors
from infer_prof.core.estimate.moe_layer import moe_fixed_s
from infer_prof.core.estimate.peaks import attention_peak_flops, bandwidth_bytes_per_s, peak_flops
from infer_prof.core.estimate.weight_only import FP4_WEIGHT_ONLY, weight_only_cost
from infer_prof.core.planning.memory import decode_weight_bytes

Bound = Literal["memory", "compute"]


class StepCost(msgspec.Struct, frozen=True, kw_only=True):
    """One engine step on one GPU. Bytes and FLOPs per GPU; times in seconds.
    ``allreduce_s`` None when tensor parallel and the link bandwidth is unknown (left out of
    ``time_s``)."""

    weight_bytes: float
    kv_bytes: float
    decode_flops: float
    prefill_flops: float
    memory_s: float
    compute_s: float
    allreduce_s: float | None
    overhead_s: float
    time_s: float
    bound: Bound


def fixed_step_s(factors: StepFactors, layers: int, sequences: float = 0.0) -> float:
    """Seconds of a step of ``sequences`` decode sequences that tensor parallelism does not
    shrink: ``step_overhead_ms x 1e-3 + layers x layer_overhead_us x 1e-6 + sequences x
    sequence_overhead_us x 1e-6`` (the step's scheduling and launch, each layer's kernel
    launches, which every GPU of the group pays whole, and each sequence's own work)."""
    return (factors.step_overhead_ms * 1e-3 + layers * factors.layer_overhead_us * 1e-6
            + sequences * factors.sequence_overhead_us * 1e-6)


def kv_share_per_gpu(arch: ModelSpec, gpus: int) -> float:
    """Share of the model's KV bytes one of ``gpus`` tensor-parallel GPUs holds (and reads):
    ``kv_bytes_per_token(tp) / kv_bytes_per_token(1)``."""
    whole = kv_layout.kv_bytes_per_token(arch, 1, 1)
    return kv_layout.kv_bytes_per_token(arch, gpus, 1) / whole if whole else 0.0


def step_cost(d: Deployment, *, batch: float, context: float, prefill_tokens: float = 0.0,
              prefill_context: float = 0.0) -> StepCost:
    """One step of ``batch`` decode tokens at mean context ``context`` (tokens) and
    ``prefill_tokens`` prompt tokens attending a mean of ``prefill_context`` positions, on one
    of ``d.gpu_count`` GPUs of the deployment ``d`` (module docstring for every formula).
    Raises ValueError when the catalog has no peak FLOP/s for ``d.precision`` on ``d.gpu``."""
    arch, gpu, gpu_count, precision, factors = d.arch, d.gpu, d.gpu_count, d.precision, d.factors
    if batch < 0 or prefill_tokens < 0 or context < 0 or gpu_count < 1:
        raise ValueError("batch, prefill tokens and context must be >= 0, gpu_count >= 1")
    peak = peak_flops(gpu, precision, d.mxfp4_activations)
    if not peak:
        raise ValueError(f"the GPU catalog has no {precision} FLOP/s figure for {gpu.key}")
    n = gpu_count
    tokens = batch + prefill_tokens
    weights = decode_weight_bytes(arch, precision, tokens) / n
    attention_kv = (kv_layout.kv_bytes_read(arch, context, d.kv_dtype_bytes)
                    - kv_layout.state_bytes_read(arch))
    # a hybrid's linear layers: their state read and written back, split n ways
    kv = batch * (attention_kv * kv_share_per_gpu(arch, n) + kv_layout.state_bytes_moved(arch) / n)
    flops_d = batch * decode_flops_per_token(arch, context) / n if batch else 0.0
    flops_p = (prefill_tokens * prefill_flops_per_token(arch, prefill_context) / n
               if prefill_tokens else 0.0)
    bw = bandwidth_bytes_per_s(gpu)
    dequant = weight_only_cost(precision, gpu)
    read_share, math_share = ((dequant.bandwidth_share, dequant.compute_share) if dequant
                              else (1.0, 1.0))
    if dequant is not None and dequant.format == FP4_WEIGHT_ONLY:
        read_share *= factors.fp4_weight_only_share
        math_share *= factors.fp4_weight_only_share
    memory = weights / (bw * factors.mbu * read_share) + kv / (bw * factors.mbu_kv)
    att_d = batch * attention_flops_per_token(arch, context) / n if batch else 0.0
    att_p = (prefill_tokens * attention_flops_per_token(arch, prefill_context) / n
             if prefill_tokens else 0.0)
    peak_att = attention_peak_flops(gpu, d.kv_dtype_bytes) or peak
    compute = (((flops_d - att_d) / (peak * factors.mfu_decode)
                + (flops_p - att_p) / (peak * factors.mfu_prefill)) / math_share
               + att_d / (peak_att * factors.mfu_decode)
               + att_p / (peak_att * factors.mfu_prefill))
    allreduce = allreduce_step_s(
        tokens=tokens, hidden=arch.hidden_size, layers=arch.num_layers, gpus=n,
        link_bytes_per_s=d.link_bytes_per_s(), efficiency=d.allreduce_efficiency(),
        latency_s=factors.allreduce_latency_us * 1e-6)
    overhead = fixed_step_s(factors, arch.num_layers, batch) + moe_fixed_s(arch)
    return StepCost(
        weight_bytes=weights, kv_bytes=kv, decode_flops=flops_d, prefill_flops=flops_p,
        memory_s=memory, compute_s=compute, allreduce_s=allreduce, overhead_s=overhead,
        time_s=max(memory, compute) + (allreduce or 0.0) + overhead,
        bound="memory" if memory >= compute else "compute")


def decode_step_s(d: Deployment, *, batch: float, context: float) -> float:
    """Seconds of a pure decode step (no prefill tokens) of ``batch`` sequences at mean context
    ``context``: :func:`step_cost`'s ``time_s``."""
    return step_cost(d, batch=batch, context=context).time_s
