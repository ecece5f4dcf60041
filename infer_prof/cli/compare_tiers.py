"""``compare --tiers``: a run's cost per 1M output tokens on-demand, spot and owned."""

from __future__ import annotations

from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.table import Table

from infer_prof.catalog.market import Market, load_market
from infer_prof.catalog.prices import load_prices
from infer_prof.results.document import Result
from infer_prof.results.tier_costs import TIER_NAMES, RunTierCosts, TierPrice, tier_costs


@dataclass(frozen=True)
class TierTable:
    """Every run's tier costs (in the runs' order) and the market the prices came from."""

    market: Market
    runs: list[RunTierCosts]


def tiers_for(results: list[Result], prices_from: str | None) -> TierTable:
    """Every run's tier costs, and where the market prices came from."""
    market = load_market(prices_from)
    seed = load_prices(None)
    return TierTable(market, [tier_costs(r, market, seed) for r in results])


def print_tiers(console: Console, names: list[str], tiers: TierTable) -> None:
    """The table: run, GPU, then $/1M output tokens per tier; what each price is, below."""
    t = Table(box=box.SIMPLE_HEAVY, title="$ per 1M output tokens by price tier",
              caption=f"on-demand/spot: cheapest instance in {tiers.market.describe()}; owned: "
              "seed purchase price", caption_justify="left")
    for name in ("run", "GPU", *TIER_NAMES):
        t.add_column(name, justify="left" if name in ("run", "GPU") else "right", no_wrap=True)
    notes = []
    for name, run in zip(names, tiers.runs, strict=True):
        cells = []
        for tier in TIER_NAMES:
            cost = run.tier(tier)
            v = cost.usd_per_million_output_tokens if isinstance(cost, TierPrice) else None
            cells.append("-" if v is None else f"${v:,.4f}")
            if isinstance(cost, TierPrice) and cost.what:
                notes.append(f"{name} {tier}: {cost.what}")
        gpu = f"{run.gpus}x {run.gpu}" if run.gpu else "-"
        t.add_row(name, gpu, *cells)
    console.print(t)
    for note in notes:
        console.print(note, markup=False, highlight=False)
