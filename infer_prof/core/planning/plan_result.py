"""What a plan holds: per-precision :class:`MemoryBreakdown`, the :class:`Candidate` rows
considered, and the :class:`Plan` with its JSON form. Pure data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from infer_prof.core.planning.precisions import PRECISION_LABELS


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU memory for one precision, bytes. ``kv_cache_bytes`` may be negative (no room).

    ``kv_bytes_per_token`` is the attention layers' KV per token; ``state_bytes_per_sequence``
    what a hybrid model's linear/Mamba layers keep per sequence whatever its length (pages of the
    pool, padded as vLLM pads them; 0 without such layers); ``kv_blocks`` blocks of
    ``block_size`` tokens, each ``block_bytes`` of the pool (every layer's share of one block);
    ``blocks_per_sequence`` those one sequence of the load takes, states included;
    ``lora_bytes`` the LoRA adapters' buffers vLLM reserves before the KV cache (0 without
    adapters: :mod:`infer_prof.core.planning.lora_memory`)."""

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
    state_bytes_per_sequence: int = 0
    block_size: int = 16
    block_bytes: int = 0
    lora_bytes: int = 0


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
class EngineSettings:
    """How the engine is to run, in no engine's spelling (the server spells it: vLLM's in
    :mod:`infer_prof.servers.vllm_args`). None everywhere means "the engine's default".

    ``precision`` is the planner's (``bf16``, ``fp8``, ``int8``, ``bnb-nf4``, ``awq``, ``gptq``:
    :mod:`infer_prof.core.planning.precisions`); ``quantization`` a name the planner does not know,
    passed to the engine as it is. ``kv_cache_bytes`` is the KV cache budget per GPU in bytes;
    ``memory_utilization`` the fraction of each GPU's memory the engine may take (one or the
    other). ``max_model_len`` is the longest sequence (tokens) the engine must hold.
    """

    dtype: str | None = None  # activation dtype: "auto" (the model's) or "float16"
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    precision: str | None = None
    quantization: str | None = None
    load_format: str | None = None  # where weights come from ("dummy": random, real shapes)
    kv_cache_dtype: str | None = None  # "auto" or "fp8"
    kv_cache_bytes: int | None = None
    memory_utilization: float | None = None
    max_model_len: int | None = None


@dataclass(frozen=True)
class Plan:
    """The planner's decision, the numbers behind it, and the engine settings that apply it
    (``settings``; None when nothing fits)."""

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
    settings: EngineSettings | None = None
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

    def to_dict(self, engine_args: dict[str, Any] | None = None) -> dict[str, Any]:
        """JSON-serializable form: every field but ``settings``, which is written as
        ``engine_args``: the serving engine's spelling of it (``Server.plan_arguments``; {} when
        none is given); bytes stay integers."""
        out = asdict(self)
        del out["settings"]
        out["engine_args"] = dict(engine_args or {})
        out["tensor_parallel_size"] = self.gpu_count
        out["precision_label"] = PRECISION_LABELS.get(self.precision or "")
        if self.kv_cache_dtype == "fp8" and out["precision_label"]:
            out["precision_label"] += ", fp8 KV cache"
        out["queue_message"] = self.queue_message()
        return out
