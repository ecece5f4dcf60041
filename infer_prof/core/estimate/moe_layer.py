"""The fixed time of a mixture-of-experts layer: what its kernels take beyond reading the
experts' weights. Pure: no I/O.

An MoE layer runs more kernels than a dense MLP: the router's softmax and top-k, the sort of
tokens by expert (``moe_align_block_size``), two grouped expert GEMMs, the activation and the
weighted sum. At a few tokens each has little work, and the layer takes a floor of time that
the bytes it reads do not explain. vLLM's own kernel benchmark (``benchmarks/kernels/
benchmark_moe.py``: the whole layer but the router GEMM, replayed from a CUDA graph on one GPU)
puts that floor near 30 us at one token, whatever the GPU and shape (:data:`MOE_LAYER_SOURCE`).
The step model charges it once per MoE layer and step, on every GPU of a tensor-parallel group
(each GPU runs every kernel on its shard):

    t_moe = moe_layers x MOE_LAYER_FIXED_US x 1e-6        (seconds a step)

It is set from those measurements, not fitted: fitted beside the step's fixed time, the
published serving points do not tell the two apart (docs/estimate.md, "Tried").
"""

from __future__ import annotations

from infer_prof.core.catalog.models import ModelSpec

__all__ = ["MOE_LAYER_FIXED_US", "MOE_LAYER_SOURCE", "moe_fixed_s"]

MOE_LAYER_FIXED_US = 30.0
"""Microseconds an MoE layer's kernels take at one token beyond reading the routed experts'
bytes at the GPU's catalog bandwidth (:data:`MOE_LAYER_SOURCE`)."""

MOE_LAYER_SOURCE = (
    "vLLM's benchmark_moe.py kernel time at batch 1 less the routed experts' bytes at the "
    "catalog bandwidth: Qwen3-30B-A3B fp8_w8a8 on one H100, 44.54 us for 37.7 MB (11.3 us at "
    "3.35 TB/s): 33 us (https://github.com/vllm-project/vllm/pull/24700, main); "
    "Qwen3-Omni-30B-A3B bf16 on one B200, 39.61 us for 75.5 MB (9.8 us at 7.7 TB/s): 30 us "
    "(https://github.com/vllm-project/vllm/pull/31448, default config); gpt-oss-120b's expert "
    "shape in bf16 on an H100, 89.02 us for 4 experts of 49.8 MB (59.4 us): 30 us, if at TP1 "
    "(the PR does not state its tensor-parallel size; https://github.com/vllm-project/vllm/pull/"
    "39902); and SGLang's Triton fused MoE for "
    "Qwen3-235B-A22B fp8 at TP8 on an H200, 31.70 us for 18.9 MB a GPU (3.9 us at 4.8 TB/s): "
    "28 us (https://github.com/sgl-project/sglang/pull/11730)")
"""Where :data:`MOE_LAYER_FIXED_US` comes from."""


def moe_fixed_s(arch: ModelSpec) -> float:
    """Seconds a step's MoE layers take beyond their weight reads:
    ``arch.num_moe_layers() x MOE_LAYER_FIXED_US x 1e-6`` (0 for a dense model: it has no MoE
    layer)."""
    return arch.num_moe_layers() * MOE_LAYER_FIXED_US * 1e-6
