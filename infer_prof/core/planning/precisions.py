"""Precisions and what an engine runs: the names ``--quantization`` and ``--kv-cache-dtype``
take, their labels, the vLLM builds' capabilities (:class:`EngineCaps`) and why a precision
cannot run here (:func:`why_not`). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infer_prof.core.catalog.gpus import GpuSpec

AUTO_LADDER = ("bf16", "fp8", "int8", "bnb-nf4")
"""Precisions ``auto`` considers, best quality first."""

PRECISIONS = ("bf16", "fp8", "int8", "bnb-nf4", "awq", "gptq", "nvfp4", "mxfp4")

PREQUANTIZED_ONLY = ("awq", "gptq", "nvfp4", "mxfp4")
"""Precisions vLLM runs only from a checkpoint already stored in them (it does not quantize
to them while loading)."""

CHECKPOINT_PRECISIONS = ("fp8", "int8", "int4", "awq", "gptq", "nvfp4", "mxfp4", "bnb-nf4",
                         "bnb-int8")
"""Precisions a pre-quantized checkpoint can be stored in
(:class:`~infer_prof.core.catalog.checkpoint_quant.CheckpointQuant`)."""

PRECISION_LABELS = {
    "bf16": "bf16/fp16 (16-bit weights)",
    "fp8": "fp8 (W8A8, online)",
    "int8": "int8 weight-only (online)",
    "bnb-nf4": "bitsandbytes 4-bit nf4 (in-flight)",
    "awq": "AWQ 4-bit, group 128 (pre-quantized checkpoint)",
    "gptq": "GPTQ 4-bit, group 128 (pre-quantized checkpoint)",
    "nvfp4": "NVFP4 4-bit, fp8 scale per 16 (pre-quantized checkpoint)",
    "mxfp4": "MXFP4 4-bit, E8M0 scale per 32 (pre-quantized checkpoint)",
    "int4": "int4 weight-only (pre-quantized checkpoint)",
    "bnb-int8": "bitsandbytes 8-bit (pre-quantized checkpoint)",
}

NVFP4_MIN_CAPABILITY = (10, 0)
"""NVFP4 runs on FP4 tensor cores from Blackwell (compute capability 10.0); vLLM's
``ModelOptNvFp4Config.get_min_capability`` is 75 because it emulates it (weight-only, Marlin) on
older GPUs, without FP4 compute."""

MXFP4_MIN_CAPABILITY = (8, 0)
"""vLLM's ``Mxfp4Config.get_min_capability``: 80 (Marlin or Triton kernels below Blackwell; it
was 90 in the release that brought gpt-oss), vllm/model_executor/layers/quantization/mxfp4.py."""

MXFP4_ROCM_TARGETS = ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1200", "gfx1201",
                      "gfx1150", "gfx1151")
"""The AMD gfx targets vLLM's ROCm build runs MXFP4 (gpt-oss) on: every ROCm target of its
builds. vLLM 0.32.0, vllm/model_executor/layers/fused_moe/oracle/mxfp4.py
``_get_priority_backends_for_gpt_oss``: AITER's MXFP4 kernels on gfx950, OpenAI's Triton
``matmul_ogs`` kernels on gfx9 (gfx90a, gfx942, gfx950) and gfx11xx/gfx12xx
(experts/gpt_oss_triton_kernels_moe.py ``_triton_kernel_moe_supports_current_device``), OCP MX
emulation last; measured: ``sariekr/gpu_conc`` served gpt-oss-20b on one MI300X with vLLM's
ROCm build (August 2025). The catalog's ``vllm_support.json`` lists the same targets."""

_PRECISION_ALIASES = {
    "bf16": "bf16", "fp16": "bf16", "bfloat16": "bf16", "float16": "bf16", "half": "bf16",
    "none": "bf16", "16bit": "bf16",
    "fp8": "fp8", "fp8pertensor": "fp8", "fp8w8a8": "fp8",
    "int8": "int8", "int8weightonly": "int8", "int8perchannelweightonly": "int8", "w8a16": "int8",
    "bitsandbytes": "bnb-nf4", "bnb": "bnb-nf4", "bnbnf4": "bnb-nf4", "nf4": "bnb-nf4",
    "bnb4bit": "bnb-nf4", "4bit": "bnb-nf4",
    "awq": "awq", "gptq": "gptq",
    "nvfp4": "nvfp4", "modeloptfp4": "nvfp4", "fp4": "nvfp4", "mxfp4": "mxfp4",
    "int4": "int4", "w4a16": "int4", "bnbint8": "bnb-int8",
}

INT8_DENSE_NOTE = (
    "vLLM has no online int8 weight-only path for dense linear layers: its "
    "int8_per_channel_weight_only shorthand quantizes MoE expert weights only and leaves every "
    "linear layer 16-bit (vllm/config/quantization.py, on GPU and CPU alike), so this dense "
    "model would load at 16-bit size"
)


class PlanError(ValueError):
    """A request the planner cannot plan for; the message says what to change."""


def normalize_precision(name: str) -> str:
    """Map a ``--quantization`` value to a planner precision, or ``"auto"``.

    Accepts the planner's names (bf16, fp8, int8, bnb-nf4, awq, gptq), vLLM's names
    (bitsandbytes, fp8_per_tensor, int8_per_channel_weight_only) and common spellings.
    """
    flat = "".join(ch for ch in name.lower() if ch.isalnum())
    if flat == "auto":
        return "auto"
    if flat in _PRECISION_ALIASES:
        return _PRECISION_ALIASES[flat]
    raise PlanError(
        f"unknown quantization {name!r}; use auto, bf16, fp8, int8, bitsandbytes, awq, gptq, "
        "nvfp4 or mxfp4"
    )



def normalize_kv_cache_dtype(name: str | None) -> str:
    """``--kv-cache-dtype``: ``"auto"`` (the model's 16-bit dtype) or ``"fp8"`` (also fp8_e4m3,
    fp8_e5m2, which vLLM names separately but sizes alike: 1 byte)."""
    flat = (name or "auto").strip().lower()
    if flat in ("auto", "bf16", "bfloat16", "fp16", "float16", "16bit"):
        return "auto"
    if flat in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        return "fp8"
    raise PlanError(f"unknown --kv-cache-dtype {name!r}; use auto or fp8")



BNB_DUMMY_NOTE = (
    "vLLM replaces --load-format dummy with bitsandbytes under --quantization bitsandbytes "
    "(GPU vLLM: EngineArgs.create_load_config; vLLM-CPU: vllm-bnb-plugin's create_engine_config), "
    "so in-flight 4-bit needs real weight files; with dummy weights it dies with 'No model "
    "weights found'"
)

FP8_KV_CPU_NOTE = "vLLM-CPU's fp8 KV cache needs an x86 CPU with AVX-512 or AMX"


@dataclass(frozen=True)
class EngineCaps:
    """What the vLLM build that will serve can run; built by ``engine_setup`` (the I/O), given to
    :func:`plan` as data so GPU cases can be planned and tested anywhere.

    ``build`` is ``"cuda"`` (GPU vLLM) or ``"cpu"`` (vLLM-CPU). ``unavailable`` pairs a precision
    with why it cannot run (a runtime not importable) and the install hint. ``fp8_kv_cache`` is
    empty when ``--kv-cache-dtype fp8`` runs, else why not. ``checked`` is False when the runtimes
    were not looked at (planning for a GPU from a machine without its vLLM): then nothing is
    marked unavailable for want of a package.
    """

    build: str = "cuda"
    vllm_version: tuple[int, ...] | None = None
    unavailable: tuple[tuple[str, str], ...] = ()
    fp8_kv_cache: str = ""
    checked: bool = False

    def missing(self, precision: str) -> str:
        """Why ``precision``'s runtime is missing here (with the install hint), or ``""``."""
        return dict(self.unavailable).get(precision, "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the plan."""
        return {
            "build": self.build,
            "vllm_version": ".".join(map(str, self.vllm_version)) if self.vllm_version else None,
            "unavailable": dict(self.unavailable),
            "fp8_kv_cache": self.fp8_kv_cache or "supported",
            "runtimes_checked": self.checked,
        }


def default_caps(gpu: GpuSpec | None) -> EngineCaps:
    """Unchecked capabilities: GPU vLLM when planning for a GPU, else vLLM-CPU."""
    return EngineCaps(build="cuda" if gpu is not None else "cpu")


def why_not(precision: str, gpu: GpuSpec | None, caps: EngineCaps,
            load_format: str | None, checkpoint: bool = False, moe: bool = False) -> str:
    """Empty when ``precision`` runs with this engine, GPU and load format, else the reason.

    The combinations: fp8 (online W8A8) needs a GPU of compute capability >= 8.9, or an AMD GPU
    with FP8 tensor math (MI300X, MI325X, MI355X: ``GpuSpec.supports_fp8``) (an fp8
    checkpoint (``checkpoint``) loads from 8.0, weight-only); int8 weight-only quantizes no
    dense layer (:data:`INT8_DENSE_NOTE`; ``moe``: it quantizes the experts); bitsandbytes
    needs its runtime importable (and ``vllm-bnb-plugin`` on vLLM builds without it) and real
    weights, since both builds force ``load_format=bitsandbytes`` (:data:`BNB_DUMMY_NOTE`);
    NVFP4 needs a GPU, with FP4 compute from :data:`NVFP4_MIN_CAPABILITY` (an NVFP4 checkpoint
    loads below it, emulated); MXFP4 needs :data:`MXFP4_MIN_CAPABILITY`, or on AMD one of
    :data:`MXFP4_ROCM_TARGETS`.
    """
    missing = caps.missing(precision)
    if missing:
        return missing
    if precision in ("nvfp4", "mxfp4"):
        cc = gpu.cuda_capability if gpu is not None else None
        if cc is None and precision == "mxfp4" and gpu is not None:  # AMD
            if gpu.compute_capability in MXFP4_ROCM_TARGETS:
                return ""
            low = MXFP4_MIN_CAPABILITY
            return (f"mxfp4 needs an NVIDIA GPU of compute capability >= {low[0]}.{low[1]} or an "
                    f"AMD GPU vLLM's ROCm build targets "
                    f"({', '.join(MXFP4_ROCM_TARGETS[:3])}, ...); "
                    f"{gpu.key} is {gpu.compute_capability}")
        if cc is None:
            where = gpu.key if gpu is not None else "a --memory-budget plan"
            return f"{precision} needs an NVIDIA GPU; {where} has none"
        low = NVFP4_MIN_CAPABILITY if precision == "nvfp4" and not checkpoint else (
            (7, 5) if precision == "nvfp4" else MXFP4_MIN_CAPABILITY)
        if cc < low:
            return (f"{precision} needs compute capability >= {low[0]}.{low[1]}; "
                    f"{gpu.key if gpu else '?'} is {gpu.compute_capability if gpu else '?'}")
        return ""
    if precision == "fp8" and checkpoint and gpu is not None:
        cc = gpu.cuda_capability
        if cc is not None and cc >= (8, 0):
            return ""
    if precision == "fp8":
        if gpu is None:
            return "fp8 needs a GPU of compute capability >= 8.9; a --memory-budget plan has none"
        if gpu.cuda_capability is None:  # AMD: CDNA 3/4 (an FP8 figure) run it on vLLM's ROCm
            return "" if gpu.supports_fp8 else (
                f"{gpu.key} ({gpu.compute_capability}) has no FP8 tensor math")
        if not gpu.supports_fp8:
            return (f"fp8 needs compute capability >= 8.9 (Ada, Hopper, Blackwell); "
                    f"{gpu.key} is {gpu.compute_capability}")
    if precision == "int8" and not moe and not checkpoint:
        return INT8_DENSE_NOTE
    if precision == "bnb-nf4" and (load_format or "").lower() == "dummy":
        return BNB_DUMMY_NOTE
    return ""
