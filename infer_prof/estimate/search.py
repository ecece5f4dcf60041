"""The configuration search: per GPU, every GPU count x weight precision x KV-cache dtype that
vLLM runs and that holds the model, each planned (:func:`infer_prof.estimate.configs.config_for`)
and then predicted and priced by the workflow.

What is searched, per GPU:

- **GPU counts**: every count an instance of that GPU is sold with in the market asked (tier,
  cloud; :func:`market_counts`: 1, 2, 4, 8 and, where the market sells them, 3, 16, ...), each
  a tensor-parallel group; ``--instance``: the divisors of its count (the rest of its GPUs
  serve replicas); ``--gpus N``: N alone; no offer at all: 1, 2, 4, 8. A count that does not
  split the model's attention heads evenly, or of more than one GPU without a link figure
  (:func:`infer_prof.catalog.interconnects.tp_link`), is not predicted.
- **Weight precisions** (:func:`weight_precisions`): a 16-bit checkpoint in bf16 (fp16 where vLLM
  has no bf16), fp8 (W8A8 where the GPU has FP8 math, W8A16 through Marlin on Turing and
  Ampere) and bitsandbytes 4-bit; a pre-quantized checkpoint (AWQ, GPTQ, NVFP4, MXFP4, fp8) at
  its own precision alone (vLLM loads it as stored); ``--quantization P``: P alone (AWQ and GPTQ
  only so: vLLM does not make them while loading).
- **KV-cache dtypes**: ``auto`` (16-bit) and ``fp8`` (half the KV bytes stored and read);
  ``--kv-cache-dtype``: that one.
- **Only what vLLM runs** (:mod:`infer_prof.catalog.vllm_support`): a GPU the released wheels do
  not run, or a precision or KV dtype they do not run on it, is listed in ``unsupported`` with
  the reason and never planned.
- **Quality**: with ``--min-quality``, configurations that cost accuracy (4-bit weights other than
  the checkpoint's native precision, an fp8 KV cache: :attr:`Config.lossy`) are kept out: their
  accuracy is not known to meet a floor.

Pruning: a configuration is planned (memory only, about half a millisecond) before anything is
predicted, and only those that hold one sequence are predicted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from infer_prof.catalog.interconnects import tp_link
from infer_prof.catalog.vllm_support import (
    Support,
    bf16_why_not,
    gpu_support,
    kv_cache_support,
    precision_support,
)
from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.market import InstanceOffer, filter_offers
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.planning.memory import check_tensor_parallel, checkpoint_precision
from infer_prof.core.planning.precisions import PlanError, normalize_precision
from infer_prof.estimate.configs import (
    GPU_COUNTS,
    NO_FLOPS_WHY,
    Config,
    ConfigRequest,
    config_for,
    costs_accuracy,
)
from infer_prof.estimate.document import SearchSummary, Skipped, Unsupported
from infer_prof.estimate.request import EstimateRequest

SEARCHED_PRECISIONS = ("bf16", "fp8", "bnb-nf4")
"""Weight precisions searched for a 16-bit checkpoint (``auto``), best quality first."""

BF16_NAMES = ("bf16", "bfloat16")
"""``--quantization`` spellings that ask for the bf16 dtype itself (not any 16-bit)."""

FP16_NAMES = ("fp16", "float16", "half")
"""``--quantization`` spellings that ask for the fp16 dtype."""

KEPT_OUT = {
    "heads": "the count does not split the model's attention heads",
    "link": "more than one GPU without an interconnect figure",
    "memory": "does not hold one sequence at that count",
    "quality": "lossy (4-bit weights or fp8 KV) under --min-quality",
    "planner": "the planner refuses the precision there",
}
"""Why a configuration was not predicted, as ``search.kept_out`` counts them."""


@dataclass
class SearchResult:
    """The configurations to predict, the GPUs without any (``skipped``, why), what vLLM does
    not run (``unsupported``) and the search's summary."""

    configs: list[Config] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    unsupported: list[Unsupported] = field(default_factory=list)
    summary: SearchSummary | None = None


def weight_precisions(model: ModelSpec, quantization: str) -> list[str]:
    """The weight precisions to search (module docstring); raises PlanError for an unknown
    ``quantization``."""
    wanted = normalize_precision(quantization)
    if wanted != "auto":
        return [wanted]
    if model.quant is not None:
        return [checkpoint_precision(model)]
    return list(SEARCHED_PRECISIONS)


def kv_cache_dtypes(request: EstimateRequest) -> list[str]:
    """``--kv-cache-dtype`` alone when given, else ``auto`` and ``fp8`` (``auto`` alone under
    ``--min-quality``)."""
    if request.kv_cache_dtype is not None:
        return [request.kv_cache_dtype]
    return ["auto"] if request.min_quality is not None else ["auto", "fp8"]


def market_counts(offers: Sequence[InstanceOffer], gpu: str, request: EstimateRequest
                  ) -> list[int]:
    """The GPU counts to try for ``gpu`` (module docstring), smallest first."""
    if request.gpu_count is not None:
        return [request.gpu_count]
    inst = request.instance
    if inst is not None and inst.gpu == gpu:
        return [n for n in range(1, inst.gpu_count + 1) if inst.gpu_count % n == 0]
    counts = {o.gpu_count for o in filter_offers(offers, gpu=gpu, cloud=request.cloud,
                                                 tier=request.tier)}
    return sorted(counts) if counts else list(GPU_COUNTS)


def _dtype_why_not(gpu: GpuSpec, quantization: str) -> str:
    """Why ``--quantization bf16`` (the dtype itself) cannot run on ``gpu``, or ``""``."""
    if quantization.strip().lower() in BF16_NAMES:
        return bf16_why_not(gpu)
    return ""


def _supported(gpu: GpuSpec, precisions: Sequence[str], kvs: Sequence[str],
               request: EstimateRequest, out: SearchResult
               ) -> tuple[list[tuple[str, Support]], list[str]]:
    """The precisions (with how vLLM runs them) and KV dtypes ``gpu`` runs; the others go to
    ``out.unsupported``."""
    why = gpu_support(gpu)
    if why:
        out.unsupported.append(Unsupported(gpu=gpu.key, why=why))
        return [], []
    runs: list[tuple[str, Support]] = []
    for p in precisions:
        s = precision_support(gpu, p)
        why = s.why or (_dtype_why_not(gpu, request.quantization) if p == "bf16" else "")
        if why:
            out.unsupported.append(Unsupported(gpu=gpu.key, precision=p, why=why))
        else:
            if request.quantization.strip().lower() in FP16_NAMES:
                s = Support(runs=True, runs_as=s.runs_as, weight_only=s.weight_only,
                            dtype="float16")
            runs.append((p, s))
    kv_ok = []
    for kv in kvs:
        why = kv_cache_support(gpu, kv)
        if why:
            out.unsupported.append(Unsupported(gpu=gpu.key, kv_cache_dtype=kv, why=why))
        else:
            kv_ok.append(kv)
    return runs, kv_ok


def _why_none(gpu: GpuSpec, why: dict[str, list[int]]) -> str:
    """One line: each reason a GPU has no configuration, with the counts it held for
    (``1 x A10G: does not hold ...; 4, 8 x A10G: no interconnect figure ...``). Missing-FLOP/s
    reasons that differ only in the precision, for the same counts, are one clause
    (``1, 2 x A16: the GPU catalog has no 16-bit FLOP/s figure for A16 (what bf16 and
    bnb-nf4 compute at)``)."""
    if not why:
        return "no configuration to try"
    merged: dict[tuple[str, tuple[int, ...]], list[str]] = {}
    for reason, counts in why.items():
        m = NO_FLOPS_WHY.match(reason)
        head, precision = (m.group(1), m.group(2)) if m else (reason, "")
        merged.setdefault((head, tuple(counts)), []).append(precision)
    clauses: list[tuple[str, str]] = []
    for (head, held), precisions in merged.items():
        named = [p for p in precisions if p]
        if named:
            what = (named[0] if len(named) == 1
                    else f"{', '.join(named[:-1])} and {named[-1]}")
            verb = "computes" if len(named) == 1 else "compute"
            head = f"{head} (what {what} {verb} at)"
        clauses.append((head, f"{', '.join(map(str, held))} x {gpu.key}: {head}"))
    first = sorted(clauses, key=lambda c: not c[0].startswith("the GPU catalog"))
    return "; ".join(line for _, line in first)


def search(request: EstimateRequest, gpus: Sequence[GpuSpec], offers: Sequence[InstanceOffer],
           catalog: Sequence[GpuSpec] = ()) -> SearchResult:
    """Every configuration of ``request.model`` to predict on ``gpus`` (module docstring)."""
    model = request.model
    precisions = weight_precisions(model, request.quantization)
    kvs = kv_cache_dtypes(request)
    out = SearchResult()
    kept: Counter[str] = Counter()
    tried: dict[str, list[int]] = {}
    planned = 0
    for g in gpus:
        runs, kv_ok = _supported(g, precisions, kvs, request, out)
        if not runs or not kv_ok:
            continue
        counts = market_counts(offers, g.key, request)
        tried[g.key] = counts
        why: dict[str, list[int]] = {}
        before = len(out.configs)
        for n in counts:
            try:
                check_tensor_parallel(model, n)
            except PlanError:
                kept["heads"] += len(runs) * len(kv_ok)
                why.setdefault(f"does not split {model.name}'s attention heads", []).append(n)
                continue
            link = tp_link(g.key, n)
            if n > 1 and link is None:
                kept["link"] += len(runs) * len(kv_ok)
                why.setdefault("no interconnect figure (NVLink, Infinity Fabric or PCIe: "
                               "infer_prof/catalog/data/interconnects.json)", []).append(n)
                continue
            for p, support in runs:
                lossy = costs_accuracy(p, model)
                for kv in kv_ok:
                    if request.min_quality is not None and (lossy or kv == "fp8"):
                        kept["quality"] += 1
                        said = (f"{p} weights (4-bit) cost accuracy, which --min-quality keeps "
                                "out (drop it, or measure the model with infer-prof quality)"
                                if lossy else "an fp8 KV cache, kept out by --min-quality")
                        if n not in why.setdefault(said, []):
                            why[said].append(n)
                        continue
                    planned += 1
                    ask = ConfigRequest(g, n, input_len=request.input_len,
                                        output_len=request.output_len, quantization=p,
                                        kv_cache_dtype=kv, link=link, support=support)
                    c = config_for(model, ask, catalog)
                    if isinstance(c, Config):
                        out.configs.append(c)
                        continue
                    memory = c.startswith("does not hold")
                    kept["memory" if memory else "planner"] += 1
                    said = (f"does not hold one sequence of "
                            f"{request.input_len + request.output_len} tokens" if memory else c)
                    if n not in why.setdefault(said, []):
                        why[said].append(n)
        if len(out.configs) == before:
            out.skipped.append(Skipped(gpu=g.key, why=_why_none(g, why)))
    out.summary = SearchSummary(
        gpu_counts=tried, precisions=precisions, kv_cache_dtypes=kvs, planned=planned,
        predicted=len(out.configs), kept_out={KEPT_OUT[k]: v for k, v in sorted(kept.items())})
    return out
