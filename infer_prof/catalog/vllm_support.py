"""What the released vLLM wheels run, GPU by GPU: the support table
``infer_prof/catalog/data/vllm_support.json``, every rule with its source (vLLM's documentation
and code).

- The GPU: an NVIDIA GPU of CUDA compute capability at least ``cuda.min_compute_capability``
  (7.5: the CUDA 12.8+ wheels; V100 and Pascal are out), or an AMD GPU whose gfx target is one
  of ``rocm.rocm_targets`` (MI100 gfx908 and MI25 gfx900 are out).
- The 16-bit dtype: bf16 from compute capability 8.0 (AMD: every target), else fp16 (vLLM's
  ``--dtype half``).
- A weight precision: the first of its ``tiers`` whose minimum capability the GPU meets says how
  it runs (``runs_as``; ``weight_only``: dequantized to 16-bit math, as fp8 through FP8 Marlin
  on Turing and Ampere); on AMD, the precision's ``rocm_targets`` (how: ``rocm_runs_as``).
- The fp8 KV cache: from ``kv_cache_dtypes.fp8.min_compute_capability``, and on ROCm.

:func:`precision_support` answers for one GPU and precision with a :class:`Support`: whether
vLLM runs it, how, and (when not) why, naming the rule's source.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import msgspec

from infer_prof.core.catalog.gpus import GpuSpec

DATA_FILE = "vllm_support.json"


class _Tier(msgspec.Struct, frozen=True):
    min_compute_capability: str
    runs_as: str
    weight_only: bool = False


class _Precision(msgspec.Struct, frozen=True):
    tiers: list[_Tier]
    source: str
    rocm_targets: list[str] = []
    rocm: bool = False
    rocm_runs_as: str = ""


class _Cuda(msgspec.Struct, frozen=True):
    min_compute_capability: str
    source: str
    note: str = ""


class _Rocm(msgspec.Struct, frozen=True):
    rocm_targets: list[str]
    source: str
    note: str = ""


class _Bf16(msgspec.Struct, frozen=True):
    min_compute_capability: str
    rocm: bool
    fallback: str
    source: str


class _KvDtype(msgspec.Struct, frozen=True):
    min_compute_capability: str
    rocm: bool
    source: str


class SupportTable(msgspec.Struct, frozen=True, rename={"comment": "_comment",
                                                         "units": "_units"}):
    """The parsed ``vllm_support.json`` (module docstring)."""

    vllm: str
    cuda: _Cuda
    rocm: _Rocm
    bf16: _Bf16
    precisions: dict[str, _Precision]
    kv_cache_dtypes: dict[str, _KvDtype]
    comment: str = ""
    units: dict[str, str] = {}


class Support(msgspec.Struct, frozen=True, kw_only=True):
    """How the released vLLM runs one precision on one GPU: ``runs``; ``runs_as`` in words;
    ``weight_only`` when the weights are dequantized to 16-bit math (no math at the
    precision's own width); ``dtype`` the 16-bit activation dtype (``bfloat16`` or
    ``float16``); ``why`` (when it does not run) one line naming the rule's source."""

    runs: bool
    runs_as: str = ""
    weight_only: bool = False
    dtype: str = "bfloat16"
    why: str = ""


@cache
def support_table() -> SupportTable:
    """The shipped table."""
    data = resources.files("infer_prof.catalog.data").joinpath(DATA_FILE).read_bytes()
    return msgspec.json.decode(data, type=SupportTable)


def _cc(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def _short(source: str) -> str:
    """A source's repository path, without the commit and quotation (for one-line reasons)."""
    head = source.split(" at ")[0].split(" (")[0].split(":")[0]
    return head.replace("vllm-project/vllm ", "vLLM's ")


def gpu_support(gpu: GpuSpec, table: SupportTable | None = None) -> str:
    """Empty when the released vLLM wheels run ``gpu``, else one line saying why not."""
    t = table or support_table()
    cc = gpu.cuda_capability
    if cc is None:
        if gpu.compute_capability in t.rocm.rocm_targets:
            return ""
        return (f"vLLM's ROCm builds do not target {gpu.compute_capability} ({gpu.key}; "
                f"targets {', '.join(t.rocm.rocm_targets[:3])}, ...: "
                f"{_short(t.rocm.source)})")
    low = _cc(t.cuda.min_compute_capability)
    if cc < low:
        return (f"vLLM's released wheels need compute capability >= "
                f"{t.cuda.min_compute_capability}; {gpu.key} ({gpu.architecture}) is "
                f"{gpu.compute_capability} ({_short(t.cuda.source)})")
    return ""


def sixteen_bit_dtype(gpu: GpuSpec, table: SupportTable | None = None) -> str:
    """``bfloat16`` where vLLM runs bf16 on ``gpu`` (compute capability >= 8.0, or AMD), else
    ``float16``."""
    t = table or support_table()
    cc = gpu.cuda_capability
    if cc is None:
        return "bfloat16" if t.bf16.rocm else t.bf16.fallback
    return "bfloat16" if cc >= _cc(t.bf16.min_compute_capability) else t.bf16.fallback


def bf16_why_not(gpu: GpuSpec, table: SupportTable | None = None) -> str:
    """Empty when vLLM runs bf16 (the dtype) on ``gpu``, else why (its source's words)."""
    t = table or support_table()
    if sixteen_bit_dtype(gpu, t) == "bfloat16":
        return ""
    return (f"bf16 needs compute capability >= {t.bf16.min_compute_capability}; {gpu.key} is "
            f"{gpu.compute_capability}: vLLM runs it in float16 (--dtype half; "
            f"{_short(t.bf16.source)})")


def precision_support(gpu: GpuSpec, precision: str, table: SupportTable | None = None
                      ) -> Support:
    """How the released vLLM runs weight precision ``precision`` (a planner name: bf16, fp8,
    bnb-nf4, awq, gptq, nvfp4, mxfp4, int8) on ``gpu`` (module docstring)."""
    t = table or support_table()
    dtype = sixteen_bit_dtype(gpu, t)
    why = gpu_support(gpu, t)
    if why:
        return Support(runs=False, dtype=dtype, why=why)
    rule = t.precisions.get(precision)
    if rule is None:
        return Support(runs=False, dtype=dtype,
                       why=f"{precision}: not in infer-prof's vLLM support table ({DATA_FILE})")
    cc = gpu.cuda_capability
    if cc is None:
        if rule.rocm or gpu.compute_capability in rule.rocm_targets:
            return Support(runs=True, runs_as=rule.rocm_runs_as or rule.tiers[0].runs_as,
                           dtype=dtype)
        return Support(runs=False, dtype=dtype,
                       why=f"vLLM does not run {precision} on AMD {gpu.compute_capability} "
                           f"({gpu.key}; {_short(rule.source)})")
    for tier in rule.tiers:
        if cc >= _cc(tier.min_compute_capability):
            return Support(runs=True, runs_as=tier.runs_as, weight_only=tier.weight_only,
                           dtype=dtype)
    low = rule.tiers[-1].min_compute_capability
    return Support(runs=False, dtype=dtype,
                   why=f"vLLM runs {precision} from compute capability {low}; {gpu.key} "
                       f"({gpu.architecture}) is {gpu.compute_capability} "
                       f"({_short(rule.source)})")


def kv_cache_support(gpu: GpuSpec, kv_cache_dtype: str, table: SupportTable | None = None
                     ) -> str:
    """Empty when vLLM runs KV-cache dtype ``kv_cache_dtype`` (``auto`` or ``fp8``) on
    ``gpu``, else why."""
    if kv_cache_dtype == "auto":
        return ""
    t = table or support_table()
    rule = t.kv_cache_dtypes.get(kv_cache_dtype)
    if rule is None:
        return f"KV-cache dtype {kv_cache_dtype}: not in the vLLM support table ({DATA_FILE})"
    cc = gpu.cuda_capability
    if cc is None:
        return "" if rule.rocm else f"no {kv_cache_dtype} KV cache on ROCm ({_short(rule.source)})"
    if cc < _cc(rule.min_compute_capability):
        return (f"{kv_cache_dtype} KV cache needs compute capability >= "
                f"{rule.min_compute_capability}; {gpu.key} is {gpu.compute_capability}")
    return ""
