"""SkyPilot's accelerator names matched to infer-prof's GPU catalog: the one place it is written.

SkyPilot's catalogs (``vms.csv``) name a GPU by ``AcceleratorName`` (``H100``, ``A100-80GB``,
``RTX4090``, ...) and, for some clouds, give its memory in ``GpuInfo``. A name alone does not
always tell the GPU model apart: Lambda's ``gpu_1x_h100_pcie`` and Azure's ``NC40ads_H100_v5``
say ``H100`` but are the PCIe and NVL cards; RunPod's and Azure's ``A100-80GB`` are PCIe cards
where AWS's and Lambda's are SXM. :data:`INSTANCE_KEYS` settles those by instance type.

A name that is in neither table nor the GPU catalog's own names, or whose memory (``GpuInfo``)
agrees with no variant of the GPU it would map to, is *unknown*: it is listed with its own name
and the reason, and never priced as another GPU. The memory also picks the variant of a family:
a cloud's ``A100`` with 80 GiB is the A100-80GB, its ``V100`` with 32 GiB the V100-32GB.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from infer_prof.catalog.gpus import catalog, match_gpu_name

ACCELERATOR_KEYS: dict[str, str] = {
    "H100": "H100-SXM",  # AWS p5, GCP a3-high, Lambda *_sxm5: the 80 GB SXM5 card
    "H100-SXM": "H100-SXM",
    "H100-MEGA": "H100-SXM",  # GCP a3-megagpu: the same card with more network bandwidth
    "H100-NVL": "H100-NVL",
    "H200": "H200",
    "H200-SXM": "H200",
    "H200-NVL": "H200-NVL",
    "A100": "A100-40GB-SXM",  # GCP a2-highgpu, AWS p4d; an 80 GB GpuInfo moves it to 80GB
    "A100-40GB": "A100-40GB-SXM",
    "A100-80GB": "A100-80GB-SXM",
    "A100-80GB-SXM": "A100-80GB-SXM",
    "L40S": "L40S",
    "L40": "L40",
    "A6000": "A6000",
    "RTXA6000": "A6000",
    "A5000": "A5000",
    "RTXA5000": "A5000",
    "A4000": "A4000",
    "RTXA4000": "A4000",
    "RTX6000-Ada": "RTX-6000-Ada",
    "RTX4090": "RTX-4090",
    "RTX3090": "RTX-3090",
    "RTX5090": "RTX-5090",
    "V100": "V100",
    "V100-32GB": "V100-32GB",
    "MI100": "MI100",
    "B200": "B200",
    "B300": "B300",
    "GB200": "GB200",
    "GB300": "GB300",
    "GH200": "GH200",
    "H20": "H20",
    "MI300X": "MI300X",
    "MI325X": "MI325X",
    "MI355X": "MI355X",
    "L4": "L4",
    "A10G": "A10G",
    "A10": "A10",
    "T4": "T4",
    "T4g": "T4",  # AWS g5g: the T4 beside a Graviton CPU
    "A40": "A40",
    "A30": "A30",
    "A16": "A16",
    "P100": "P100",
    "RTXPRO6000": "RTX-PRO-6000",
    "RTXA4500": "A4500",
    "RTX2000-Ada": "RTX-2000-Ada",
    "RTX4000-Ada": "RTX-4000-Ada",
    "A800": "A800",
    "P4": "P4",
    "M60": "M60",
    "K80": "K80",
    "Radeon MI25": "MI25",
    # The names other clouds give the same cards (Hyperstack, Spheron, Verda, Shadeform, ...).
    "H100-80G-SXM5": "H100-SXM",
    "H100_SXM5": "H100-SXM",
    "H100-80G-PCIe": "H100-PCIe",
    "H100-80G-PCIe-NVLink": "H100-PCIe",  # the PCIe card with an NVLink bridge
    "H100_PCIE": "H100-PCIe",
    "H100_PCIE_BAREMETAL": "H100-PCIe",
    "H100_NVL": "H100-NVL",
    "NVIDIA-H200-NVL": "H200-NVL",  # RunPod
    "A100-80G-PCIe": "A100-80GB-PCIe",
    "A100-80G-PCIe-NVLink": "A100-80GB-PCIe",
    "A100_80G_PCIE": "A100-80GB-PCIe",
    "A100_80G_SXM4": "A100-80GB-SXM",
    # Verda names an instance's A100s by GPU memory and its total: 2A100.44V is A100-80GB-160GB
    "A100-40GB-320GB": "A100-40GB-SXM",
    "A100-80GB-160GB": "A100-80GB-SXM",
    "A100-80GB-320GB": "A100-80GB-SXM",
    "A100-80GB-640GB": "A100-80GB-SXM",
    "L40S_PCIE": "L40S",
    "L40S_PCIE_BAREMETAL": "L40S",
    "L40s": "L40S",  # Seeweb
    "L40_PCIE": "L40",
    "L4_PCIE": "L4",
    "A16_PCIE": "A16",
    "A4000_PCIE": "A4000",
    "A5000_PCIE": "A5000",
    "A6000_PCIE_LOW_RAM": "A6000",
    "A6000_PCIE_HIGH_PERF": "A6000",
    "RTX6000ADA_PCIE": "RTX-6000-Ada",
    "V100_32G_PCIE": "V100-32GB",
    "RTX-A6000": "A6000",
    "RTX-A4000": "A4000",
    "RTX-6000-Ada": "RTX-6000-Ada",
    "RTX6000Ada": "RTX-6000-Ada",
    "RTX5090_PCIE": "RTX-5090",
    "RTX5090_PCIE_BAREMETAL": "RTX-5090",
    "RTX-PRO-6000": "RTX-PRO-6000",
    "RTXPro6000": "RTX-PRO-6000",
    "RTXPRO6000-WK": "RTX-PRO-6000",  # RunPod's workstation edition
    "RTXPRO6000Blackwell": "RTX-PRO-6000",
    "RTXPRO6000WS": "RTX-PRO-6000",
    "RTXPRO6000S": "RTX-PRO-6000",
    "RTXPRO6000_PCIE": "RTX-PRO-6000",
    "RTXPRO6000_PCIE_BAREMETAL": "RTX-PRO-6000",
    "RTX4000Ada": "RTX-4000-Ada",
    "Tesla-V100": "V100",  # Verda; a 32 GB GpuInfo moves it to V100-32GB
}
"""SkyPilot ``AcceleratorName`` -> infer-prof GPU key. A name not here is looked up in the GPU
catalog's own names (:func:`infer_prof.catalog.gpus.match_gpu_name`); a name in neither is
unknown and listed with :data:`UNKNOWN_REASONS`' reason, or :data:`NOT_IN_CATALOG`."""

NOT_IN_CATALOG = "not in infer-prof's GPU catalog (no sourced specs for the planner)"
"""The reason an accelerator without a catalog entry is listed as unknown."""

UNKNOWN_REASONS: dict[str, str] = {
    "H100-NVLINK": "Fluidstack's H100-NVLINK does not say which H100 (SXM, or PCIe with an NVLink "
                   "bridge)",
    "RTX6000": "the 24 GB Turing Quadro RTX 6000 (Lambda): no source for its bandwidth and tensor "
               "TFLOPS was found; " + NOT_IN_CATALOG,
    "Radeon Pro V520": "AMD's Radeon Pro V520 (AWS g4ad), a graphics GPU: no source for its memory "
                       "bandwidth was found; " + NOT_IN_CATALOG,
}
"""Why a known-but-unmapped accelerator name is not priced as a catalog GPU."""

NOT_A_GPU_PREFIXES: tuple[str, ...] = (
    "inferentia", "trainium", "tpu", "virtex", "gaudi", "qualcomm",
)
"""Accelerator names (lower-cased prefixes) that are not NVIDIA or AMD GPUs: AWS Inferentia and
Trainium, Google TPUs, Xilinx FPGAs (AWS f1/f2), Intel Gaudi (dl1), Qualcomm AI 100 (dl2q)."""


def is_gpu_accelerator(accelerator: str) -> bool:
    """False for the accelerators of :data:`NOT_A_GPU_PREFIXES` (not NVIDIA or AMD GPUs)."""
    return not accelerator.strip().lower().startswith(NOT_A_GPU_PREFIXES)

INSTANCE_KEYS: tuple[tuple[str, str, str], ...] = (
    ("lambda", r"_h100_pcie$", "H100-PCIe"),
    ("azure", r"^Standard_NC\d+adi?s_H100_v5$", "H100-NVL"),
    ("azure", r"^Standard_NC\d+ads_A100_v4$", "A100-80GB-PCIe"),
    ("runpod", r"^\d+x_A100-80GB_", "A100-80GB-PCIe"),
    ("cudo", r"-a100-pci", "A100-80GB-PCIe"),  # epyc-genoa-a100-pcie_*, intel-ice-lake-a100-pci_*
    ("vast", r"-A100_PCIE-", "A100-80GB-PCIe"),
    ("vast", r"-H100_NVL-", "H100-NVL"),
    ("scaleway", r"^H100-\d+-80G$", "H100-PCIe"),  # GpuInfo: "NVIDIA H100 PCIe"
    ("shadeform", r"^scaleway_H100", "H100-PCIe"),  # Scaleway's H100s, resold
    ("primeintellect", r"^hyperstack__\d+xA100_80GB__", "A100-80GB-PCIe"),
    # Hyperstack's n3-H100x1/2/4/8 (28/60/124/252 vCPUs) are PCIe; its n3-H100-SXM5x8 has 192
    ("primeintellect", r"^hyperstack__\d+xH100_80GB__(28|60|124|252)__", "H100-PCIe"),
    ("primeintellect", r"^oblivus__\d+xA100_80GB__\d+__\d+$", "A100-80GB-PCIe"),
)
"""(cloud, regular expression on the instance type, GPU key): instance types whose accelerator
name does not tell the GPU model apart. Checked before :data:`ACCELERATOR_KEYS`."""

GPU_COUNT_FIXES: dict[tuple[str, str], tuple[int, str]] = {
    ("azure", "Standard_ND96isr_H100_v5"): (
        8,
        "Azure's ND96isr H100 v5 has 8 H100 GPUs; the catalog row says {count}",
    ),
}
"""(cloud, instance type) -> (GPU count, note): known wrong ``AcceleratorCount`` values."""

MEMORY_TOLERANCE = 0.15
"""A catalog memory more than 15% away from the GPU key's nominal memory is a different GPU."""


class AcceleratorMatch(NamedTuple):
    """The GPU key an accelerator maps to (None: unknown), its memory (GiB), and why."""

    gpu: str | None
    memory_gib: float | None
    note: str | None


def match_accelerator(
    cloud: str, instance_type: str, accelerator: str, memory_gib: float | None
) -> AcceleratorMatch:
    """infer-prof's GPU key for a catalog row, with the memory it has.

    The instance-type table first, then the name table, then the GPU catalog's own names.
    ``memory_gib`` (from ``GpuInfo``, or None) picks the variant: when it disagrees with the
    key's nominal memory by more than :data:`MEMORY_TOLERANCE`, the key's family member whose
    memory agrees is taken (``A100`` with 80 GiB -> A100-80GB-SXM, same form factor first;
    ``H100`` with 94 GiB -> H100-NVL); with none, the row is unknown and the note says why.
    The memory returned is the catalog's when given, else the key's nominal one (None for an
    unknown accelerator without ``GpuInfo`` memory). An unknown row's note says why it is.
    """
    key = None
    for c, pattern, k in INSTANCE_KEYS:
        if c == cloud.lower() and re.search(pattern, instance_type):
            key = k
            break
    if key is None:
        key = ACCELERATOR_KEYS.get(accelerator)
    if key is None and accelerator not in UNKNOWN_REASONS:
        spec = match_gpu_name(accelerator)
        key = spec.key if spec else None
    if key is None:
        why = UNKNOWN_REASONS.get(accelerator, NOT_IN_CATALOG)
        if not is_gpu_accelerator(accelerator):
            why = "not an NVIDIA or AMD GPU"
        return AcceleratorMatch(None, memory_gib, why)
    nominal = catalog()[key].memory_gib
    if memory_gib is not None and abs(memory_gib - nominal) > MEMORY_TOLERANCE * nominal:
        other = _variant_by_memory(key, memory_gib)
        if other is None:
            why = f"{accelerator} with {memory_gib:g} GiB is not {key} ({nominal:g} GiB)"
            return AcceleratorMatch(None, memory_gib, why)
        key = other
    return AcceleratorMatch(key, memory_gib if memory_gib is not None else nominal, None)


def _variant_by_memory(key: str, memory_gib: float) -> str | None:
    """The member of ``key``'s GPU family whose nominal memory is within
    :data:`MEMORY_TOLERANCE` of ``memory_gib``: of the same form factor as ``key`` first, then
    the nearest in memory; None when no member agrees."""
    base = catalog()[key]
    fits = [g for g in catalog().values()
            if g.family == base.family and g.key != key
            and abs(memory_gib - g.memory_gib) <= MEMORY_TOLERANCE * g.memory_gib]
    if not fits:
        return None
    return min(fits, key=lambda g: (g.form_factor != base.form_factor,
                                    abs(memory_gib - g.memory_gib))).key


def fixed_gpu_count(cloud: str, instance_type: str, count: int) -> tuple[int, str | None]:
    """The GPU count to use for a catalog row, and a note when it corrects the catalog."""
    fix = GPU_COUNT_FIXES.get((cloud.lower(), instance_type))
    if fix is None or fix[0] == count:
        return count, None
    return fix[0], fix[1].format(count=count)
