"""GPU-to-GPU interconnect bandwidth, for the estimate's tensor-parallel all-reduce.

The bidirectional GB/s per GPU of each NVLink GPU whose catalog entry states a figure in its
``sources.nvlink`` note (``catalog/data/gpus.json``); the note is the source, quoted in
:data:`LINK_SOURCES`. A GPU without a stated figure (the AMD parts: their entries name Infinity
Fabric links but no bandwidth) answers None, and the estimate then leaves the all-reduce out
and says so.
"""

from __future__ import annotations

LINK_GBPS: dict[str, float] = {
    "A100-40GB-SXM": 600.0,
    "A100-80GB-SXM": 600.0,
    "H100-SXM": 900.0,
    "H100-NVL": 600.0,
    "H200": 900.0,
    "H20": 900.0,
    "B200": 1800.0,
    "B300": 1800.0,
}
"""Bidirectional NVLink GB/s per GPU, by catalog key."""

LINK_SOURCES: dict[str, str] = {
    "A100-40GB-SXM": "gpus.json A100-40GB-SXM sources.nvlink: NVIDIA A100 datasheet (600 GB/s)",
    "A100-80GB-SXM": "gpus.json A100-80GB-SXM sources.nvlink: NVLink 600 GB/s per GPU (NVLink 3.0)",
    "H100-SXM": "gpus.json H100-SXM sources.nvlink: NVIDIA H100 datasheet (NVLink 900 GB/s)",
    "H100-NVL": "gpus.json H100-NVL sources.nvlink: H100 NVL NVLink bridge 600 GB/s",
    "H200": "gpus.json H200 sources.nvlink: NVIDIA H200 datasheet (900 GB/s)",
    "H20": "gpus.json H20 sources.nvlink: NVLink 4.0, 900 GB/s",
    "B200": "gpus.json B200 sources.nvlink: 2x 900 GB/s NVLink 5",
    "B300": "gpus.json B300 sources.nvlink: NVLink 5, 1.8 TB/s bidirectional per GPU",
}
"""Where each figure of :data:`LINK_GBPS` is stated."""


def link_gbps(gpu_key: str) -> float | None:
    """The bidirectional interconnect GB/s of one ``gpu_key`` GPU, or None when the catalog
    states no figure (module docstring)."""
    return LINK_GBPS.get(gpu_key)
