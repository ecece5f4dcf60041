"""``compare --tiers``: a run's cost per 1M output tokens on-demand, spot and owned."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from infer_prof.catalog.market import load_market
from infer_prof.catalog.prices import load_prices
from infer_prof.results.document import Result
from infer_prof.results.tier_costs import TIER_NAMES, tier_costs


def tiers_for(results: list[Result], prices_from: str | None) -> dict[str, Any]:
    """Every run's tier costs, and where the market prices came from."""
    market = load_market(prices_from)
    seed = load_prices(None)
    return {"market": market.to_dict(), "runs": [tier_costs(r, market, seed) for r in results],
            "describe": market.describe()}


def print_tiers(console: Console, names: list[str], tiers: dict[str, Any]) -> None:
    """The table: run, GPU, then $/1M output tokens per tier; what each price is, below."""
    t = Table(box=box.SIMPLE_HEAVY, title="$ per 1M output tokens by price tier",
              caption=f"on-demand/spot: cheapest instance in {tiers['describe']}; owned: seed "
              "purchase price", caption_justify="left")
    for name in ("run", "GPU", *TIER_NAMES):
        t.add_column(name, justify="left" if name in ("run", "GPU") else "right", no_wrap=True)
    notes = []
    for name, run in zip(names, tiers["runs"], strict=True):
        cells = []
        for tier in TIER_NAMES:
            v = run[tier].get("usd_per_million_output_tokens")
            cells.append("-" if v is None else f"${v:,.4f}")
            if run[tier].get("what"):
                notes.append(f"{name} {tier}: {run[tier]['what']}")
        gpu = f"{run['gpus']}x {run['gpu']}" if run["gpu"] else "-"
        t.add_row(name, gpu, *cells)
    console.print(t)
    for note in notes:
        console.print(note, markup=False, highlight=False)
