"""``infer-prof prices``: the GPU instances one can rent (SkyPilot's catalogs, or the snapshot of
them infer-prof ships), cheapest per GPU-hour first, and the seed articles' price rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from infer_prof.catalog.gpus import find_gpus
from infer_prof.catalog.market import Market, load_market, nearest, uncatalogued
from infer_prof.catalog.prices import (
    CANONICAL_GPU_KEYS,
    PriceCatalog,
    PriceRow,
    default_rows,
    load_prices,
)
from infer_prof.cli.declared import declared_command
from infer_prof.config.options import Opt
from infer_prof.report.fit import print_fitted

_LEFT = ("", "provider", "gpu", "date", "src")


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _money(value: float | None, digits: int = 2) -> str:
    """$1,234.50 style; up to ``digits`` decimals, at least 2 (or 0 when ``digits`` is 0)."""
    if value is None:
        return "-"
    text = f"{value:,.{digits}f}"
    if digits > 2:
        text = text.rstrip("0")
        text += "0" * max(0, 2 - len(text.split(".")[1]))
    return f"${text}"


def _gpu_keys(gpu: str) -> list[str]:
    """The catalog keys a ``--gpu`` value means: one key, or a family's every variant (``A100``
    -> the four A100 keys); ``[]`` for a name the GPU catalog does not know."""
    try:
        return [g.key for g in find_gpus(gpu)]
    except ValueError:
        return []


def _filter(catalog: PriceCatalog, gpu: str | None, provider: str | None) -> list[PriceRow]:
    rows = list(catalog.rows)
    if gpu is not None:
        keys = _gpu_keys(gpu)
        rows = [r for r in rows if r.gpu in keys]
    if provider is not None:
        wanted = provider.strip().lower()
        rows = [r for r in rows if r.provider.lower() == wanted]
    return rows


def _check_filters(market: Market, gpu: str | None, cloud: str | None, region: str | None,
                   max_price: float | None) -> list[str]:
    """The GPU keys of ``--gpu`` (one, or a family's every variant); exits 2 naming the nearest
    match for anything not listed."""
    keys: list[str] = []
    if gpu is not None:
        keys = _gpu_keys(gpu)
        if not keys and not uncatalogued(market, gpu):
            _fail(f"unknown GPU {gpu!r}; nearest: {nearest(gpu, list(CANONICAL_GPU_KEYS))} "
                  f"(known GPUs: {', '.join(CANONICAL_GPU_KEYS)})")
    clouds = sorted({o.cloud for o in market.offers})
    if cloud is not None and cloud.lower() not in clouds:
        _fail(f"--cloud {cloud!r} is not in {market.describe()}; nearest: "
              f"{nearest(cloud, clouds)}")
    regions = sorted({o.region for o in market.offers
                      if cloud is None or o.cloud == cloud.lower()})
    if region is not None and region.lower() not in {r.lower() for r in regions}:
        _fail(f"--region {region!r} is not in {market.describe()}"
              + (f" for {cloud}" if cloud else "") + f"; nearest: {nearest(region, regions)}")
    if gpu is not None and cloud is not None:
        pool = uncatalogued(market, gpu) if not keys else [o for o in market.offers
                                                            if o.gpu in keys]
        if not any(o.cloud == cloud.lower() for o in pool):
            name = keys[0] if len(keys) == 1 else gpu
            _fail(f"{cloud} has no {name} instance in {market.describe()}; clouds with "
                  f"{name}: {', '.join(sorted({o.cloud for o in pool})) or 'none'}")
    if max_price is not None and not max_price > 0:
        _fail(f"--max-price must be a positive USD per GPU-hour, got {max_price}")
    return keys


@dataclass(frozen=True)
class PricesOptions:
    """The options of ``infer-prof prices``, each declared once
    (:mod:`infer_prof.cli.declared`)."""

    gpu: Annotated[str | None, Opt(
        ("--gpu",),
        "Only this GPU (catalog key or alias, e.g. H100-SXM, RTX-4090), or every variant of a "
        "family (A100, H100).")] = None
    cloud: Annotated[str | None, Opt(
        ("--cloud",),
        "Only this cloud (aws, gcp, ...).")] = None
    region: Annotated[str | None, Opt(
        ("--region",),
        "Only this region.")] = None
    spot: Annotated[bool, Opt(
        ("--spot",),
        "Sort by and keep only spot prices.")] = False
    max_price: Annotated[float | None, Opt(
        ("--max-price",),
        "Only prices up to this many USD per GPU-hour.")] = None
    all_regions: Annotated[bool, Opt(
        ("--all-regions",),
        "A row per region (default: each instance's cheapest).")] = False
    prices_from: Annotated[str | None, Opt(
        ("--prices-from",),
        ("A folder of SkyPilot catalogs to read instead of ~/.sky/catalogs or the "
        "shipped snapshot."))] = None
    provider: Annotated[str | None, Opt(
        ("--provider",),
        "Only this provider's seed rows (no instance table).")] = None
    prices_file: Annotated[str | None, Opt(
        ("--prices",),
        "A seed price CSV to read instead of the shipped one.")] = None
    json_output: Annotated[bool, Opt(
        ("--json",),
        "Print a JSON list of rows.")] = False


def prices(o: PricesOptions) -> None:
    """List GPU prices: rentable instances (cloud, instance type, region, on-demand and spot,
    per instance and per GPU-hour) from SkyPilot's catalogs, cheapest per GPU-hour first, then
    the seed articles' rows (provider, $/hour, purchase price, source, date).

    Each price says where it comes from: the catalog (live ~/.sky/catalogs, or the shipped
    snapshot with its commit and date; older than 90 days: printed with its age) or the
    article it was copied from.
    """
    from infer_prof.core.catalog.market import Tier, cheapest_offer, filter_offers

    try:
        catalog = load_prices(o.prices_file)
    except ValueError as exc:
        _fail(f"{exc}; fix the file, or leave out --prices to use the shipped catalog")
    market = load_market(o.prices_from)
    if market.notice:
        typer.echo(f"note: {market.notice}", err=True)
    keys = _check_filters(market, o.gpu, o.cloud, o.region, o.max_price)
    key = keys[0] if len(keys) == 1 else None  # one GPU: its default price is marked
    tier: Tier = "spot" if o.spot else "on-demand"
    show_market = o.provider is None
    pool = market.offers
    if o.gpu is not None:
        pool = (tuple(x for x in market.offers if x.gpu in keys) if keys
                else tuple(uncatalogued(market, o.gpu)))
    offers = filter_offers(pool, cloud=o.cloud, region=o.region, tier=tier,
                           max_usd_per_gpu_hour=o.max_price) if show_market else []
    quote = cheapest_offer(market.offers, key, "on-demand", 1) if key and show_market else None
    default = next((o for o in offers if quote and o.key() == f"{quote.provider}:"
                    f"{quote.instance_type}:{quote.region}"), None)
    seed = [] if o.cloud or o.region or o.spot else _filter(catalog, o.gpu, o.provider)
    if o.max_price is not None:
        seed = [r for r in seed if (r.per_gpu("on_demand_usd_per_hour") or 0) <= o.max_price]
    picked = set() if default is not None else default_rows(catalog)
    if o.json_output:
        data = [{**o.to_dict(), "provider": o.cloud, "kind": "instance",
                 "catalog": market.to_dict(), "default": o == default} for o in offers]
        data += [{**r.to_dict(), "kind": "seed", "default": r.line in picked} for r in seed]
        typer.echo(json.dumps(data, indent=2))
        return
    console = Console()
    if offers:
        from infer_prof.cli.prices_market import cheapest_region, print_market

        rows = ([(o, 1) for o in offers] if o.all_regions or o.region
                else cheapest_region(offers, tier))
        print_market(console, rows, market, tier, default, o.all_regions or bool(o.region))
        if key is not None:
            _print_siblings(console, market, key)
        elif len(keys) > 1:
            console.print(f"{o.gpu} is a GPU family: every variant is listed ({', '.join(keys)}); "
                          "--gpu KEY lists one and marks the price a run on it uses",
                          markup=False, highlight=False)
        elif o.gpu is not None:
            console.print(f"{offers[0].accelerator} is not in infer-prof's GPU catalog (no specs "
                          f"for the planner): listed as the catalog names it ('?'); a run on it "
                          f"is priced with --instance or --price-per-hour",
                          markup=False, highlight=False)
    elif show_market:
        typer.echo(f"no instance in {market.describe()} matches the filters", err=True)
    if seed:
        console.print()
        _print_seed(console, catalog, seed, picked)


prices_command = declared_command(PricesOptions, prices)


def _print_seed(console: Console, catalog: PriceCatalog, rows: list[PriceRow],
                picked: set[int]) -> None:
    """The seed rows' table (provider, $/h, $/GPU-h, spot, purchase, date, source)."""
    sources: dict[str, int] = {}
    for r in rows:
        sources.setdefault(r.source, len(sources) + 1)
    columns: list[tuple[str, Callable[[PriceRow], str]]] = [
        ("", lambda r: "*" if r.line in picked else ""),
        ("provider", lambda r: r.provider),
        ("gpu", lambda r: r.gpu),
    ]
    if any(r.gpu_count > 1 for r in rows):
        columns += [
            ("GPUs", lambda r: str(r.gpu_count)),
            ("$/h", lambda r: _money(r.on_demand_usd_per_hour)),
        ]
    columns.append(("$/GPU-h", lambda r: _money(r.per_gpu("on_demand_usd_per_hour"), 4)))
    if any(r.spot_usd_per_hour is not None for r in rows):
        columns.append(("spot $/GPU-h", lambda r: _money(r.per_gpu("spot_usd_per_hour"), 4)))
    if any(r.purchase_usd is not None for r in rows):
        columns.append(("buy $", lambda r: _money(r.per_gpu("purchase_usd"), 0)))
    columns += [("date", lambda r: r.date or "-"), ("src", lambda r: f"[{sources[r.source]}]")]
    table = Table(
        title=f"Seed price rows ({catalog.origin})",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=0,  # the box's blank column separator leaves one space between columns
    )
    cells = [[cell(r) for _, cell in columns] for r in rows]
    for name, _ in columns:
        table.add_column(name, no_wrap=True, justify="left" if name in _LEFT else "right")
    for c in cells:
        table.add_row(*c)
    print_fitted(console, table, ("buy $", "date", "spot $/GPU-h", "$/h"))
    for source, n in sources.items():
        console.print(f"[{n}] {source}", markup=False, highlight=False)
    if picked:
        console.print("* = the on-demand price a run on that GPU uses by default; notes: --json",
                      markup=False, highlight=False)


def _print_siblings(console: Console, market: Market, key: str) -> None:
    """``also in the catalog: H100-PCIe (lambda), H100-NVL (azure)``: the other models of the
    same GPU family (the catalog's ``family``), which ``--gpu KEY`` keeps apart."""
    from infer_prof.catalog.gpus import catalog

    family = catalog()[key].family
    others: dict[str, set[str]] = {}
    for o in market.offers:
        if o.gpu and o.gpu != key and catalog()[o.gpu].family == family:
            others.setdefault(o.gpu, set()).add(o.cloud)
    if others:
        listed = ", ".join(f"{k} ({', '.join(sorted(c))})" for k, c in sorted(others.items()))
        console.print(f"also in the catalog: {listed}; --gpu KEY lists one",
                      markup=False, highlight=False)
