"""Rented GPU instances and their prices: choosing one, and what one GPU-hour of it costs.

Pure: offers in, offers and quotes out; no files (``infer_prof.catalog.market`` reads the
catalogs). Units: USD per hour for a whole instance (``*_usd_per_hour``), USD per GPU-hour
(``per_gpu``), GiB of memory per GPU.

An instance of ``gpu_count`` GPUs that rents for P USD/hour costs P / gpu_count per GPU-hour.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

Tier = Literal["on-demand", "spot"]
TIERS: tuple[Tier, ...] = ("on-demand", "spot")


@dataclass(frozen=True)
class InstanceOffer:
    """One instance type of one cloud in one region, at its cheapest zone.

    ``gpu`` is infer-prof's GPU key, or None for an accelerator infer-prof does not know
    (``accelerator`` keeps the cloud catalog's own name either way). Prices are for the whole
    instance; None where the catalog has none (e.g. no spot market).
    """

    cloud: str
    instance_type: str
    accelerator: str
    gpu: str | None
    gpu_count: int
    gpu_memory_gib: float | None
    region: str
    on_demand_usd_per_hour: float | None
    spot_usd_per_hour: float | None
    source: str
    date: str | None
    note: str | None = None

    def price(self, tier: Tier) -> float | None:
        """The instance's USD per hour in ``tier`` (None when it has no such price)."""
        return self.spot_usd_per_hour if tier == "spot" else self.on_demand_usd_per_hour

    def per_gpu(self, tier: Tier) -> float | None:
        """USD per GPU-hour in ``tier``: instance price / gpu_count (None without a price)."""
        p = self.price(tier)
        return None if p is None else p / self.gpu_count

    def key(self) -> str:
        """``cloud:instance_type:region``, the form ``--instance`` takes."""
        return f"{self.cloud}:{self.instance_type}:{self.region}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict, with the per-GPU prices."""
        out = asdict(self)
        out["on_demand_usd_per_gpu_hour"] = self.per_gpu("on-demand")
        out["spot_usd_per_gpu_hour"] = self.per_gpu("spot")
        return out


@dataclass(frozen=True)
class InstanceQuote:
    """The price a run is costed at when it comes from a rented instance.

    ``usd_per_hour`` is per GPU (as in every quote of the project); the instance itself costs
    ``instance_usd_per_hour`` for its ``instance_gpus`` GPUs. ``low``/``high`` are the range of
    per-GPU prices the choice was made from (equal when one instance was named).
    """

    usd_per_hour: float
    gpu: str | None
    provider: str
    instance_type: str
    region: str
    instance_gpus: int
    instance_usd_per_hour: float
    kind: Tier
    source: str
    date: str | None
    reason: str
    low: float
    high: float
    candidates: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``cloud`` repeats ``provider``, ``tier`` repeats ``kind``)."""
        out = asdict(self)
        out["cloud"] = self.provider
        out["tier"] = self.kind
        return out


def filter_offers(
    offers: Iterable[InstanceOffer],
    *,
    gpu: str | None = None,
    cloud: str | None = None,
    region: str | None = None,
    tier: Tier | None = None,
    max_usd_per_gpu_hour: float | None = None,
) -> list[InstanceOffer]:
    """Offers matching every filter given, cheapest per GPU-hour first.

    ``gpu`` is a GPU key; ``cloud`` and ``region`` compare case-insensitively. With ``tier``
    only offers with a price in that tier are kept and sorted by it (else by on-demand, then
    spot); ``max_usd_per_gpu_hour`` drops offers whose per-GPU price in that order exceeds it.
    """
    order: Sequence[Tier] = (tier,) if tier else TIERS

    def sort_price(o: InstanceOffer) -> float | None:
        for t in order:
            p = o.per_gpu(t)
            if p is not None:
                return p
        return None

    out = []
    for o in offers:
        if gpu is not None and o.gpu != gpu:
            continue
        if cloud is not None and o.cloud.lower() != cloud.lower():
            continue
        if region is not None and o.region.lower() != region.lower():
            continue
        p = sort_price(o)
        if p is None:
            continue
        if max_usd_per_gpu_hour is not None and p > max_usd_per_gpu_hour:
            continue
        out.append((p, o))
    out.sort(key=lambda po: (po[0], po[1].cloud, po[1].instance_type, po[1].region))
    return [o for _, o in out]


def quote_instance(offer: InstanceOffer, tier: Tier, reason: str) -> InstanceQuote:
    """The quote for one named instance in ``tier``. Raises ValueError without that price."""
    price = offer.price(tier)
    if price is None:
        raise ValueError(f"{offer.key()} has no {tier} price")
    per_gpu = price / offer.gpu_count
    return InstanceQuote(
        usd_per_hour=per_gpu,
        gpu=offer.gpu,
        provider=offer.cloud,
        instance_type=offer.instance_type,
        region=offer.region,
        instance_gpus=offer.gpu_count,
        instance_usd_per_hour=price,
        kind=tier,
        source=offer.source,
        date=offer.date,
        reason=reason,
        low=per_gpu,
        high=per_gpu,
        candidates=1,
    )


def cheapest_offer(
    offers: Iterable[InstanceOffer], gpu: str, tier: Tier, gpus: int = 1
) -> InstanceQuote | None:
    """The cheapest per-GPU-hour instance of ``gpu`` in ``tier``, for a run on ``gpus`` GPUs.

    Instances with exactly ``gpus`` GPUs are preferred (renting a bigger one costs its whole
    price); when there are none, every instance of that GPU counts. ``low``..``high`` is the
    per-GPU range over the instances considered. None when no instance has such a price.
    """
    pool = filter_offers(offers, gpu=gpu, tier=tier)
    if not pool:
        return None
    exact = [o for o in pool if o.gpu_count == gpus]
    chosen = exact or pool
    best = chosen[0]
    prices = [o.per_gpu(tier) or 0.0 for o in chosen]
    what = f"{gpus}-GPU instances" if exact else "instances (none has exactly that many GPUs)"
    reason = (
        f"cheapest {tier} price per GPU-hour among {len(chosen)} {gpu} {what}: "
        f"{best.cloud} {best.instance_type} in {best.region}"
    )
    q = quote_instance(best, tier, reason)
    return InstanceQuote(**{**asdict(q), "low": min(prices), "high": max(prices),
                            "candidates": len(chosen)})
