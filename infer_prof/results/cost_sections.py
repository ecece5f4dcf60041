"""The result's sections about what the run cost: the price it was costed at (``cost.price``,
with the instance market it came from), the rental cost for the GPUs its engine used
(``cost``, with a filled instance), the cost of owning them (``cost.owned``) and the energy
over the measured window (``energy``). Part of :class:`infer_prof.results.document.Result`;
the frontier's price (``frontier.price``) is a :class:`Price` too.

Units are in the names: ``_usd`` US dollars, ``_j`` joules, ``_w`` watts.
"""

from __future__ import annotations

from msgspec import UnsetType

from infer_prof.results.document_base import Section


class PriceCatalog(Section):
    """``cost.price.catalog``: the instance market a price came from (``catalog.market``):
    its ``source`` folder and ``origin``, the prices' ``date`` and ``age_days``, ``stale``
    past the age limit, what was ``read`` (rows, offers, rows skipped and why) and a
    ``notice``."""

    source: str | None = None
    origin: str | None = None
    date: str | None = None
    age_days: int | None = None
    stale: bool | None = None
    read: str | None = None
    notice: str | None = None


class OwnedCost(Section):
    """``cost.owned``: the hourly cost of owning the GPUs (``core.catalog.prices.OwnedCost``:
    amortization over ``years`` at ``utilization``, electricity at ``usd_per_kwh`` for
    ``power_kw`` measured or from the TDP, overhead), the $ per 1M output tokens at that cost
    and the hours after which buying beats renting; ``available`` False with a ``reason`` when
    the options cannot be costed."""

    available: bool | None = None
    reason: str | None = None
    amortization_usd_per_hour: float | None = None
    electricity_usd_per_hour: float | None = None
    overhead_usd_per_hour: float | None = None
    usd_per_hour: float | None = None
    power_kw: float | None = None
    power_source: str | None = None
    purchase_usd: float | None = None
    years: float | None = None
    utilization: float | None = None
    usd_per_kwh: float | None = None
    usd_per_million_output_tokens: float | None = None
    break_even_hours: float | None = None


class Price(Section):
    """The price a run was costed at (``catalog.prices.PriceQuote`` or
    ``core.catalog.market.InstanceQuote``): per GPU-hour, and where it came from."""

    usd_per_hour: float
    gpu: str | None = None
    provider: str | None = None
    instance_type: str | None = None
    region: str | None = None
    instance_gpus: int | None = None
    instance_usd_per_hour: float | None = None
    kind: str | None = None
    source: str | None = None
    date: str | None = None
    reason: str | None = None
    low: float | None = None
    high: float | None = None
    candidates: int | None = None
    cloud: str | None = None
    tier: str | None = None
    spot: bool | None = None
    #: UNSET (left out) where the price is repeated without its market (a frontier's ``price``)
    catalog: PriceCatalog | None | UnsetType = None


class Filled(Section):
    """An instance's cost if each of its GPUs served a copy of the measured engine
    (``run.economics.filled_instance``)."""

    replicas: int
    idle_gpus: int
    usd_per_million_output_tokens: float | None = None
    usd_per_million_total_tokens: float | None = None


class Cost(Section):
    """Rental cost of the run for the GPUs its engine used (``run.economics.cost_block``);
    ``available`` False with a ``reason`` when no price applies."""

    available: bool
    reason: str | None = None
    usd_per_gpu_hour: float | None = None
    gpus: int | None = None
    usd_per_hour: float | None = None
    usd_per_million_output_tokens: float | None = None
    usd_per_million_total_tokens: float | None = None
    output_tokens_per_usd: float | None = None
    total_tokens_per_usd: float | None = None
    usd_per_1m_output_tokens: float | None = None  # an older spelling of the $/1M output field
    price: Price | None = None
    run_gpus: int | None = None
    filled: Filled | None = None
    owned: OwnedCost | None = None


class Energy(Section):
    """Energy over the measured window (NVML), None with a ``reason`` without it."""

    energy_j: float | None = None
    source: str | None = None
    joules_per_output_token: float | None = None
    mean_power_w: float | None = None
    power_capped: bool | None = None
    throttled: bool | None = None
    throttle_reasons: list[str] | None = None
    reason: str | None = None
