"""The price a configuration is costed at: one rented instance's USD per GPU-hour.

By default the cheapest on-demand instance per GPU-hour of that GPU in the market
(:func:`infer_prof.core.catalog.market.cheapest_offer`: instances with exactly the
configuration's GPU count preferred); ``--spot`` the spot tier; ``--cloud`` only that cloud's
instances; ``--instance`` the one named. $ per 1M tokens then follows as in DESIGN.md
"Comparing GPUs fairly": ``$/GPU-hour / (tokens/s per GPU x 3600 / 1e6)``.
"""

from __future__ import annotations

from collections.abc import Sequence

from infer_prof.core.catalog.market import (
    InstanceOffer,
    InstanceQuote,
    Tier,
    cheapest_offer,
    filter_offers,
    quote_instance,
)
from infer_prof.estimate.document import Instance


def priced_gpus(offers: Sequence[InstanceOffer], tier: Tier, cloud: str | None) -> set[str]:
    """GPU keys with at least one offer priced in ``tier`` (of ``cloud`` when given)."""
    return {o.gpu for o in filter_offers(offers, cloud=cloud, tier=tier) if o.gpu}


def quote_for(offers: Sequence[InstanceOffer], gpu: str, gpu_count: int, *, tier: Tier,
              cloud: str | None = None, instance: InstanceOffer | None = None
              ) -> InstanceQuote | None:
    """The quote a ``gpu_count`` x ``gpu`` configuration is priced at (module docstring); None
    when no instance has that GPU at a price in ``tier``."""
    if instance is not None:
        if instance.gpu != gpu or instance.price(tier) is None:
            return None
        return quote_instance(instance, tier, f"--instance {instance.key()}")
    pool = filter_offers(offers, gpu=gpu, cloud=cloud, tier=tier)
    return cheapest_offer(pool, gpu, tier, gpu_count)


def instance_of(q: InstanceQuote) -> Instance:
    """The document's :class:`Instance` of a quote."""
    return Instance(cloud=q.provider, instance_type=q.instance_type, region=q.region,
                    instance_gpus=q.instance_gpus, tier=q.kind, usd_per_gpu_hour=q.usd_per_hour,
                    instance_usd_per_hour=q.instance_usd_per_hour, source=q.source, date=q.date,
                    reason=q.reason)
