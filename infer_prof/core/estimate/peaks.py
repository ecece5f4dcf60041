"""The peaks a GPU runs one precision at: bandwidth and dense tensor FLOP/s. Pure: no I/O.

Which tensor math a precision's matrices run on, in vLLM:

- ``bf16`` (and fp16): the 16-bit peak (``bf16_tflops``, else ``fp16_tflops``: Volta and
  Turing run 16-bit models as fp16).
- ``fp8``: W8A8, the fp8 peak, on a GPU with FP8 tensor math (``GpuSpec.supports_fp8``: Ada,
  Hopper, Blackwell, CDNA 3/4); below it vLLM runs an fp8 model weight-only (W8A16 through the
  FP8 Marlin kernels, compute capability 7.5 to 8.6: Turing, Ampere), so the 16-bit peak.
- ``nvfp4``: W4A4, the fp4 peak on GPUs with FP4 tensor cores (Blackwell, CDNA 4); on older
  GPUs vLLM dequantizes to 16-bit (Marlin), so the 16-bit peak.
- ``mxfp4`` (gpt-oss's MoE experts): the weights stay 4-bit in memory, but vLLM's MXFP4 MoE
  kernels for gpt-oss multiply 16-bit activations by default, on every GPU: the first backends
  of vLLM 0.32.0's ``_get_priority_backends_for_gpt_oss``
  (``model_executor/layers/fused_moe/oracle/mxfp4.py``) are ``FLASHINFER_TRTLLM_MXFP4_BF16``
  (Blackwell) and ``AITER_MXFP4_BF16`` (CDNA 4), "BF16-act variant before activation-quantized
  variant"; so the 16-bit peak. With MXFP8 activations
  (``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1``, FlashInfer's TRT-LLM kernels) the fp8 peak, on
  a GPU with FP8 math (``mxfp4_activations="mxfp8"``).
- weight-only formats (``int8``, ``bnb-nf4``, ``awq``, ``gptq``, ``int4``, ``bnb-int8``): the
  weights are dequantized and multiplied in 16-bit, so the 16-bit peak; only their bytes shrink.
"""

from __future__ import annotations

from infer_prof.core.catalog.gpus import GpuSpec

TERA = 1e12
GIGA = 1e9


MXFP4_ACTIVATIONS: tuple[str, ...] = ("bf16", "mxfp8")
"""What vLLM's MXFP4 MoE kernels multiply the weights with: 16-bit activations (its default) or
MXFP8 ones (``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1``)."""


def peak_tflops(gpu: GpuSpec, precision: str,
                mxfp4_activations: str = "bf16") -> float | None:
    """Dense tensor TFLOP/s one GPU computes ``precision``'s matrices at (module docstring), or
    None when the catalog has no such figure for this GPU. ``mxfp4_activations``
    (:data:`MXFP4_ACTIVATIONS`) matters for ``mxfp4`` only."""
    if mxfp4_activations not in MXFP4_ACTIVATIONS:
        raise ValueError(f"mxfp4_activations must be one of {MXFP4_ACTIVATIONS}, "
                         f"got {mxfp4_activations!r}")
    sixteen = gpu.bf16_tflops or gpu.fp16_tflops
    if precision == "fp8" or (precision == "mxfp4" and mxfp4_activations == "mxfp8"):
        return gpu.fp8_tflops if gpu.supports_fp8 else sixteen
    if precision == "nvfp4" and gpu.fp4_tflops:
        return gpu.fp4_tflops
    return sixteen


def peak_flops(gpu: GpuSpec, precision: str, mxfp4_activations: str = "bf16") -> float | None:
    """:func:`peak_tflops` in FLOP/s (x 1e12), or None."""
    t = peak_tflops(gpu, precision, mxfp4_activations)
    return None if t is None else t * TERA


def bandwidth_bytes_per_s(gpu: GpuSpec) -> float:
    """Peak memory bandwidth of one GPU in bytes/s: ``memory_bandwidth_gbps x 1e9``."""
    return gpu.memory_bandwidth_gbps * GIGA


def attention_peak_flops(gpu: GpuSpec, kv_dtype_bytes: float) -> float | None:
    """Dense FLOP/s the attention's matrices (``Q K^T``, ``P V``) run at: the 16-bit peak, or
    with an fp8 KV cache (``kv_dtype_bytes`` 1) on a GPU with FP8 tensor math the fp8 peak
    ("When using the Flash Attention 3 backend with FP8 KV cache, attention operations are also
    performed in the quantized (FP8) domain", vLLM docs/features/quantization/quantized_kvcache.md).
    The weights' precision does not change it: an fp8 or FP4 model attends in 16-bit with a
    16-bit KV cache. None when the catalog has no figure."""
    return peak_flops(gpu, "fp8" if kv_dtype_bytes <= 1 and gpu.supports_fp8 else "bf16")
