"""Which configurations to predict: for one GPU, the GPU count and precision the planner says
serve the model, and how many sequences its KV cache holds at once.

The planner (:func:`infer_prof.core.planning.planner.plan`, as ``infer-prof plan`` runs it) is
asked for one sequence of ``input_len + output_len`` tokens on ``n`` GPUs (tensor parallel),
``n`` the one given (``--gpus``), else the smallest of 1, 2, 4, 8 that splits the model's heads
evenly and holds it. (Not every count that holds it: on a GPU without an interconnect figure,
:mod:`infer_prof.catalog.interconnects`, a tensor-parallel configuration is predicted without its
all-reduce time, which would rank more GPUs ahead of fewer for no reason.) The frontier then
runs up to ``max_concurrency`` = ``min(max_sequences, max_num_seqs)``: what the KV cache holds
at once, capped by vLLM's default ``max_num_seqs`` for the GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.estimate.peaks import peak_tflops
from infer_prof.core.planning.memory import check_tensor_parallel, default_scheduler_limits
from infer_prof.core.planning.plan_request import PlanRequest
from infer_prof.core.planning.planner import plan
from infer_prof.core.planning.precisions import EngineCaps, PlanError

GPU_COUNTS = (1, 2, 4, 8)
"""Tensor-parallel sizes tried, smallest first, when ``--gpus`` is not given."""


@dataclass(frozen=True)
class Config:
    """One configuration to predict: ``gpu_count`` x ``gpu`` at ``precision``, a KV cache of
    ``kv_dtype_bytes`` bytes an element, at most ``max_concurrency`` sequences at once, and
    vLLM's per-step token budget ``max_num_batched_tokens``."""

    gpu: GpuSpec
    gpu_count: int
    precision: str
    kv_dtype_bytes: float
    max_concurrency: int
    max_num_batched_tokens: int
    notes: tuple[str, ...] = ()


def plan_configs(model: ModelSpec, gpu: GpuSpec, *, input_len: int, output_len: int,
                 quantization: str = "auto", gpus: int | None = None,
                 catalog: Sequence[GpuSpec] = ()) -> list[Config] | str:
    """The :class:`Config` the planner gives for ``model`` on ``gpu`` (a list of one: the
    smallest GPU count that holds it, module docstring), or one line saying why there is
    none (no count holds it, no FLOP/s figure, a forced precision the GPU cannot run)."""
    counts = (gpus,) if gpus else GPU_COUNTS
    why = ""
    out: list[Config] = []
    caps = EngineCaps(build="cuda", checked=False)
    for n in counts:
        try:
            check_tensor_parallel(model, n)
            p = plan(PlanRequest(model, gpu, gpus=n, concurrency=1, input_len=input_len,
                                 output_len=output_len, quantization=quantization, caps=caps,
                                 catalog=catalog), with_suggestions=False)
        except PlanError as exc:
            why = str(exc)
            continue
        if not p.fits or p.precision is None or p.memory is None or p.memory.max_sequences < 1:
            why = (f"does not hold one sequence of {input_len + output_len} tokens on "
                   f"{n} x {gpu.key}")
            continue
        if peak_tflops(gpu, p.precision) is None:
            math = "fp8" if p.precision == "fp8" else "16-bit"
            return (f"the GPU catalog has no {math} FLOP/s figure for {gpu.key} (what "
                    f"{p.precision} computes at)")
        budget, max_seqs = default_scheduler_limits(gpu, gpu.cuda_memory_bytes, n)
        out.append(Config(gpu=gpu, gpu_count=n, precision=p.precision,
                      kv_dtype_bytes=1.0 if p.kv_cache_dtype == "fp8" else 2.0,
                      max_concurrency=min(p.memory.max_sequences, max_seqs),
                      max_num_batched_tokens=budget,
                      notes=(("fp8 KV cache (the planner's choice)",)
                             if p.kv_cache_dtype == "fp8" else ())))
        return out
    return why or f"no GPU count of {', '.join(map(str, counts))} holds the model"
