"""infer-prof's GPU names (the catalog keys) -> Ray's accelerator types, written down once.

A Ray node advertises its GPU as the resource ``accelerator_type:<TYPE>``; Ray derives TYPE
from the NVML name of the node's first GPU (``ray._private.accelerators.nvidia_gpu``:
``"NVIDIA H100 80GB HBM3"`` -> ``H100``, ``"NVIDIA A100-SXM4-80GB"`` -> ``A100``), and
``ray.util.accelerators`` names the common ones. Ray's label is coarser than the catalog: every
H100 (SXM, PCIe, NVL) is ``H100``, every A100 is ``A100`` and both V100s are ``V100``. Ray's
rule keeps the run of all-caps tokens up to the first with a digit (``"NVIDIA RTX PRO 6000
Blackwell Server Edition"`` -> ``RTX-PRO-6000``), else the hyphen-joined name
(``GeForce-RTX-5090``); AMD GPUs are named from Ray's PCI device-id table, which has the MI300X
(``AMD-Instinct-MI300X-OAM``) but no MI325X, MI355X or MI25 (``()`` here). Ray also defines
``A100-80G`` and ``A100-40G`` that a cluster may add by hand (``ray start --resources
'{"accelerator_type:A100-80G": 1}'``); where a cluster has the more specific label it is used.
A cell checks on its node that NVML's GPU is the catalog's (see
:mod:`infer_prof.run.matrix_cell`), so a coarse label never measures the wrong GPU silently.

Each entry lists the types most specific first. The test ``tests/unit/test_matrix.py`` checks
the least specific one of each against Ray's own name rule for every NVML name in the catalog.
"""

from __future__ import annotations

RAY_ACCELERATOR_TYPES: dict[str, tuple[str, ...]] = {
    "RTX-4090": ("GeForce-RTX-4090",),
    "RTX-3090": ("GeForce-RTX-3090",),
    "RTX-5090": ("GeForce-RTX-5090",),
    "A4000": ("RTX-A4000",),
    "A5000": ("RTX-A5000",),
    "A6000": ("RTX-A6000",),
    "RTX-6000-Ada": ("RTX-6000",),
    "L40": ("L40",),
    "L40S": ("L40S",),
    "A100-40GB-PCIe": ("A100-40G", "A100"),
    "A100-80GB-PCIe": ("A100-80G", "A100"),
    "A100-40GB-SXM": ("A100-40G", "A100"),
    "A100-80GB-SXM": ("A100-80G", "A100"),
    "H100-PCIe": ("H100",),
    "H100-SXM": ("H100",),
    "H100-NVL": ("H100",),
    "H200": ("H200",),
    "H200-NVL": ("H200",),
    "V100": ("V100",),
    "MI100": ("AMD-Instinct-MI100",),
    "B200": ("B200",),
    "B300": ("B300",),
    "GB200": ("GB200",),
    "GB300": ("GB300",),
    "H20": ("H20",),
    "GH200": ("GH200",),
    "MI300X": ("AMD-Instinct-MI300X-OAM",),
    "MI325X": (),  # Ray's AMD device table names no MI325X, MI355X or MI25: a cluster labels
    "MI355X": (),  # such nodes by hand (ray start --resources '{"accelerator_type:X": 1}')
    "L4": ("L4",),
    "A10G": ("A10G",),
    "A10": ("A10",),
    "T4": ("T4",),
    "A40": ("A40",),
    "A30": ("A30",),
    "RTX-PRO-6000": ("RTX-PRO-6000",),
    "V100-32GB": ("V100",),
    "P100": ("P100",),
    "RTX-4000-Ada": ("RTX-4000",),
    "RTX-2000-Ada": ("RTX-2000",),
    "A4500": ("RTX-A4500",),
    "A16": ("A16",),
    "A800": ("A800",),
    "MI25": (),
    "P4": ("P4",),
    "M60": ("M60",),
    "K80": ("K80",),
}

RESOURCE_PREFIX = "accelerator_type:"


def ray_types(gpu_key: str) -> tuple[str, ...]:
    """Ray's accelerator types for a catalog key, most specific first (``()`` if unknown)."""
    return RAY_ACCELERATOR_TYPES.get(gpu_key, ())


def choose_ray_type(gpu_key: str, cluster_resources: dict[str, float]) -> str | None:
    """The most specific of ``gpu_key``'s Ray types the cluster advertises (its
    ``ray.cluster_resources()``), or None when it has none of them."""
    for t in ray_types(gpu_key):
        if cluster_resources.get(RESOURCE_PREFIX + t, 0) > 0:
            return t
    return None
