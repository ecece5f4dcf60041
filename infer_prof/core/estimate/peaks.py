"""The peaks a GPU runs one precision at: bandwidth and dense tensor FLOP/s. Pure: no I/O.

Which tensor math a precision's matrices run on, in vLLM:

- ``bf16`` (and fp16): the 16-bit peak (``bf16_tflops``, else ``fp16_tflops``: Volta and
  Turing run 16-bit models as fp16).
- ``fp8``: W8A8, the fp8 peak, on a GPU with FP8 tensor math (``GpuSpec.supports_fp8``: Ada,
  Hopper, Blackwell, CDNA 3/4); below it vLLM runs an fp8 model weight-only (W8A16 through the
  FP8 Marlin kernels, compute capability 7.5 to 8.6: Turing, Ampere), so the 16-bit peak.
- ``nvfp4`` / ``mxfp4``: the fp4 peak on GPUs with FP4 tensor cores (Blackwell, CDNA 4); on
  older GPUs vLLM dequantizes to 16-bit (Marlin), so the 16-bit peak.
- weight-only formats (``int8``, ``bnb-nf4``, ``awq``, ``gptq``, ``int4``, ``bnb-int8``): the
  weights are dequantized and multiplied in 16-bit, so the 16-bit peak; only their bytes shrink.
"""

from __future__ import annotations

from infer_prof.core.catalog.gpus import GpuSpec

TERA = 1e12
GIGA = 1e9


def peak_tflops(gpu: GpuSpec, precision: str) -> float | None:
    """Dense tensor TFLOP/s one GPU computes ``precision``'s matrices at (module docstring), or
    None when the catalog has no such figure for this GPU."""
    sixteen = gpu.bf16_tflops or gpu.fp16_tflops
    if precision == "fp8":
        return gpu.fp8_tflops if gpu.supports_fp8 else sixteen
    if precision in ("nvfp4", "mxfp4") and gpu.fp4_tflops:
        return gpu.fp4_tflops
    return sixteen


def peak_flops(gpu: GpuSpec, precision: str) -> float | None:
    """:func:`peak_tflops` in FLOP/s (x 1e12), or None."""
    t = peak_tflops(gpu, precision)
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
