"""One configuration to predict: a GPU count, a weight precision and a KV-cache dtype on one GPU,
planned as ``infer-prof plan`` plans it, with how many sequences its KV cache holds at once and
what its tensor-parallel all-reduce runs over.

:func:`config_for` plans one: the planner (:func:`infer_prof.core.planning.planner.plan`) is
asked for one sequence of ``input_len + output_len`` tokens on ``n`` GPUs (tensor parallel) at
the precision and KV-cache dtype given; the frontier then runs up to ``max_concurrency`` =
``min(max_sequences, max_num_seqs)``: what the KV cache holds at once, capped by vLLM's default
``max_num_seqs`` for the GPU. A group of more than one GPU needs a link figure
(:func:`infer_prof.catalog.interconnects.tp_link`: NVLink, Infinity Fabric or PCIe), else it is
not predicted (its all-reduce time would be a guess).

:func:`plan_configs` is the planner's own choice (the smallest of 1, 2, 4, 8 that holds the model,
at the precision ``auto`` picks), as ``run --frontier-from-estimate`` uses it; ``estimate``
searches every configuration (:mod:`infer_prof.estimate.search`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from infer_prof.catalog.interconnects import TpLink, tp_link
from infer_prof.catalog.native_precision import native_precision
from infer_prof.catalog.vllm_support import Support, precision_support
from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.estimate.deployment import Deployment
from infer_prof.core.estimate.factors import StepFactors
from infer_prof.core.estimate.peaks import peak_tflops
from infer_prof.core.planning.memory import check_tensor_parallel, default_scheduler_limits
from infer_prof.core.planning.plan_request import PlanRequest
from infer_prof.core.planning.planner import plan
from infer_prof.core.planning.precisions import EngineCaps, PlanError

GPU_COUNTS = (1, 2, 4, 8)
"""Tensor-parallel sizes tried, smallest first, when no count is given and the market has none."""

LOSSY_WEIGHTS = ("bnb-nf4", "awq", "gptq", "nvfp4", "mxfp4", "int4")
"""Weight precisions that cost accuracy (4-bit weights), unless they are the checkpoint's
native precision (:func:`costs_accuracy`): marked in a row and kept out by
``--min-quality``."""


def costs_accuracy(precision: str, model: ModelSpec) -> bool:
    """True when running ``model``'s weights at ``precision`` costs accuracy: 4-bit weights
    (:data:`LOSSY_WEIGHTS`) other than the precision the checkpoint was trained and published in
    (:func:`infer_prof.catalog.native_precision.native_precision`: gpt-oss's MXFP4)."""
    return _lossy_weights(precision, native_precision(model))


def _lossy_weights(precision: str, native: str | None) -> bool:
    """:func:`costs_accuracy` given the checkpoint's native precision ``native`` (or None)."""
    return precision in LOSSY_WEIGHTS and precision != native


def lossy_weights_label(precision: str) -> str:
    """How a row says its weights cost accuracy: ``4-bit weights (awq)``."""
    return f"4-bit weights ({precision})"


@dataclass(frozen=True)
class Config:
    """One configuration to predict: ``gpu_count`` x ``gpu`` at ``precision``, a KV cache of
    ``kv_dtype_bytes`` bytes an element (``kv_cache_dtype`` ``auto`` or ``fp8``), at most
    ``max_concurrency`` sequences at once, vLLM's per-step token budget
    ``max_num_batched_tokens``; ``support`` how vLLM runs the precision there (dtype, weight-only
    or not), ``link`` what the all-reduce runs over (None on one GPU)."""

    gpu: GpuSpec
    gpu_count: int
    precision: str
    kv_dtype_bytes: float
    max_concurrency: int
    max_num_batched_tokens: int
    notes: tuple[str, ...] = ()
    kv_cache_dtype: str = "auto"
    support: Support | None = None
    link: TpLink | None = None
    native_precision: str | None = None

    def deployment(self, model: ModelSpec, factors: StepFactors,
                   link_gbps: float | None = None) -> Deployment:
        """This configuration serving ``model`` with the achieved shares ``factors``, over its
        own link (or an interconnect of ``link_gbps`` bidirectional GB/s when given)."""
        gbps = link_gbps if link_gbps is not None else (
            self.link.bidirectional_gbps if self.link is not None else None)
        pcie = link_gbps is None and self.link is not None and self.link.kind == "pcie"
        return Deployment(arch=model, gpu=self.gpu, gpu_count=self.gpu_count,
                          precision=self.precision, factors=factors,
                          kv_dtype_bytes=self.kv_dtype_bytes, link_gbps=gbps, over_pcie=pcie,
                          max_num_batched_tokens=self.max_num_batched_tokens)

    @property
    def lossy(self) -> tuple[str, ...]:
        """What costs accuracy here, in words: 4-bit weights (not the checkpoint's native
        precision: :func:`costs_accuracy`), an fp8 KV cache."""
        out = []
        if _lossy_weights(self.precision, self.native_precision):
            out.append(lossy_weights_label(self.precision))
        if self.kv_cache_dtype == "fp8":
            out.append("fp8 KV cache")
        return tuple(out)


@dataclass(frozen=True)
class ConfigRequest:
    """One configuration asked of the planner: ``gpu_count`` x ``gpu`` at the weight precision
    ``quantization`` (a planner precision, or ``auto``) and ``kv_cache_dtype``, for one sequence
    of ``input_len + output_len`` tokens; ``link`` and ``support`` when the caller already has
    them (else looked up: :func:`infer_prof.catalog.interconnects.tp_link`,
    :func:`infer_prof.catalog.vllm_support.precision_support`)."""

    gpu: GpuSpec
    gpu_count: int
    input_len: int
    output_len: int
    quantization: str
    kv_cache_dtype: str = "auto"
    link: TpLink | None = None
    support: Support | None = None


NO_FLOPS_WHY = re.compile(
    r"^(the GPU catalog has no .+ FLOP/s figure for \S+) \(what (\S+) computes at\)$")
"""The shape of :func:`config_for`'s reason for a missing FLOP/s figure: group 1 the figure
missing, group 2 the precision that would compute at it (the search says the figure once for
all the precisions it stops)."""


def config_for(model: ModelSpec, ask: ConfigRequest,
               catalog: Sequence[GpuSpec] = ()) -> Config | str:
    """The :class:`Config` of ``model`` as ``ask`` describes it, or one line saying why there is
    none: the count does not split the model's heads, nothing holds one sequence, no FLOP/s
    figure, a precision the planner refuses here."""
    gpu, gpu_count = ask.gpu, ask.gpu_count
    input_len, output_len = ask.input_len, ask.output_len
    caps = EngineCaps(build="cuda", checked=False)
    try:
        check_tensor_parallel(model, gpu_count)
        p = plan(PlanRequest(model, gpu, gpus=gpu_count, concurrency=1, input_len=input_len,
                             output_len=output_len, quantization=ask.quantization, caps=caps,
                             kv_cache_dtype=ask.kv_cache_dtype, catalog=catalog),
                 with_suggestions=False)
    except PlanError as exc:
        return str(exc)
    if not p.fits or p.precision is None or p.memory is None or p.memory.max_sequences < 1:
        return (f"does not hold one sequence of {input_len + output_len} tokens on "
                f"{gpu_count} x {gpu.key}")
    if peak_tflops(gpu, p.precision) is None:
        math = "fp8" if p.precision == "fp8" and gpu.supports_fp8 else "16-bit"
        return (f"the GPU catalog has no {math} FLOP/s figure for {gpu.key} (what "
                f"{p.precision} computes at)")
    budget, max_seqs = default_scheduler_limits(gpu, gpu.cuda_memory_bytes, gpu_count)
    kv = p.kv_cache_dtype
    return Config(gpu=gpu, gpu_count=gpu_count, precision=p.precision,
                  kv_dtype_bytes=1.0 if kv == "fp8" else 2.0,
                  max_concurrency=min(p.memory.max_sequences, max_seqs),
                  max_num_batched_tokens=budget, kv_cache_dtype=kv,
                  notes=(("fp8 KV cache (the planner's choice)",)
                         if kv == "fp8" and ask.kv_cache_dtype != "fp8" else ()),
                  support=ask.support or precision_support(gpu, p.precision),
                  link=ask.link if ask.link is not None else tp_link(gpu.key, gpu_count),
                  native_precision=native_precision(model))


def plan_configs(model: ModelSpec, gpu: GpuSpec, *, input_len: int, output_len: int,
                 quantization: str = "auto", gpus: int | None = None,
                 catalog: Sequence[GpuSpec] = ()) -> list[Config] | str:
    """The :class:`Config` the planner gives for ``model`` on ``gpu`` (a list of one: ``gpus``,
    else the smallest of :data:`GPU_COUNTS` that holds it, at the precision ``quantization``
    says), or one line saying why there is none."""
    counts = (gpus,) if gpus else GPU_COUNTS
    why = ""
    for n in counts:
        c = config_for(model, ConfigRequest(gpu, n, input_len=input_len, output_len=output_len,
                                            quantization=quantization), catalog)
        if isinstance(c, Config):
            return [c]
        if c.startswith("the GPU catalog has no"):
            return c
        why = c
    return why or f"no GPU count of {', '.join(map(str, counts))} holds the model"
