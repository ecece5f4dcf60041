"""The shipped GPU-to-GPU interconnect figures (``infer_prof/catalog/data/interconnects.json``):
what tensor parallelism's all-reduces run on.

- ``links``: the GPUs whose every GPU of a board shares one NVLink domain (through NVSwitch:
  every GPU has its whole figure to the group) or one direct mesh (AMD's Infinity Fabric: a
  link to each peer, so a group of ``n`` reaches its ``n - 1`` peers over ``n - 1`` links), with
  a stated source.
- ``pcie``: for PCIe cards (an NVLink bridge is not assumed: a rented instance may not have
  one), each generation's x16 figure and each card's generation and lanes, with sources. A
  group of ``n`` cards all-reduces over each card's own link: ``lanes / 16 x`` the
  generation's bidirectional x16 figure, whatever ``n``.

:func:`tp_link` gives a group's :class:`TpLink`; a GPU in neither list (or a group larger than
its domain) has none: its all-reduce time is unknown, and ``infer-prof estimate`` does not rank
such a group.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

DATA_FILE = "interconnects.json"

LinkKind = Literal["nvlink", "infinity-fabric", "pcie"]


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


@dataclass(frozen=True)
class TpLink:
    """What a tensor-parallel group all-reduces over: ``kind`` (``nvlink``,
    ``infinity-fabric`` or ``pcie``), ``bidirectional_gbps`` per GPU (both directions; a ring
    uses one: half), ``link`` in words, ``source``."""

    kind: LinkKind
    bidirectional_gbps: float
    link: str
    source: str


@dataclass(frozen=True)
class PcieSlot:
    """One PCIe card's host link: ``generation`` (3, 4, 5), ``lanes`` (16 or 8), ``source``."""

    gpu: str
    generation: int
    lanes: int
    source: str


def _document() -> dict[str, object]:
    text = resources.files("infer_prof.catalog.data").joinpath(DATA_FILE).read_text("utf-8")
    return dict(json.loads(text))


@cache
def interconnects() -> dict[str, Interconnect]:
    """Every listed GPU's :class:`Interconnect`, by GPU catalog key."""
    links = _document()["links"]
    assert isinstance(links, dict)
    return {key: Interconnect(gpu=key, bidirectional_gbps=float(e["bidirectional_gbps"]),
                              link=str(e["link"]), max_gpus=int(e["max_gpus"]),
                              source=str(e["source"]), topology=str(e.get("topology", "switch")))
            for key, e in links.items()}


@cache
def pcie_generations() -> dict[int, tuple[float, str]]:
    """``{generation: (bidirectional GB/s at x16, source)}``."""
    pcie = _document()["pcie"]
    assert isinstance(pcie, dict)
    return {int(k): (float(v["bidirectional_gbps_x16"]), str(v["source"]))
            for k, v in pcie["generations"].items()}


@cache
def pcie_slots() -> dict[str, PcieSlot]:
    """Every listed PCIe card's :class:`PcieSlot`, by GPU catalog key."""
    pcie = _document()["pcie"]
    assert isinstance(pcie, dict)
    return {key: PcieSlot(gpu=key, generation=int(e["generation"]), lanes=int(e["lanes"]),
                          source=str(e["source"]))
            for key, e in pcie["gpus"].items()}


def pcie_gbps(gpu: str) -> float | None:
    """A PCIe card's bidirectional GB/s: its generation's x16 figure x ``lanes / 16``; None
    when the card is not listed."""
    slot = pcie_slots().get(gpu)
    if slot is None:
        return None
    return pcie_generations()[slot.generation][0] * slot.lanes / 16


def link_gbps(gpu: str, gpu_count: int) -> float | None:
    """The bidirectional GB/s per GPU a ``gpu_count`` x ``gpu`` tensor-parallel group
    all-reduces over on its NVLink domain or mesh: the GPU's figure behind a switch,
    ``(gpu_count - 1) x`` the per-link figure in a direct mesh (one link to each peer, all used
    at once); None when the GPU is not listed or the group is larger than one domain (PCIe:
    :func:`tp_link`)."""
    link = interconnects().get(gpu)
    if link is None or gpu_count > link.max_gpus:
        return None
    if link.topology == "mesh":
        return link.bidirectional_gbps * max(1, gpu_count - 1)
    return link.bidirectional_gbps


def tp_link(gpu: str, gpu_count: int) -> TpLink | None:
    """What a ``gpu_count`` x ``gpu`` group all-reduces over: its NVLink domain or Infinity
    Fabric mesh (:func:`link_gbps`), else, for a listed PCIe card, its PCIe link
    (:func:`pcie_gbps`); None for one GPU, or when neither is known."""
    if gpu_count <= 1:
        return None
    fast = link_gbps(gpu, gpu_count)
    if fast is not None:
        ic = interconnects()[gpu]
        kind: LinkKind = "infinity-fabric" if ic.topology == "mesh" else "nvlink"
        return TpLink(kind=kind, bidirectional_gbps=fast, link=ic.link, source=ic.source)
    pcie = pcie_gbps(gpu)
    if pcie is None:
        return None
    slot = pcie_slots()[gpu]
    return TpLink(kind="pcie", bidirectional_gbps=pcie,
                  link=f"PCIe Gen{slot.generation} x{slot.lanes}",
                  source=f"{slot.source}; {pcie_generations()[slot.generation][1]}")
