"""How far a measured throughput is from what the hardware could do at best (a roofline).

Pure: plain numbers (bytes, bytes/s, FLOP/s, tokens/s) and a ModelSpec in; no catalog access.
For a tensor-parallel run pass the aggregate bandwidth and peak FLOP/s of all its GPUs.

Decode (memory-bandwidth bound at the batch sizes served in practice). Each decode step produces
one token for each of the B running sequences and reads the weights once plus the KV cache of
the B sequences at their mean context length L:

    bytes_per_step      = weight_bytes + B x L x kv_bytes_per_token

Of the weights a step reads what its B tokens pass through: the input embedding is a lookup of
B rows (``2 x B x hidden`` bytes, not the ``2 x vocab x hidden`` table, which a model with tied
embeddings reads whole as its LM head), and a vision tower runs only when a prompt's images are
encoded, so ``weight_bytes`` less :func:`unread_weight_bytes`.
For a mixture-of-experts model a step reads only the routed experts its B tokens are sent to:
with E experts per layer and top-k routing, E x (1 - (1 - k/E)^B) distinct ones per layer in
expectation, so of the routed experts' bytes ``routed_expert_bytes`` a step reads the share
(1 - (1 - k/E)^B), and every other weight (attention, shared experts, dense layers, routers,
the LM head) in full. A sliding-window layer reads at most its window of each sequence's KV:

    bytes_per_step      = weight_bytes - unread_weight_bytes(B)
                          - routed_expert_bytes x (1 - k/E)^B
                          + B x L x kv_bytes_per_token x kv_read_share(L)

with kv_read_share(L) = (sum over layers of min(L, window)) / (layers x L), 1 without windows.
    step_time_min       = bytes_per_step / bandwidth
    bandwidth ceiling   = B / step_time_min                                 (output tokens/s)

B is the batch a decode step runs with: the server's running-requests gauge averaged over the
time it was above 0 (idle time runs no step), else the client's requests in flight over the time
any was. Two utilizations (fractions; ``*_pct`` x 100):

    window MBU (mbu)    = bytes_per_step x (output_tokens_per_s / B) / bandwidth
        the bytes decode moved per second averaged over the whole measured window: the window's
        output tokens / B decode steps, each moving bytes_per_step. Prefill, ramp-up, drain and
        any idle time are in the window, so this is what the GPU's bandwidth did for the run.
    decode-step MBU     = bytes_per_step / step_time / bandwidth
        the bandwidth a decode step reaches while it runs; step_time is the ITL p50 (the typical
        gap between two tokens of a stream: one decode step), else the TPOT p50.

llama-2-7b bf16 on an H100 SXM (3.35e12 B/s), 512 in / 128 out, so L = 512 + 128 / 2 = 576:
at 128 streams (B = 114.3 running, 4,258 output tok/s, ITL p50 19.4 ms) a step moves 47.7e9 B:
window MBU 53.1 %, decode-step MBU 73.4 %.

A decode step also cannot beat compute: compute ceiling = peak_flops / decode_flops_per_token,
decode_flops_per_token = 2 x active linear params + 2 x vocab x hidden (LM head)
+ 4 x layers x L x q_dim (active: the top-k experts of a MoE layer, not all; L at most the window
on sliding layers).
The decode ceiling is the lower of the two.

Prefill (compute bound). FLOPs per prompt token, a prompt of length P attending causally to a
mean of C = (P + 1) / 2 positions:

    prefill_flops_per_token = 2 x linear_params + 4 x layers x C x q_dim
    prefill ceiling         = peak_flops / prefill_flops_per_token           (prompt tokens/s)
    MFU                     = prefill_tokens_per_s x prefill_flops_per_token / peak_flops

2 x linear_params is the matmuls of the decoder layers (a multiply-add is 2 FLOPs); the attention
term is QK^T and AV: 2 matmuls x 2 FLOPs x C positions x q_dim (= hidden for most models) per
layer. The input embedding is a lookup (no FLOPs), and vLLM computes logits only for a prompt's
last token, so the LM head is left out of the per-prompt-token count.

A measured throughput above its ceiling cannot be real: it is flagged as a measurement error.
"""

from __future__ import annotations

from dataclasses import dataclass

from infer_prof.core.catalog.kv_layout import kv_groups, state_bytes_moved
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.catalog.roofline_record import Roofline


def _require_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")


def decode_bytes_per_step(
    weight_bytes: float, kv_bytes_per_token: float, batch_size: float, mean_context_len: float
) -> float:
    """Bytes one decode step reads: weight_bytes + batch x mean_context_len x kv_bytes_per_token."""
    if weight_bytes < 0 or kv_bytes_per_token < 0 or batch_size < 0 or mean_context_len < 0:
        raise ValueError("weight bytes, KV bytes/token, batch size and context must be >= 0")
    return weight_bytes + batch_size * mean_context_len * kv_bytes_per_token


def kv_read_share(spec: ModelSpec, context_len: float) -> float:
    """Share of ``layers x context_len`` KV positions a decoded token reads: 1 unless some
    layers attend to a window shorter than the context (then those read the window only)."""
    groups = kv_groups(spec, 1, 1)
    full = sum(g.layers * g.bytes_per_token for g in groups) * context_len
    if full <= 0:
        return 1.0
    return sum(g.layers * g.bytes_per_token * g.tokens_read(context_len) for g in groups) / full


def unread_weight_bytes(spec: ModelSpec, batch_size: float) -> float:
    """Bytes of the 16-bit weights a decode step of ``batch_size`` sequences holds but does not
    read: of an untied input embedding all but its ``batch_size`` rows,
    ``2 x hidden x (vocab - B)`` (tied, the table is the LM head and is read whole), and a
    vision tower's ``2 x params`` (it runs at prefill, on a prompt's images)."""
    rows = 0.0
    if not spec.tie_word_embeddings:
        rows = 2.0 * spec.hidden_size * max(0.0, spec.vocab_size - batch_size)
    vision = 2.0 * spec.vision.params() if spec.vision is not None else 0.0
    return rows + vision


def model_decode_bytes_per_step(
    spec: ModelSpec,
    weight_bytes: float,
    kv_bytes_per_token: float,
    batch_size: float,
    mean_context_len: float,
    routed_expert_bytes: float = 0.0,
) -> float:
    """Bytes one decode step of ``batch_size`` sequences moves (module docstring):
    ``weight_bytes - unread_weight_bytes(B) - routed_expert_bytes x (1 - k/E)^B +
    B x L x kv_bytes_per_token x kv_read_share(L) + B x state``, ``state`` the bytes of a
    hybrid model's linear-layer state read and written back once per sequence
    (:func:`~infer_prof.core.catalog.kv_layout.state_bytes_moved`, 0 otherwise); the plain
    :func:`decode_bytes_per_step` for a dense model without sliding windows."""
    weights = max(0.0, weight_bytes - unread_weight_bytes(spec, batch_size))
    if spec.moe is not None and routed_expert_bytes > 0:
        untouched = 1.0 - spec.moe.expected_distinct(batch_size) / spec.moe.num_experts
        weights -= routed_expert_bytes * untouched
    kv = kv_bytes_per_token * kv_read_share(spec, mean_context_len)
    state = batch_size * state_bytes_moved(spec)  # hybrid: once per sequence, any context
    return decode_bytes_per_step(weights, kv, batch_size, mean_context_len) + state


def decode_step_time_min_s(bytes_per_step: float, bandwidth_bytes_per_s: float) -> float:
    """Shortest possible decode step (s): bytes_per_step / bandwidth (bytes/s)."""
    _require_positive("bandwidth", bandwidth_bytes_per_s)
    return bytes_per_step / bandwidth_bytes_per_s


def decode_bandwidth_ceiling(
    bytes_per_step: float, bandwidth_bytes_per_s: float, batch_size: float
) -> float:
    """Memory-bandwidth ceiling of decode (output tokens/s): batch_size / step_time_min."""
    _require_positive("batch size", batch_size)
    _require_positive("bytes per step", bytes_per_step)
    return batch_size / decode_step_time_min_s(bytes_per_step, bandwidth_bytes_per_s)


def decode_flops_per_token(spec: ModelSpec, context_len: float) -> float:
    """FLOPs to decode one token at a context of ``context_len`` positions.

    2 x active linear params + 2 x vocab x hidden (LM head) + 4 x layers x context_len x q_dim
    (a sliding-window layer attends to at most its window; only attention layers attend) + a
    hybrid model's linear-layer recurrences, constant in the context
    (:meth:`~infer_prof.core.catalog.models.ModelSpec.state_flops_per_token`).
    """
    lm_head = 2.0 * spec.vocab_size * spec.hidden_size
    return (2.0 * spec.active_linear_params() + lm_head
            + attention_flops_per_token(spec, context_len) + spec.state_flops_per_token())


def prefill_flops_per_token(spec: ModelSpec, attended_context: float) -> float:
    """FLOPs per prompt token: 2 x active linear params + 4 x layers x attended_context x q_dim
    (attention layers only) + the linear layers' recurrences, the same for every token (so a
    hybrid layer's prefill FLOPs are linear in the prompt's length).

    For a causal prompt of length P, the mean attended context is (P + 1) / 2
    (see :func:`causal_mean_context`).
    """
    return (2.0 * spec.active_linear_params() + attention_flops_per_token(spec, attended_context)
            + spec.state_flops_per_token())


def causal_mean_context(prompt_len: float) -> float:
    """Mean number of positions a prompt token attends to under a causal mask: (P + 1) / 2."""
    if prompt_len < 0:
        raise ValueError(f"prompt length must be >= 0, got {prompt_len}")
    return (prompt_len + 1.0) / 2.0 if prompt_len > 0 else 0.0


def attention_flops_per_token(spec: ModelSpec, context: float) -> float:
    """The attention part of one token's FLOPs at a context of ``context`` positions:
    ``4 x q_dim x`` the positions its attention layers read (each layer at most its sliding
    window; a hybrid's linear layers none). Part of :func:`decode_flops_per_token` and
    :func:`prefill_flops_per_token`."""
    if context < 0:
        raise ValueError(f"context length must be >= 0, got {context}")
    positions = sum(g.layers * g.tokens_read(context) for g in kv_groups(spec, 1, 1))
    return 4.0 * positions * spec.q_dim


def compute_ceiling(flops_per_token: float, peak_flops: float) -> float:
    """Compute ceiling (tokens/s): peak FLOP/s / FLOPs per token."""
    _require_positive("peak FLOP/s", peak_flops)
    _require_positive("FLOPs per token", flops_per_token)
    return peak_flops / flops_per_token


def mbu(
    output_tokens_per_s: float,
    batch_size: float,
    bytes_per_step: float,
    bandwidth_bytes_per_s: float,
) -> float:
    """Memory-bandwidth utilization (fraction): bytes_per_step x (output_tokens_per_s / B) / bw."""
    _require_positive("batch size", batch_size)
    _require_positive("bandwidth", bandwidth_bytes_per_s)
    steps_per_s = output_tokens_per_s / batch_size
    return bytes_per_step * steps_per_s / bandwidth_bytes_per_s


def decode_step_mbu(
    bytes_per_step: float, step_time_s: float, bandwidth_bytes_per_s: float
) -> float:
    """Decode-step MBU (fraction): bytes_per_step / step_time_s / bandwidth.

    The bandwidth one decode step used while it ran (``step_time_s``: the ITL p50 or TPOT p50),
    beside :func:`mbu`, the average over the whole window.
    """
    _require_positive("decode step time", step_time_s)
    _require_positive("bandwidth", bandwidth_bytes_per_s)
    return bytes_per_step / step_time_s / bandwidth_bytes_per_s


# What the MBU fields of roofline_report mean; copied into every result (its "definitions").
MBU_DEFINITIONS: dict[str, str] = {
    "decode_bytes_per_step": (
        "bytes one decode step reads: weight_bytes + batch_size x mean_context_len x "
        "kv_bytes_per_token, less the input embedding's rows no token of the step gathers "
        "(an untied embedding: 2 x hidden x (vocab - batch_size)) and a vision tower's weights; "
        "for a mixture of experts only the routed experts its tokens reach "
        "(E x (1 - (1 - k/E)^batch_size) of E per layer), for sliding-window layers only "
        "the window of each sequence's KV, and for a hybrid model's linear (Mamba, Gated "
        "DeltaNet) layers each sequence's state read and written back (2 x its bytes)"
    ),
    "batch_size": "sequences in a decode step: see batch_source",
    "mbu": (
        "window MBU: decode_bytes_per_step x (output_tokens_per_s / batch_size) / "
        "bandwidth_bytes_per_s, the bandwidth decode used averaged over the whole measured "
        "window (prefill, ramp and idle time included)"
    ),
    "decode_step_mbu": (
        "decode-step MBU: decode_bytes_per_step / decode_step_time_s / bandwidth_bytes_per_s, "
        "the bandwidth a decode step used while it ran (step time: decode_step_time_source)"
    ),
}


def mfu(tokens_per_s: float, flops_per_token: float, peak_flops: float) -> float:
    """FLOP utilization (fraction): tokens_per_s x flops_per_token / peak_flops."""
    _require_positive("peak FLOP/s", peak_flops)
    return tokens_per_s * flops_per_token / peak_flops


def _pct(x: float | None) -> float | None:
    return None if x is None else 100.0 * x


def _usable(x: float | None) -> bool:
    return x is not None and x > 0


@dataclass(frozen=True)
class RooflineInputs:
    """What one run's roofline is computed from: the model; weight bytes read per step (all GPUs);
    KV-cache bytes per token; memory bandwidth (bytes/s) and peak dense FLOP/s (of all GPUs),
    None when unknown; the mean batch size the server ran (running sequences) and their mean
    context length (tokens); the measured output tokens/s; optionally the measured prefill
    (prompt) tokens/s and the mean prompt length (tokens; without it the prefill attention term
    is left out, which raises the prefill ceiling: never a false flag); and the decode step time
    (seconds) with the name of the figure it came from; ``routed_expert_bytes`` the part of
    ``weight_bytes`` that is routed experts (0 for a dense model)."""

    spec: ModelSpec
    weight_bytes: float | None
    kv_bytes_per_token: float | None
    bandwidth_bytes_per_s: float | None
    peak_flops: float | None
    batch_size: float | None
    mean_context_len: float | None
    output_tokens_per_s: float | None
    prefill_tokens_per_s: float | None = None
    mean_prompt_len: float | None = None
    decode_step_time_s: float | None = None
    decode_step_time_source: str | None = None
    routed_expert_bytes: float = 0.0


def roofline_report(inputs: RooflineInputs) -> Roofline:
    """Ceilings, utilizations and the above-ceiling flag of one run, as the result's
    :class:`~infer_prof.core.catalog.roofline_record.Roofline` (``available``; None where the
    inputs do not allow the number). The inputs are :class:`RooflineInputs`, echoed in the report.

    ``above_ceiling`` is True when either measured throughput exceeds its ceiling (a measurement
    error), False when at least one was checked and neither does, None when none could be checked.
    Utilizations are fractions (``mbu``, ``mfu``) and percentages (``mbu_pct``, ``mfu_pct``).
    ``mbu`` is the window MBU; with ``decode_step_time_s`` (seconds, and the name of the figure
    it came from) the report also has the decode-step MBU ``decode_step_mbu`` (see
    ``MBU_DEFINITIONS``, copied into ``definitions``).
    """
    out = _inputs_report(inputs)
    _decode(inputs, out)
    _prefill(inputs, out)
    flags = [f for f in (out.decode_above_ceiling, out.prefill_above_ceiling) if f is not None]
    out.above_ceiling = any(flags) if flags else None
    out.definitions = dict(MBU_DEFINITIONS)
    return out


def _float(x: float | None) -> float | None:
    """An input echoed as the report's float fields hold it (a whole number becomes a float,
    as the section read back from JSON holds it); None stays None."""
    return None if x is None else float(x)


def _inputs_report(i: RooflineInputs) -> Roofline:
    """The report with the inputs echoed, every figure None until computed."""
    return Roofline(
        available=True,
        batch_size=_float(i.batch_size),
        mean_context_len=_float(i.mean_context_len),
        weight_bytes=_float(i.weight_bytes),
        kv_bytes_per_token=_float(i.kv_bytes_per_token),
        bandwidth_bytes_per_s=_float(i.bandwidth_bytes_per_s),
        peak_flops=_float(i.peak_flops),
        output_tokens_per_s=_float(i.output_tokens_per_s),
        prefill_tokens_per_s=_float(i.prefill_tokens_per_s),
        mean_prompt_len=_float(i.mean_prompt_len),
        decode_step_time_s=_float(i.decode_step_time_s),
        decode_step_time_source=i.decode_step_time_source,
    )


def _decode(i: RooflineInputs, out: Roofline) -> None:
    """Decode: bandwidth ceiling, compute ceiling, the lower of them, window and decode-step
    MBU, into ``out``; nothing without the weight and KV bytes, a batch and a context."""
    batch_size, bandwidth = i.batch_size, i.bandwidth_bytes_per_s
    if (
        i.weight_bytes is None
        or not _usable(batch_size)
        or i.mean_context_len is None
        or i.kv_bytes_per_token is None
    ):
        return
    assert batch_size is not None
    step_bytes = model_decode_bytes_per_step(
        i.spec, i.weight_bytes, i.kv_bytes_per_token, batch_size, i.mean_context_len,
        i.routed_expert_bytes,
    )
    out.decode_bytes_per_step = _float(step_bytes)
    ceilings: dict[str, float] = {}
    if _usable(bandwidth) and step_bytes > 0:
        assert bandwidth is not None
        out.decode_step_time_min_s = decode_step_time_min_s(step_bytes, bandwidth)
        ceilings["memory"] = decode_bandwidth_ceiling(step_bytes, bandwidth, batch_size)
        out.decode_bandwidth_ceiling_tokens_per_s = ceilings["memory"]
        if i.output_tokens_per_s is not None:
            out.achieved_bytes_per_s = step_bytes * i.output_tokens_per_s / batch_size
            out.mbu = mbu(i.output_tokens_per_s, batch_size, step_bytes, bandwidth)
            out.mbu_pct = _pct(out.mbu)
        step_s = i.decode_step_time_s
        if _usable(step_s):
            assert step_s is not None
            out.decode_step_bytes_per_s = step_bytes / step_s
            out.decode_step_mbu = decode_step_mbu(step_bytes, step_s, bandwidth)
            out.decode_step_mbu_pct = _pct(out.decode_step_mbu)
    dec_flops = decode_flops_per_token(i.spec, i.mean_context_len)
    out.decode_flops_per_token = dec_flops
    if _usable(i.peak_flops):
        assert i.peak_flops is not None
        ceilings["compute"] = compute_ceiling(dec_flops, i.peak_flops)
        out.decode_compute_ceiling_tokens_per_s = ceilings["compute"]
    if ceilings:
        bound = min(ceilings, key=lambda k: ceilings[k])
        out.decode_bound = bound
        out.decode_ceiling_tokens_per_s = ceilings[bound]
        if i.output_tokens_per_s is not None:
            out.decode_above_ceiling = i.output_tokens_per_s > ceilings[bound]


def _prefill(i: RooflineInputs, out: Roofline) -> None:
    """Prefill: compute ceiling and MFU, into ``out``."""
    attended = causal_mean_context(i.mean_prompt_len) if i.mean_prompt_len is not None else 0.0
    out.prefill_attended_context = attended
    pre_flops = prefill_flops_per_token(i.spec, attended)
    out.prefill_flops_per_token = pre_flops
    if _usable(i.peak_flops):
        assert i.peak_flops is not None
        ceiling = compute_ceiling(pre_flops, i.peak_flops)
        out.prefill_ceiling_tokens_per_s = ceiling
        if i.prefill_tokens_per_s is not None:
            out.achieved_flops = i.prefill_tokens_per_s * pre_flops
            out.mfu = mfu(i.prefill_tokens_per_s, pre_flops, i.peak_flops)
            out.mfu_pct = _pct(out.mfu)
            out.prefill_above_ceiling = i.prefill_tokens_per_s > ceiling
