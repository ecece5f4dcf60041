"""How long a run will take, estimated before it starts, from a roofline of the device.

Pure: a :class:`~infer_prof.core.catalog.models.ModelSpec`, the weight and KV bytes, a
:class:`DeviceSpeed` and the load points in; seconds out. Used to refuse, in seconds, a run that
would go on for hours (a 7B model on a 2-core CPU).

Per decode step of a batch of ``b`` sequences at a mean context of ``L = P + O/2`` tokens (prompt
``P``, output ``O``), the step is bound by memory or by compute, whichever is slower, plus a fixed
per-step cost of the engine (scheduling, sampling, Python):

    step_bytes(b) = weight_bytes + b x L x kv_bytes_per_token
                    (roofline.model_decode_bytes_per_step: a MoE step reads only the experts
                    its b tokens are routed to, a sliding-window layer only its window)
    step_time(b)  = max(step_bytes(b) / bandwidth,
                        b x decode_flops_per_token(L) / flops) + step_overhead

Prefill is compute bound: ``prefill_time = N x P x prefill_flops_per_token((P+1)/2) / flops``.

Closed loop, ``N`` requests (warm-up included) at concurrency ``C``: the batch is
``B = min(C, N, max_sequences)`` (``max_sequences``: what the KV cache holds, from the plan), the
requests pass in ``N // B`` full waves of ``O`` steps at batch ``B`` and one last wave of ``O``
steps at batch ``N mod B``:

    decode_time = (N // B) x O x step_time(B) + [N mod B > 0] x O x step_time(N mod B)

Open loop at ``rate`` requests/s: ``max(N / rate, prefill_time + decode_time)`` with the batch
capped by ``--max-concurrency`` (else by ``N``). Bound by ``--duration D``: ``D`` plus the time to
finish the requests in flight (one wave, at most the per-request timeout; its prefill and decode
shares counted in the same proportion). The fastest a request of a point can end is its own
prefill and ``O`` steps at the point's batch (closed loop; open loop: batch 1),
``P x prefill_flops_per_token((P+1)/2) / flops + O x step_time(B)``; ``fastest_request_s`` is
the least of these over the points (when it is above the per-request timeout, every request
times out). A warm-up counts as
its requests (a counted one; ``steady``: one wave of ``C``) or its seconds. The run is the engine
start-up (``startup_base_s + startup_s_per_gb x weight GB``) plus every load point.

Device figures (:func:`cpu_speed`, :func:`gpu_speed`):

- GPU: the catalog's bandwidth and dense peak FLOP/s (of all GPUs) times an efficiency of
  :data:`GPU_EFFICIENCY` (0.6: llama-2-7b bf16 on an H100 SXM ran a single stream at TPOT 6.15 ms
  against a 4.0 ms roofline, 128 streams at 25.7 ms against 15.5 ms).
- CPU: effective figures of vLLM-CPU per core, calibrated on the 2-core development machines:
  llama-2-7b (dummy weights, bf16) decodes about 0.3 tokens/s for a single stream, i.e. 13.5 GB of
  weights read (4 GB/s) and 13.5 GFLOP computed (4 GFLOP/s) per token; a batched fp32 GEMM there
  peaks at about 12 GFLOP/s on the two cores. So a CPU gets 2 GB/s and 6 GFLOP/s per core: the
  batch runs compute bound and parallelises only up to 3x, not like on a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.catalog.roofline import (
    causal_mean_context,
    decode_flops_per_token,
    model_decode_bytes_per_step,
    prefill_flops_per_token,
)

GPU_EFFICIENCY = 0.6
"""Share of the catalog's bandwidth and peak FLOP/s a vLLM run reaches on a GPU (measured 0.6-0.65
for llama-2-7b on an H100 SXM, vLLM 0.26)."""

CPU_BYTES_PER_S_PER_CORE = 2.0e9
"""Effective weight-streaming rate of vLLM-CPU per core (0.3 tok/s x 13.5 GB / 2 cores)."""

CPU_FLOPS_PER_CORE = 6.0e9
"""Effective batched compute of vLLM-CPU per core (about 12 GFLOP/s on the 2-core machines)."""

CPU_STEP_OVERHEAD_S = 0.02
"""Engine cost per decode step on CPU that is neither bandwidth nor compute (scheduler,
sampler, Python): about 20 ms."""

GPU_STEP_OVERHEAD_S = 0.001
"""The same on a GPU with CUDA graphs: about 1 ms."""

LIMIT_S = 3600.0
"""Runs estimated above this are refused unless ``--yes`` is given."""


@dataclass(frozen=True)
class DeviceSpeed:
    """What a device does per second, as the estimate uses it: ``bandwidth_bytes_per_s`` and
    ``flops_per_s`` (effective, all devices together), ``step_overhead_s`` per decode step,
    start-up as ``startup_base_s + startup_s_per_gb x weight GB``, and ``basis`` in words."""

    name: str
    bandwidth_bytes_per_s: float
    flops_per_s: float
    step_overhead_s: float
    startup_base_s: float
    startup_s_per_gb: float
    basis: str


def cpu_speed(cores: int) -> DeviceSpeed:
    """vLLM-CPU on ``cores`` cores (see the module docstring for the calibration)."""
    n = max(1, cores)
    return DeviceSpeed(
        f"CPU ({n} core{'s' if n > 1 else ''})",
        CPU_BYTES_PER_S_PER_CORE * n,
        CPU_FLOPS_PER_CORE * n,
        CPU_STEP_OVERHEAD_S,
        # vLLM-CPU: ~50 s for the tiny model, ~80 s for 7B dummy weights on 2 cores
        50.0,
        2.3,
        f"vLLM-CPU, {CPU_BYTES_PER_S_PER_CORE / 1e9:g} GB/s and "
        f"{CPU_FLOPS_PER_CORE / 1e9:g} GFLOP/s per core (a 7B model: ~0.3 tok/s on 2 cores)",
    )


def gpu_speed(
    name: str, count: int, bandwidth_gbps: float, peak_tflops: float | None
) -> DeviceSpeed:
    """``count`` GPUs of ``bandwidth_gbps`` GB/s and ``peak_tflops`` dense TFLOP/s each (the
    catalog's figures for the run's precision), at :data:`GPU_EFFICIENCY`."""
    n = max(1, count)
    tflops = peak_tflops if peak_tflops else 100.0
    return DeviceSpeed(
        f"{n}x {name}" if n > 1 else name,
        bandwidth_gbps * 1e9 * n * GPU_EFFICIENCY,
        tflops * 1e12 * n * GPU_EFFICIENCY,
        GPU_STEP_OVERHEAD_S,
        # vLLM 0.26 on an H100: 76-99 s for 7B (13.5 GB), 195 s for 70B fp8 (70 GB)
        80.0,
        1.7,
        f"{GPU_EFFICIENCY:.0%} of the catalog's {bandwidth_gbps:g} GB/s and {tflops:g} TFLOP/s",
    )


@dataclass(frozen=True)
class PointLoad:
    """One load point as the estimate sees it. ``requests`` counts warm-up requests too (None:
    bound by ``duration_s``); ``warmup_s`` a warm-up of so many seconds; ``concurrency`` for a
    closed loop, ``rate`` (requests/s, None = unpaced) and ``max_concurrency`` for an open one;
    mean prompt and output tokens."""

    requests: int | None
    input_len: float
    output_len: float
    concurrency: int | None = None
    rate: float | None = None
    max_concurrency: int | None = None
    duration_s: float | None = None
    timeout_s: float = 300.0
    warmup_s: float = 0.0  # a warm-up of fixed seconds, before the requests counted above


@dataclass(frozen=True)
class Estimate:
    """The estimate in seconds: ``total_s = startup_s + sum(points_s)``, with the prefill and
    decode shares, and the batch each point runs at."""

    total_s: float
    startup_s: float
    prefill_s: float
    decode_s: float
    points_s: tuple[float, ...]
    batches: tuple[int, ...]
    device: DeviceSpeed
    single_stream_tokens_per_s: float
    fastest_request_s: float = 0.0
    assumptions: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, seconds and tokens/s."""
        return asdict(self)


def step_time_s(
    spec: ModelSpec,
    weight_bytes: float,
    kv_bytes_per_token: float,
    device: DeviceSpeed,
    batch: int,
    mean_context: float,
    routed_expert_bytes: float = 0.0,
) -> float:
    """One decode step at ``batch`` sequences: max(memory time, compute time) + overhead; the
    bytes are :func:`~infer_prof.core.catalog.roofline.model_decode_bytes_per_step` (a MoE
    step reads the experts its tokens are routed to)."""
    if batch <= 0:
        return 0.0
    step_bytes = model_decode_bytes_per_step(spec, weight_bytes, kv_bytes_per_token, batch,
                                             mean_context, routed_expert_bytes)
    memory = step_bytes / device.bandwidth_bytes_per_s
    compute = batch * decode_flops_per_token(spec, mean_context) / device.flops_per_s
    return max(memory, compute) + device.step_overhead_s


def estimate_run(
    spec: ModelSpec,
    weight_bytes: float,
    kv_bytes_per_token: float,
    device: DeviceSpeed,
    points: Sequence[PointLoad],
    max_sequences: int | None = None,
    routed_expert_bytes: float = 0.0,
) -> Estimate:
    """Estimate the run's wall time (see the module docstring for every formula)."""
    if not points:
        raise ValueError("no load points to estimate")
    startup = device.startup_base_s + device.startup_s_per_gb * weight_bytes / 1e9
    total_prefill = total_decode = 0.0
    per_point: list[float] = []
    batches: list[int] = []
    fastest = float("inf")
    for p in points:
        P, O = max(0.0, p.input_len), max(1.0, p.output_len)  # noqa: E741, N806
        L = P + O / 2.0  # noqa: N806
        n = p.requests
        if n is None:  # bound by duration: enough requests to keep the batch full
            cap = p.concurrency or p.max_concurrency or 64
        else:
            cap = p.concurrency if p.concurrency is not None else (p.max_concurrency or n)
        batch = max(1, min(cap, n if n is not None else cap, max_sequences or cap))
        batches.append(batch)
        one_prefill = P * prefill_flops_per_token(spec, causal_mean_context(P)) / device.flops_per_s

        def step(b: int, L: float = L) -> float:  # noqa: N803
            return step_time_s(spec, weight_bytes, kv_bytes_per_token, device, b, L,
                               routed_expert_bytes)

        # closed loop: every stream decodes at the point's batch; open loop: as few as one
        fastest = min(fastest, one_prefill + O * step(batch if p.concurrency else 1))
        if n is None:
            full_wave = batch * one_prefill + O * step(batch)
            wave = min(p.timeout_s, full_wave)
            share = wave / full_wave if full_wave > 0 else 0.0
            prefill, decode = batch * one_prefill * share, O * step(batch) * share
            t = (p.duration_s or 0.0) + wave
        else:
            full, rest = divmod(n, batch)
            prefill = n * one_prefill
            decode = full * O * step(batch) + (O * step(rest) if rest else 0.0)
            t = prefill + decode
            if p.rate is not None and p.rate > 0 and p.concurrency is None:
                t = max(t, n / p.rate)
        total_prefill += prefill
        total_decode += decode
        per_point.append(t + p.warmup_s)
    single = 1.0 / step_time_s(
        spec, weight_bytes, kv_bytes_per_token, device, 1, points[0].input_len,
        routed_expert_bytes,
    )
    return Estimate(
        total_s=startup + sum(per_point),
        startup_s=startup,
        prefill_s=total_prefill,
        decode_s=total_decode,
        points_s=tuple(per_point),
        batches=tuple(batches),
        device=device,
        single_stream_tokens_per_s=single,
        fastest_request_s=fastest,
        assumptions={
            "weight_bytes": weight_bytes,
            "kv_bytes_per_token": kv_bytes_per_token,
            "max_sequences": max_sequences,
        },
    )


def human_duration(seconds: float) -> str:
    """``42 s``, ``12 min``, ``3.4 h``, ``2.1 days``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
