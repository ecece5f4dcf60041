"""A run's cost priced from the instance market: --instance, --gpu, --spot, and the seed rows."""

from __future__ import annotations

import msgspec
import pytest

from infer_prof.catalog.gpus import find_gpu
from infer_prof.results.cost_sections import Cost
from infer_prof.results.document import Summary
from infer_prof.run.economics import CostOptions, cost_block

from .test_skypilot_catalog import write_live_catalog

SUMMARY = Summary(output_throughput=1000.0, total_throughput=3000.0)


@pytest.fixture(autouse=True)
def no_sky_home(tmp_path, monkeypatch):
    """No ~/.sky/catalogs unless a test writes one: the shipped snapshot prices."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def cost(gpu: str | None, gpus: int, **opts) -> dict:
    """The run's ``cost`` section as the result file holds it (JSON)."""
    section = cost_block(SUMMARY, find_gpu(gpu) if gpu else None, gpus, CostOptions(**opts),
                         None, None)
    assert isinstance(section, Cost)
    return msgspec.to_builtins(section)


def test_named_instance_costs_the_whole_instance():
    c = cost("H100-SXM", 1, instance="aws:p5.48xlarge:us-east-1")
    assert c["available"] and c["gpus"] == 8 and c["run_gpus"] == 1
    assert c["usd_per_hour"] == pytest.approx(55.04)
    assert c["usd_per_gpu_hour"] == pytest.approx(6.88)
    p = c["price"]
    assert (p["cloud"], p["instance_type"], p["region"], p["tier"]) == (
        "aws", "p5.48xlarge", "us-east-1", "on-demand")
    assert p["source"].startswith("skypilot-org/skypilot-catalog@") and p["date"]
    assert p["catalog"]["source"] == "snapshot"
    # $55.04/h at 1000 output tokens/s: 55.04 / 3.6e6 * 1e6 USD per 1M tokens
    assert c["usd_per_million_output_tokens"] == pytest.approx(55.04 / 3.6)


def test_named_instance_spot_tier():
    c = cost(None, 8, instance="aws:p5.48xlarge:us-east-1", spot=True)
    assert c["usd_per_hour"] == pytest.approx(14.246) and c["price"]["tier"] == "spot"
    no_spot = cost(None, 1, instance="lambda:gpu_1x_h100_sxm5:us-east-1", spot=True)
    assert not no_spot["available"] and "no spot price" in no_spot["reason"]


def test_gpu_is_priced_at_the_cheapest_instance_named_with_its_range():
    """Before the market the --gpu price was the seed articles' 'cloud-low' $1.99 range end."""
    c = cost("H100-SXM", 1)
    p = c["price"]
    assert (p["cloud"], p["instance_type"], p["usd_per_hour"]) == (
        "hyperbolic", "1x-H100-75-722", 1.29)
    assert c["usd_per_hour"] == pytest.approx(1.29)
    # 94 1-GPU H100-SXM offers (instance x region)
    assert (p["low"], p["high"], p["candidates"]) == (1.29, 12.73552, 94)
    c8 = cost("H100-SXM", 8)
    assert c8["price"]["usd_per_hour"] == pytest.approx(8.0 / 8)  # Mithril h100-80gb.sxm.8x
    assert c8["usd_per_hour"] == pytest.approx(8.0)
    assert c8["price"]["high"] == pytest.approx(127.816 / 8)  # AWS/Azure's dearest region
    assert c8["price"]["low"] < c8["price"]["high"]


def test_gpu_missing_from_the_market_falls_back_to_the_seed_rows(tmp_path):
    root = write_live_catalog(tmp_path)  # Lambda and AWS H100s only
    c = cost("RTX-4090", 1, prices_from=str(root))
    assert (c["price"]["provider"], c["price"]["usd_per_hour"]) == ("runpod", 0.34)
    h = cost("H100-SXM", 1, prices_from=str(root))
    assert h["price"]["catalog"]["source"] == "live" and h["price"]["usd_per_hour"] == 2.50


def test_provider_and_price_per_hour_keep_their_meaning():
    c = cost("A100-80GB-SXM", 1, provider="lambda")
    assert (c["price"]["provider"], c["usd_per_hour"]) == ("lambda", 1.48)
    c = cost("H100-SXM", 2, price_per_hour=1.5)
    assert (c["price"]["kind"], c["usd_per_hour"]) == ("user", 3.0)


def test_summary_names_the_instance_and_the_range():
    from infer_prof.report.console import _derived_rows
    from tests.unit.typed_results import result_of

    rows = dict(_derived_rows(result_of(cost=cost("H100-SXM", 8))))
    assert rows["price"].startswith("$8.00/h for 8 GPU(s) (mithril h100-80gb.sxm.8x ")
    assert "on-demand); $1.00-$15.98 per GPU-hour across instances" in rows["price"]


def test_a_price_the_user_gave_is_said_as_given():
    from infer_prof.report.console import _derived_rows
    from tests.unit.typed_results import result_of

    rows = dict(_derived_rows(result_of(cost=cost("H100-SXM", 2, price_per_hour=1.5))))
    assert rows["price"] == "$3.00/h for 2 GPU(s) (given with --price-per-hour)"


def test_owned_hardware_beside_the_rent_with_its_break_even():
    section = cost_block(SUMMARY, find_gpu("H100-SXM"), 2, CostOptions(
        price_per_hour=1.5, purchase_usd=30000), 3600.0, 10.0)
    owned = section.owned
    assert owned is not None and owned.available and owned.power_source == "measured"
    # $60,000 over 3 years of 24/7 use, 360 W measured (3,600 J over 10 s) at $0.12/kWh
    assert owned.usd_per_hour == pytest.approx(60000 / (3 * 8760) + 0.36 * 0.12)
    assert owned.usd_per_million_output_tokens == pytest.approx(
        owned.usd_per_hour / (1000.0 * 3600) * 1e6)
    # buying beats renting 2 GPUs at $1.50/h after purchase / (rent - power and overhead)
    assert owned.break_even_hours == pytest.approx(60000 / (3.0 - 0.36 * 0.12))
    # no GPU: no rent, and an owned cost only with the power measured
    bad = cost_block(SUMMARY, None, 1, CostOptions(purchase_usd=1000), None, None)
    assert not bad.available and bad.owned is not None and not bad.owned.available
    assert "needs power: measured energy and duration, or a TDP" in (bad.owned.reason or "")
    unrented = cost_block(SUMMARY, None, 1, CostOptions(purchase_usd=1000), 3600.0, 10.0).owned
    assert unrented is not None and unrented.available and unrented.break_even_hours is None
