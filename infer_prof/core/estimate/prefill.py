"""Prefill: a prompt's tokens, chunked and interleaved with decode as vLLM schedules them.
Pure: no I/O.

vLLM's scheduler (V1, chunked prefill on) fills each step with every running sequence's decode
token first, then prompt tokens up to ``max_num_batched_tokens`` (``T``) in all. A prompt of
``I`` tokens beside ``B`` decoding sequences is therefore cut into chunks of at most
``T - B`` tokens (at least 1), one per step, and its first output token is sampled at the end
of the step that carries its last chunk.

The tokens ``a + 1 .. b`` of a chunk attend causally to a mean of ``(a + b + 1) / 2``
positions; a chunk of ``c`` tokens costs ``c x prefill_flops_per_token((a + b + 1) / 2)``
(:mod:`infer_prof.core.catalog.roofline`): 2 x active linear params + attention per token.
The whole prompt's FLOPs:

    prefill_flops(I) = I x prefill_flops_per_token((I + 1) / 2)

(compute bound: a step of hundreds of prompt tokens does many FLOPs per weight byte read).
"""

from __future__ import annotations

from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.catalog.roofline import causal_mean_context, prefill_flops_per_token
from infer_prof.core.estimate.decode_step import StepCost, step_cost
from infer_prof.core.estimate.factors import StepFactors


def prefill_flops(arch: ModelSpec, input_len: int) -> float:
    """FLOPs of a whole prompt of ``input_len`` tokens (whole model):
    ``I x prefill_flops_per_token((I + 1) / 2)``."""
    if input_len <= 0:
        return 0.0
    return input_len * prefill_flops_per_token(arch, causal_mean_context(input_len))


def chunks(input_len: int, max_num_batched_tokens: int, decode_batch: int) -> list[int]:
    """Chunk sizes of a prompt of ``input_len`` tokens beside ``decode_batch`` decoding
    sequences: at most ``max(1, T - B)`` tokens a step (module docstring)."""
    if input_len <= 0:
        return []
    room = max(1, max_num_batched_tokens - decode_batch)
    full, rest = divmod(input_len, room)
    return [room] * full + ([rest] if rest else [])


def prefill_steps(arch: ModelSpec, gpu: GpuSpec, *, gpu_count: int, precision: str,
                  input_len: int, decode_batch: int, decode_context: float,
                  max_num_batched_tokens: int, factors: StepFactors,
                  kv_dtype_bytes: float = 2.0,
                  link_bytes_per_s: float | None = None) -> list[StepCost]:
    """The steps that carry one prompt's chunks, each beside ``decode_batch`` decode tokens at
    context ``decode_context`` (:func:`~infer_prof.core.estimate.decode_step.step_cost`, with
    the chunk's mean attended context ``(a + b + 1) / 2``)."""
    out = []
    done = 0
    for c in chunks(input_len, max_num_batched_tokens, decode_batch):
        attended = (2 * done + c + 1) / 2.0
        out.append(step_cost(
            arch, gpu, gpu_count=gpu_count, precision=precision, batch=decode_batch,
            context=decode_context, prefill_tokens=c, prefill_context=attended,
            factors=factors, kv_dtype_bytes=kv_dtype_bytes, link_bytes_per_s=link_bytes_per_s))
        done += c
    return out


def prefill_s(arch: ModelSpec, gpu: GpuSpec, *, gpu_count: int, precision: str,
              input_len: int, decode_batch: int, decode_context: float,
              max_num_batched_tokens: int, factors: StepFactors,
              kv_dtype_bytes: float = 2.0, link_bytes_per_s: float | None = None) -> float:
    """Seconds from a prompt's first scheduled step to its first token: the sum of
    :func:`prefill_steps`' times."""
    return sum(s.time_s for s in prefill_steps(
        arch, gpu, gpu_count=gpu_count, precision=precision, input_len=input_len,
        decode_batch=decode_batch, decode_context=decode_context,
        max_num_batched_tokens=max_num_batched_tokens, factors=factors,
        kv_dtype_bytes=kv_dtype_bytes, link_bytes_per_s=link_bytes_per_s))


def queued_prefill_s(arch: ModelSpec, gpu: GpuSpec, *, gpu_count: int, precision: str,
                     queued_tokens: float, input_len: int, decode_batch: float,
                     decode_context: float, max_num_batched_tokens: int,
                     factors: StepFactors, kv_dtype_bytes: float = 2.0,
                     link_bytes_per_s: float | None = None) -> float:
    """Seconds to prefill ``queued_tokens`` prompt tokens (several prompts of ``input_len``,
    first come first served) in steps that each carry ``decode_batch`` decode tokens and
    ``room = min(T - B, queued)`` prompt tokens (``T`` = ``max_num_batched_tokens``):

        queued / room x t(B, room)

    (``t`` :func:`~infer_prof.core.estimate.decode_step.step_cost`; a fractional last step
    counts its share). Prompt tokens attend a mean of ``(input_len + 1) / 2`` positions."""
    if queued_tokens <= 0:
        return 0.0
    room = min(max(1.0, max_num_batched_tokens - decode_batch), queued_tokens)
    step = step_cost(arch, gpu, gpu_count=gpu_count, precision=precision, batch=decode_batch,
                     context=decode_context, prefill_tokens=room,
                     prefill_context=(input_len + 1) / 2.0, factors=factors,
                     kv_dtype_bytes=kv_dtype_bytes, link_bytes_per_s=link_bytes_per_s)
    return queued_tokens / room * step.time_s
