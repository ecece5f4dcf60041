"""What the memory planner is asked: a model, a device, a load and the engine's limits.

The input of :func:`infer_prof.core.planning.planner.plan`; its answer is
:class:`infer_prof.core.planning.plan_result.Plan`.
"""

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass

from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.planning.lora_memory import LoraSlots
from infer_prof.core.planning.precisions import EngineCaps


@dataclass(frozen=True)
class PlanRequest:
    """A model to serve ``concurrency`` sequences of ``input_len + output_len`` tokens.

    On ``gpus`` x ``gpu`` (tensor parallel over all of them, as given), with a per-GPU budget of
    ``gpu_memory_utilization x memory``: ``memory_per_gpu_bytes`` is the total CUDA reports for
    the detected device (``memory_source`` says how it was read), else the catalog's
    ``cuda_visible_gib``. Or on a plain ``memory_budget_bytes`` (a CPU run when ``gpu`` is None;
    it replaces the utilization budget when a GPU is given too). ``quantization`` is ``"auto"`` or
    a precision to force; ``kv_cache_dtype`` ``"auto"`` or ``"fp8"``; ``kv_cache_dtype_bytes``
    the bytes of the 16-bit (or wider) KV element; ``load_format`` vLLM's (``"dummy"`` rules out
    in-flight bitsandbytes); ``caps`` what the serving vLLM build runs (default: unchecked GPU
    vLLM for a GPU, vLLM-CPU without); ``max_num_batched_tokens`` / ``max_num_seqs`` the
    scheduler limits when given (default: vLLM's for the device); ``vllm_version`` the version
    the overhead model is checked against (default: ``caps``'). ``catalog`` lets a plan that
    does not fit name the cheapest-memory GPU that would hold the load.
    """

    model: ModelSpec
    gpu: GpuSpec | None = None
    _: KW_ONLY
    gpus: int = 1
    concurrency: int = 1
    input_len: int = 512
    output_len: int = 256
    gpu_memory_utilization: float = 0.9
    quantization: str = "auto"
    memory_budget_bytes: int | None = None
    memory_per_gpu_bytes: int | None = None
    memory_source: str | None = None
    kv_cache_dtype_bytes: int = 2
    kv_cache_dtype: str = "auto"
    load_format: str | None = None
    caps: EngineCaps | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    vllm_version: tuple[int, ...] | None = None
    catalog: Sequence[GpuSpec] = ()
    lora: LoraSlots | None = None
