"""How the engine is set up for a run: the GPU it is planned and priced for, the memory plan,
and the vLLM arguments that apply it."""

from __future__ import annotations

from typing import Any

from infer_prof.core.gpuspec import GpuSpec
from infer_prof.core.planner import Plan, PlanError, normalize_precision, plan
from infer_prof.environment import installed_vllm_version
from infer_prof.gpus import catalog as gpu_catalog
from infer_prof.gpus import detect_gpus, find_gpu
from infer_prof.models import ResolvedModel, alias_config_dir
from infer_prof.run_config import ConfigError, RunConfig

CPU_DEFAULT_KV_CACHE_BYTES = 512 * 1024 * 1024


_FLAG_NAMES = {
    "dtype": "--dtype",
    "tensor_parallel_size": "--tensor-parallel-size",
    "quantization": "--quantization",
    "load_format": "--load-format",
    "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "max_model_len": "--max-model-len",
}


def engine_arguments(
    cfg: RunConfig,
    model: ResolvedModel,
    on_gpu: bool,
    plan_args: dict[str, Any] | None = None,
    max_seq_len: int = 2048,
    kv_tokens: int = 0,
) -> list[str]:
    """The vLLM command-line arguments for this run (beyond model, host and port).

    Start from the plan's engine arguments (``--quantization auto``), then let every option the
    user gave explicitly win, then append ``--engine-arg`` values verbatim.
    """
    merged: dict[str, Any] = {k: v for k, v in (plan_args or {}).items() if k in _FLAG_NAMES}
    if merged.get("dtype") == "auto":
        del merged["dtype"]
    if merged.get("tensor_parallel_size") == 1:
        del merged["tensor_parallel_size"]
    explicit = {
        "dtype": cfg.dtype,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "gpu_memory_utilization": cfg.gpu_memory_utilization,
        "max_model_len": cfg.max_model_len,
        "load_format": cfg.load_format,
        "kv_cache_memory_bytes": cfg.kv_cache_memory_bytes,
    }
    if cfg.quantization not in ("auto", "", None) and not plan_args:
        explicit["quantization"] = cfg.quantization  # a name the planner does not know
    merged.update({k: v for k, v in explicit.items() if v is not None})
    if "max_model_len" not in merged and model.spec is not None:
        merged["max_model_len"] = min(model.spec.max_position_embeddings, max(2048, max_seq_len))
    if "kv_cache_memory_bytes" not in merged and not on_gpu:
        # On CPU vLLM reserves a fraction of the node's memory unless told an explicit KV size;
        # size it for the load: concurrency x (input + output) tokens, with 50% headroom.
        need = 0
        if model.spec is not None:
            need = int(kv_tokens * model.spec.kv_cache_bytes_per_token(2.0) * 1.5)
        merged["kv_cache_memory_bytes"] = max(CPU_DEFAULT_KV_CACHE_BYTES, need)
    args: list[str] = []
    for key, flag in _FLAG_NAMES.items():
        if key in merged:
            args += [flag, str(merged[key])]
    if cfg.enforce_eager:
        args.append("--enforce-eager")
    if not model.has_tokenizer:
        args.append("--skip-tokenizer-init")
    return args + list(cfg.engine_args)


def resolve_gpu(cfg: RunConfig) -> tuple[GpuSpec | None, int, str]:
    """The GPU this run is costed and planned for: ``--gpu`` or the detected one.

    Returns (catalog entry or None, GPU count, how it was found). The count is ``--gpus``,
    else ``--tensor-parallel-size``, else the number of detected GPUs of the first kind.
    """
    if cfg.gpu:
        try:
            spec = find_gpu(cfg.gpu)
        except ValueError as exc:
            raise ConfigError(f"--gpu: {exc}") from None
        return spec, cfg.gpus or cfg.tensor_parallel_size or 1, "--gpu"
    found = detect_gpus()
    if not found:
        return None, cfg.gpus or cfg.tensor_parallel_size or 1, "none detected"
    first = found[0]
    same = sum(1 for d in found if d.nvml_name == first.nvml_name)
    count = cfg.gpus or cfg.tensor_parallel_size or same
    return first.spec, count, f"detected ({first.nvml_name})"


def make_plan(
    cfg: RunConfig,
    model: ResolvedModel,
    gpu: GpuSpec | None,
    gpus: int,
    concurrency: int,
    input_len: int,
    output_len: int,
) -> tuple[Plan | None, str | None]:
    """Plan precision and memory for a server this run starts (``--quantization auto`` or a
    forced precision). Returns (plan, why there is none). Raises ConfigError when the model
    cannot run at all, with the planner's numbers and what would fit."""
    if cfg.endpoint:
        return None, "--endpoint: the running server's own settings apply"
    if model.spec is None:
        return None, "model architecture unknown (hub id without a local config)"
    if gpu is None and cfg.memory_budget_bytes is None:
        return None, (
            "no GPU and no --memory-budget: vLLM-CPU runs at 16-bit with a KV cache "
            "sized for the load"
        )
    try:
        precision = normalize_precision(cfg.quantization or "auto")
    except PlanError:
        return None, f"--quantization {cfg.quantization!r} passed to vLLM verbatim, not planned"
    try:
        p = plan(
            model.spec,
            gpu,
            gpus=gpus,
            concurrency=concurrency,
            input_len=input_len,
            output_len=output_len,
            gpu_memory_utilization=cfg.gpu_memory_utilization or 0.9,
            quantization=precision,
            memory_budget_bytes=cfg.memory_budget_bytes,
            vllm_version=installed_vllm_version(),
            catalog=tuple(gpu_catalog().values()),
        )
    except PlanError as exc:
        raise ConfigError(f"plan: {exc}") from None
    if not p.fits:
        why = "; ".join(c.reason for c in p.rejections) or "no precision fits"
        fix = "; ".join(p.suggestions) or "use a larger GPU or more of them"
        raise ConfigError(f"{model.name} does not fit ({why}); would fit: {fix}")
    return p, None


def engine_model_path(cfg: RunConfig, model: ResolvedModel) -> str:
    """What vLLM loads: for an alias with dummy weights, a folder holding just its config."""
    if model.source == "alias" and (cfg.load_format or "") == "dummy":
        return str(alias_config_dir(model.name))
    return model.path
