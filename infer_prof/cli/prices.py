"""``infer-prof prices``: list the price catalog (the shipped one or ``--prices FILE``)."""

from __future__ import annotations

import json
from collections.abc import Callable

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from infer_prof.catalog.prices import (
    CANONICAL_GPU_KEYS,
    PriceCatalog,
    PriceRow,
    canonical_gpu_key,
    default_rows,
    load_prices,
)

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


def _filter(catalog: PriceCatalog, gpu: str | None, provider: str | None) -> list[PriceRow]:
    rows = list(catalog.rows)
    if gpu is not None:
        key = canonical_gpu_key(gpu)
        rows = [r for r in rows if r.gpu == key]
    if provider is not None:
        wanted = provider.strip().lower()
        rows = [r for r in rows if r.provider.lower() == wanted]
    return rows


def prices_command(
    gpu: str | None = typer.Option(
        None, "--gpu", help="Only this GPU (canonical key, e.g. RTX-4090, H100-SXM)."
    ),
    provider: str | None = typer.Option(None, "--provider", help="Only this provider."),
    prices_file: str | None = typer.Option(
        None, "--prices", help="A price CSV to read instead of the shipped catalog."
    ),
    json_output: bool = typer.Option(False, "--json", help="Print a JSON list of rows."),
) -> None:
    """List GPU prices: provider, $/hour (per listing and per GPU), purchase price, source, date.

    The row marked '*' (``"default": true`` in JSON) is the on-demand price a run on that GPU is
    costed at when neither --provider nor --price-per-hour is given.
    """
    try:
        catalog = load_prices(prices_file)
    except ValueError as exc:
        _fail(f"{exc}; fix the file, or leave out --prices to use the shipped catalog")
    if gpu is not None and canonical_gpu_key(gpu) is None:
        _fail(f"unknown GPU {gpu!r}; use one of {', '.join(CANONICAL_GPU_KEYS)}")
    rows = _filter(catalog, gpu, provider)
    picked = default_rows(catalog)
    if json_output:
        data = [{**r.to_dict(), "default": r.line in picked} for r in rows]
        typer.echo(json.dumps(data, indent=2))
        return
    if not rows:
        typer.echo(
            f"no rows in {catalog.origin} match"
            + (f" --gpu {gpu}" if gpu else "")
            + (f" --provider {provider}" if provider else "")
            + f"; GPUs: {', '.join(catalog.gpus()) or 'none'}; "
            + f"providers: {', '.join(catalog.providers()) or 'none'}",
            err=True,
        )
        return
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
        title=f"GPU prices ({catalog.origin})",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=0,  # the box's blank column separator leaves one space between columns
    )
    cells = [[cell(r) for _, cell in columns] for r in rows]
    for i, (name, _) in enumerate(columns):
        # Only provider and gpu may be shortened on a narrow terminal; numbers never are.
        widest = max([len(name)] + [len(c[i]) for c in cells])
        table.add_column(
            name,
            no_wrap=True,
            justify="left" if name in _LEFT else "right",
            min_width=None if name in ("provider", "gpu") else widest,
        )
    for c in cells:
        table.add_row(*c)
    console = Console()
    console.print(table)
    for source, n in sources.items():
        console.print(f"[{n}] {source}", markup=False, highlight=False)
    typer.echo("* = the on-demand price a run on that GPU uses by default; notes: --json")
