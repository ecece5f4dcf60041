"""What a plan holds: per-precision :class:`MemoryBreakdown`, the :class:`Candidate` rows
considered, and the :class:`Plan` with its JSON form. Pure data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from infer_prof.core.precisions import PRECISION_LABELS


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
