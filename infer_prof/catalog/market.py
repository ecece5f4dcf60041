"""The instance market infer-prof prices from: SkyPilot's live catalogs, else the shipped snapshot.

Where the prices come from, first found wins:

1. ``--prices-from DIR``: a folder of SkyPilot catalogs (``DIR/<cloud>/vms.csv``,
   ``DIR/<version>/<cloud>/vms.csv`` or a catalog repository's ``DIR/catalogs/<version>/...``);
2. ``~/.sky/catalogs/``: the copies SkyPilot keeps (and refreshes) for its users;
3. the snapshot shipped in ``infer_prof/catalog/data/skypilot_gpu_prices.csv.gz`` with its
   provenance in ``skypilot_gpu_prices.json`` (rebuilt by ``scripts/refresh_prices.py``).

A folder that is missing or has no readable ``vms.csv`` is one line in ``Market.notice`` and the
snapshot is used. A live catalog's date is its files' modification time (when SkyPilot fetched
it); the snapshot's is the one its provenance records. Prices older than :data:`STALE_DAYS` are
shown with their age.
"""

from __future__ import annotations

import csv
import datetime as dt
import difflib
import gzip
import io
import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from infer_prof.catalog.skypilot import SNAPSHOT_COLUMNS, CatalogRead, parse_vms_csv
from infer_prof.core.catalog.market import InstanceOffer

SNAPSHOT_DATA = "skypilot_gpu_prices.csv.gz"
SNAPSHOT_PROVENANCE = "skypilot_gpu_prices.json"
STALE_DAYS = 90


@dataclass(frozen=True)
class Market:
    """Instance offers and where they came from.

    ``source`` is "live" (SkyPilot's catalogs) or "snapshot"; ``origin`` the folder or file;
    ``date`` (YYYY-MM-DD) how current the prices are and ``age_days`` how old that is;
    ``notice`` one line when a live folder was asked for but could not be used.
    """

    offers: tuple[InstanceOffer, ...]
    source: str
    origin: str
    date: str | None
    age_days: int | None
    read: str
    notice: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def stale(self) -> bool:
        """True when the prices are older than :data:`STALE_DAYS`."""
        return self.age_days is not None and self.age_days > STALE_DAYS

    def describe(self) -> str:
        """``snapshot of SkyPilot's catalog (commit abc1234, 2026-11-24, 0 days old)``; a snapshot
        whose files were read at their own commits says ``29 clouds' files, each at its own
        commit`` (the commits are in its provenance, ``skypilot_gpu_prices.json``)."""
        age = f"{self.age_days} days old" if self.age_days is not None else "age unknown"
        if self.stale:
            age = f"{age}: older than {STALE_DAYS} days"
        if self.source == "live":
            return f"SkyPilot's catalogs in {self.origin} ({self.date or '?'}, {age})"
        commit = str(self.provenance.get("commit") or "?")
        at = (f"{len(self.provenance.get('clouds') or {})} clouds' files, each at its own commit"
              if commit == "per-file" else f"commit {commit[:12]}")
        return f"snapshot of SkyPilot's catalog ({at}, {self.date or '?'}, {age})"

    def to_dict(self) -> dict[str, Any]:
        """Where the prices came from, JSON-ready (the offers are not included)."""
        return {"source": self.source, "origin": self.origin, "date": self.date,
                "age_days": self.age_days, "stale": self.stale, "read": self.read,
                "notice": self.notice}


class MarketError(ValueError):
    """A catalog folder that cannot be used; the message is one line."""


def _age(date: str | None, today: dt.date) -> int | None:
    if not date:
        return None
    try:
        return (today - dt.date.fromisoformat(date[:10])).days
    except ValueError:
        return None


_VERSIONED = re.compile(r"(?:^|/)(v\d+)/([^/]+)/vms\.csv$")


def newest_per_cloud(names: list[str], version: str | None = None) -> dict[str, str]:
    """``{cloud: path}``: for each cloud the ``.../vN/<cloud>/vms.csv`` of the highest ``vN``
    that has one (only ``version``'s when given).

    SkyPilot bumps the catalog version per release and fetches a cloud's file on first use, so
    a catalog folder (``~/.sky/catalogs``, or the catalog repository, where some clouds stopped
    at an older version) can hold different clouds in different versions; each cloud is read
    from its newest. Paths not in that layout are ignored.
    """
    best: dict[str, tuple[int, str]] = {}
    for name in names:
        m = _VERSIONED.search(name.replace("\\", "/"))
        if m is None or (version is not None and m.group(1) != version):
            continue
        n = int(m.group(1)[1:])
        if m.group(2) not in best or n > best[m.group(2)][0]:
            best[m.group(2)] = (n, name)
    return {cloud: name for cloud, (_, name) in sorted(best.items())}


def catalog_files(root: Path) -> list[tuple[str, Path]]:
    """``(cloud, vms.csv path)`` under a SkyPilot catalog folder.

    ``root`` may be a cloud folder's parent (``root/aws/vms.csv``), a folder of versions
    (``root/v8/aws/vms.csv``, as in ``~/.sky/catalogs``) or a catalog repository
    (``root/catalogs/v8/aws/vms.csv``); of several versions each cloud is read from the highest
    ``vN`` that has it (:func:`newest_per_cloud`).
    """
    if (root / "catalogs").is_dir():
        root = root / "catalogs"
    direct = sorted(root.glob("*/vms.csv"))
    if direct:
        return [(p.parent.name, p) for p in direct]
    found = newest_per_cloud([str(p) for p in root.glob("v*/*/vms.csv")])
    return [(cloud, Path(path)) for cloud, path in found.items()]


def read_catalog_dir(root: Path) -> tuple[CatalogRead, str | None]:
    """Read every cloud's ``vms.csv`` under ``root`` (see :func:`catalog_files`).

    Returns the read and the oldest file modification date (YYYY-MM-DD): the prices are as
    current as the oldest file read. A file that cannot be read or lacks SkyPilot's columns
    counts as a skipped file; raises :class:`MarketError` when ``root`` is missing or no file
    could be read.
    """
    if not root.is_dir():
        raise MarketError(f"{root}: no such folder")
    files = catalog_files(root)
    if not files:
        raise MarketError(f"{root}: no <cloud>/vms.csv in it (SkyPilot's catalog layout)")
    total = CatalogRead()
    oldest: float | None = None
    failures = []
    for cloud, path in files:
        try:
            text = path.read_text(encoding="utf-8-sig")
            mtime = path.stat().st_mtime
            date = dt.datetime.fromtimestamp(mtime, dt.UTC).date().isoformat()
            total.merge(parse_vms_csv(text, cloud, str(path), date))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            failures.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")
            total.skipped["unreadable file"] += 1
            continue
        oldest = mtime if oldest is None else min(oldest, mtime)
    if oldest is None:
        raise MarketError(f"{root}: no readable vms.csv ({failures[0]})")
    day = dt.datetime.fromtimestamp(oldest, dt.UTC).date().isoformat()
    return total, day


@cache
def _snapshot() -> tuple[tuple[InstanceOffer, ...], dict[str, Any]]:
    data = resources.files("infer_prof.catalog.data")
    provenance = json.loads(data.joinpath(SNAPSHOT_PROVENANCE).read_text("utf-8"))
    raw = gzip.decompress(data.joinpath(SNAPSHOT_DATA).read_bytes()).decode("utf-8")
    return parse_snapshot(raw, provenance), provenance


def parse_snapshot(text: str, provenance: dict[str, Any]) -> tuple[InstanceOffer, ...]:
    """Offers from snapshot CSV text (:data:`SNAPSHOT_COLUMNS`); source and date from the
    provenance (``repository@commit``, ``date``)."""
    source = f"{provenance.get('repository', 'skypilot-catalog')}@{provenance.get('commit', '?')}"
    date = provenance.get("date")

    def num(raw: str) -> float | None:
        return float(raw) if raw else None

    out = []
    for row in csv.DictReader(io.StringIO(text)):
        missing = [c for c in SNAPSHOT_COLUMNS if c not in row]
        if missing:
            raise ValueError(f"snapshot lacks columns {', '.join(missing)}")
        out.append(InstanceOffer(
            cloud=row["cloud"], instance_type=row["instance_type"],
            accelerator=row["accelerator"], gpu=row["gpu"] or None,
            gpu_count=int(row["gpu_count"]), gpu_memory_gib=num(row["gpu_memory_gib"]),
            region=row["region"], on_demand_usd_per_hour=num(row["on_demand_usd_per_hour"]),
            spot_usd_per_hour=num(row["spot_usd_per_hour"]), source=source, date=date,
            note=row["note"] or None,
        ))
    return tuple(out)


def snapshot_market(today: dt.date | None = None, notice: str | None = None) -> Market:
    """The shipped snapshot as a :class:`Market`."""
    offers, provenance = _snapshot()
    date = provenance.get("date")
    return Market(
        offers=offers, source="snapshot", origin=f"infer_prof/catalog/data/{SNAPSHOT_DATA}",
        date=date, age_days=_age(date, today or dt.date.today()),
        read=str(provenance.get("read") or ""), notice=notice, provenance=provenance,
    )


def load_market(prices_from: str | None = None, today: dt.date | None = None) -> Market:
    """The market to price from: ``prices_from``, else ``~/.sky/catalogs``, else the snapshot.

    Never raises for a missing or unreadable folder: the snapshot is used and ``notice`` says
    why in one line.
    """
    today = today or dt.date.today()
    if prices_from is not None:
        root = Path(prices_from).expanduser()
    else:
        root = Path.home() / ".sky" / "catalogs"
        if not root.is_dir():
            return snapshot_market(today)
    try:
        read, date = read_catalog_dir(root)
    except MarketError as exc:
        return snapshot_market(today, notice=f"{exc}; using the shipped snapshot")
    return Market(offers=tuple(read.offers), source="live", origin=str(root), date=date,
                  age_days=_age(date, today), read=read.summary())


# --------------------------------------------------------------------------- --instance


def nearest(word: str, choices: list[str], n: int = 3) -> str:
    """``a, b or c``: the closest of ``choices`` to ``word`` (difflib), for an error message."""
    lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(lower), n=n, cutoff=0.3)
    picks = [lower[c] for c in close] or sorted(choices)[:n]
    return ", ".join(picks[:-1]) + (" or " if len(picks) > 1 else "") + picks[-1] if picks else "-"


def _plain(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def uncatalogued(market: Market, name: str) -> list[InstanceOffer]:
    """The offers of an accelerator infer-prof's GPU catalog lacks, by the catalog's own name
    (``L4``, ``a10g``, ``MI300X``; case, ``-``, ``_`` and spaces ignored); [] when none."""
    wanted = _plain(name)
    return [o for o in market.offers if o.gpu is None and _plain(o.accelerator) == wanted]


def find_instance(market: Market, spec: str, gpu: str | None = None) -> InstanceOffer:
    """The offer ``CLOUD:TYPE[:REGION]`` names (without a region: its cheapest on-demand one).

    Raises ValueError with one line naming the nearest cloud, instance type or region, and a
    GPU mismatch when ``gpu`` (a GPU key) is given and the instance has another GPU.
    """
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
        raise ValueError(f"--instance {spec!r}: write CLOUD:TYPE or CLOUD:TYPE:REGION, "
                         "e.g. aws:p5.48xlarge:us-east-1")
    cloud, itype = parts[0].strip().lower(), parts[1].strip()
    region = parts[2].strip() if len(parts) == 3 else None
    clouds = sorted({o.cloud for o in market.offers})
    if cloud not in clouds:
        raise ValueError(f"--instance {spec}: no cloud {cloud!r} in {market.describe()}; "
                         f"nearest: {nearest(cloud, clouds)}")
    of_cloud = [o for o in market.offers if o.cloud == cloud]
    types = sorted({o.instance_type for o in of_cloud})
    same = [o for o in of_cloud if o.instance_type.lower() == itype.lower()]
    if not same:
        hint = ""
        if gpu:
            with_gpu = sorted({o.instance_type for o in of_cloud if o.gpu == gpu})
            hint = (f"; {cloud} instances with {gpu}: {', '.join(with_gpu[:5])}" if with_gpu
                    else f"; {cloud} has no {gpu} instance in this catalog")
        raise ValueError(f"--instance {spec}: {cloud} has no instance type {itype!r}; "
                         f"nearest: {nearest(itype, types)}{hint}")
    if gpu is not None and same[0].gpu != gpu:
        raise ValueError(f"--instance {spec}: has {same[0].gpu_count}x "
                         f"{same[0].gpu or same[0].accelerator + ' (unknown to infer-prof)'}, "
                         f"not {gpu}; leave out --gpu or name an instance with {gpu}")
    if region is not None:
        hit = [o for o in same if o.region.lower() == region.lower()]
        if not hit:
            regions = sorted({o.region for o in same})
            raise ValueError(f"--instance {spec}: {same[0].instance_type} is not listed in "
                             f"region {region!r}; nearest: {nearest(region, regions)}")
        return hit[0]
    priced = [o for o in same if o.on_demand_usd_per_hour is not None] or same
    return min(priced, key=lambda o: (o.on_demand_usd_per_hour or 0.0, o.region))
