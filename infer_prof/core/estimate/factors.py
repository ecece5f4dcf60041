"""The achieved shares of a GPU's peaks that turn a roofline into a prediction.

Pure: no I/O. A spec sheet gives peak memory bandwidth (GB/s) and peak dense tensor FLOP/s; a
served model reaches a share of each, and every engine step costs a fixed time besides
(scheduling, sampling, kernel launches between CUDA graphs). :class:`StepFactors` holds those
shares, per GPU architecture family, each set with its ``source``:

- ``mbu``: achieved share of peak memory bandwidth while a step reads weights and KV
  (decode-step MBU: bytes read / step time / peak bandwidth).
- ``mbu_kv``: the same on KV-cache reads (paged attention gathers blocks scattered over the
  cache: a lower share than streaming weights).
- ``mfu_decode``: achieved share of the precision's dense peak FLOP/s on the decode tokens of a
  step (small matrices: far below peak).
- ``mfu_prefill``: the same on prompt (prefill) tokens: large matrices, nearer peak.
- ``step_overhead_ms``: fixed milliseconds per engine step, beside the bound time.
- ``allreduce_efficiency``: achieved share of the interconnect's per-direction bandwidth in a
  tensor-parallel all-reduce over NVLink or Infinity Fabric; ``allreduce_latency_us`` the fixed
  cost of one all-reduce call.
- ``pcie_allreduce_efficiency``: the same share for an all-reduce over PCIe (cards without an
  NVLink domain): its own factor, as NCCL over PCIe reaches a different share of its link than
  over NVLink. Default :data:`PCIE_ALLREDUCE_EFFICIENCY` (a published figure, not a fit).
- ``layer_overhead_us``: fixed microseconds per decoder layer per engine step that tensor
  parallelism does not shrink (each GPU launches every layer's kernels, however small its share
  of the matrices): a step's fixed time is ``step_overhead_ms + layers x layer_overhead_us``.
- ``sequence_overhead_us``: microseconds per running sequence per engine step, beside the bound
  time and the fixed ones: the work of a step that grows with its sequences and that no byte or
  FLOP term counts, the host's (scheduling each sequence, building its inputs, appending its
  token, checking its stop) and the device's (the sampler's passes over a vocabulary of logits,
  each sequence's attention setup), which tensor parallelism does not shrink. A step of ``B``
  decode sequences pays ``B x sequence_overhead_us``. Fitted on the published points (a
  concurrency sweep tells it from the KV reads, which grow with the context as well as with
  ``B``); 0 where not fitted.
- ``fp4_weight_only_share``: what FP4 weights (MXFP4, NVFP4) on a GPU without FP4 math (Hopper,
  Ada, Ampere: unpacked to 16-bit by Marlin or Triton's ``matmul_ogs``) reach of the int4 Marlin
  rates their dequantization is modelled with (:mod:`.weight_only`): 1 where no point of that
  path was fitted; fitted only where one was, pulled towards 1 as far as its sources are few.

Only one GPU has been measured by this project (``../shared/measurements/h100-2026-11-23.csv``:
one H100 SXM, vLLM 0.26.0, llama-2-7b bf16, 512 in / 128 out). The Hopper defaults are fitted
there; every other family carries the Hopper figures over, and its ``source`` says so.
"""

from __future__ import annotations

import msgspec

from infer_prof.core.catalog.gpus import GpuSpec

PCIE_ALLREDUCE_EFFICIENCY = 0.62
"""Default share of a PCIe link's per-direction bandwidth a ring all-reduce reaches: NCCL
``all_reduce_perf`` on 8 x H100 PCIe without NVLink reaches a bus bandwidth of 35-45 GB/s at large
sizes ("PCIe Gen5 limited": Alaya AI, NCCL-tests in practice,
https://docs.alayanew.com/en/docs/tech-blog/2026-05-06-nccl-tests, reference table); bus
bandwidth is what the ring moves per GPU per second, so the share is 40 / 64 GB/s (Gen5 x16, one
direction) = 0.62. A documented default, not fitted on any vLLM run."""

H100_MEASUREMENTS = "../shared/measurements/h100-2026-11-23.csv"
"""Where the Hopper defaults were fitted: infer-prof's own runs on one H100 SXM (vLLM 0.26.0)."""


class StepFactors(msgspec.Struct, frozen=True, kw_only=True):
    """Achieved shares of a GPU's peaks and the fixed per-step time (module docstring).

    Fractions in (0, 1] for ``mbu``, ``mfu_decode``, ``mfu_prefill``, ``allreduce_efficiency``,
    ``pcie_allreduce_efficiency``, ``fp4_weight_only_share``;
    ``step_overhead_ms`` in milliseconds per engine step; ``allreduce_latency_us`` in
    microseconds per all-reduce call; ``layer_overhead_us`` in microseconds per decoder layer per
    step; ``sequence_overhead_us`` in microseconds per running sequence per step. ``family``
    the architecture family the factors are for, ``source`` where they come from (a fit, a
    carried-over default, a user's runs)."""

    mbu: float
    mbu_kv: float
    mfu_decode: float
    mfu_prefill: float
    step_overhead_ms: float
    allreduce_efficiency: float
    allreduce_latency_us: float
    family: str
    source: str
    pcie_allreduce_efficiency: float = PCIE_ALLREDUCE_EFFICIENCY
    layer_overhead_us: float = 0.0
    fp4_weight_only_share: float = 1.0
    sequence_overhead_us: float = 0.0

    def __post_init__(self) -> None:
        for name in ("mbu", "mbu_kv", "mfu_decode", "mfu_prefill", "allreduce_efficiency",
                     "pcie_allreduce_efficiency", "fp4_weight_only_share"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        times = ("step_overhead_ms", "allreduce_latency_us", "layer_overhead_us",
                 "sequence_overhead_us")
        if any(getattr(self, name) < 0 for name in times):
            raise ValueError(f"{', '.join(times)} must be >= 0")

    def basis(self) -> str:
        """The source's first clause (up to its first parenthesis or colon): a short
        "where from" for a console footer."""
        return self.source.split(" (")[0].split(":")[0]

    def figures(self) -> str:
        """The shares and fixed times in one line, without family or source."""
        return (f"MBU {self.mbu:.0%} weights / {self.mbu_kv:.0%} KV, MFU decode "
                f"{self.mfu_decode:.0%} / prefill {self.mfu_prefill:.0%}, "
                f"{self.step_overhead_ms:.2g} ms a step + {self.layer_overhead_us:.2g} us a "
                f"layer + {self.sequence_overhead_us:.2g} us a sequence, all-reduce "
                f"{self.allreduce_efficiency:.0%} of link bandwidth (PCIe "
                f"{self.pcie_allreduce_efficiency:.0%}) + {self.allreduce_latency_us:.2g} us a "
                "call")

    def describe(self) -> str:
        """One line: the shares, the fixed times, the family and the source."""
        return f"{self.figures()} ({self.family}: {self.source})"


HOPPER_FIT = StepFactors(
    mbu=0.73,
    mbu_kv=0.58,
    mfu_decode=0.65,
    mfu_prefill=0.65,
    step_overhead_ms=0.5,
    allreduce_efficiency=0.7,
    allreduce_latency_us=10.0,
    layer_overhead_us=0.0,
    family="Hopper",
    source=(
        f"fitted by hand on {H100_MEASUREMENTS} (one H100 SXM, vLLM 0.26.0, 512 in / 128 out): "
        "mbu 0.73 and step_overhead_ms 0.5 from llama-2-7b bf16 at 1 stream (TPOT 6.15 ms, "
        "decode-step MBU 69-73 %); mbu_kv 0.58 from llama-2-7b bf16 at 128 streams (TPOT "
        "25.7 ms, mostly KV reads); mfu_decode = mfu_prefill = 0.65 from llama-3.1-8b bf16 at "
        "128 streams (TPOT 16.4 ms, compute bound); the same six points are predicted within "
        "12 % of output tok/s, but TTFT of one 512-token prompt at 10.9 ms against 17.5 "
        "measured; allreduce_efficiency 0.7 and allreduce_latency_us 10 not measured here, "
        "but in line with vLLM's own all-reduce benchmark on H100 (vllm-project/vllm pull "
        "24111, TP=6, the best kernel per size: 13 / 16 / 21 / 31 us at 0.5 / 1 / 2 / 4 MB, "
        "about 11 us + 5 us a MB, i.e. 0.74 of NVLink's 450 GB/s one way for the ring's "
        "2(n-1)/n bytes); layer_overhead_us 0: one GPU cannot tell it from step_overhead_ms "
        "(fits with tensor-parallel points move it)"
    ),
)
"""The Hopper defaults: fitted on the project's only GPU measurements (see ``source``)."""

FAMILIES: dict[str, tuple[str, ...]] = {
    "Hopper": ("hopper",),
    "Blackwell": ("blackwell",),
    "Ada": ("ada",),
    "Ampere": ("ampere",),
    "CDNA3": ("cdna 3", "cdna3"),
    "CDNA4": ("cdna 4", "cdna4"),
    "older": ("volta", "turing", "pascal", "maxwell", "kepler", "cdna", "gcn"),
}
"""Architecture families by the words of the GPU catalog's ``architecture`` field (first match
wins, so ``CDNA 3`` is CDNA3 before the bare ``CDNA`` of ``older``). One family a generation, as
Hopper and Blackwell are: CDNA 4 (MI355X: FP4/FP6 math, other kernels in vLLM's ROCm build, such
as AITER's MXFP4 ones on gfx950) is not CDNA 3 (MI300X, MI325X), so a CDNA 3 validation does not
stand for it."""


BLACKWELL_RTX = "Blackwell RTX"
"""GeForce and RTX PRO Blackwell (GB20x: RTX 5090, RTX PRO 6000; CUDA compute capability 12.x),
a family apart from the datacenter Blackwell of :data:`FAMILIES` (B200, B300, GB200: compute
capability 10.x). Same architecture name, other chips: GDDR7 at a quarter of a B200's
bandwidth, no tensor memory (``tcgen05``), so vLLM runs them on its sm_120 builds of the
attention, GEMM and MoE kernels, not the sm_100 ones InferenceMAX's B200 runs measure."""


def family_of(gpu: GpuSpec) -> str:
    """The architecture family of ``gpu`` (a key of :data:`FAMILIES`, or
    :data:`BLACKWELL_RTX` for a Blackwell of compute capability 12.x), or its own
    ``architecture`` text when none matches."""
    arch = gpu.architecture.lower()
    for family, words in FAMILIES.items():
        if any(w in arch for w in words):
            cc = gpu.cuda_capability
            if family == "Blackwell" and cc is not None and cc[0] >= 12:
                return BLACKWELL_RTX
            return family
    return gpu.architecture


def default_factors(gpu: GpuSpec) -> StepFactors:
    """The default :class:`StepFactors` for ``gpu``'s architecture family: the Hopper fit
    (:data:`HOPPER_FIT`) for Hopper; for every other family the same figures carried over,
    with a ``source`` that says no GPU of that family has been measured."""
    family = family_of(gpu)
    if family == "Hopper":
        return HOPPER_FIT
    return msgspec.structs.replace(
        HOPPER_FIT, family=family,
        source=(f"no {family} GPU measured yet: the Hopper fit carried over ({HOPPER_FIT.source})"))
