"""GPU facts (one catalog entry) and the few derived numbers the planner and roofline need.

Pure: no I/O. Loading the shipped catalog and asking NVML live in ``infer_prof.catalog.gpus``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

GIB = 1 << 30
"""Bytes in one GiB (2^30)."""

# The figures every entry must give (the catalog test checks each has a source).
SPEC_FIGURES = (
    "memory_gib",
    "cuda_visible_gib",
    "memory_bandwidth_gbps",
    "fp16_tflops",
    "bf16_tflops",
    "fp8_tflops",
    "fp4_tflops",
    "tdp_watts",
    "architecture",
    "compute_capability",
    "nvlink",
)

FP8_MIN_CAPABILITY = (8, 9)
"""vLLM runs FP8 weights *and* activations (W8A8) from compute capability 8.9 (Ada, Hopper)."""

BF16_MIN_CAPABILITY = (8, 0)
"""BF16 tensor math starts at Ampere (8.0); Volta (7.0) runs 16-bit models as FP16."""


def normalize_gpu_name(name: str) -> str:
    """Lower-case ``name`` and drop everything but letters and digits, then a leading ``nvidia``.

    ``"NVIDIA A100-SXM4-80GB"``, ``"a100_sxm4 80gb"`` and ``"A100-SXM4-80GB"`` all become
    ``"a100sxm480gb"``: matching is case-insensitive and ignores spaces, dashes and underscores.
    """
    flat = re.sub(r"[^a-z0-9]", "", name.lower())
    return flat[len("nvidia"):] if flat.startswith("nvidia") and len(flat) > 6 else flat


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model as the catalog describes it.

    Units: ``memory_gib`` in GiB (2^30 B), the nominal size; ``cuda_visible_gib`` the total CUDA
    reports (``torch.cuda.mem_get_info``), a little less; ``memory_bandwidth_gbps`` in GB/s
    (10^9 B/s);
    ``*_tflops`` dense tensor-core peaks in 10^12 FLOP/s (``None`` where the GPU lacks that math,
    or where no source states the figure); ``fp4_tflops`` the FP4 (NVFP4/MXFP4) peak, on NVIDIA
    Blackwell and AMD CDNA 4 only; ``tdp_watts`` in W (``None`` where unpublished).
    ``family`` the name that means every variant of the GPU (``A100``, ``H100``).
    ``compute_capability`` is ``"major.minor"`` for NVIDIA, a ROCm gfx target (``"gfx908"``) for
    AMD. ``sources`` pairs each figure's name with where it comes from.
    """

    key: str
    name: str
    vendor: str
    architecture: str
    compute_capability: str
    memory_gib: float
    memory_type: str
    memory_bandwidth_gbps: float
    fp16_tflops: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    tdp_watts: float | None
    nvlink: bool
    form_factor: str = ""
    nvml_names: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    sources: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    cuda_visible_gib: float | None = None
    fp4_tflops: float | None = None
    family: str = ""

    @classmethod
    def from_dict(cls, key: str, entry: dict[str, Any]) -> GpuSpec:
        """Build a spec from one catalog entry (the ``gpus.json`` object for ``key``)."""
        try:
            return cls(
                key=key,
                name=str(entry["name"]),
                vendor=str(entry["vendor"]),
                architecture=str(entry["architecture"]),
                compute_capability=str(entry["compute_capability"]),
                memory_gib=float(entry["memory_gib"]),
                memory_type=str(entry.get("memory_type", "")),
                memory_bandwidth_gbps=float(entry["memory_bandwidth_gbps"]),
                fp16_tflops=_opt_float(entry.get("fp16_tflops")),
                bf16_tflops=_opt_float(entry.get("bf16_tflops")),
                fp8_tflops=_opt_float(entry.get("fp8_tflops")),
                tdp_watts=_opt_float(entry["tdp_watts"]),
                nvlink=bool(entry["nvlink"]),
                form_factor=str(entry.get("form_factor", "")),
                nvml_names=tuple(entry.get("nvml_names", ())),
                aliases=tuple(entry.get("aliases", ())),
                sources=tuple(sorted((str(k), str(v))
                                     for k, v in entry.get("sources", {}).items())),
                notes=tuple(entry.get("notes", ())),
                cuda_visible_gib=_opt_float(entry.get("cuda_visible_gib")),
                fp4_tflops=_opt_float(entry.get("fp4_tflops")),
                family=str(entry.get("family") or key),
            )
        except KeyError as exc:
            raise ValueError(f"GPU catalog entry {key!r} lacks the field {exc.args[0]!r}") from None

    @property
    def memory_bytes(self) -> int:
        """Nominal memory in bytes: ``memory_gib x 2^30``."""
        return int(self.memory_gib * GIB)

    @property
    def cuda_memory_bytes(self) -> int:
        """Bytes CUDA reports as this GPU's total (what vLLM budgets from): ``cuda_visible_gib x
        2^30``, or the nominal :attr:`memory_bytes` for an entry without that figure."""
        if self.cuda_visible_gib is None:
            return self.memory_bytes
        return int(self.cuda_visible_gib * GIB)

    @property
    def cuda_capability(self) -> tuple[int, int] | None:
        """``(major, minor)`` for an NVIDIA GPU; ``None`` for one without CUDA (AMD)."""
        m = re.fullmatch(r"(\d+)\.(\d+)", self.compute_capability)
        return (int(m.group(1)), int(m.group(2))) if m else None

    @property
    def supports_fp8(self) -> bool:
        """True when the GPU has FP8 tensor math vLLM runs W8A8 on: CUDA compute capability >= 8.9
        (every such GPU has it, whether or not the catalog has a source for its TFLOPS), or an AMD
        GPU with an FP8 figure (CDNA 3/4: MI300X, MI325X, MI355X; vLLM's ROCm build runs FP8)."""
        cc = self.cuda_capability
        if cc is None:
            return self.fp8_tflops is not None
        return cc >= FP8_MIN_CAPABILITY

    @property
    def supports_bf16(self) -> bool:
        """True when the GPU has BF16 tensor math: a BF16 figure, or CUDA compute capability >= 8.0
        (Ampere and newer, whether or not the catalog has a source for its TFLOPS)."""
        cc = self.cuda_capability
        return self.bf16_tflops is not None or (cc is not None and cc >= BF16_MIN_CAPABILITY)

    @property
    def supports_fp4(self) -> bool:
        """True when the GPU has FP4 tensor math (NVFP4/MXFP4): an ``fp4_tflops`` figure
        (NVIDIA Blackwell, compute capability >= 10.0 or 12.x; AMD CDNA 4, gfx950)."""
        return self.fp4_tflops is not None

    @property
    def source_map(self) -> dict[str, str]:
        """``sources`` as a dict: figure name -> where the figure comes from."""
        return dict(self.sources)

    def match_keys(self) -> set[str]:
        """Every normalized name this GPU answers to: key, aliases, NVML names, full name."""
        names = (self.key, self.name, *self.aliases, *self.nvml_names)
        return {normalize_gpu_name(n) for n in names}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the figures, without sources and notes)."""
        return {
            "key": self.key,
            "name": self.name,
            "vendor": self.vendor,
            "architecture": self.architecture,
            "compute_capability": self.compute_capability,
            "memory_gib": self.memory_gib,
            "cuda_visible_gib": self.cuda_visible_gib,
            "memory_bandwidth_gbps": self.memory_bandwidth_gbps,
            "fp16_tflops": self.fp16_tflops,
            "bf16_tflops": self.bf16_tflops,
            "fp8_tflops": self.fp8_tflops,
            "fp4_tflops": self.fp4_tflops,
            "tdp_watts": self.tdp_watts,
            "nvlink": self.nvlink,
        }


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)
