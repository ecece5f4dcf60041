"""The result's sections about the engine's plan and its ceilings, as types (part of
:class:`infer_prof.results.document.Result`): ``plan`` (``core.planning.plan_result.Plan`` in
its JSON form), ``duration_estimate`` (``core.planning.duration.Estimate``) and ``roofline``
(``run.economics.roofline_block``: :class:`Roofline`, declared beside the arithmetic that builds
it, in :mod:`infer_prof.core.catalog.roofline_record`).

Every field has a default, so a result of an older version that lacks one still loads (None:
not recorded). Units are in the names: ``_bytes`` bytes, ``_s`` seconds, ``_per_s`` per second.
"""

from __future__ import annotations

from typing import Any

from infer_prof.core.catalog.roofline_record import Roofline as Roofline
from infer_prof.results.document_base import Section


class PlannedMemory(Section):
    """Per-GPU memory for one precision, bytes (``core.planning.plan_result.MemoryBreakdown``);
    ``kv_cache_bytes`` may be negative (no room)."""

    precision: str | None = None
    budget_bytes: int | None = None
    weights_bytes: int | None = None
    weights_bytes_total: int | None = None
    fixed_overhead_bytes: int | None = None
    activation_bytes: int | None = None
    overhead_bytes: int | None = None
    kv_cache_bytes: int | None = None
    kv_bytes_per_token: int | None = None
    kv_blocks: int | None = None
    kv_tokens: int | None = None
    blocks_per_sequence: int | None = None
    max_sequences: int | None = None
    kv_needed_bytes: int | None = None
    needed_bytes: int | None = None
    fits_load: bool | None = None
    runnable: bool | None = None
    kv_cache_dtype: str | None = None
    state_bytes_per_sequence: int | None = None
    """A hybrid model's linear/Mamba-layer state per sequence, bytes of the pool (0 without)."""
    block_size: int | None = None
    """Tokens per KV block (a hybrid model's are aligned to its state pages)."""
    block_bytes: int | None = None
    """Pool bytes one block takes across every layer."""
    lora_bytes: int | None = None
    """The LoRA adapters' buffers vLLM reserves before the KV cache (``--max-loras`` slots of
    ``--max-lora-rank``; 0 without adapters)."""


class PlanCandidate(Section):
    """One (precision, KV dtype) the planner considered: whether it runs here, why (or why
    not), its memory (``core.planning.plan_result.Candidate``)."""

    precision: str | None = None
    available: bool | None = None
    reason: str | None = None
    memory: PlannedMemory | None = None
    kv_cache_dtype: str | None = None


class PlanAssumptions(Section):
    """The constants and overhead model the plan's numbers rest on
    (``core.planning.planner._assumptions``)."""

    block_size: int | None = None
    kv_cache_dtype_bytes: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    fixed_overhead_bytes: int | None = None
    vllm_version: str | None = None
    overhead_model: str | None = None
    overhead_model_vllm: str | None = None


class PlanEngine(Section):
    """What the vLLM build that served can run (``core.planning.precisions.EngineCaps``):
    ``build`` ``cuda`` or ``cpu``, each unavailable precision with why, whether the fp8 KV
    cache runs (``supported`` or why not), and whether the runtimes were checked."""

    build: str | None = None
    vllm_version: str | None = None
    unavailable: dict[str, str] = {}
    fp8_kv_cache: str | None = None
    runtimes_checked: bool | None = None


class Plan(Section):
    """The planner's decision for the run (``core.planning.plan_result.Plan.to_dict``): the load
    it planned for, the per-GPU budget (bytes), the precision chosen and its memory, each
    candidate considered and each rejected, and the engine settings in the server's own spelling
    (``engine_args``: its options by name, as the server takes them)."""

    model: str | None = None
    device: str | None = None
    gpu: str | None = None
    gpu_count: int | None = None
    concurrency: int | None = None
    input_len: int | None = None
    output_len: int | None = None
    seq_len: int | None = None
    gpu_memory_utilization: float | None = None
    memory_per_gpu_bytes: int | None = None
    budget_per_gpu_bytes: int | None = None
    quantization_requested: str | None = None
    fits: bool | None = None
    fits_load: bool | None = None
    precision: str | None = None
    dtype: str | None = None
    memory: PlannedMemory | None = None
    candidates: list[PlanCandidate] = []
    rejections: list[PlanCandidate] = []
    warnings: list[str] = []
    suggestions: list[str] = []
    notes: list[str] = []
    assumptions: PlanAssumptions | None = None
    memory_source: str | None = None
    kv_cache_dtype: str | None = None
    load_format: str | None = None
    engine: PlanEngine | None = None
    running_at_once: int | None = None
    queued: int | None = None
    engine_args: dict[str, Any] = {}  # the server's options by its names (free-form values)
    tensor_parallel_size: int | None = None
    precision_label: str | None = None
    queue_message: str | None = None


class EstimateDevice(Section):
    """What the device does per second as the duration estimate used it
    (``core.planning.duration.DeviceSpeed``): effective bandwidth (bytes/s) and FLOP/s of all
    devices together, the decode step overhead (s), start-up as ``startup_base_s +
    startup_s_per_gb x weight GB``, and the basis in words."""

    name: str | None = None
    bandwidth_bytes_per_s: float | None = None
    flops_per_s: float | None = None
    step_overhead_s: float | None = None
    startup_base_s: float | None = None
    startup_s_per_gb: float | None = None
    basis: str | None = None


class EstimateAssumptions(Section):
    """The weight bytes, KV bytes per token and concurrent-sequence limit the estimate used."""

    weight_bytes: float | None = None
    kv_bytes_per_token: float | None = None
    max_sequences: int | None = None


class DurationEstimate(Section):
    """The run's wall time estimated before it started (``core.planning.duration.Estimate``):
    ``total_s = startup_s + sum(points_s)`` seconds, its prefill and decode shares, the batch
    each point runs at, one stream's decode speed (tokens/s) and the least time a request of
    the run can take (``fastest_request_s``: its prefill and decode at its point's batch)."""

    total_s: float | None = None
    startup_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    points_s: list[float] = []
    batches: list[int] = []
    device: EstimateDevice | None = None
    single_stream_tokens_per_s: float | None = None
    fastest_request_s: float | None = None
    assumptions: EstimateAssumptions | None = None
