#!/usr/bin/env python3
"""Rebuild infer-prof's price snapshot from SkyPilot's catalog repository.

    python scripts/refresh_prices.py SOURCE [--version v8] [--out infer_prof/catalog/data]

SOURCE is a checkout of skypilot-org/skypilot-catalog, a bare git directory of it (read with
``git show``, nothing checked out), or a folder in the same layout (``catalogs/<version>/<cloud>/
vms.csv``). Each cloud's ``vms.csv`` is read from the newest catalog version that has one (the
repository keeps some clouds at older versions), or from ``--version`` only. Its GPU rows become
one row per (cloud, instance type, region) at the cheapest zone (``infer_prof.catalog.skypilot``),
written to
``skypilot_gpu_prices.csv.gz``; ``skypilot_gpu_prices.json`` records the repository, commit and
commit date, and how many rows each cloud gave and skipped.

A plain folder has no commit: give ``--commit``/``--date``, or put a ``PROVENANCE.json``
(repository, commit, date, note, files) at its top; its fields are copied. Its ``files`` may be a
list of ``{"path" or "file", "repo", "commit", ...}`` (the layout ``shared/skypilot-catalog``
keeps, each file read at its own commit): each cloud's repository, path and commit are then
recorded under ``clouds`` and the snapshot's ``commit`` is ``per-file``.

The provenance also counts the NVIDIA and AMD GPU offers (Inferentia, Trainium, TPUs, FPGAs,
Gaudi and Qualcomm aside) and how many of them map to a GPU of infer-prof's catalog.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from infer_prof.catalog.accelerators import is_gpu_accelerator
from infer_prof.catalog.market import SNAPSHOT_DATA, SNAPSHOT_PROVENANCE, newest_per_cloud
from infer_prof.catalog.skypilot import (
    SNAPSHOT_COLUMNS,
    CatalogRead,
    parse_vms_csv,
    snapshot_rows,
)

REPOSITORY = "skypilot-org/skypilot-catalog"
REDUCTION = (
    "GPU rows only; one row per (cloud, instance type, region): the cheapest zone's on-demand "
    "and the cheapest zone's spot price, each taken separately; GCP accelerators priced with "
    "their host VM in the same zone"
)


PER_FILE_NOTE = (
    "GPU rows of SkyPilot's catalogs, each cloud's file at its own commit (listed in "
    "skypilot_gpu_prices.json); GCP's host-VM rows are not among them, so GCP's built-in GPUs "
    "are priced alone (said per row)")


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True,
                          capture_output=True, text=True).stdout


def _git_dir(source: Path) -> Path | None:
    if (source / ".git").exists():
        return source / ".git"
    if (source / "HEAD").is_file() and (source / "objects").is_dir():
        return source
    return None


def _versions(names: list[str]) -> list[str]:
    """The catalog versions (``v7``, ``v8``, ...) that hold a ``<cloud>/vms.csv``, oldest first."""
    found = {m.group(1) for n in names if (m := re.match(r"catalogs/(v\d+)/[^/]+/vms\.csv$", n))}
    return sorted(found, key=lambda v: int(v[1:]))


def read_source(source: Path, version: str | None) -> tuple[dict[str, str], dict[str, Any]]:
    """``({relative path: vms.csv text}, provenance fields)``: each cloud's ``vms.csv`` from the
    newest catalog version that has one, or from ``version`` only when given."""
    git_dir = _git_dir(source)
    if git_dir is not None:
        names = _git(git_dir, "ls-tree", "-r", "--name-only", "HEAD", "catalogs").split("\n")
        prov: dict[str, Any] = {
            "repository": REPOSITORY,
            "commit": _git(git_dir, "rev-parse", "HEAD").strip(),
            "date": _git(git_dir, "log", "-1", "--format=%cs", "HEAD").strip(),
            "date_is": "the commit date",
        }
    else:
        names = [str(p.relative_to(source)) for p in source.glob("catalogs/v*/*/vms.csv")]
        prov_file = source / "PROVENANCE.json"
        prov = json.loads(prov_file.read_text("utf-8")) if prov_file.is_file() else {}
        prov = _per_file_provenance(prov)
    versions = _versions(names)
    if not versions:
        sys.exit(f"error: {source}: no catalogs/<version>/<cloud>/vms.csv; give a checkout of "
                 f"{REPOSITORY}")
    if version is not None and version not in versions:
        sys.exit(f"error: {source}: no catalog version {version}; it has {', '.join(versions)}")
    picked = newest_per_cloud([n for n in names if n.startswith("catalogs/")], version)
    texts = {}
    for name in picked.values():
        texts[name] = (_git(git_dir, "show", f"HEAD:{name}") if git_dir is not None
                       else (source / name).read_text("utf-8-sig"))
    chosen = version or versions[-1]
    used = {cloud: name.split("/")[1] for cloud, name in picked.items()}
    if set(used.values()) != {chosen}:
        prov["catalog_versions"] = used
    prov["catalog_version"] = chosen
    return texts, prov


def _per_file_provenance(prov: dict[str, Any]) -> dict[str, Any]:
    """A ``PROVENANCE.json`` whose ``files`` is a list (one entry per file read, each at its own
    commit) as this script's layout: ``files`` keyed by cloud (repository, path, commit), the
    other list entries (``common/accelerators.csv``) dropped, and ``commit`` ``per-file``."""
    files = prov.get("files")
    if not isinstance(files, list):
        return prov
    by_cloud: dict[str, Any] = {}
    for f in files:
        path = str(f.get("path") or f.get("file") or "")
        m = re.match(r"catalogs/(v\d+)/([^/]+)/vms\.csv$", path)
        if m is None:
            continue
        by_cloud[m.group(2)] = {"repository": f.get("repo") or REPOSITORY, "path": path,
                                "commit": f.get("commit")}
    out = {k: v for k, v in prov.items() if k not in ("files", "method", "description")}
    out.setdefault("repository", REPOSITORY)
    out.setdefault("commit", "per-file")
    out.setdefault("note", PER_FILE_NOTE)
    out["files"] = by_cloud
    return out


def mapped_share(offers: list[Any]) -> dict[str, Any]:
    """How many NVIDIA and AMD GPU offers there are and how many map to a catalog GPU."""
    gpu = [o for o in offers if is_gpu_accelerator(o.accelerator)]
    mapped = sum(1 for o in gpu if o.gpu)
    return {"offers": len(offers), "gpu_offers": len(gpu), "mapped_gpu_offers": mapped,
            "mapped_share": round(mapped / len(gpu), 4) if gpu else None}


def build(texts: dict[str, str], prov: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """The gzipped snapshot CSV and its provenance document."""
    total = CatalogRead()
    per_cloud: dict[str, Any] = {}
    for name, text in texts.items():
        cloud = name.split("/")[2]
        read = parse_vms_csv(text, cloud, name, prov.get("date"))
        total.merge(read)
        per_cloud[cloud] = {"file": name, "rows": read.rows, "offers": len(read.offers),
                            "skipped": dict(read.skipped), "unknown": sorted(read.unknown),
                            **(prov.get("files") or {}).get(cloud, {})}
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(SNAPSHOT_COLUMNS), lineterminator="\n")
    writer.writeheader()
    offers = sorted(total.offers, key=lambda o: (o.cloud, o.instance_type, o.region))
    writer.writerows(snapshot_rows(offers))
    data = gzip.compress(buf.getvalue().encode("utf-8"), mtime=0)
    doc = {k: v for k, v in prov.items() if k != "files"}
    doc.setdefault("repository", REPOSITORY)
    doc.update({"reduction": REDUCTION, "read": total.summary(), "mapped": mapped_share(offers),
                "clouds": per_cloud})
    return data, doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", type=Path, help="checkout, bare git dir or folder of the catalog")
    ap.add_argument("--version", help="read only this catalog version, e.g. v8 (default: each "
                    "cloud from the newest version that has it)")
    ap.add_argument("--out", type=Path, default=Path("infer_prof/catalog/data"))
    ap.add_argument("--commit", help="commit to record (a plain folder has none)")
    ap.add_argument("--date", help="date of the prices, YYYY-MM-DD (a plain folder has none)")
    args = ap.parse_args(argv)
    texts, prov = read_source(args.source, args.version)
    if args.commit:
        prov["commit"] = args.commit
    if args.date:
        prov["date"] = args.date
        prov["date_is"] = ("given with --date: the day the rows were read (a plain folder has no "
                           "commit date)")
    data, doc = build(texts, prov)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / SNAPSHOT_DATA).write_bytes(data)
    (args.out / SNAPSHOT_PROVENANCE).write_text(json.dumps(doc, indent=2) + "\n", "utf-8")
    print(f"{args.out / SNAPSHOT_DATA}: {doc['read']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
