"""``run``'s instance-market options, checked before anything starts."""

from __future__ import annotations

from infer_prof.catalog.market import find_instance, load_market
from infer_prof.catalog.prices import canonical_gpu_key
from infer_prof.cli.common import fail


def check_instance(instance: str | None, prices_from: str | None, gpu: str | None) -> str | None:
    """Validate ``--instance CLOUD:TYPE[:REGION]`` against the market; return its GPU key.

    Exits 2 with one line naming the nearest cloud, instance type or region when it is not in
    the catalog, or when ``--gpu`` names another GPU than the instance has. Returns the GPU key
    of the instance (None without ``--instance`` or for an accelerator infer-prof does not know).
    """
    if instance is None:
        return None
    market = load_market(prices_from)
    key = canonical_gpu_key(gpu) if gpu else None
    try:
        offer = find_instance(market, instance, key)
    except ValueError as exc:
        fail(str(exc))
    return offer.gpu
