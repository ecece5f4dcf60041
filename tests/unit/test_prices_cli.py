"""`infer-prof prices`: the instance market with its filters, where each price comes from."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from infer_prof.cli.prices import prices_command

from .test_skypilot_catalog import write_live_catalog


@pytest.fixture(autouse=True)
def no_sky_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture()
def app() -> typer.Typer:
    a = typer.Typer()
    a.command()(prices_command)
    return a


def run(app, *args: str, columns: int = 200):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})


def test_h100_from_five_clouds_cheapest_per_gpu_first(app):
    res = run(app, "--gpu", "H100-SXM", "--json")
    assert res.exit_code == 0, res.output
    rows = [r for r in json.loads(res.stdout) if r["kind"] == "instance"]
    assert {"aws", "gcp", "azure", "lambda", "runpod"} <= {r["cloud"] for r in rows}
    per_gpu = [r["on_demand_usd_per_gpu_hour"] for r in rows]
    assert per_gpu == sorted(per_gpu)
    assert all(r["gpu"] == "H100-SXM" for r in rows)
    assert rows[0]["catalog"]["source"] == "snapshot"
    assert rows[0]["source"].startswith("skypilot-org/skypilot-catalog@")
    # the cheapest 1-GPU H100-SXM on demand: Hyperbolic's 1x-H100-75-722 at $1.29/h
    assert [r["instance_type"] for r in rows if r["default"]] == ["1x-H100-75-722"]
    seed = [r for r in json.loads(res.stdout) if r["kind"] == "seed"]
    assert {r["provider"] for r in seed} == {"cloud-low", "cloud-high"}


def test_table_names_the_source_and_collapses_regions(app):
    res = run(app, "--gpu", "H100-SXM", "--cloud", "aws")
    assert res.exit_code == 0, res.output
    assert "p5.48xlarge" in res.stdout and "us-east-1 (+10)" in res.stdout
    assert "snapshot of SkyPilot's catalog (29 clouds' files, each at its own commit" in res.stdout
    assert "$55.04" in res.stdout and "$6.88" in res.stdout
    assert "Seed price rows" not in res.stdout  # the seed rows have no cloud
    res = run(app, "--gpu", "H100-SXM")
    assert ("also in the catalog: H100-NVL (azure, runpod, spheron, vast), H100-PCIe (hyperstack, "
            "lambda, primeintellect, scaleway, shadeform, spheron)") in res.stdout
    res = run(app, "--gpu", "H100-SXM", "--cloud", "aws", "--all-regions")
    assert res.stdout.count("p5.48xlarge") == 11


@pytest.mark.parametrize(("family", "keys"), [
    ("A100", {"A100-40GB-SXM", "A100-80GB-SXM", "A100-80GB-PCIe"}),
    ("H100", {"H100-SXM", "H100-PCIe", "H100-NVL"}),
    ("MI300X", {"MI300X"}),
])
def test_a_family_name_lists_every_variant(app, family, keys):
    res = run(app, "--gpu", family, "--json")
    assert res.exit_code == 0, res.output
    rows = [r for r in json.loads(res.stdout) if r["kind"] == "instance"]
    assert {r["gpu"] for r in rows} == keys
    assert not any(r["default"] for r in rows) or len(keys) == 1
    table = run(app, "--gpu", family)
    if len(keys) > 1:
        assert f"{family} is a GPU family: every variant is listed" in table.stdout


def test_spot_region_and_max_price_filters(app):
    res = run(app, "--spot", "--region", "us-east-1", "--max-price", "3", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert rows and all(r["region"] == "us-east-1" for r in rows)
    assert all(r["spot_usd_per_gpu_hour"] <= 3 for r in rows)
    spot = [r["spot_usd_per_gpu_hour"] for r in rows]
    assert spot == sorted(spot)
    # p5 in us-east-1: $14.246 spot / 8 GPUs
    p5 = [r for r in rows if r["instance_type"] == "p5.48xlarge"]
    assert p5[0]["spot_usd_per_gpu_hour"] == pytest.approx(14.246 / 8)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--cloud", "awz"), "nearest: aws"),
        (("--region", "us-est-1"), "nearest: "),
        (("--gpu", "H10"), "unknown GPU 'H10'; nearest: "),
        (("--gpu", "RTX-4090", "--cloud", "aws"), "aws has no RTX-4090 instance"),
    ],
)
def test_bad_filters_exit_2_with_one_line(app, args, words):
    res = run(app, *args)
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and words in res.stderr


def test_live_catalog_is_used_and_says_so(app, tmp_path):
    root = write_live_catalog(tmp_path)
    res = run(app, "--gpu", "H100", "--prices-from", str(root))
    assert res.exit_code == 0, res.output
    assert f"SkyPilot's catalogs in {root}" in res.stdout
    assert "gpu_1x_h100_sxm5" in res.stdout and "$2.5" in res.stdout
    res = run(app, "--prices-from", str(tmp_path / "nope"), "--gpu", "H100")
    assert res.exit_code == 0
    assert "no such folder; using the shipped snapshot" in res.stderr
    assert "snapshot of SkyPilot's catalog" in res.stdout


def test_unknown_accelerators_are_listed_as_such(app, tmp_path):
    root = write_live_catalog(tmp_path)
    res = run(app, "--prices-from", str(root), "--json")
    a2 = [r for r in json.loads(res.stdout) if r.get("accelerator") == "A2"]
    assert a2 and a2[0]["gpu"] is None
    res = run(app, "--prices-from", str(root))
    assert "? A2" in res.stdout
    assert "! ? A2: not in infer-prof's GPU catalog" in res.stdout
