"""`compare --tiers`: each run's cost per 1M output tokens on-demand, spot and owned."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from infer_prof.catalog.gpus import catalog
from infer_prof.catalog.market import snapshot_market
from infer_prof.catalog.prices import load_prices
from infer_prof.cli.compare import compare_command
from infer_prof.results.document import decode_result as typed
from infer_prof.results.tier_costs import TierPrice, TierUnpriced, tier_costs

from .test_report_html import make_result


@pytest.fixture(autouse=True)
def no_sky_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_tiers_by_hand():
    r = make_result("a", gpu="A100-80GB-SXM", gpu_count=1)
    thr = r["summary"]["output_throughput"]
    t = tier_costs(typed(r), snapshot_market(), load_prices(None))
    assert (t.gpu, t.gpus, t.output_throughput) == ("A100-80GB-SXM", 1, thr)
    on_demand, spot, owned = t.tier("on-demand"), t.tier("spot"), t.tier("owned")
    assert isinstance(on_demand, TierPrice) and isinstance(spot, TierPrice)
    assert isinstance(owned, TierPrice)
    # on-demand: DataCrunch's 1x A100-80GB-SXM through Prime Intellect at $1.12/h
    assert on_demand.what.startswith("primeintellect datacrunch__1xA100_80GB__22__120")
    assert on_demand.usd_per_million_output_tokens == pytest.approx(1.12 / (thr * 3600) * 1e6)
    # spot: DataCrunch's 1x A100-80GB-SXM spot through Prime Intellect at $0.53/h
    assert spot.usd_per_hour == pytest.approx(0.53)
    assert spot.what == "primeintellect datacrunch__1xA100_80GB__22__120__SPOT FI"
    # owned: $37,500 over 3 years 24/7 + 400 W at $0.12/kWh
    tdp = catalog()["A100-80GB-SXM"].tdp_watts
    per_hour = 37500 / (3 * 8760) + tdp / 1000 * 0.12
    assert owned.usd_per_hour == pytest.approx(per_hour)
    assert owned.usd_per_million_output_tokens == pytest.approx(per_hour / (thr * 3600) * 1e6)


def test_missing_prices_say_why():
    t = tier_costs(typed(make_result("h", gpu="H100-SXM")), snapshot_market(), load_prices(None))
    owned = t.tier("owned")
    assert isinstance(owned, TierUnpriced) and "no purchase price for H100-SXM" in owned.reason
    t = tier_costs(typed(make_result("c", gpu=None)), snapshot_market(), load_prices(None))
    tiers = [t.tier(k) for k in ("on-demand", "spot", "owned")]
    assert all(isinstance(c, TierUnpriced) and "no GPU key" in c.reason for c in tiers)


def test_compare_cli_shows_the_tiers(tmp_path):
    paths = []
    for name, gpu in (("r4090", "RTX-4090"), ("a100", "A100-80GB-SXM")):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(make_result(name, gpu=gpu)))
        paths.append(str(p))
    app = typer.Typer()
    app.command()(compare_command)
    res = CliRunner().invoke(app, [*paths, "--tiers"])
    assert res.exit_code == 0, res.output
    assert "$ per 1M output tokens by price tier" in res.stdout
    assert "r4090 on-demand: lium RTX4090_1x UA" in res.stdout
    assert "r4090 owned: $1,600/GPU (street)" in res.stdout
    res = CliRunner().invoke(app, [*paths, "--tiers", "--format", "json"])
    tiers = json.loads(res.stdout)["tiers"]
    runs = tiers["runs"]
    assert [r["gpu"] for r in runs] == ["RTX-4090", "A100-80GB-SXM"]
    assert runs[0]["spot"]["usd_per_hour"] == pytest.approx(0.29)  # RunPod 4090 spot
    # each run: its GPU, count and throughput, then a tier each, priced or with its reason
    assert list(runs[0]) == ["gpu", "gpus", "output_throughput", "on-demand", "spot", "owned"]
    assert list(runs[0]["owned"]) == ["usd_per_hour", "usd_per_million_output_tokens", "what"]
    assert "source" in tiers["market"]
