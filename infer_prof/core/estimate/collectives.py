"""Tensor parallelism's all-reduces: what they cost per engine step. Pure: no I/O.

Megatron-style tensor parallelism (what vLLM runs) sums partial results across the ``n`` GPUs
twice per decoder layer: after the attention output projection and after the MLP's down
projection. Each all-reduce carries the step's activations, ``tokens x hidden x a`` bytes
(``a`` = 2, 16-bit activations). A ring all-reduce moves ``2 (n - 1) / n`` times the buffer
over each GPU's link, so one call takes

    t_call = 2 (n - 1) / n x tokens x hidden x a / (link_bytes_per_s x efficiency) + latency

and a step ``2 x layers x t_call``. ``link_bytes_per_s`` is one direction of a GPU's
interconnect: half the bidirectional figure datasheets give (NVLink 900 GB/s on an H100 SXM is
450 GB/s each way). Where the GPU catalog has no interconnect figure the cost is unknown:
:func:`allreduce_step_s` answers None and the prediction says it was left out.
"""

from __future__ import annotations

ACTIVATION_BYTES = 2
"""Bytes per activation element all-reduced (bf16/fp16 activations, also under fp8 weights)."""

ALLREDUCES_PER_LAYER = 2
"""All-reduces per decoder layer: after attention's o_proj and after the MLP's down_proj."""


def ring_allreduce_s(buffer_bytes: float, gpus: int, link_bytes_per_s: float,
                     efficiency: float, latency_s: float) -> float:
    """Seconds one ring all-reduce of ``buffer_bytes`` over ``gpus`` GPUs takes:
    ``2 (n - 1) / n x buffer / (link_bytes_per_s x efficiency) + latency_s``; 0 for one GPU."""
    if gpus <= 1:
        return 0.0
    if link_bytes_per_s <= 0 or not 0 < efficiency <= 1:
        raise ValueError("link bandwidth must be > 0 and efficiency in (0, 1]")
    moved = 2.0 * (gpus - 1) / gpus * buffer_bytes
    return moved / (link_bytes_per_s * efficiency) + latency_s


def allreduce_step_s(*, tokens: float, hidden: int, layers: int, gpus: int,
                     link_bytes_per_s: float | None, efficiency: float,
                     latency_s: float) -> float | None:
    """Seconds of all-reduce in one engine step of ``tokens`` tokens (decode and prefill
    together): ``2 x layers x ring_allreduce_s(tokens x hidden x 2 B)``. 0 on one GPU; None
    when ``gpus > 1`` and the link bandwidth is unknown (``link_bytes_per_s`` None)."""
    if gpus <= 1:
        return 0.0
    if link_bytes_per_s is None:
        return None
    buffer = tokens * hidden * ACTIVATION_BYTES
    call = ring_allreduce_s(buffer, gpus, link_bytes_per_s, efficiency, latency_s)
    return ALLREDUCES_PER_LAYER * layers * call


def link_bytes_per_s(bidirectional_gbps: float | None) -> float | None:
    """One direction of an interconnect in bytes/s from a datasheet's bidirectional GB/s
    figure: ``gbps / 2 x 1e9``; None when there is no figure."""
    if bidirectional_gbps is None:
        return None
    return bidirectional_gbps / 2.0 * 1e9
