"""The shipped GPU-to-GPU interconnect figures (``infer_prof/catalog/data/interconnects.json``):
what tensor parallelism's all-reduces run on, for the GPUs whose every GPU of a board shares one
NVLink domain (through NVSwitch: every GPU has its whole figure to the group) or one direct
mesh (AMD's Infinity Fabric: a link to each peer, so a group of ``n`` reaches its ``n - 1`` peers
over ``n - 1`` links), with a stated source. A GPU not listed has no figure: its all-reduce
time is unknown, and ``infer-prof estimate`` says so rather than guess."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

DATA_FILE = "interconnects.json"


@dataclass(frozen=True)
class Interconnect:
    """One GPU's link: ``bidirectional_gbps`` GB/s (both directions, as datasheets state it)
    per GPU (``topology`` "switch") or per link to one peer (``topology`` "mesh"), ``link`` in
    words, ``max_gpus`` the GPUs one domain joins, ``source``."""

    gpu: str
    bidirectional_gbps: float
    link: str
    max_gpus: int
    source: str
    topology: str = "switch"


@cache
def interconnects() -> dict[str, Interconnect]:
    """Every listed GPU's :class:`Interconnect`, by GPU catalog key."""
    text = resources.files("infer_prof.catalog.data").joinpath(DATA_FILE).read_text("utf-8")
    links = json.loads(text)["links"]
    return {key: Interconnect(gpu=key, bidirectional_gbps=float(e["bidirectional_gbps"]),
                              link=str(e["link"]), max_gpus=int(e["max_gpus"]),
                              source=str(e["source"]), topology=str(e.get("topology", "switch")))
            for key, e in links.items()}


def link_gbps(gpu: str, gpu_count: int) -> float | None:
    """The bidirectional GB/s per GPU a ``gpu_count`` x ``gpu`` tensor-parallel group
    all-reduces over: the GPU's figure behind a switch, ``(gpu_count - 1) x`` the per-link
    figure in a direct mesh (one link to each peer, all used at once); None when the GPU is not
    listed or the group is larger than one domain."""
    link = interconnects().get(gpu)
    if link is None or gpu_count > link.max_gpus:
        return None
    if link.topology == "mesh":
        return link.bidirectional_gbps * max(1, gpu_count - 1)
    return link.bidirectional_gbps
