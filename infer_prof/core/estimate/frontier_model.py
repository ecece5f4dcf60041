"""The predicted frontier: vLLM's continuous batching in a closed loop, at steady state.
Pure: no I/O.

``C`` streams each send a request of ``I`` prompt tokens, wait for its ``O`` output tokens,
and send the next at once. At steady state all ``C`` are on the server (``C`` at most what the
KV cache holds: the planner's ``max_sequences``), so a step decodes ``B = C`` tokens at a mean
context of ``L = I + O / 2``. While one request decodes, the other ``C - 1`` streams' prompts
are prefilled beside it: ``p = (C - 1) x I / O`` prompt tokens a step on average (chunked prefill
interleaved with decode, :mod:`.prefill`), arriving in chunks of ``k = min(I, T - C)`` tokens
(``T`` = max_num_batched_tokens): a share ``phi = p / k`` of the steps carries a chunk, the rest
decode only (when ``p >= k`` every step carries ``p``). With ``t(B, L, q)`` the step time of
:mod:`.decode_step` (``q`` prompt tokens):

    TPOT      = (1 - phi) x t(C, L, 0) + phi x t(C, L, k)                 (ms per output token)
    TTFT      = (C - 1) / C x TPOT / 2 + prefill of Q = ((C - 1) / 2 + 1) x I prompt tokens
                in steps of T - (C - 1) / 2 of them beside (C - 1) / 2 decoding sequences
                (:func:`.prefill.queued_prefill_s`; T = max_num_batched_tokens)
    R         = TTFT + (O - 1) x TPOT                                (one request, end to end)
    output tok/s per GPU = C x O / R / n,  input = C x I / R / n,  total = C x (I + O) / R / n
    interactivity        = 1000 / TPOT(ms)                           (tokens/s one user sees)

(``R`` and the rates by Little's law: ``C`` requests in the system, each taking ``R``.)

Above the KV limit (``C > M`` sequences running at most, ``max_running``) the other ``C - M``
wait in vLLM's queue: the server runs the point of ``M``, at ``lambda = M / R_M`` requests/s,
so ``R_C = C / lambda`` and the wait lands in TTFT: ``TTFT_C = R_C - (O - 1) x TPOT_M``.

TTFT's queue: a closed loop whose streams start together keeps its requests in waves (requests
of equal lengths finish together and come back together), so a median request finds half of
the others' prompts ahead of it: the H100 runs this was checked on (llama-2-7b, 512/128)
measured TTFT p50 17.5 / 236 / 552 ms at 1 / 32 / 128 streams, where a smooth arrival model
gives 17 / 24 / 39 ms and the wave model 11 / 178 / 692 ms. Not modelled: preemption, prefix
caching, speculative decoding, CUDA-graph batch padding.

The public entry is :func:`predict_point`; :func:`predict_frontier` runs it at 1, 2, 4, ... up
to the KV limit.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from infer_prof.core.estimate.decode_step import StepCost, step_cost
from infer_prof.core.estimate.deployment import Deployment
from infer_prof.core.estimate.factors import default_factors
from infer_prof.core.estimate.prefill import queued_prefill_s

__all__ = ["Deployment", "PredictedPoint", "concurrency_levels", "default_factors",
           "predict_frontier", "predict_point"]


class PredictedPoint(msgspec.Struct, frozen=True, kw_only=True):
    """One predicted load point (module docstring for the formulas). Throughputs in tokens/s
    per GPU; times in ms (medians: the model has no spread); ``bound`` what the decode step is
    bound by; ``allreduce_counted`` False when tensor parallel and the GPU catalog has no
    interconnect figure (then the all-reduce time is left out)."""

    concurrency: int
    output_tok_s_per_gpu: float
    input_tok_s_per_gpu: float
    total_tok_s_per_gpu: float
    interactivity: float
    ttft_ms_p50: float
    tpot_ms_p50: float
    bound: Literal["memory", "compute"]
    memory_ms: float
    compute_ms: float
    allreduce_ms: float | None
    allreduce_counted: bool
    predicted: bool = True


def predict_point(d: Deployment, *, input_len: int, output_len: int,
                  concurrency: int) -> PredictedPoint:
    """The predicted steady state of ``concurrency`` closed-loop streams of ``input_len`` prompt
    and ``output_len`` output tokens, served by vLLM as the deployment ``d`` says (model, GPUs,
    precision, factors, limits: :class:`~infer_prof.core.estimate.deployment.Deployment`).
    Above ``d.max_running`` sequences the rest queue. Formulas in the module docstring. Raises
    ValueError for non-positive lengths or concurrency, or a precision the catalog has no peak
    FLOP/s for on the GPU.
    """
    gpu_count = d.gpu_count
    if input_len < 0 or output_len < 1 or concurrency < 1 or gpu_count < 1:
        raise ValueError("need input_len >= 0, output_len >= 1, concurrency >= 1, gpu_count >= 1")
    if d.max_running is not None and 1 <= d.max_running < concurrency:
        return _queued(predict_point(d, input_len=input_len, output_len=output_len,
                                     concurrency=d.max_running),
                       concurrency, input_len, output_len, gpu_count)
    c, i, o = concurrency, input_len, output_len
    context = i + o / 2.0
    step = _mean_step(d, c, i, o)
    tpot = step.time_s
    wait = (c - 1) / c * tpot / 2.0
    ahead = (c - 1) / 2.0
    ttft = wait + queued_prefill_s(d, queued_tokens=(ahead + 1) * i, input_len=i,
                                   decode_batch=ahead, decode_context=context)
    if i == 0:
        ttft = wait + tpot
    request_s = ttft + (o - 1) * tpot
    rate = c / request_s / gpu_count  # requests/s per GPU
    return PredictedPoint(
        concurrency=c,
        output_tok_s_per_gpu=rate * o,
        input_tok_s_per_gpu=rate * i,
        total_tok_s_per_gpu=rate * (i + o),
        interactivity=1.0 / tpot,
        ttft_ms_p50=ttft * 1e3,
        tpot_ms_p50=tpot * 1e3,
        bound=step.bound,
        memory_ms=step.memory_s * 1e3,
        compute_ms=step.compute_s * 1e3,
        allreduce_ms=None if step.allreduce_s is None else step.allreduce_s * 1e3,
        allreduce_counted=step.allreduce_s is not None,
    )


def _mean_step(d: Deployment, c: int, i: int, o: int) -> StepCost:
    """The mean step one of ``c`` decoding requests sees (module docstring): the other
    ``c - 1`` streams' ``p = (c - 1) x i / o`` prompt tokens a step, in chunks of
    ``k = min(i, T - c)`` carried by a share ``phi = p / k`` of the steps; bytes, FLOPs and
    times are the two kinds of step weighted by their shares (``bound`` by the weighted
    memory and compute times)."""
    context = i + o / 2.0
    p = (c - 1) * i / o
    k = float(min(i, max(1, d.step_budget() - c)))
    decode = step_cost(d, batch=c, context=context)
    if p <= 0 or k <= 0:
        return decode
    if p >= k:
        return step_cost(d, batch=c, context=context, prefill_tokens=p,
                         prefill_context=(i + 1) / 2.0)
    phi = p / k
    mixed = step_cost(d, batch=c, context=context, prefill_tokens=k,
                      prefill_context=(i + 1) / 2.0)

    def mean(a: float, b: float) -> float:
        return (1.0 - phi) * a + phi * b

    allreduce = (None if decode.allreduce_s is None or mixed.allreduce_s is None
                 else mean(decode.allreduce_s, mixed.allreduce_s))
    memory, compute = mean(decode.memory_s, mixed.memory_s), mean(decode.compute_s,
                                                                    mixed.compute_s)
    return StepCost(
        weight_bytes=mean(decode.weight_bytes, mixed.weight_bytes),
        kv_bytes=mean(decode.kv_bytes, mixed.kv_bytes),
        decode_flops=mean(decode.decode_flops, mixed.decode_flops),
        prefill_flops=mean(decode.prefill_flops, mixed.prefill_flops),
        memory_s=memory, compute_s=compute, allreduce_s=allreduce,
        overhead_s=decode.overhead_s, time_s=mean(decode.time_s, mixed.time_s),
        bound="memory" if memory >= compute else "compute")


def _queued(at_limit: PredictedPoint, concurrency: int, input_len: int, output_len: int,
            gpu_count: int) -> PredictedPoint:
    """The point of ``concurrency`` streams when only ``at_limit.concurrency`` run at once
    (module docstring): the same rates and TPOT, the queue's wait added to TTFT."""
    per_request = at_limit.output_tok_s_per_gpu * gpu_count / output_len  # requests/s
    request_ms = concurrency / per_request * 1e3
    ttft = request_ms - (output_len - 1) * at_limit.tpot_ms_p50  # >= the point of m's TTFT
    return msgspec.structs.replace(at_limit, concurrency=concurrency,
                                   ttft_ms_p50=max(ttft, at_limit.ttft_ms_p50))


def concurrency_levels(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit``, and ``limit`` itself when it is not a power of two;
    [] when ``limit`` < 1."""
    out: list[int] = []
    c = 1
    while c <= limit:
        out.append(c)
        c *= 2
    if limit >= 1 and out[-1] != limit:
        out.append(limit)
    return out


def predict_frontier(d: Deployment, *, input_len: int, output_len: int,
                     max_concurrency: int) -> list[PredictedPoint]:
    """:func:`predict_point` at each of :func:`concurrency_levels` ``(max_concurrency)`` (the
    KV limit: the planner's ``max_sequences``, capped by vLLM's ``max_num_seqs``)."""
    return [predict_point(d, input_len=input_len, output_len=output_len, concurrency=c)
            for c in concurrency_levels(max_concurrency)]
