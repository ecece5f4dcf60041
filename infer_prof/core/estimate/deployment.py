"""What serves a predicted load: the model, the GPUs, the precision, the engine's limits and
the achieved shares, declared once and passed to every step of the estimate. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.estimate.collectives import link_bytes_per_s
from infer_prof.core.estimate.factors import StepFactors
from infer_prof.core.planning.memory import default_scheduler_limits


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """One vLLM server as the estimate sees it.

    ``arch`` the model's architecture; ``gpu`` x ``gpu_count`` the tensor-parallel group;
    ``precision`` a planner precision (``bf16``, ``fp8``, ``int8``, ``bnb-nf4``, ``awq``,
    ``gptq``, ``nvfp4``, ``mxfp4``); ``factors`` the achieved shares
    (:func:`infer_prof.core.estimate.factors.default_factors`); ``kv_dtype_bytes`` 2, or 1 for
    an fp8 KV cache; ``link_gbps`` the interconnect's bidirectional GB/s (None: the all-reduce
    time is unknown and left out); ``over_pcie`` True when that link is PCIe (the all-reduce
    then reaches ``factors.pcie_allreduce_efficiency`` of it, else
    ``factors.allreduce_efficiency``); ``max_num_batched_tokens`` vLLM's per-step token budget
    (None: vLLM's default for the GPU); ``max_running`` the most sequences the server runs at
    once (the planner's ``max_sequences`` capped by ``max_num_seqs``; None: no limit);
    ``mxfp4_activations`` what an ``mxfp4`` model's MoE kernels multiply with, ``bf16`` (vLLM's
    default) or ``mxfp8`` (:data:`~infer_prof.core.estimate.peaks.MXFP4_ACTIVATIONS`)."""

    arch: ModelSpec
    gpu: GpuSpec
    gpu_count: int = 1
    precision: str = "bf16"
    factors: StepFactors
    kv_dtype_bytes: float = 2.0
    link_gbps: float | None = None
    over_pcie: bool = False
    max_num_batched_tokens: int | None = None
    max_running: int | None = None
    mxfp4_activations: str = "bf16"

    def step_budget(self) -> int:
        """Prompt + decode tokens one step may carry: ``max_num_batched_tokens``, or vLLM's
        default for this GPU and count."""
        if self.max_num_batched_tokens:
            return self.max_num_batched_tokens
        return default_scheduler_limits(self.gpu, self.gpu.cuda_memory_bytes, self.gpu_count)[0]

    def allreduce_efficiency(self) -> float:
        """The share of the link's per-direction bandwidth an all-reduce reaches: the factors'
        PCIe share over PCIe, else their NVLink/Infinity Fabric share."""
        return (self.factors.pcie_allreduce_efficiency if self.over_pcie
                else self.factors.allreduce_efficiency)

    def link_bytes_per_s(self) -> float | None:
        """One direction of the interconnect in bytes/s (half of ``link_gbps`` x 1e9); None
        when unknown."""
        return link_bytes_per_s(self.link_gbps)
