"""SkyPilot's accelerator names matched to infer-prof's GPU catalog: the one place it is written.

SkyPilot's catalogs (``vms.csv``) name a GPU by ``AcceleratorName`` (``H100``, ``A100-80GB``,
``RTX4090``, ...) and, for some clouds, give its memory in ``GpuInfo``. A name alone does not
always tell the GPU model apart: Lambda's ``gpu_1x_h100_pcie`` and Azure's ``NC40ads_H100_v5``
say ``H100`` but are the PCIe and NVL cards; RunPod's and Azure's ``A100-80GB`` are PCIe cards
where AWS's and Lambda's are SXM. :data:`INSTANCE_KEYS` settles those by instance type.

A name that is in neither table, or whose memory disagrees with the GPU it would map to, is
*unknown*: it is listed with its own name and never priced as another GPU.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from infer_prof.catalog.gpus import catalog

ACCELERATOR_KEYS: dict[str, str] = {
    "H100": "H100-SXM",  # AWS p5, GCP a3-high, Lambda *_sxm5: the 80 GB SXM5 card
    "H100-SXM": "H100-SXM",
    "H100-MEGA": "H100-SXM",  # GCP a3-megagpu: the same card with more network bandwidth
    "H100-NVL": "H100-NVL",
    "H200": "H200",
    "H200-SXM": "H200",
    "H200-NVL": "H200-NVL",
    "A100": "A100-40GB-SXM",
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
    "MI100": "MI100",
    # The names other clouds give the same cards (Hyperstack, Spheron, Verda, Shadeform, ...).
    "H100-80G-SXM5": "H100-SXM",
    "H100_SXM5": "H100-SXM",
    "H100-80G-PCIe": "H100-PCIe",
    "H100-80G-PCIe-NVLink": "H100-PCIe",  # the PCIe card with an NVLink bridge
    "H100_PCIE": "H100-PCIe",
    "H100_PCIE_BAREMETAL": "H100-PCIe",
    "H100_NVL": "H100-NVL",
    "A100-80G-PCIe": "A100-80GB-PCIe",
    "A100-80G-PCIe-NVLink": "A100-80GB-PCIe",
    "A100_80G_PCIE": "A100-80GB-PCIe",
    "A100_80G_SXM4": "A100-80GB-SXM",
    "L40S_PCIE": "L40S",
    "L40S_PCIE_BAREMETAL": "L40S",
    "RTX-A6000": "A6000",
    "RTX-A4000": "A4000",
    "RTX-6000-Ada": "RTX-6000-Ada",
    "RTX6000Ada": "RTX-6000-Ada",
    "RTX5090_PCIE": "RTX-5090",
    "RTX5090_PCIE_BAREMETAL": "RTX-5090",
}
"""SkyPilot ``AcceleratorName`` -> infer-prof GPU key. A name not here is unknown and listed as
such: T4, T4g, L4, A10, A10G, A30, A40, A16, A800, B200, B300, GB200, GH200, MI300X, MI355X, P100,
V100-32GB, RTX PRO 6000, RTX6000 (the 24 GB Turing card), H100-NVLINK (Fluidstack does not say
which H100), ...: infer-prof's GPU catalog has no specs for them."""

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

    The instance-type table first, then the name table. ``memory_gib`` (from ``GpuInfo``, or
    None) must agree with the key's nominal memory within :data:`MEMORY_TOLERANCE`, else the
    row is unknown with a note saying why. The memory returned is the catalog's when given,
    else the key's nominal one (None for an unknown accelerator without ``GpuInfo`` memory).
    """
    key = None
    for c, pattern, k in INSTANCE_KEYS:
        if c == cloud.lower() and re.search(pattern, instance_type):
            key = k
            break
    if key is None:
        key = ACCELERATOR_KEYS.get(accelerator)
    if key is None:
        return AcceleratorMatch(None, memory_gib, None)
    nominal = catalog()[key].memory_gib
    if memory_gib is not None and abs(memory_gib - nominal) > MEMORY_TOLERANCE * nominal:
        why = f"{accelerator} with {memory_gib:g} GiB is not {key} ({nominal:g} GiB)"
        return AcceleratorMatch(None, memory_gib, why)
    return AcceleratorMatch(key, memory_gib if memory_gib is not None else nominal, None)


def fixed_gpu_count(cloud: str, instance_type: str, count: int) -> tuple[int, str | None]:
    """The GPU count to use for a catalog row, and a note when it corrects the catalog."""
    fix = GPU_COUNT_FIXES.get((cloud.lower(), instance_type))
    if fix is None or fix[0] == count:
        return count, None
    return fix[0], fix[1].format(count=count)
