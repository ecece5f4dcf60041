"""What a measured run would cost per 1M output tokens in each price tier.

For ``compare --tiers``: the run's GPU (``gpu.key``) and GPU count (``gpu.count``) at

- ``on-demand``: the cheapest on-demand instance of that GPU in the market (exactly that many
  GPUs preferred; ``infer_prof.core.catalog.market.cheapest_offer``),
- ``spot``: likewise in the spot tier,
- ``owned``: the seed articles' purchase price of that GPU, amortized over
  :data:`OWNED_YEARS` years of 24/7 use, plus its TDP at :data:`OWNED_USD_PER_KWH`
  (``infer_prof.core.catalog.prices.owned_cost_per_hour``).

USD per 1M output tokens = USD per hour for the run's GPUs / (output tokens/s x 3600) x 1e6.
A tier with no price for the GPU, or a run without a GPU key or throughput, is None with why.
"""

from __future__ import annotations

from typing import Any

from infer_prof.catalog.gpus import catalog
from infer_prof.catalog.market import Market
from infer_prof.catalog.prices import PriceCatalog, PriceError, select_purchase
from infer_prof.core.catalog.market import TIERS, cheapest_offer
from infer_prof.core.catalog.prices import cost_per_million_output_tokens, owned_cost_per_hour
from infer_prof.results.document import Result

OWNED_YEARS = 3.0
OWNED_USD_PER_KWH = 0.12
TIER_NAMES: tuple[str, ...] = (*TIERS, "owned")


def tier_costs(result: Result, market: Market, seed: PriceCatalog) -> dict[str, Any]:
    """``{tier: {"usd_per_million_output_tokens", "usd_per_hour", "what"} | {"reason"}}`` and
    the run's ``gpu``/``gpus``/``output_throughput``."""
    key = result.gpu.key if result.gpu else None
    gpus = int((result.gpu.count if result.gpu else None) or 1)
    thr = result.summary.output_throughput
    out: dict[str, Any] = {"gpu": key, "gpus": gpus, "output_throughput": thr}
    for tier in TIER_NAMES:
        if not key or key not in catalog():
            out[tier] = {"reason": "no GPU key in the result (give --gpu to the run)"}
            continue
        if tier == "owned":
            try:
                buy = select_purchase(seed, key)
            except PriceError:
                out[tier] = {"reason": f"no purchase price for {key} in the seed rows"}
                continue
            tdp = catalog()[key].tdp_watts
            owned = owned_cost_per_hour(buy.usd * gpus, OWNED_YEARS, OWNED_USD_PER_KWH,
                                        tdp_watts=None if tdp is None else tdp * gpus)
            per_hour = owned.usd_per_hour
            what = (f"${buy.usd:,.0f}/GPU ({buy.provider}) over {OWNED_YEARS:g} years, "
                    f"TDP at ${OWNED_USD_PER_KWH}/kWh")
        else:
            q = cheapest_offer(market.offers, key, tier, gpus)  # type: ignore[arg-type]
            if q is None:
                out[tier] = {"reason": f"no {tier} price for {key} in {market.describe()}"}
                continue
            per_hour = q.usd_per_hour * gpus
            what = f"{q.provider} {q.instance_type} {q.region}"
        out[tier] = {
            "usd_per_hour": per_hour,
            "usd_per_million_output_tokens": cost_per_million_output_tokens(per_hour, thr, 1),
            "what": what,
        }
    return out
