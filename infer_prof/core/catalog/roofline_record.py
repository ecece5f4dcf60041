"""The roofline of one run as a type: what :func:`infer_prof.core.catalog.roofline.roofline_report`
builds and a result's ``roofline`` section holds (:class:`infer_prof.results.document.Result`),
declared once; its JSON Schema is generated from it (``scripts/write_result_schema.py``).

Every field but ``available`` has a default, so a result of an older version that lacks one still
loads (None: not recorded or not computable from the inputs), and every field is written (null
where unknown).
"""

from __future__ import annotations

import msgspec


class Roofline(msgspec.Struct, kw_only=True, omit_defaults=False):
    """The run against the hardware's ceilings (``run.economics.roofline_block``,
    ``core.catalog.roofline``): ``available`` False with a ``reason`` without a known model
    architecture and a catalog GPU.

    The inputs: ``batch_size`` (sequences per decode step, from ``batch_source``),
    ``mean_context_len`` and ``mean_prompt_len`` (tokens), ``weight_bytes`` (bytes a step reads
    of the weights, all GPUs), ``kv_bytes_per_token`` (bytes), ``bandwidth_bytes_per_s`` and
    ``peak_flops`` (FLOP/s, all GPUs), the measured ``output_tokens_per_s`` and
    ``prefill_tokens_per_s`` (tokens/s) and ``decode_step_time_s`` (seconds, from
    ``decode_step_time_source``). Decode: bytes per step, the shortest step (s), the bandwidth
    and compute ceilings and the lower of them (``decode_bound``: ``memory`` or ``compute``;
    output tokens/s), FLOPs per token, the bytes/s achieved over the window and in a step, the
    window and decode-step MBU. Prefill: the mean attended context (positions), FLOPs per
    prompt token, the compute ceiling (prompt tokens/s), FLOP/s achieved and MFU. Utilizations
    are fractions (``mbu``, ``decode_step_mbu``, ``mfu``) and percent (``_pct``);
    ``*_above_ceiling`` is True when a measured throughput exceeds its ceiling (a measurement
    error), None when it could not be checked. ``definitions`` says each MBU figure's formula in
    words; ``precision`` the weights' precision the ceilings assume, ``gpu`` the catalog key and
    ``gpus`` how many."""

    available: bool
    reason: str | None = None
    batch_size: float | None = None
    mean_context_len: float | None = None
    weight_bytes: float | None = None
    kv_bytes_per_token: float | None = None
    bandwidth_bytes_per_s: float | None = None
    peak_flops: float | None = None
    output_tokens_per_s: float | None = None
    prefill_tokens_per_s: float | None = None
    mean_prompt_len: float | None = None
    decode_bytes_per_step: float | None = None
    decode_step_time_min_s: float | None = None
    decode_bandwidth_ceiling_tokens_per_s: float | None = None
    decode_flops_per_token: float | None = None
    decode_compute_ceiling_tokens_per_s: float | None = None
    decode_ceiling_tokens_per_s: float | None = None
    decode_bound: str | None = None
    achieved_bytes_per_s: float | None = None
    mbu: float | None = None
    mbu_pct: float | None = None
    decode_step_time_s: float | None = None
    decode_step_time_source: str | None = None
    decode_step_bytes_per_s: float | None = None
    decode_step_mbu: float | None = None
    decode_step_mbu_pct: float | None = None
    decode_above_ceiling: bool | None = None
    prefill_attended_context: float | None = None
    prefill_flops_per_token: float | None = None
    prefill_ceiling_tokens_per_s: float | None = None
    achieved_flops: float | None = None
    mfu: float | None = None
    mfu_pct: float | None = None
    prefill_above_ceiling: bool | None = None
    above_ceiling: bool | None = None
    definitions: dict[str, str] | None = None
    batch_source: str | None = None
    precision: str | None = None
    gpu: str | None = None
    gpus: int | None = None
