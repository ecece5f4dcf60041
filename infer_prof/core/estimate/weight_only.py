"""What a weight-only format costs beyond its bytes: dequantizing the weights. Pure: no I/O.

A weight-only format (AWQ and GPTQ int4 through vLLM's Marlin kernels, fp8 on a GPU without fp8
math through FP8 Marlin, NVFP4 and MXFP4 on a GPU without FP4 math through Marlin or Triton's
``matmul_ogs``, bitsandbytes) stores the weights packed and multiplies in 16-bit: each step
unpacks the weights it reads. Two regimes, two shares (:class:`WeightOnlyCost`):

- small batch, bound by the bytes read: the packed weights are read at ``bandwidth_share`` of
  the rate 16-bit weights are (a kernel that dequantizes in registers, as Marlin does, reads at
  nearly the same rate; bitsandbytes does not):

      t_weights = W_packed / (bandwidth x mbu x bandwidth_share)

- large batch, bound by FLOPs: the dequantization is paid per FLOP, the 16-bit tensor math
  runs at ``compute_share`` of its rate:

      t_compute = flops / (peak_16bit x mfu x compute_share)

The shares are read from published vLLM measurements of each format against 16-bit on the same
GPU, model and load (each with its ``source``). A format validates end to end where the
published set (``published_results.json``) has held-out closed-loop vLLM points of it (AWQ on
the A100 and RTX cards, MXFP4 on Hopper); for the others
:func:`infer_prof.estimate.expected_error.ExpectedError.format_validated` says False and a row
of such a format is marked unvalidated.
"""

from __future__ import annotations

import msgspec

from infer_prof.core.catalog.gpus import GpuSpec

GPUSTACK_QUANT = (
    "GPUStack performance lab, 'The Impact of Quantization on vLLM Inference Performance' "
    "(gpustack/gpustack docs/performance-lab/references/"
    "the-impact-of-quantization-on-vllm-inference-performance.md @ 4650ef43): Qwen3-8B on one "
    "A100 80GB, vLLM 0.9.2, vllm bench serve of 1,000 ShareGPT prompts at once (a large batch, "
    "compute bound), BF16 10,338.25 tok/s")


FP4_WEIGHT_ONLY = "fp4-weight-only"
"""The format of FP4 weights (NVFP4, MXFP4) on a GPU without FP4 math, unpacked to 16-bit: the
one whose int4 Marlin shares the fitted ``StepFactors.fp4_weight_only_share`` scales."""


class WeightOnlyCost(msgspec.Struct, frozen=True, kw_only=True):
    """A weight-only format's dequantization cost (module docstring): ``bandwidth_share`` and
    ``compute_share`` in (0, 1], relative to 16-bit weights on the same GPU; ``source`` where
    the figures come from."""

    format: str
    bandwidth_share: float
    compute_share: float
    source: str

    def __post_init__(self) -> None:
        for name in ("bandwidth_share", "compute_share"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)}")


MARLIN_BATCH_1 = (
    "bandwidth_share 0.98: Mistral-7B on one L4 at batch 1, vLLM 0.16.0, FP16 17.9 against "
    "AWQ-Marlin 61.4 tok/s (bereketlemma/llm-inference-bench README): 3.43x for 3.49x fewer "
    "weight bytes (14.5 GB against 4.15 GB by the planner's sizes)")

AWQ_MARLIN = WeightOnlyCost(
    format="awq", bandwidth_share=0.98, compute_share=0.78,
    source=(f"compute_share 0.78: AWQ Marlin 8,066.03 tok/s on the {GPUSTACK_QUANT}; "
            f"{MARLIN_BATCH_1}"))
"""int4 through vLLM's Marlin kernels (AWQ), whose shares the FP4 formats take on a GPU without
FP4 math."""

WEIGHT_ONLY: dict[str, WeightOnlyCost] = {
    "awq": AWQ_MARLIN,
    "gptq": WeightOnlyCost(
        format="gptq", bandwidth_share=0.98, compute_share=0.79,
        source=(f"compute_share 0.79: GPTQ-Marlin int4 8,146.73 tok/s on the {GPUSTACK_QUANT}; "
                f"{MARLIN_BATCH_1} (the AWQ figure: the same Marlin kernel)")),
    "fp8-weight-only": WeightOnlyCost(
        format="fp8-weight-only", bandwidth_share=0.98, compute_share=0.69,
        source=("no FP8-Marlin measurement found: compute_share 0.69 is GPTQ-Marlin int8 "
                f"(the Marlin kernel at 8 bits), 7,119.60 tok/s on the {GPUSTACK_QUANT}; "
                f"bandwidth_share as int4 Marlin's ({MARLIN_BATCH_1})")),
    "int8": WeightOnlyCost(
        format="int8", bandwidth_share=0.98, compute_share=0.69,
        source=(f"GPTQ-Marlin int8, 7,119.60 tok/s on the {GPUSTACK_QUANT}; bandwidth_share as "
                f"int4 Marlin's ({MARLIN_BATCH_1})")),
    FP4_WEIGHT_ONLY: WeightOnlyCost(
        format=FP4_WEIGHT_ONLY, bandwidth_share=AWQ_MARLIN.bandwidth_share,
        compute_share=AWQ_MARLIN.compute_share,
        source=("no vLLM measurement of an MXFP4 or NVFP4 model against its 16-bit twin on a GPU "
                "without FP4 math found: the int4 Marlin shares (AWQ's), as MXFP4 through Marlin "
                "costs what int4 through Marlin does: the fused Marlin MoE kernel at the Mixtral "
                "shape on an H20 takes 0.144106 ms at 1 token with MXFP4 weights "
                "(flagos-ai/FlagGems PR 4483) and 0.144 ms with int4 (PR 3609), 1.04-1.12 of it "
                "at 16-64 tokens and 0.98-1.02 at 256-32,768 (against PR 4350's int4 table, whose "
                "GPU is not named in the readable text); Triton's matmul_ogs path "
                "(vLLM's other MXFP4 kernel on Hopper) reaches 0.99 and 0.94 of Marlin's tok/s at "
                "batch 1 for gpt-oss-20b and -120b on an A100 (vllm-project/vllm PR 22428). "
                f"AWQ's shares: {AWQ_MARLIN.source}")),
    "bnb-nf4": WeightOnlyCost(
        format="bnb-nf4", bandwidth_share=0.7, compute_share=0.57,
        source=(f"compute_share 0.57: bitsandbytes 5,916.34 tok/s on the {GPUSTACK_QUANT}; "
                "bandwidth_share 0.7: one request of gemma-3-27b on an RTX 6000 Ada, vLLM "
                "0.9.0.1, bitsandbytes 4-bit ~20 against AWQ ~30 tok/s "
                "(https://github.com/vllm-project/vllm/issues/22780) for 8 % more bytes "
                "(9/16 against 133/256 byte a weight): 0.67 x 1.08 x AWQ's 0.98")),
}
"""The modelled weight-only formats by planner precision (``fp8-weight-only``: ``fp8`` on a GPU
without fp8 tensor math; ``fp4-weight-only``: ``nvfp4`` or ``mxfp4`` on a GPU without FP4 math)."""


def weight_only_cost(precision: str, gpu: GpuSpec) -> WeightOnlyCost | None:
    """The dequantization cost of ``precision`` on ``gpu``, or None for a format whose math runs
    at its own precision (bf16, fp8 on a GPU with fp8 math, nvfp4/mxfp4 on a GPU with FP4 math:
    their cost is in the fitted factors). ``fp8`` on a GPU whose catalog entry has no fp8 FLOP/s
    figure runs weight-only (FP8 Marlin), and ``nvfp4``/``mxfp4`` on one without an FP4 figure
    (Hopper, Ada, Ampere: Marlin or Triton's ``matmul_ogs``)."""
    if precision == "fp8":
        return None if gpu.fp8_tflops else WEIGHT_ONLY["fp8-weight-only"]
    if precision in ("nvfp4", "mxfp4"):
        return None if gpu.fp4_tflops else WEIGHT_ONLY[FP4_WEIGHT_ONLY]
    return WEIGHT_ONLY.get(precision)
