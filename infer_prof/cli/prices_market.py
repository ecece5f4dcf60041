"""The instance table of ``infer-prof prices``: SkyPilot's GPU instances, cheapest per GPU first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from infer_prof.catalog.market import Market
from infer_prof.core.catalog.market import InstanceOffer, Tier
from infer_prof.report.fit import print_fitted


def cheapest_region(offers: list[InstanceOffer], tier: Tier) -> list[tuple[InstanceOffer, int]]:
    """One ``(offer, regions listed)`` per (cloud, instance type): its cheapest region in
    ``tier``; ``offers`` must come sorted cheapest first (``filter_offers``)."""
    seen: dict[tuple[str, str], list[Any]] = {}
    for o in offers:
        k = (o.cloud, o.instance_type)
        if k in seen:
            seen[k][1] += 1
        else:
            seen[k] = [o, 1]
    return [(o, n) for o, n in seen.values()]


def _money(value: float | None) -> str:
    if value is None:
        return "-"
    return f"${value:,.2f}" if value >= 10 else f"${value:,.3f}".rstrip("0").rstrip(".")


def gpu_label(o: InstanceOffer) -> str:
    """The GPU key, or ``? NAME`` for an accelerator infer-prof does not know."""
    return o.gpu if o.gpu else f"? {o.accelerator}"


def market_table(rows: list[tuple[InstanceOffer, int]], market: Market, tier: Tier,
                 default: InstanceOffer | None, all_regions: bool) -> Table:
    """The table: cloud, instance, GPUs, GPU, region, $/h and $/GPU-h (in ``tier``, named in
    the title), the other tier's $/GPU-h."""
    columns: list[tuple[str, Callable[[InstanceOffer, int], str]]] = [
        ("", lambda o, n: "*" if o == default else ""),
        ("cloud", lambda o, n: o.cloud),
        ("instance", lambda o, n: o.instance_type),
        ("GPUs", lambda o, n: str(o.gpu_count)),
        ("gpu", lambda o, n: gpu_label(o)),
        ("region", lambda o, n: o.region if all_regions or n == 1 else f"{o.region} (+{n - 1})"),
        ("$/h", lambda o, n: _money(o.price(tier))),
        ("$/GPU-h", lambda o, n: _money(o.per_gpu(tier))),
    ]
    other: Tier = "on-demand" if tier == "spot" else "spot"
    columns.append((f"{other} $/GPU-h", lambda o, n: _money(o.per_gpu(other))))
    if any(o.note for o, _ in rows):
        columns.append(("note", lambda o, n: "!" if o.note else ""))
    table = Table(title=f"GPU instances, {tier} $ per hour, cheapest per GPU-hour first",
                  box=box.SIMPLE_HEAD,
                  show_edge=False, padding=0)
    cells = [[cell(o, n) for _, cell in columns] for o, n in rows]
    for i, (name, _) in enumerate(columns):
        widest = max([len(name)] + [len(c[i]) for c in cells])
        right = "$" in name or name == "GPUs"
        table.add_column(name, no_wrap=name != "region", justify="right" if right else "left",
                         min_width=None if name in ("instance", "region") else widest)
    for c in cells:
        table.add_row(*c)
    return table


def print_market(console: Console, rows: list[tuple[InstanceOffer, int]], market: Market,
                 tier: Tier, default: InstanceOffer | None, all_regions: bool) -> None:
    """The table, then where its prices come from and the notes of the rows marked '!'. On a
    narrow console the per-instance price, then the region and the other tier's price are left
    out (:func:`~infer_prof.report.fit.print_fitted`)."""
    other: Tier = "on-demand" if tier == "spot" else "spot"
    print_fitted(console, market_table(rows, market, tier, default, all_regions),
                 ("$/h", "region", f"{other} $/GPU-h", "note"), ("instance",))
    console.print(f"prices: {market.describe()}", markup=False, highlight=False)
    if market.provenance.get("note"):
        console.print(f"  {market.provenance['note']}", markup=False, highlight=False)
    if market.stale:
        console.print(f"warning: these prices are {market.age_days} days old", markup=False)
    notes = sorted({f"{o.cloud} {o.instance_type}: {o.note}" for o, _ in rows
                    if o.note and o.gpu})
    notes += sorted({f"{gpu_label(o)}: {o.note}" for o, _ in rows if o.note and not o.gpu})
    for note in notes:
        console.print(f"! {note}", markup=False, highlight=False)
    if not all_regions:
        console.print("one row per instance type at its cheapest region (+N: other regions "
                      "listed); --all-regions lists each", markup=False, highlight=False)
    if default is not None:
        console.print(f"* = the instance a 1-GPU run with --gpu {default.gpu} is priced at "
                      "(a run on N GPUs: the cheapest N-GPU instance)",
                      markup=False, highlight=False)
