"""Reading SkyPilot's instance catalogs: the GPU rows of each cloud's ``vms.csv``.

SkyPilot (skypilot-org/skypilot-catalog, and every SkyPilot user's ``~/.sky/catalogs/``) keeps
one folder per catalog version and one ``<cloud>/vms.csv`` per cloud. The columns are named by
a header; their order differs between clouds::

    InstanceType, AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, GpuInfo, Price,
    SpotPrice, Region, AvailabilityZone (AWS, GCP, RunPod), Generation (Azure)

``Price``/``SpotPrice`` are USD per hour for the whole instance; ``GpuInfo`` is a Python-literal
dict with each GPU's memory (AWS, GCP, Lambda) or just the GPU's name (Azure, RunPod).

GCP lists a GPU's price apart from its host VM: rows with an empty ``InstanceType`` price the
accelerators per zone, rows with no accelerator price the VM. An instance type with GPUs built
in (a3-highgpu-8g: 8 H100) costs host + accelerators in the same zone (:data:`GCP_HOSTS`);
GPUs attached to an N1 VM are listed at the accelerator price alone, with a note.

Each (cloud, instance type, region) becomes one :class:`InstanceOffer` at its cheapest zone
(on-demand and spot minimums taken separately). Bad rows are skipped and counted by reason.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from infer_prof.catalog.accelerators import fixed_gpu_count, match_accelerator
from infer_prof.core.catalog.market import InstanceOffer

REQUIRED_COLUMNS: tuple[str, ...] = (
    "InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "Region",
)

GCP_HOSTS: dict[str, dict[int, str]] = {
    "H100": {1: "a3-highgpu-1g", 2: "a3-highgpu-2g", 4: "a3-highgpu-4g", 8: "a3-highgpu-8g"},
    "H100-MEGA": {8: "a3-megagpu-8g"},
    "H200": {8: "a3-ultragpu-8g"},
    "B200": {8: "a4-highgpu-8g"},
    "A100": {1: "a2-highgpu-1g", 2: "a2-highgpu-2g", 4: "a2-highgpu-4g", 8: "a2-highgpu-8g",
             16: "a2-megagpu-16g"},
    "A100-80GB": {1: "a2-ultragpu-1g", 2: "a2-ultragpu-2g", 4: "a2-ultragpu-4g",
                  8: "a2-ultragpu-8g"},
    "L4": {1: "g2-standard-4", 2: "g2-standard-24", 4: "g2-standard-48", 8: "g2-standard-96"},
}
"""GCP accelerator (name, count) -> the instance type it comes built into."""

GCP_ATTACHED_NOTE = "GPU price only: attached to an N1 VM, whose price is extra"

GCP_NO_HOST_NOTE = ("GPU price only: the catalog read has no price for its host VM {host} (a "
                    "catalog of GPU rows only), whose price is extra")
"""The note of a GCP accelerator whose built-in host VM has no row in the file read at all."""


@dataclass
class CatalogRead:
    """What reading one or more ``vms.csv`` gave: offers, and the rows left out and why."""

    offers: list[InstanceOffer] = field(default_factory=list)
    rows: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    unknown: Counter[str] = field(default_factory=Counter)
    files: list[str] = field(default_factory=list)

    def merge(self, other: CatalogRead) -> None:
        """Add another read's offers and counts to this one."""
        self.offers += other.offers
        self.rows += other.rows
        self.skipped.update(other.skipped)
        self.unknown.update(other.unknown)
        self.files += other.files

    def summary(self) -> str:
        """``N rows read, M skipped (why: n, ...), K unknown accelerators (names)``."""
        text = f"{self.rows} rows read, {len(self.offers)} GPU instance offers"
        if self.skipped:
            why = ", ".join(f"{r}: {n}" for r, n in sorted(self.skipped.items()))
            text += f"; {sum(self.skipped.values())} bad rows skipped ({why})"
        if self.unknown:
            text += f"; accelerators infer-prof does not know: {', '.join(sorted(self.unknown))}"
        return text


class _Cheapest:
    """The cheapest on-demand and spot price of one offer over its zones."""

    def __init__(self) -> None:
        self.on_demand: float | None = None
        self.spot: float | None = None

    def add(self, on_demand: float | None, spot: float | None) -> None:
        if on_demand is not None and (self.on_demand is None or on_demand < self.on_demand):
            self.on_demand = on_demand
        if spot is not None and (self.spot is None or spot < self.spot):
            self.spot = spot


TOTAL_MEMORY_CLOUDS: frozenset[str] = frozenset({"vast", "primeintellect", "verda"})
"""Clouds whose ``GpuInfo`` gives the whole instance's GPU memory where the others give one
GPU's (Vast ``2x-H200``: 287542 MiB; Prime Intellect ``8xA100_80GB``: 655360 MiB; Verda
``8H100.80S.176V``: 640 GB)."""

PLACEHOLDER_USD_PER_GPU_HOUR = 0.02
"""A row whose every price is at most this many USD per GPU-hour is a placeholder, not a rental
price, and is skipped (counted): Mithril's catalog lists its A100 and B200 instances at $0.01 per
GPU-hour; the lowest real price in the catalogs is $0.06 (an RTX A2000 on SimplePod)."""

MIB_IS_GIB_BELOW = 1024
"""A ``SizeInMiB`` below this is GiB (RunPod's and Shadeform's catalogs write 80 for 80 GB):
no GPU has less than 1 GiB of memory."""


def _literal(text: str) -> Any:
    """A ``GpuInfo`` cell as Python data: a Python literal (most clouds), else JSON (Hyperstack
    writes ``null``, Spheron and Prime Intellect write JSON); None when neither."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, TypeError):
        pass
    try:
        return json.loads(text)
    except ValueError:
        return None


def _get(mapping: Any, key: str) -> Any:
    """``mapping[key]`` with the key's case ignored (DigitalOcean writes ``sizeinmib``)."""
    if not isinstance(mapping, dict):
        return None
    for k, v in mapping.items():
        if isinstance(k, str) and k.lower() == key.lower():
            return v
    return None


@cache
def gpu_memory_gib(gpu_info: str) -> float | None:
    """The memory in GiB a ``GpuInfo`` cell gives its first GPU (``SizeInMiB`` / 1024), else None.

    ``GpuInfo`` is a dict, ``{'Gpus': [{'MemoryInfo': {'SizeInMiB': 81920}}]}``, written as a
    Python literal or as JSON, with keys in any case; a ``SizeInMiB`` below
    :data:`MIB_IS_GIB_BELOW` is taken as GiB. A bare name (Azure, Paperspace), a zero size or
    anything unreadable gives None. Cached: a catalog repeats the same cell on every row of an
    instance type. For :data:`TOTAL_MEMORY_CLOUDS` the value is the whole instance's.
    """
    text = gpu_info.strip()
    if not text.startswith("{"):
        return None
    gpus = _get(_literal(text), "Gpus")
    if not isinstance(gpus, list) or not gpus:
        return None
    mib = _get(_get(gpus[0], "MemoryInfo"), "SizeInMiB")
    if isinstance(mib, bool) or not isinstance(mib, (int, float)) or not mib > 0:
        return None
    return float(mib) if mib < MIB_IS_GIB_BELOW else float(mib) / 1024.0


def _money(raw: str) -> float | None:
    """A price cell: None when empty or 0 (Vast writes 0.00 for "no spot price"; nothing is
    rented for free); ValueError when not a finite number >= 0."""
    raw = raw.strip()
    if not raw:
        return None
    value = float(raw)
    if not math.isfinite(value) or value < 0:
        raise ValueError(raw)
    return value or None


def _add(total: float | None, part: float | None) -> float | None:
    """Host + accelerator USD/hour, rounded to 6 decimals (the catalog's precision)."""
    return None if total is None or part is None else round(total + part, 6)


class _Parser:
    """One file's rows -> cheapest price per (instance type, accelerator, count, region)."""

    def __init__(self, cloud: str) -> None:
        self.cloud = cloud
        self.read = CatalogRead()
        self.best: dict[tuple[str, str, int, str], _Cheapest] = {}
        self.memory: dict[tuple[str, str, int, str], float | None] = {}
        self.hosts: dict[tuple[str, str], tuple[float | None, float | None]] = {}
        self.gcp_gpus: list[tuple[str, int, float | None, str, str, float | None, float | None]]
        self.gcp_gpus = []
        self.no_host: set[str] = set()

    def row(self, cells: dict[str, str]) -> None:
        instance = cells["InstanceType"].strip()
        acc = cells["AcceleratorName"].strip()
        region = cells["Region"].strip()
        zone = cells.get("AvailabilityZone", "").strip()
        try:
            on_demand = _money(cells["Price"])
            spot = _money(cells.get("SpotPrice", ""))
        except ValueError:
            self.read.skipped["price not a number >= 0"] += 1
            return
        if not acc:
            if self.cloud == "gcp" and instance:
                self.hosts[(instance, zone)] = (on_demand, spot)
            return  # an instance without accelerators
        if acc.lower().startswith("tpu"):
            return  # TPUs are not GPUs
        try:
            count = float(cells["AcceleratorCount"])
        except ValueError:
            self.read.skipped["AcceleratorCount not a number"] += 1
            return
        if not count > 0 or count != int(count):
            self.read.skipped["AcceleratorCount not a whole number > 0"] += 1
            return
        if on_demand is None and spot is None:
            self.read.skipped["no price"] += 1
            return
        if all(p is None or p / count <= PLACEHOLDER_USD_PER_GPU_HOUR for p in (on_demand, spot)):
            self.read.skipped[f"price at most ${PLACEHOLDER_USD_PER_GPU_HOUR} per GPU-hour "
                              "(a placeholder)"] += 1
            return
        if not region:
            self.read.skipped["no region"] += 1
            return
        memory = gpu_memory_gib(cells.get("GpuInfo") or "")
        if memory is not None and self.cloud in TOTAL_MEMORY_CLOUDS:
            memory /= count
        if self.cloud == "gcp" and not instance:
            self.gcp_gpus.append((acc, int(count), memory, region, zone, on_demand, spot))
            return
        if not instance:
            self.read.skipped["no instance type"] += 1
            return
        self._offer(instance, acc, int(count), memory, region, on_demand, spot)

    def _offer(self, instance: str, acc: str, count: int, memory: float | None, region: str,
               on_demand: float | None, spot: float | None) -> None:
        k = (instance, acc, count, region)
        self.best.setdefault(k, _Cheapest()).add(on_demand, spot)
        if memory is not None or k not in self.memory:
            self.memory[k] = memory

    def join_gcp(self) -> None:
        """Price each GCP accelerator row with its host VM in the same zone. A host type with
        no row anywhere in the file (a catalog of GPU rows only) gives the accelerator's price
        alone, with :data:`GCP_NO_HOST_NOTE`; one sold elsewhere but not in the zone, none."""
        host_types = {h for h, _ in self.hosts}
        for acc, count, memory, region, zone, on_demand, spot in self.gcp_gpus:
            host = GCP_HOSTS.get(acc, {}).get(count)
            if host is None:
                self._offer(f"{count}x {acc} (attached)", acc, count, memory, region, on_demand,
                            spot)
                continue
            if host not in host_types:
                self.no_host.add(host)
                self._offer(host, acc, count, memory, region, on_demand, spot)
                continue
            if (host, zone) not in self.hosts:
                continue  # the accelerator is sold in a zone where its VM is not
            host_od, host_spot = self.hosts[(host, zone)]
            self._offer(host, acc, count, memory, region, _add(on_demand, host_od),
                        _add(spot, host_spot))

    def offers(self, source: str, date: str | None) -> list[InstanceOffer]:
        out = []
        for (instance, acc, count, region), best in sorted(self.best.items()):
            if best.on_demand is None and best.spot is None:
                continue
            fixed, count_note = fixed_gpu_count(self.cloud, instance, count)
            match = match_accelerator(self.cloud, instance, acc, self.memory.get(
                (instance, acc, count, region)))
            notes = [n for n in (count_note, match.note) if n]
            if instance.endswith("(attached)"):
                notes.append(GCP_ATTACHED_NOTE)
            if instance in self.no_host:
                notes.append(GCP_NO_HOST_NOTE.format(host=instance))
            if match.gpu is None:
                self.read.unknown[acc] += 1
            out.append(InstanceOffer(
                cloud=self.cloud, instance_type=instance, accelerator=acc, gpu=match.gpu,
                gpu_count=fixed, gpu_memory_gib=match.memory_gib, region=region,
                on_demand_usd_per_hour=best.on_demand, spot_usd_per_hour=best.spot,
                source=source, date=date, note="; ".join(notes) or None,
            ))
        return out


def parse_vms_csv(text: str, cloud: str, source: str, date: str | None) -> CatalogRead:
    """The GPU offers of one cloud's ``vms.csv`` text, and the rows skipped.

    Raises ValueError (one line) when the file has no header or lacks a required column;
    a row with the wrong number of fields, an unreadable count or price, no price at all or no
    region is skipped and counted in ``skipped`` by reason. ``source``/``date`` are stamped on
    every offer.
    """
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise ValueError(f"{source}: empty file; a SkyPilot vms.csv starts with a header") from None
    except csv.Error as exc:
        raise ValueError(f"{source}: not CSV ({exc})") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise ValueError(f"{source}: the header lacks {', '.join(missing)}; not a SkyPilot vms.csv")
    parser = _Parser(cloud.lower())
    try:
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue
            parser.read.rows += 1
            if len(cells) != len(header):
                parser.read.skipped["wrong number of fields"] += 1
                continue
            parser.row(dict(zip(header, cells, strict=True)))
    except csv.Error as exc:
        raise ValueError(f"{source} line {reader.line_num}: not CSV ({exc})") from None
    if parser.cloud == "gcp":
        parser.join_gcp()
    parser.read.offers = parser.offers(source, date)
    parser.read.files.append(source)
    return parser.read


def snapshot_rows(offers: list[InstanceOffer]) -> list[dict[str, Any]]:
    """Offers as the rows of the shipped snapshot CSV (see :data:`SNAPSHOT_COLUMNS`)."""
    return [{c: "" if getattr(o, c) is None else getattr(o, c) for c in SNAPSHOT_COLUMNS}
            for o in offers]


SNAPSHOT_COLUMNS: tuple[str, ...] = (
    "cloud", "instance_type", "accelerator", "gpu", "gpu_count", "gpu_memory_gib", "region",
    "on_demand_usd_per_hour", "spot_usd_per_hour", "note",
)
"""The columns of the shipped snapshot: one row per (cloud, instance type, region)."""
