"""Memory planner: which precision and how many GPUs let a model serve a load, and why.

The memory model (weights, KV cache, overhead per GPU) is :mod:`infer_prof.core.memory`; the
precisions and engine capabilities :mod:`infer_prof.core.precisions`; the result types
:mod:`infer_prof.core.plan_result`.

Choice (``quantization="auto"``): walk bf16 > fp8 > int8 weight-only > bitsandbytes 4-bit and take
the first that runs with the engine and load format given (:class:`EngineCaps`, :func:`why_not`)
and whose KV cache holds ``concurrency`` sequences of ``input+output`` tokens; when none holds the
whole load, the first that holds at least one sequence, with a warning that requests will queue.
The fp8 KV cache (``kv_cache_dtype="fp8"``, half the KV bytes) is used when asked, or when no
precision holds even one sequence with a 16-bit KV cache; its rows are shown beside the others.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infer_prof.core.gpus import GIB, GpuSpec
from infer_prof.core.memory import (
    BLOCK_SIZE,
    MIB,
    NON_TORCH_GPU,
    OVERHEAD_MODEL_VLLM,
    TP_COMM_OVERHEAD,
    activation_bytes,
    ceil_div,
    check_tensor_parallel,
    default_scheduler_limits,
    gpu_activation_bytes,
    kv_bytes_per_token,
    weight_bytes,
)
from infer_prof.core.models import ModelSpec
from infer_prof.core.plan_result import Candidate, EngineSettings, MemoryBreakdown, Plan
from infer_prof.core.precisions import (
    AUTO_LADDER,
    INT8_DENSE_NOTE,
    EngineCaps,
    PlanError,
    default_caps,
    normalize_kv_cache_dtype,
    normalize_precision,
    why_not,
)


@dataclass(frozen=True)
class _Setup:
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


def _evaluate(s: _Setup, precision: str, kv_dtype: str = "auto") -> MemoryBreakdown:
    memory_precision = "bf16" if precision == "int8" else precision  # see INT8_DENSE_NOTE
    weights = weight_bytes(s.model, memory_precision, s.tp)
    total = weight_bytes(s.model, memory_precision, 1)
    overhead = s.fixed + s.activation
    kv_cache = s.budget - weights - overhead
    kv_bytes = 1 if kv_dtype == "fp8" else s.kv_dtype_bytes
    per_token = kv_bytes_per_token(s.model, s.tp, kv_bytes)
    block_bytes = BLOCK_SIZE * per_token
    blocks = max(0, kv_cache) // block_bytes
    per_seq = ceil_div(s.seq_len, BLOCK_SIZE)
    max_seqs = blocks // per_seq
    kv_needed = s.concurrency * per_seq * block_bytes
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
        kv_tokens=blocks * BLOCK_SIZE,
        blocks_per_sequence=per_seq,
        max_sequences=max_seqs,
        kv_needed_bytes=kv_needed,
        needed_bytes=weights + overhead + kv_needed,
        fits_load=max_seqs >= s.concurrency,
        runnable=max_seqs >= 1,
        kv_cache_dtype=kv_dtype,
    )


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def _availability(s: _Setup, precision: str) -> str:
    """Empty when ``precision`` can run here, else the reason it cannot."""
    return why_not(precision, s.gpu, s.caps, s.load_format)


def _memory_reason(m: MemoryBreakdown, seq_len: int, concurrency: int) -> str:
    if m.kv_cache_bytes < 0:
        return (f"weights {_gib(m.weights_bytes)} + overhead {_gib(m.overhead_bytes)} per GPU "
                f"exceed the {_gib(m.budget_bytes)} budget")
    if not m.runnable:
        need = m.blocks_per_sequence * BLOCK_SIZE * m.kv_bytes_per_token
        return (f"leaves {_gib(m.kv_cache_bytes)} per GPU for KV cache: not one sequence of "
                f"{seq_len} tokens ({need / MIB:.1f} MiB)")
    if not m.fits_load:
        return (f"KV cache {_gib(m.kv_cache_bytes)} per GPU holds {m.max_sequences} sequences of "
                f"{seq_len} tokens; the load needs {concurrency} ({_gib(m.kv_needed_bytes)})")
    return ""


def _candidates(s: _Setup, ladder: Sequence[str], kv_dtype: str) -> list[Candidate]:
    cands = []
    for p in ladder:
        why = _availability(s, p)
        if not why and kv_dtype == "fp8":
            why = s.caps.fp8_kv_cache
        mem = _evaluate(s, p, kv_dtype)
        cands.append(Candidate(p, not why, why or _memory_reason(mem, s.seq_len, s.concurrency),
                               mem, kv_dtype))
    return cands


def _pick(cands: Sequence[Candidate]) -> Candidate | None:
    chosen = next((c for c in cands if c.available and c.memory.fits_load), None)
    if chosen is None:
        chosen = next((c for c in cands if c.available and c.memory.runnable), None)
    return chosen


def _choose(s: _Setup, ladder: Sequence[str]) -> tuple[list[Candidate], Candidate | None]:
    cands = _candidates(s, ladder, "auto")
    return cands, _pick(cands)


def _setup(model: ModelSpec, gpu: GpuSpec | None, tp: int, concurrency: int, seq_len: int,
           budget: int, kv_dtype_bytes: int, max_num_batched_tokens: int | None,
           max_num_seqs: int | None, memory_bytes: int, caps: EngineCaps,
           load_format: str | None) -> tuple[_Setup, int, int]:
    mnbt, mns = default_scheduler_limits(gpu, memory_bytes, tp)
    mnbt = max_num_batched_tokens or mnbt
    mns = max_num_seqs or mns
    if gpu is None:
        fixed, act = 0, activation_bytes(model, tp, mnbt, mns)
    else:
        fixed = NON_TORCH_GPU + (TP_COMM_OVERHEAD if tp > 1 else 0)
        act = gpu_activation_bytes(model, tp, mnbt, mns)
    setup = _Setup(model, gpu, tp, concurrency, seq_len, budget, fixed, act, kv_dtype_bytes,
                   caps, load_format)
    return setup, mnbt, mns


def plan(
    model: ModelSpec,
    gpu: GpuSpec | None = None,
    *,
    gpus: int = 1,
    concurrency: int = 1,
    input_len: int = 512,
    output_len: int = 256,
    gpu_memory_utilization: float = 0.9,
    quantization: str = "auto",
    memory_budget_bytes: int | None = None,
    memory_per_gpu_bytes: int | None = None,
    memory_source: str | None = None,
    kv_cache_dtype_bytes: int = 2,
    kv_cache_dtype: str = "auto",
    load_format: str | None = None,
    caps: EngineCaps | None = None,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    vllm_version: tuple[int, ...] | None = None,
    catalog: Sequence[GpuSpec] = (),
    _with_suggestions: bool = True,
) -> Plan:
    """Plan how ``model`` serves ``concurrency`` sequences of ``input_len + output_len`` tokens.

    On ``gpus`` x ``gpu`` (tensor parallel over all of them, as given), with a per-GPU budget of
    ``gpu_memory_utilization x memory``: ``memory_per_gpu_bytes`` is the total CUDA reports for
    the detected device (``memory_source`` says how it was read), else the catalog's
    ``cuda_visible_gib``. Or on a plain ``memory_budget_bytes`` (a CPU run when ``gpu`` is None;
    it replaces the utilization budget when a GPU is given too). ``quantization`` is ``"auto"`` or
    a precision to force; ``kv_cache_dtype`` ``"auto"`` or ``"fp8"``; ``load_format`` vLLM's
    (``"dummy"`` rules out in-flight bitsandbytes); ``caps`` what the serving vLLM build runs
    (default: unchecked GPU vLLM for a GPU, vLLM-CPU without). ``catalog`` lets a plan that does
    not fit name the cheapest-memory GPU that would hold the load. Raises :class:`PlanError` for
    impossible requests (bad tensor-parallel size, a forced precision that cannot run, no device).
    """
    if gpu is None and memory_budget_bytes is None:
        raise PlanError("no GPU to plan for: pass --gpu NAME, or --memory-budget for a CPU run")
    if concurrency < 1 or input_len < 1 or output_len < 1:
        raise PlanError("--concurrency, --input-len and --output-len must be at least 1")
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise PlanError(f"--gpu-memory-utilization must be in (0, 1], got {gpu_memory_utilization}")
    if kv_cache_dtype_bytes not in (1, 2, 4):
        raise PlanError(f"KV-cache dtype bytes must be 1, 2 or 4, got {kv_cache_dtype_bytes}")
    kv_dtype = normalize_kv_cache_dtype(kv_cache_dtype)
    check_tensor_parallel(model, gpus)
    wanted = normalize_precision(quantization)
    seq_len = input_len + output_len
    caps = caps or default_caps(gpu)
    if vllm_version is None:
        vllm_version = caps.vllm_version
    if kv_dtype == "fp8" and caps.fp8_kv_cache:
        raise PlanError(f"cannot use --kv-cache-dtype fp8: {caps.fp8_kv_cache}; drop the option")

    memory: int | None = None
    source = "--memory-budget"
    if gpu is not None:
        if memory_per_gpu_bytes:
            memory, source = memory_per_gpu_bytes, memory_source or "given"
        else:
            memory = gpu.cuda_memory_bytes
            source = (f"catalog: {gpu.key} cuda_visible_gib {gpu.cuda_visible_gib:g}"
                      if gpu.cuda_visible_gib is not None
                      else f"catalog: {gpu.key} memory_gib {gpu.memory_gib:g} (nominal)")
    if memory_budget_bytes is not None:
        if memory_budget_bytes <= 0:
            raise PlanError("--memory-budget must be positive")
        budget, util, source = memory_budget_bytes, None, "--memory-budget"
    else:
        assert memory is not None
        budget, util = round(gpu_memory_utilization * memory), gpu_memory_utilization
    s, mnbt, mns = _setup(model, gpu, gpus, concurrency, seq_len, budget, kv_cache_dtype_bytes,
                          max_num_batched_tokens, max_num_seqs, memory or budget, caps,
                          load_format)

    warnings: list[str] = []
    notes: list[str] = []
    if wanted == "auto":
        cands = _candidates(s, AUTO_LADDER, kv_dtype)
        chosen = _pick(cands)
        stop = cands.index(chosen) if chosen else len(cands)
        rejected = list(cands[:stop])
        if kv_dtype == "auto" and gpu is not None:
            runs = [c.precision for c in cands if c.available]
            fp8_kv = _candidates(s, runs, "fp8") if not s.caps.fp8_kv_cache else []
            if chosen is None:  # nothing runs with a 16-bit KV cache: the fp8 KV cache may
                chosen = _pick(fp8_kv)
                stop = fp8_kv.index(chosen) if chosen else len(fp8_kv)
                rejected += fp8_kv[:stop]
                if chosen is not None:
                    notes.append("fp8 KV cache chosen: no precision holds one sequence with a "
                                 "16-bit KV cache")
            cands += fp8_kv
        rejections = tuple(rejected)
        if chosen is not None:
            i = cands.index(chosen)
            chosen = Candidate(chosen.precision, True, "", chosen.memory, chosen.kv_cache_dtype)
            cands[i] = chosen
    else:
        why = _availability(s, wanted)
        if wanted == "fp8" and why and not caps.missing("fp8"):
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
        if wanted in ("awq", "gptq"):
            warnings.append(f"{wanted} needs a pre-quantized {wanted.upper()} checkpoint: --model "
                            "must point at one (vLLM does not quantize to it while loading)")
        mem = _evaluate(s, wanted, kv_dtype)
        reason = _memory_reason(mem, seq_len, concurrency)
        c = Candidate(wanted, True, reason, mem, kv_dtype)
        cands = [c]
        chosen = c if mem.runnable else None
        rejections = ()
        notes.append(f"precision {wanted} forced by --quantization {quantization}")
    if kv_dtype == "fp8":
        notes.append("fp8 KV cache asked for (--kv-cache-dtype fp8): KV bytes halved")

    m = chosen.memory if chosen else None
    fits_load = bool(m and m.fits_load)
    running: int | None = None
    queued: int | None = None
    if chosen is not None and m is not None:
        running = min(concurrency, m.max_sequences, mns)
        queued = concurrency - running
    if chosen is not None and m is not None and not m.fits_load:
        warnings.append(
            f"only {m.max_sequences} of the {concurrency} concurrent requests fit in the KV cache "
            f"at once ({seq_len} tokens each): requests will queue, {running} run at once and "
            f"{queued} wait in vLLM's queue; their TTFT includes that wait")
        if wanted == "auto":
            for c in cands[cands.index(chosen) + 1:]:
                if c.available and c.memory.max_sequences > m.max_sequences:
                    notes.append(f"{c.label} would hold {c.memory.max_sequences} sequences at "
                                 f"once; {chosen.label} is kept for quality")
    elif queued:
        warnings.append(f"max_num_seqs={mns} caps the batch: requests will queue, {running} run "
                        f"at once and {queued} wait")
    if seq_len > model.max_position_embeddings:
        warnings.append(f"input+output ({seq_len} tokens) exceeds {model.name}'s context of "
                        f"{model.max_position_embeddings}; vLLM will refuse such requests")
    if gpus > 1:
        notes.append(f"tensor parallelism over the {gpus} GPUs given "
                     f"(tensor_parallel_size={gpus}); the planner uses the count it is given "
                     "and does not reduce it")
    if memory_budget_bytes is not None:
        notes.append("--memory-budget replaces gpu_memory_utilization x memory; the KV cache size "
                     "is passed to vLLM as kv_cache_memory_bytes")
    if gpu is not None and caps.build == "cuda" and vllm_version is not None \
            and vllm_version[:2] != (0, 26):
        notes.append(f"the overhead model follows vLLM {OVERHEAD_MODEL_VLLM} on GPU; vLLM "
                     f"{'.'.join(map(str, vllm_version))} is installed: later releases may charge "
                     "CUDA-graph memory (0.7-1.9 GiB) inside the budget "
                     "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS), leaving less KV cache")

    dtype = "auto"
    if gpu is not None and not gpu.supports_bf16:
        dtype = "float16"
        notes.append(f"{gpu.key} has no BF16: dtype float16")
    settings: EngineSettings | None = None
    chosen_kv = chosen.kv_cache_dtype if chosen else kv_dtype
    if chosen is not None and m is not None:
        budgeted = memory_budget_bytes is not None
        short = m.kv_tokens < model.max_position_embeddings
        settings = EngineSettings(
            dtype=dtype,
            tensor_parallel=gpus,
            precision=chosen.precision,
            kv_cache_dtype="fp8" if chosen_kv == "fp8" else None,
            kv_cache_bytes=m.kv_blocks * BLOCK_SIZE * m.kv_bytes_per_token if budgeted else None,
            memory_utilization=None if budgeted else gpu_memory_utilization,
            max_model_len=seq_len if short else None,
        )
        if short:
            notes.append(f"max_model_len={seq_len}: the KV cache holds {m.kv_tokens} tokens, fewer "
                         f"than the model's context of {model.max_position_embeddings}, and vLLM "
                         "refuses to start unless one max-length sequence fits")

    suggestions: list[str] = []
    if _with_suggestions and not fits_load:
        suggestions = _suggest(model, gpu, s, wanted, gpus=gpus, concurrency=concurrency,
                               input_len=input_len, output_len=output_len,
                               util=gpu_memory_utilization, budget=memory_budget_bytes,
                               memory_per_gpu=memory_per_gpu_bytes, memory_source=memory_source,
                               kv_dtype_bytes=kv_cache_dtype_bytes, kv_dtype=kv_dtype,
                               load_format=load_format, caps=caps, vllm_version=vllm_version,
                               catalog=catalog)

    return Plan(
        model=model.name,
        device=gpu.key if gpu else "memory-budget",
        gpu=gpu.key if gpu else None,
        gpu_count=gpus,
        concurrency=concurrency,
        input_len=input_len,
        output_len=output_len,
        seq_len=seq_len,
        gpu_memory_utilization=util,
        memory_per_gpu_bytes=memory,
        budget_per_gpu_bytes=budget,
        quantization_requested=quantization,
        fits=chosen is not None,
        fits_load=fits_load,
        precision=chosen.precision if chosen else None,
        dtype=dtype,
        settings=settings,
        memory=m,
        candidates=tuple(cands),
        rejections=rejections,
        warnings=tuple(warnings),
        suggestions=tuple(suggestions),
        notes=tuple(notes),
        assumptions={
            "block_size": BLOCK_SIZE,
            "kv_cache_dtype_bytes": 1 if chosen_kv == "fp8" else kv_cache_dtype_bytes,
            "max_num_batched_tokens": mnbt,
            "max_num_seqs": mns,
            "fixed_overhead_bytes": s.fixed,
            "vllm_version": ".".join(map(str, vllm_version)) if vllm_version else "0.32",
            "overhead_model": (
                f"vLLM {OVERHEAD_MODEL_VLLM} on GPU (H100-calibrated): weights + peak activation "
                "+ non-torch 0.22 GiB inside the budget, CUDA graphs outside"
                if gpu is not None else
                "vLLM-CPU 0.32 with an explicit KV size: weights + activation estimate "
                "(uncalibrated), no fixed part"),
            "overhead_model_vllm": OVERHEAD_MODEL_VLLM if gpu is not None else None,
        },
        memory_source=source,
        kv_cache_dtype=chosen_kv,
        load_format=load_format,
        engine=caps.to_dict(),
        running_at_once=running,
        queued=queued,
    )


def _suggest(model: ModelSpec, gpu: GpuSpec | None, s: _Setup, wanted: str, *, gpus: int,
             concurrency: int, input_len: int, output_len: int, util: float,
             budget: int | None, memory_per_gpu: int | None, memory_source: str | None,
             kv_dtype_bytes: int, kv_dtype: str, load_format: str | None, caps: EngineCaps,
             vllm_version: tuple[int, ...] | None, catalog: Sequence[GpuSpec]) -> list[str]:
    """What would hold the whole load: memory needed, more of these GPUs, another catalog GPU."""
    out: list[str] = []
    ladder = AUTO_LADDER if wanted == "auto" else (wanted,)
    for p in ladder:
        if not _availability(s, p) or wanted != "auto":
            m = _evaluate(s, p, kv_dtype)
            out.append(f"{p}: the whole load needs {_gib(m.needed_bytes)} per GPU (weights "
                       f"{_gib(m.weights_bytes)} + overhead {_gib(m.overhead_bytes)} + KV "
                       f"{_gib(m.kv_needed_bytes)}); the budget is {_gib(m.budget_bytes)}")
            break
    common: dict[str, Any] = dict(concurrency=concurrency, input_len=input_len,
                                  output_len=output_len, gpu_memory_utilization=util,
                                  quantization=wanted, kv_cache_dtype_bytes=kv_dtype_bytes,
                                  kv_cache_dtype=kv_dtype, load_format=load_format, caps=caps,
                                  vllm_version=vllm_version, _with_suggestions=False)
    if gpu is not None and budget is None:
        for n in range(gpus + 1, 65):
            try:
                more = plan(model, gpu, gpus=n, memory_per_gpu_bytes=memory_per_gpu,
                            memory_source=memory_source, **common)
            except PlanError:
                continue
            if more.fits_load and more.memory is not None:
                out.append(f"{n} x {gpu.key} (tensor parallel {n}) hold the whole load at "
                           f"{more.precision}: {more.memory.max_sequences} sequences")
                break
        else:
            out.append(f"no count of {gpu.key} up to 64 holds the whole load")
    if budget is None:
        for other in sorted(catalog, key=lambda g: (g.memory_gib, g.key)):
            if gpu is not None and other.key == gpu.key:
                continue
            try:
                alt = plan(model, other, gpus=1, **common)
            except PlanError:
                continue
            if alt.fits_load:
                out.append(f"one {other.key} ({other.memory_gib:g} GiB, the least memory in the "
                           f"catalog that does) holds the whole load at {alt.precision}")
                break
    if wanted == "auto":
        awq = _evaluate(s, "awq", kv_dtype)
        if awq.max_sequences > max((c.memory.max_sequences for c in
                                    _candidates(s, AUTO_LADDER, kv_dtype) if c.available),
                                   default=0):
            out.append(f"a pre-quantized AWQ/GPTQ 4-bit checkpoint (group 128) takes "
                       f"{_gib(awq.weights_bytes)} per GPU and would hold {awq.max_sequences} "
                       "sequences")
    return out
