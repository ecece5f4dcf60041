"""Cost arithmetic against hand-computed cases (infer_prof.core.catalog.prices)."""

from __future__ import annotations

import pytest

from infer_prof.core.catalog.prices import (
    HOURS_PER_YEAR,
    amortized_usd_per_hour,
    break_even_hours,
    cost_per_million_output_tokens,
    cost_per_million_total_tokens,
    cost_report,
    electricity_usd_per_hour,
    owned_cost_per_hour,
    power_kw_from_energy,
    tokens_per_dollar,
)


def test_cost_per_million_output_tokens_rtx4090():
    # $0.34/h, 1000 output tok/s: 0.34 / (1000 x 3600) x 1e6 = 0.09444... USD per 1M tokens
    assert cost_per_million_output_tokens(0.34, 1000.0) == pytest.approx(0.0944444444, rel=1e-9)


def test_tensor_parallel_doubles_cost():
    # two GPUs at $0.34/h each, same 1000 tok/s: 0.68 / 3.6e6 x 1e6 = 0.18888...
    assert cost_per_million_output_tokens(0.34, 1000.0, gpus=2) == pytest.approx(
        0.1888888889, rel=1e-9
    )


def test_cost_per_million_total_tokens():
    # 3000 prompt + 1000 output tok/s = 4000 tok/s at $1.39/h: 1.39 / (4000 x 3600) x 1e6
    # = 1.39 / 14400 = 0.0965277...
    assert cost_per_million_total_tokens(1.39, 4000.0) == pytest.approx(0.0965277778, rel=1e-9)


@pytest.mark.parametrize("throughput", [0.0, None])
def test_no_throughput_gives_none_not_zero_or_inf(throughput):
    assert cost_per_million_output_tokens(0.34, throughput) is None
    assert cost_per_million_total_tokens(0.34, throughput) is None
    assert tokens_per_dollar(0.34, throughput) is None


def test_tokens_per_dollar():
    # 1000 tok/s x 3600 s = 3.6e6 tokens per hour; / $0.34 = 10,588,235.29 tokens per USD
    assert tokens_per_dollar(0.34, 1000.0) == pytest.approx(10_588_235.294, rel=1e-9)
    # two GPUs: half as many tokens per dollar
    assert tokens_per_dollar(0.34, 1000.0, gpus=2) == pytest.approx(5_294_117.647, rel=1e-9)
    # a free GPU has no finite tokens-per-dollar
    assert tokens_per_dollar(0.0, 1000.0) is None


def test_cost_report_block():
    rep = cost_report(0.34, 2, output_tokens_per_s=1000.0, total_tokens_per_s=None)
    assert rep["usd_per_hour"] == pytest.approx(0.68)
    assert rep["usd_per_million_output_tokens"] == pytest.approx(0.1888888889, rel=1e-9)
    assert rep["usd_per_million_total_tokens"] is None
    assert rep["total_tokens_per_usd"] is None


def test_invalid_inputs_raise():
    with pytest.raises(ValueError):
        cost_per_million_output_tokens(-1.0, 1000.0)
    with pytest.raises(ValueError):
        cost_per_million_output_tokens(0.34, 1000.0, gpus=0)


# --- owned hardware -------------------------------------------------------------------------
#
# Worked example from seeds/001_cd298c08d48cf0a0.txt ("Buy vs Rent Analysis", DeployBase,
# March 2026): "RTX 4090 at $0.34/hr ... Purchase + power ($450W at $0.12/kWh = $470/year) ...
# ~$1,600 + $2,350 (5-year) = ~$3,950 total."


def test_seed_rtx4090_power_cost_per_year():
    # 0.45 kW x $0.12/kWh = $0.054 per hour; x 8760 h = $473.04 per year (article: "$470/year")
    per_hour = electricity_usd_per_hour(0.45, 0.12)
    assert per_hour == pytest.approx(0.054, rel=1e-12)
    assert per_hour * HOURS_PER_YEAR == pytest.approx(473.04, rel=1e-9)
    assert round(per_hour * HOURS_PER_YEAR, -1) == 470.0


def test_seed_rtx4090_five_year_total():
    # $1,600 + 5 x $473.04 = $3,965.20 (article: "~$1,600 + $2,350 (5-year) = ~$3,950")
    owned = owned_cost_per_hour(1600.0, years=5, usd_per_kwh=0.12, tdp_watts=450.0)
    five_years_of_hours = 5 * HOURS_PER_YEAR
    assert owned.usd_per_hour * five_years_of_hours == pytest.approx(3965.2, rel=1e-9)
    # amortization 1600 / (5 x 8760) = 0.036529680... $/h; electricity 0.054 $/h
    assert owned.amortization_usd_per_hour == pytest.approx(0.0365296804, rel=1e-9)
    assert owned.usd_per_hour == pytest.approx(0.0905296804, rel=1e-9)
    assert owned.power_source == "tdp"


def test_seed_rtx4090_break_even_hours():
    # Rent $0.34/h vs buy $1,600 + electricity $0.054/h:
    # 1600 / (0.34 - 0.054) = 1600 / 0.286 = 5594.4 hours of use (about 7.7 months 24/7).
    # The article prints "~14,000 hours" for this case, which does not follow from its own
    # figures: even charging all five years of power up front, 3,950 / 0.34 = 11,618 h.
    hours = break_even_hours(1600.0, rent_usd_per_hour=0.34, running_usd_per_hour=0.054)
    assert hours == pytest.approx(5594.405594, rel=1e-9)


def test_break_even_never_when_running_cost_exceeds_rent():
    assert break_even_hours(1600.0, rent_usd_per_hour=0.05, running_usd_per_hour=0.054) is None
    assert break_even_hours(1600.0, rent_usd_per_hour=0.054, running_usd_per_hour=0.054) is None


def test_measured_energy_takes_precedence_over_tdp():
    # 3.6e6 J over 3600 s = 1000 W = 1 kW; at $0.12/kWh: $0.12 per hour
    assert power_kw_from_energy(3.6e6, 3600.0) == pytest.approx(1.0)
    owned = owned_cost_per_hour(
        8760.0, years=1, usd_per_kwh=0.12, energy_joules=3.6e6, duration_s=3600.0, tdp_watts=450
    )
    assert owned.power_source == "measured"
    assert owned.power_kw == pytest.approx(1.0)
    # amortization 8760 / (1 x 8760) = $1/h; total 1 + 0.12 = 1.12
    assert owned.electricity_usd_per_hour == pytest.approx(0.12)
    assert owned.usd_per_hour == pytest.approx(1.12)


def test_utilization_and_overhead():
    # At 50% utilization the purchase spreads over half the hours: 8760 / (1 x 8760 x 0.5) = 2 $/h
    assert amortized_usd_per_hour(8760.0, years=1, utilization=0.5) == pytest.approx(2.0)
    # Cooling $2,000/year (the article's A100 PCIe figure) at 24/7: 2000 / 8760 = 0.228310 $/h
    owned = owned_cost_per_hour(
        27500.0, years=5, usd_per_kwh=0.12, tdp_watts=300, overhead_usd_per_year=2000.0
    )
    assert owned.overhead_usd_per_hour == pytest.approx(0.2283105023, rel=1e-9)
    # 27500 / 43800 + 0.3 x 0.12 + 0.2283105 = 0.6278539 + 0.036 + 0.2283105 = 0.8921644
    assert owned.usd_per_hour == pytest.approx(0.8921643836, rel=1e-9)


def test_owned_cost_needs_power():
    with pytest.raises(ValueError, match="power"):
        owned_cost_per_hour(1600.0, years=5, usd_per_kwh=0.12)
    with pytest.raises(ValueError, match="utilization"):
        amortized_usd_per_hour(1600.0, years=5, utilization=0.0)
