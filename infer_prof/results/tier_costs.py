"""What a measured run would cost per 1M output tokens in each price tier.

For ``compare --tiers``: the run's GPU (``gpu.key``) and GPU count (``gpu.count``) at

- ``on-demand``: the cheapest on-demand instance of that GPU in the market (exactly that many
  GPUs preferred; ``infer_prof.core.catalog.market.cheapest_offer``),
- ``spot``: likewise in the spot tier,
- ``owned``: the seed articles' purchase price of that GPU, amortized over
  :data:`OWNED_YEARS` years of 24/7 use, plus its TDP at :data:`OWNED_USD_PER_KWH`
  (``infer_prof.core.catalog.prices.owned_cost_per_hour``).

USD per 1M output tokens = USD per hour for the run's GPUs / (output tokens/s x 3600) x 1e6.
A tier with no price for the GPU, or a run without a GPU key, is a :class:`TierUnpriced` with
why; a run without a throughput has a price and no $/1M (None). One run's costs are a
:class:`RunTierCosts`, declared once: ``compare --tiers`` prints its fields and ``compare
--format json`` writes it (``tiers.runs``).
"""

from __future__ import annotations

import msgspec

from infer_prof.catalog.gpus import catalog
from infer_prof.catalog.market import Market
from infer_prof.catalog.prices import PriceCatalog, PriceError, select_purchase
from infer_prof.core.catalog.market import TIERS, cheapest_offer
from infer_prof.core.catalog.prices import cost_per_million_output_tokens, owned_cost_per_hour
from infer_prof.results.document import Result

OWNED_YEARS = 3.0
OWNED_USD_PER_KWH = 0.12
TIER_NAMES: tuple[str, ...] = (*TIERS, "owned")


class TierPrice(msgspec.Struct, frozen=True, kw_only=True):
    """A tier's price for the run's GPUs: USD per hour for all of them, USD per 1M output tokens
    at the run's throughput (None without one), and what the price is (instance or purchase)."""

    usd_per_hour: float
    usd_per_million_output_tokens: float | None
    what: str


class TierUnpriced(msgspec.Struct, frozen=True, kw_only=True):
    """A tier without a price for the run's GPU, and why."""

    reason: str


#: A tier's cost (encoded as JSON without a tag: ``{"reason"}`` or the price's fields).
TierCost = TierPrice | TierUnpriced


class RunTierCosts(msgspec.Struct, frozen=True, kw_only=True):
    """One run's cost in each tier of :data:`TIER_NAMES` (JSON keys ``on-demand``, ``spot``,
    ``owned``), beside its GPU key (None when the result has none), GPU count and output
    tokens/s."""

    gpu: str | None
    gpus: int
    output_throughput: float | None
    on_demand: TierCost = msgspec.field(name="on-demand")
    spot: TierCost
    owned: TierCost

    def tier(self, name: str) -> TierCost:
        """The cost in the tier called ``name`` (one of :data:`TIER_NAMES`)."""
        costs = {"on-demand": self.on_demand, "spot": self.spot, "owned": self.owned}
        return costs[name]


def tier_costs(result: Result, market: Market, seed: PriceCatalog) -> RunTierCosts:
    """The run's cost in each tier, with its ``gpu``/``gpus``/``output_throughput``."""
    key = result.gpu.key if result.gpu else None
    gpus = int((result.gpu.count if result.gpu else None) or 1)
    thr = result.summary.output_throughput
    costs = {tier: _tier_cost(tier, key, gpus, thr, market, seed) for tier in TIER_NAMES}
    return RunTierCosts(gpu=key, gpus=gpus, output_throughput=thr, on_demand=costs["on-demand"],
                        spot=costs["spot"], owned=costs["owned"])


def _tier_cost(tier: str, key: str | None, gpus: int, thr: float | None, market: Market,
               seed: PriceCatalog) -> TierCost:
    """The cost of ``gpus`` GPUs ``key`` in ``tier`` at ``thr`` output tokens/s."""
    if not key or key not in catalog():
        return TierUnpriced(reason="no GPU key in the result (give --gpu to the run)")
    if tier == "owned":
        try:
            buy = select_purchase(seed, key)
        except PriceError:
            return TierUnpriced(reason=f"no purchase price for {key} in the seed rows")
        tdp = catalog()[key].tdp_watts
        owned = owned_cost_per_hour(buy.usd * gpus, OWNED_YEARS, OWNED_USD_PER_KWH,
                                    tdp_watts=None if tdp is None else tdp * gpus)
        per_hour = owned.usd_per_hour
        what = (f"${buy.usd:,.0f}/GPU ({buy.provider}) over {OWNED_YEARS:g} years, "
                f"TDP at ${OWNED_USD_PER_KWH}/kWh")
    else:
        q = cheapest_offer(market.offers, key, tier, gpus)  # type: ignore[arg-type]
        if q is None:
            return TierUnpriced(reason=f"no {tier} price for {key} in {market.describe()}")
        per_hour = q.usd_per_hour * gpus
        what = f"{q.provider} {q.instance_type} {q.region}"
    return TierPrice(usd_per_hour=per_hour,
                     usd_per_million_output_tokens=cost_per_million_output_tokens(per_hour, thr, 1),
                     what=what)
