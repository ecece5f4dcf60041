"""Cost arithmetic: what a million tokens cost at a price, and what owning the GPU costs per hour.

Pure: plain numbers in, plain numbers out; no catalog access (``infer_prof.catalog.prices``
chooses the price). Units: USD, hours, tokens per second, watts/kilowatts, joules, seconds.

A quantity that cannot be computed (throughput 0 or unknown, a price of 0) is None, never 0 or
infinity.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

SECONDS_PER_HOUR = 3600.0
HOURS_PER_YEAR = 8760.0  # 365 x 24, the figure the seeds' rent-vs-buy arithmetic uses
TOKENS_PER_MILLION = 1e6


def _positive(x: float | None) -> bool:
    return x is not None and math.isfinite(x) and x > 0


def _check_price(usd_per_hour: float, gpus: int) -> None:
    if not math.isfinite(usd_per_hour) or usd_per_hour < 0:
        raise ValueError(f"price per hour must be a finite number >= 0, got {usd_per_hour}")
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")


def cost_per_million_tokens(
    usd_per_gpu_hour: float, tokens_per_s: float | None, gpus: int = 1
) -> float | None:
    """USD per 1M tokens at a throughput.

    cost = usd_per_gpu_hour x gpus / (tokens_per_s x 3600) x 1e6.
    With tensor parallelism over ``gpus`` GPUs the price covers all of them. None when
    ``tokens_per_s`` is 0 or None (nothing was produced, or it was not measured).
    """
    _check_price(usd_per_gpu_hour, gpus)
    if not _positive(tokens_per_s):
        return None
    assert tokens_per_s is not None
    return usd_per_gpu_hour * gpus / (tokens_per_s * SECONDS_PER_HOUR) * TOKENS_PER_MILLION


def cost_per_million_output_tokens(
    usd_per_gpu_hour: float, output_tokens_per_s: float | None, gpus: int = 1
) -> float | None:
    """USD per 1M output tokens: price x gpus / (output_tokens_per_s x 3600) x 1e6; None at 0."""
    return cost_per_million_tokens(usd_per_gpu_hour, output_tokens_per_s, gpus)


def cost_per_million_total_tokens(
    usd_per_gpu_hour: float, total_tokens_per_s: float | None, gpus: int = 1
) -> float | None:
    """USD per 1M total tokens, where total = prompt + output tokens per second; None at 0."""
    return cost_per_million_tokens(usd_per_gpu_hour, total_tokens_per_s, gpus)


def tokens_per_dollar(
    usd_per_gpu_hour: float, tokens_per_s: float | None, gpus: int = 1
) -> float | None:
    """Tokens one USD buys: tokens_per_s x 3600 / (usd_per_gpu_hour x gpus).

    None when the throughput is 0 or None, or the price is 0 (no finite answer).
    """
    _check_price(usd_per_gpu_hour, gpus)
    if not _positive(tokens_per_s) or usd_per_gpu_hour == 0:
        return None
    assert tokens_per_s is not None
    return tokens_per_s * SECONDS_PER_HOUR / (usd_per_gpu_hour * gpus)


def cost_report(
    usd_per_gpu_hour: float,
    gpus: int,
    output_tokens_per_s: float | None,
    total_tokens_per_s: float | None,
) -> dict[str, Any]:
    """The cost block of a result (JSON-ready; null where not computable).

    Keys: usd_per_gpu_hour, gpus, usd_per_hour (= usd_per_gpu_hour x gpus),
    usd_per_million_output_tokens, usd_per_million_total_tokens, output_tokens_per_usd,
    total_tokens_per_usd.
    """
    _check_price(usd_per_gpu_hour, gpus)
    return {
        "usd_per_gpu_hour": usd_per_gpu_hour,
        "gpus": gpus,
        "usd_per_hour": usd_per_gpu_hour * gpus,
        "usd_per_million_output_tokens": cost_per_million_output_tokens(
            usd_per_gpu_hour, output_tokens_per_s, gpus
        ),
        "usd_per_million_total_tokens": cost_per_million_total_tokens(
            usd_per_gpu_hour, total_tokens_per_s, gpus
        ),
        "output_tokens_per_usd": tokens_per_dollar(usd_per_gpu_hour, output_tokens_per_s, gpus),
        "total_tokens_per_usd": tokens_per_dollar(usd_per_gpu_hour, total_tokens_per_s, gpus),
    }


# --------------------------------------------------------------------------- owned hardware


def power_kw_from_energy(joules: float, seconds: float) -> float:
    """Mean power in kW from measured energy: joules / seconds / 1000."""
    if seconds <= 0:
        raise ValueError(f"duration must be > 0 s, got {seconds}")
    if joules < 0:
        raise ValueError(f"energy must be >= 0 J, got {joules}")
    return joules / seconds / 1000.0


def electricity_usd_per_hour(power_kw: float, usd_per_kwh: float) -> float:
    """Electricity cost per hour of running: power_kw x usd_per_kwh (kW x 1 h = kWh)."""
    if power_kw < 0 or usd_per_kwh < 0:
        raise ValueError(f"power and $/kWh must be >= 0, got {power_kw} kW, {usd_per_kwh} $/kWh")
    return power_kw * usd_per_kwh


def amortized_usd_per_hour(purchase_usd: float, years: float, utilization: float = 1.0) -> float:
    """Purchase price spread over the hours the hardware is used.

    amortized = purchase_usd / (years x 8760 h x utilization); utilization in (0, 1] is the
    fraction of wall-clock hours it is busy (1.0 = 24/7).
    """
    if purchase_usd < 0:
        raise ValueError(f"purchase price must be >= 0, got {purchase_usd}")
    if years <= 0:
        raise ValueError(f"years must be > 0, got {years}")
    if not 0 < utilization <= 1:
        raise ValueError(f"utilization must be within (0, 1], got {utilization}")
    return purchase_usd / (years * HOURS_PER_YEAR * utilization)


@dataclass(frozen=True)
class OwnedCost:
    """Hourly cost of owned hardware per hour of use, by part (USD/hour), and the power used."""

    amortization_usd_per_hour: float
    electricity_usd_per_hour: float
    overhead_usd_per_hour: float
    usd_per_hour: float
    power_kw: float
    power_source: str  # "measured" (energy / time) or "tdp"
    purchase_usd: float
    years: float
    utilization: float
    usd_per_kwh: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def owned_cost_per_hour(
    purchase_usd: float,
    years: float,
    usd_per_kwh: float,
    *,
    utilization: float = 1.0,
    energy_joules: float | None = None,
    duration_s: float | None = None,
    tdp_watts: float | None = None,
    overhead_usd_per_year: float = 0.0,
) -> OwnedCost:
    """Hourly cost of owning the hardware, per hour of use.

    usd_per_hour = purchase_usd / (years x 8760 x utilization)      amortization
                 + power_kw x usd_per_kwh                          electricity
                 + overhead_usd_per_year / (8760 x utilization)    cooling, hosting (optional)

    power_kw = energy_joules / duration_s / 1000 when both are given (measured, e.g. NVML's
    total-energy counter over the run), else tdp_watts / 1000. The purchase price and the power
    must describe the same hardware (one GPU, or all GPUs of a tensor-parallel run).
    Raises ValueError when neither measured energy nor a TDP is given.
    """
    if energy_joules is not None and duration_s is not None:
        power_kw = power_kw_from_energy(energy_joules, duration_s)
        power_source = "measured"
    elif tdp_watts is not None:
        if tdp_watts < 0:
            raise ValueError(f"TDP must be >= 0 W, got {tdp_watts}")
        power_kw = tdp_watts / 1000.0
        power_source = "tdp"
    else:
        raise ValueError("owned-hardware cost needs power: measured energy and duration, or a TDP")
    if overhead_usd_per_year < 0:
        raise ValueError(f"overhead must be >= 0 USD/year, got {overhead_usd_per_year}")
    amort = amortized_usd_per_hour(purchase_usd, years, utilization)
    elec = electricity_usd_per_hour(power_kw, usd_per_kwh)
    overhead = overhead_usd_per_year / (HOURS_PER_YEAR * utilization)
    return OwnedCost(
        amortization_usd_per_hour=amort,
        electricity_usd_per_hour=elec,
        overhead_usd_per_hour=overhead,
        usd_per_hour=amort + elec + overhead,
        power_kw=power_kw,
        power_source=power_source,
        purchase_usd=purchase_usd,
        years=years,
        utilization=utilization,
        usd_per_kwh=usd_per_kwh,
    )


def break_even_hours(
    purchase_usd: float, rent_usd_per_hour: float, running_usd_per_hour: float
) -> float | None:
    """Hours of use after which buying costs less than renting.

    Renting h hours costs rent x h; owning costs purchase + running x h (electricity, plus any
    overhead). They are equal at h = purchase_usd / (rent_usd_per_hour - running_usd_per_hour).
    None when running costs at least the rent (owning never catches up).
    """
    if purchase_usd < 0 or rent_usd_per_hour < 0 or running_usd_per_hour < 0:
        raise ValueError("purchase, rent and running cost must be >= 0")
    margin = rent_usd_per_hour - running_usd_per_hour
    if margin <= 0:
        return None
    return purchase_usd / margin
