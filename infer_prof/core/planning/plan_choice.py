"""The precision choice of the memory planner: each candidate precision's memory on the device,
and which one the plan takes.

Choice (``quantization="auto"``): walk bf16 > fp8 > int8 weight-only > bitsandbytes 4-bit and take
the first that runs with the engine and load format given (:class:`EngineCaps`, :func:`why_not`)
and whose KV cache holds ``concurrency`` sequences of ``input+output`` tokens; when none holds the
whole load, the first that holds at least one sequence. The fp8 KV cache (half the KV bytes) is
used when asked, or when no precision holds even one sequence with a 16-bit KV cache. A forced
precision is taken as it is, or refused with :class:`PlanError` when it cannot run. Used by
:func:`infer_prof.core.planning.planner.plan`.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from infer_prof.core.catalog.gpus import GIB, GpuSpec
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.planning.memory import (
    MIB,
    ceil_div,
    checkpoint_precision,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    pool_layout,
    weight_bytes,
)
from infer_prof.core.planning.plan_result import Candidate, MemoryBreakdown
from infer_prof.core.planning.precisions import (
    AUTO_LADDER,
    INT8_DENSE_NOTE,
    PREQUANTIZED_ONLY,
    EngineCaps,
    PlanError,
    why_not,
)


@dataclass(frozen=True)
class PlanSetup:
    """The planning situation: the request with its defaults resolved, and the per-GPU budget."""

    model: ModelSpec
    gpu: GpuSpec | None
    tp: int
    concurrency: int
    seq_len: int
    budget: int
    fixed: int
    activation: int
    kv_dtype_bytes: int
    caps: EngineCaps
    load_format: str | None
    max_num_batched_tokens: int
    max_num_seqs: int
    lora: int = 0  # LoRA buffers per GPU, bytes (lora_memory.lora_buffer_bytes)


def evaluate(s: PlanSetup, precision: str, kv_dtype: str = "auto") -> MemoryBreakdown:
    """Per-GPU memory of ``precision``: weights, LoRA buffers, overhead, and the KV cache left
    (``budget - weights - lora - overhead``), in blocks of
    :data:`BLOCK_SIZE` tokens of every layer (``kv_bytes_per_token`` sums the layers); a
    sequence takes ``ceil(its KV bytes / block bytes)`` blocks, its KV bytes counting only the
    window of sliding-window layers plus one scheduler step's tokens
    (``max_num_batched_tokens``, as vLLM reserves them: :func:`kv_bytes_per_sequence`), so for a
    model without them ``ceil(seq_len / 16)``. A hybrid model's blocks are vLLM's aligned ones
    (every layer's page of one block index) and a sequence also takes its linear layers' state
    pages (:mod:`infer_prof.core.catalog.state_pages`)."""
    memory_precision = precision
    if precision == "int8" and s.model.moe is None:
        memory_precision = "bf16"  # see INT8_DENSE_NOTE
    weights = weight_bytes(s.model, memory_precision, s.tp)
    total = weight_bytes(s.model, memory_precision, 1)
    overhead = s.fixed + s.activation
    kv_cache = s.budget - weights - s.lora - overhead
    kv_bytes = 1 if kv_dtype == "fp8" else s.kv_dtype_bytes
    per_token = kv_bytes_per_token(s.model, s.tp, kv_bytes)
    block, block_bytes, paging = pool_layout(s.model, s.tp, kv_bytes, on_cpu=s.gpu is None)
    blocks = max(0, kv_cache) // block_bytes
    state = paging.state_bytes_per_sequence() if paging is not None else 0
    # each group of layers (full, sliding, linear) pages its own blocks from the pool: a
    # sequence takes its bytes of it, which for a model of one kind of layer are whole blocks
    if paging is not None:
        seq_bytes = paging.sequence_bytes(s.seq_len)
    else:
        seq_bytes = kv_bytes_per_sequence(s.model, s.seq_len, s.tp, kv_bytes,
                                          s.max_num_batched_tokens)
    per_seq = ceil_div(seq_bytes, block_bytes)
    max_seqs = blocks * block_bytes // seq_bytes
    tokens = blocks * block if paging is None else blocks * block_bytes // seq_bytes * s.seq_len
    kv_needed = s.concurrency * seq_bytes
    return MemoryBreakdown(
        precision=precision,
        budget_bytes=s.budget,
        weights_bytes=weights,
        weights_bytes_total=total,
        fixed_overhead_bytes=s.fixed,
        activation_bytes=s.activation,
        overhead_bytes=overhead,
        kv_cache_bytes=kv_cache,
        kv_bytes_per_token=per_token,
        kv_blocks=blocks,
        kv_tokens=tokens,
        blocks_per_sequence=per_seq,
        max_sequences=max_seqs,
        kv_needed_bytes=kv_needed,
        needed_bytes=weights + s.lora + overhead + kv_needed,
        fits_load=max_seqs >= s.concurrency,
        runnable=max_seqs >= 1,
        kv_cache_dtype=kv_dtype,
        state_bytes_per_sequence=state,
        block_size=block,
        block_bytes=block_bytes,
        lora_bytes=s.lora,
    )


def gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def availability(s: PlanSetup, precision: str) -> str:
    """Empty when ``precision`` can run here, else the reason it cannot."""
    own = s.model.quant is not None and precision == checkpoint_precision(s.model)
    return why_not(precision, s.gpu, s.caps, s.load_format, checkpoint=own,
                   moe=s.model.moe is not None)


def memory_reason(m: MemoryBreakdown, seq_len: int, concurrency: int) -> str:
    if m.kv_cache_bytes < 0:
        return (f"weights {gib(m.weights_bytes)} + overhead {gib(m.overhead_bytes)} per GPU "
                f"exceed the {gib(m.budget_bytes)} budget")
    if not m.runnable:
        need = m.blocks_per_sequence * m.block_bytes
        return (f"leaves {gib(m.kv_cache_bytes)} per GPU for KV cache: not one sequence of "
                f"{seq_len} tokens ({need / MIB:.1f} MiB)")
    if not m.fits_load:
        return (f"KV cache {gib(m.kv_cache_bytes)} per GPU holds {m.max_sequences} sequences of "
                f"{seq_len} tokens; the load needs {concurrency} ({gib(m.kv_needed_bytes)})")
    return ""


def candidates(s: PlanSetup, ladder: Sequence[str], kv_dtype: str) -> list[Candidate]:
    cands = []
    for p in ladder:
        why = availability(s, p)
        if not why and kv_dtype == "fp8":
            why = s.caps.fp8_kv_cache
        mem = evaluate(s, p, kv_dtype)
        cands.append(Candidate(p, not why, why or memory_reason(mem, s.seq_len, s.concurrency),
                               mem, kv_dtype))
    return cands


def pick(cands: Sequence[Candidate]) -> Candidate | None:
    chosen = next((c for c in cands if c.available and c.memory.fits_load), None)
    if chosen is None:
        chosen = next((c for c in cands if c.available and c.memory.runnable), None)
    return chosen


@dataclass
class Choice:
    """The chosen candidate (None when nothing runs), every row shown, the rows passed over on
    the way to it, and what the plan must say about the choice."""

    candidates: list[Candidate]
    chosen: Candidate | None
    rejections: tuple[Candidate, ...]
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def ladder(model: ModelSpec) -> tuple[str, ...]:
    """The precisions ``auto`` walks: :data:`AUTO_LADDER` for a 16-bit checkpoint; a
    pre-quantized checkpoint's own precision alone (vLLM loads it as stored and cannot
    quantize it again)."""
    return AUTO_LADDER if model.quant is None else (checkpoint_precision(model),)


def choose_auto(s: PlanSetup, kv_dtype: str) -> Choice:
    """Walk the ladder; on a GPU with a 16-bit KV cache, add the fp8-KV rows, and take one of
    them when no precision holds even one sequence otherwise."""
    cands = candidates(s, ladder(s.model), kv_dtype)
    chosen = pick(cands)
    stop = cands.index(chosen) if chosen else len(cands)
    rejected = list(cands[:stop])
    notes: list[str] = []
    if kv_dtype == "auto" and s.gpu is not None:
        runs = [c.precision for c in cands if c.available]
        fp8_kv = candidates(s, runs, "fp8") if not s.caps.fp8_kv_cache else []
        if chosen is None:  # nothing runs with a 16-bit KV cache: the fp8 KV cache may
            chosen = pick(fp8_kv)
            stop = fp8_kv.index(chosen) if chosen else len(fp8_kv)
            rejected += fp8_kv[:stop]
            if chosen is not None:
                notes.append("fp8 KV cache chosen: no precision holds one sequence with a "
                             "16-bit KV cache")
        cands += fp8_kv
    if chosen is not None:
        i = cands.index(chosen)
        chosen = Candidate(chosen.precision, True, "", chosen.memory, chosen.kv_cache_dtype)
        cands[i] = chosen
    return Choice(candidates=cands, chosen=chosen, rejections=tuple(rejected), notes=notes)


def choose_forced(s: PlanSetup, wanted: str, kv_dtype: str, quantization: str) -> Choice:
    """The one precision ``--quantization`` forces, or :class:`PlanError` when it cannot run
    (a pre-quantized checkpoint runs at its own precision only)."""
    warnings: list[str] = []
    q = s.model.quant
    if q is not None and wanted != q.precision:
        raise PlanError(
            f"{s.model.name} is a pre-quantized checkpoint ({q.describe()}); vLLM loads it as "
            f"it is and cannot quantize it to {wanted}: drop --quantization or give "
            f"{q.precision}")
    why = availability(s, wanted)
    if wanted == "fp8" and why and not s.caps.missing("fp8"):
        cc = s.gpu.cuda_capability if s.gpu else None
        if cc is None or cc < (7, 5):
            raise PlanError(f"cannot force fp8: {why}")
        warnings.append(f"fp8 forced below compute capability 8.9: vLLM runs it as weight-only "
                        f"FP8 (W8A16, Marlin kernels) on {s.gpu.key if s.gpu else '?'}: "
                        "fp8 memory, no FP8 compute")
        why = ""
    if wanted == "int8":
        warnings.append(INT8_DENSE_NOTE + "; planned at 16-bit size")
        why = ""
    if why:
        raise PlanError(f"cannot force {wanted}: {why}")
    if wanted in PREQUANTIZED_ONLY and q is None:
        warnings.append(f"{wanted} needs a pre-quantized {wanted.upper()} checkpoint: --model "
                        "must point at one (vLLM does not quantize to it while loading)")
    mem = evaluate(s, wanted, kv_dtype)
    reason = memory_reason(mem, s.seq_len, s.concurrency)
    c = Candidate(wanted, True, reason, mem, kv_dtype)
    return Choice(candidates=[c], chosen=c if mem.runnable else None, rejections=(),
                   warnings=warnings,
                   notes=[f"precision {wanted} forced by --quantization {quantization}"])

