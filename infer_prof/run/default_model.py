"""The model ``infer-prof run`` profiles when none is named (what ``make run`` does).

It follows the machine: without a GPU, ``tiny-llama`` (a 7B model decodes ~0.3 tokens/s on these
CPUs: hours for one run); on a GPU, the mission's own case -- ``llama-2-7b`` with random weights
at 128 concurrent streams -- when the planner says it fits there (at a precision that runs with
random weights), else ``tiny-llama`` with the planner's reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infer_prof.catalog.gpus import DetectedGpu, catalog
from infer_prof.catalog.models import TINY_LLAMA, registry
from infer_prof.core.planning.planner import PlanRequest, plan
from infer_prof.core.planning.precisions import PlanError

GPU_DEFAULT_MODEL = "llama-2-7b"
GPU_DEFAULT_CONCURRENCY = 128
DEFAULT_INPUT_LEN = 128
DEFAULT_OUTPUT_LEN = 128
"""The built-in workload's lengths (see :func:`infer_prof.run.load_points.base_workload`)."""

DUMMY_PRECISIONS = ("bf16", "fp16", "fp8")
"""Precisions vLLM applies to random weights from a config-only folder (bitsandbytes makes GPU
vLLM switch to its own load format, which needs weight files)."""


@dataclass(frozen=True)
class DefaultChoice:
    """What to profile: ``model``, the ``load_format`` and ``concurrency`` to use unless given,
    and ``why`` (the console line)."""

    model: str
    load_format: str | None
    concurrency: int | None
    why: str


def choose_default(
    detected: Sequence[DetectedGpu], cuda_total: Callable[[int], int | None] | None = None
) -> DefaultChoice:
    """The default model for a machine whose GPUs are ``detected`` (``gpus.detect_gpus()``),
    planned as ``run`` plans it: the same per-GPU memory (``engine_setup.device_memory``;
    ``cuda_total`` is injectable for tests), GPU vLLM's capabilities, random weights."""
    from infer_prof.run.engine_setup import device_memory, engine_capabilities

    if not detected:
        return DefaultChoice(
            TINY_LLAMA,
            None,
            None,
            f"no --model: profiling {TINY_LLAMA}, the default without a GPU (none detected; "
            f"{GPU_DEFAULT_MODEL} would decode at ~0.3 tokens/s on a CPU); give --model to choose",
        )
    first = detected[0]
    count = sum(1 for d in detected if d.nvml_name == first.nvml_name)
    fallback = f"no --model: profiling {TINY_LLAMA} on {first.nvml_name}: "
    if first.spec is None:
        return DefaultChoice(
            TINY_LLAMA,
            None,
            None,
            fallback + "this GPU is not in the catalog, so the planner cannot say whether "
            f"{GPU_DEFAULT_MODEL} fits; give --model and --gpu to choose",
        )
    from infer_prof.core.catalog.models import ModelSpec

    entry = registry()[GPU_DEFAULT_MODEL]
    spec = ModelSpec.from_config(entry["config"], name=GPU_DEFAULT_MODEL, hub_id=entry["hub_id"])
    memory, source = device_memory(first.spec, detected, cuda_total)
    try:
        p = plan(
            PlanRequest(spec,
            first.spec,
            gpus=count,
            concurrency=GPU_DEFAULT_CONCURRENCY,
            input_len=DEFAULT_INPUT_LEN,
            output_len=DEFAULT_OUTPUT_LEN,
            memory_per_gpu_bytes=memory,
            memory_source=source,
            load_format="dummy",
            caps=engine_capabilities(True),
            catalog=tuple(catalog().values())),
        )
    except PlanError as exc:
        return DefaultChoice(TINY_LLAMA, None, None, fallback + f"planner: {exc}")
    where = f"{count}x {first.spec.key}" if count > 1 else first.spec.key
    if not (p.fits and p.fits_load and p.precision in DUMMY_PRECISIONS):
        held = p.memory.max_sequences if p.memory else 0
        if not p.fits:
            why = "; ".join(c.reason for c in p.rejections) or "no precision fits"
        elif p.precision not in DUMMY_PRECISIONS:
            why = f"the planner would need {p.precision}"
        else:
            why = f"its KV cache holds {held} of {GPU_DEFAULT_CONCURRENCY} sequences"
        return DefaultChoice(
            TINY_LLAMA,
            None,
            None,
            fallback + f"{GPU_DEFAULT_MODEL} at {GPU_DEFAULT_CONCURRENCY} streams does not fit "
            f"{where} at bf16/fp8 ({why}); give --model to choose",
        )
    seqs = p.memory.max_sequences if p.memory else None
    return DefaultChoice(
        GPU_DEFAULT_MODEL,
        "dummy",
        GPU_DEFAULT_CONCURRENCY,
        f"no --model: profiling {GPU_DEFAULT_MODEL} with random weights at "
        f"{GPU_DEFAULT_CONCURRENCY} streams on {where}: the planner fits it at {p.precision}"
        + (f" (KV cache for {seqs} sequences)" if seqs else "")
        + "; give --model to choose",
    )
