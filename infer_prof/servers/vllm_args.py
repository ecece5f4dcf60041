"""vLLM's spelling of the engine settings (:class:`EngineSettings`): the planner and ``run/``
speak precision, KV cache budget, parallelism and lengths; only this module knows that vLLM
calls them ``--quantization fp8_per_tensor``, ``--kv-cache-memory-bytes``,
``--tensor-parallel-size`` or ``--gpu-memory-utilization``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infer_prof.catalog.lora_adapters import LoraAdapter
from infer_prof.core.planning.plan_result import EngineSettings

#: vLLM's engine-argument names (as in ``EngineArgs``) and their flags, in the order written.
FLAG_NAMES = {
    "dtype": "--dtype",
    "tensor_parallel_size": "--tensor-parallel-size",
    "pipeline_parallel_size": "--pipeline-parallel-size",
    "quantization": "--quantization",
    "load_format": "--load-format",
    "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "max_model_len": "--max-model-len",
    "kv_cache_dtype": "--kv-cache-dtype",
}

#: The ranks vLLM accepts for ``--max-lora-rank`` (vLLM 0.32, ``vllm/config/lora.py``,
#: ``MaxLoRARanks``).
MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def quantization_args(precision: str, vllm_version: tuple[int, ...] | None) -> dict[str, Any]:
    """vLLM engine arguments that select ``precision`` (for ``vllm_version``; None = 0.32)."""
    if precision == "fp8":
        # `fp8` quantized bf16 checkpoints online up to 0.30; 0.32 refuses and names
        # `fp8_per_tensor` (in the docs since 0.20).
        old = vllm_version is not None and vllm_version < (0, 20)
        return {"quantization": "fp8" if old else "fp8_per_tensor"}
    if precision == "int8":
        return {"quantization": "int8_per_channel_weight_only"}
    if precision == "bnb-nf4":
        args: dict[str, Any] = {"quantization": "bitsandbytes"}
        if vllm_version is not None and vllm_version < (0, 8):
            args["load_format"] = "bitsandbytes"  # vLLM <= 0.7 needed both; later infers it
        return args
    if precision in ("awq", "gptq"):
        return {"quantization": precision}
    return {}


def vllm_engine_args(
    settings: EngineSettings | None, vllm_version: tuple[int, ...] | None = None
) -> dict[str, Any]:
    """``settings`` as vLLM engine arguments (``{"tensor_parallel_size": 2, ...}``), each set
    field once; {} for None. ``vllm_version`` picks the quantization name (None = 0.32)."""
    if settings is None:
        return {}
    s = settings
    args: dict[str, Any] = {}
    if s.dtype is not None:
        args["dtype"] = s.dtype
    if s.tensor_parallel is not None:
        args["tensor_parallel_size"] = s.tensor_parallel
    if s.pipeline_parallel is not None:
        args["pipeline_parallel_size"] = s.pipeline_parallel
    if s.precision is not None:
        args.update(quantization_args(s.precision, vllm_version))
    if s.quantization is not None:
        args["quantization"] = s.quantization
    if s.kv_cache_dtype is not None:
        args["kv_cache_dtype"] = s.kv_cache_dtype
    if s.kv_cache_bytes is not None:
        args["kv_cache_memory_bytes"] = s.kv_cache_bytes
    if s.memory_utilization is not None:
        args["gpu_memory_utilization"] = s.memory_utilization
    if s.max_model_len is not None:
        args["max_model_len"] = s.max_model_len
    if s.load_format is not None:
        args["load_format"] = s.load_format
    return args


#: The environment a launched vLLM server gets: ``VLLM_SERVER_DEV_MODE=1`` mounts
#: ``POST /reset_prefix_cache`` (vllm/entrypoints/serve/dev/cache/api_router.py, vLLM 0.32),
#: through which ``--prefix-cache cold`` empties the cache before each point.
VLLM_ENV = {"VLLM_SERVER_DEV_MODE": "1"}


def vllm_flags(
    settings: EngineSettings,
    extra_args: tuple[str, ...] | list[str] = (),
    *,
    enforce_eager: bool = False,
    tokenizer: bool = True,
    vllm_version: tuple[int, ...] | None = None,
    speculative_config: str | None = None,
    reasoning_parser: str | None = None,
    lora_adapters: Sequence[LoraAdapter] = (),
) -> list[str]:
    """The vLLM command-line arguments beyond model, host and port: each set setting as its
    flag (in :data:`FLAG_NAMES` order), unless ``extra_args`` (``--engine-arg``, appended
    verbatim) gives that flag itself; ``--enforce-eager``; ``--skip-tokenizer-init`` for a
    model without a tokenizer; ``--enable-prompt-tokens-details`` (each response's usage
    then says how many prompt tokens the prefix cache held: ``prompt_tokens_details.
    cached_tokens``); with ``speculative_config`` (JSON), ``--speculative-config`` and, on
    vLLM 0.32 or later (``vllm_version`` None: 0.32), ``--per-request-spec-decode-metrics
    summary`` (each response's ``metrics.speculative_decoding``); ``--reasoning-parser NAME``
    (unless given verbatim); the LoRA flags of ``lora_adapters`` (:func:`lora_flags`)."""
    merged = vllm_engine_args(settings, vllm_version)
    given = {a.split("=", 1)[0] for a in extra_args if a.startswith("--")}
    args: list[str] = []
    for key, flag in FLAG_NAMES.items():
        if key in merged and flag not in given:
            args += [flag, str(merged[key])]
    if enforce_eager:
        args.append("--enforce-eager")
    if not tokenizer:
        args.append("--skip-tokenizer-init")
    if "--enable-prompt-tokens-details" not in given:
        args.append("--enable-prompt-tokens-details")
    if speculative_config is not None and "--speculative-config" not in given:
        args += ["--speculative-config", speculative_config]
        recent = vllm_version is None or vllm_version >= (0, 32)
        if recent and "--per-request-spec-decode-metrics" not in given:
            args += ["--per-request-spec-decode-metrics", "summary"]
    if reasoning_parser and "--reasoning-parser" not in given:
        if vllm_version is not None and vllm_version < (0, 9) and "--enable-reasoning" not in given:
            # the parser needed it before 0.9, which deprecated it (vllm-project/vllm#18404)
            args.append("--enable-reasoning")
        args += ["--reasoning-parser", reasoning_parser]
    return args + lora_flags(lora_adapters, given) + list(extra_args)


def max_lora_rank(ranks: Sequence[int]) -> int:
    """vLLM's ``--max-lora-rank`` for adapters of ``ranks``: the smallest rank vLLM accepts
    (:data:`MAX_LORA_RANKS`) that holds the largest; ValueError above vLLM's largest."""
    need = max(ranks)
    for r in MAX_LORA_RANKS:
        if r >= need:
            return r
    raise ValueError(f"a LoRA rank of {need} is above vLLM's largest --max-lora-rank "
                     f"({MAX_LORA_RANKS[-1]})")


def lora_flags(adapters: Sequence[LoraAdapter], given: set[str] | frozenset[str] = frozenset()
               ) -> list[str]:
    """vLLM's flags that serve ``adapters``: ``--enable-lora``, ``--max-lora-rank`` (their
    largest rank, :func:`max_lora_rank`), ``--max-loras`` (their number, so that one batch can
    hold every adapter: vLLM's default is 1, which runs requests of different adapters in
    different steps) and ``--lora-modules NAME=PATH ...``; a flag in ``given`` (the user's
    ``--engine-arg``) is left to the user. [] without adapters."""
    if not adapters:
        return []
    args = [] if "--enable-lora" in given else ["--enable-lora"]
    if "--max-lora-rank" not in given:
        args += ["--max-lora-rank", str(max_lora_rank([a.rank for a in adapters]))]
    if "--max-loras" not in given:
        args += ["--max-loras", str(len(adapters))]
    if "--lora-modules" not in given:
        args += ["--lora-modules", *(f"{a.name}={a.path}" for a in adapters)]
    return args

