"""The price catalog: the shipped file, user files, price selection, and `infer-prof prices`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from infer_prof.catalog.prices import (
    CANONICAL_GPU_KEYS,
    PriceError,
    canonical_gpu_key,
    load_prices,
    parse_prices_csv,
    select_price,
    select_purchase,
)
from infer_prof.cli.prices import prices_command

HEADER = "provider,gpu,gpu_count,on_demand_usd_per_hour,spot_usd_per_hour,purchase_usd,source,date"


@pytest.fixture(scope="module")
def shipped():
    return load_prices()


def test_shipped_catalog_rows_are_canonical_and_sourced(shipped):
    assert len(shipped.rows) >= 10
    for row in shipped.rows:
        assert row.gpu in CANONICAL_GPU_KEYS
        # every figure cites the seed file it came from
        assert re.match(r"^\d{3}_[0-9a-f]{16}\.txt: ", row.source), row.source
        assert row.date == "2026-03"


def test_shipped_catalog_has_the_seed_figures(shipped):
    # seeds/001_cd298c08d48cf0a0.txt, "Single-GPU On-Demand (as of March 2026)" and the H100 range
    od = {(r.provider, r.gpu): r.on_demand_usd_per_hour for r in shipped.rows if r.gpu_count == 1}
    assert od[("runpod", "RTX-4090")] == 0.34
    assert od[("runpod", "A100-80GB-PCIe")] == 1.19
    assert od[("runpod", "A100-80GB-SXM")] == 1.39
    assert od[("lambda", "A100-80GB-PCIe")] == 1.48
    assert od[("lambda", "A100-80GB-SXM")] == 1.48
    assert od[("cloud-low", "H100-SXM")] == 1.99
    assert od[("cloud-high", "H100-SXM")] == 3.78
    buy = {r.gpu: r.purchase_usd for r in shipped.rows if r.purchase_usd is not None}
    assert buy == {"RTX-4090": 1600.0, "A100-80GB-PCIe": 27500.0, "A100-80GB-SXM": 37500.0}


def test_canonical_gpu_key_is_forgiving():
    assert canonical_gpu_key("rtx 4090") == "RTX-4090"
    assert canonical_gpu_key("H100_sxm") == "H100-SXM"
    assert canonical_gpu_key("a100 80gb sxm") == "A100-80GB-SXM"
    assert canonical_gpu_key("RTX 6000 ada") == "RTX-6000-Ada"
    assert canonical_gpu_key("GTX-1080") is None


def test_default_is_lowest_on_demand_and_says_so(shipped):
    q = select_price(shipped, "rtx 4090")
    assert (q.usd_per_hour, q.provider, q.kind, q.gpu) == (0.34, "runpod", "on-demand", "RTX-4090")
    assert "lowest" in q.reason and "2 single-GPU" in q.reason
    # A100 SXM: runpod $1.39 beats lambda $1.48; the 8-GPU cluster listings are not single-GPU
    q = select_price(shipped, "A100-80GB-SXM")
    assert (q.usd_per_hour, q.provider) == (1.39, "runpod")
    assert q.source.startswith("001_cd298c08d48cf0a0.txt")
    assert q.date == "2026-03"


def test_provider_choice_and_per_gpu_division(shipped):
    q = select_price(shipped, "A100-80GB-SXM", provider="Lambda")
    assert (q.usd_per_hour, q.provider) == (1.48, "lambda")
    # $2,500/month / 730 h = $3.4247/h for 8 GPUs -> $0.4281 per GPU-hour
    q = select_price(shipped, "A100-80GB-SXM", provider="8x-cluster-low")
    assert q.usd_per_hour == pytest.approx(3.4247 / 8)
    assert "divided by 8" in q.reason


def test_price_per_hour_override(shipped):
    q = select_price(shipped, "RTX-4090", price_per_hour=0.5)
    assert (q.usd_per_hour, q.source, q.kind, q.provider) == (0.5, "user", "user", "user")
    # no GPU needed, nor a catalog row for it
    assert select_price(shipped, None, price_per_hour=2.0).usd_per_hour == 2.0
    with pytest.raises(PriceError):
        select_price(shipped, "RTX-4090", price_per_hour=0.0)


def test_no_price_errors_say_what_to_do(shipped):
    with pytest.raises(PriceError, match="--price-per-hour"):
        select_price(shipped, "V100")
    with pytest.raises(PriceError, match="unknown GPU"):
        select_price(shipped, "GTX-1080")
    with pytest.raises(PriceError, match="providers with RTX-4090 rows"):
        select_price(shipped, "RTX-4090", provider="aws")
    with pytest.raises(PriceError, match="no spot price"):
        select_price(shipped, "RTX-4090", spot=True)


def test_purchase_price(shipped):
    p = select_purchase(shipped, "RTX 4090")
    assert (p.usd, p.provider) == (1600.0, "street")


def test_user_file_with_spot_prices(tmp_path: Path):
    f = tmp_path / "mine.csv"
    f.write_text(
        HEADER + "\n"
        "acme,h100 sxm,8,20.00,12.00,,my quote,2025-11-02\n"
        "\n"
        "acme,H100-SXM,1,2.80,1.60,,my quote,2025\n"
    )
    cat = load_prices(f)
    assert cat.origin == str(f)
    assert [r.line for r in cat.rows] == [2, 4]
    q = select_price(cat, "H100-SXM", spot=True)
    assert (q.usd_per_hour, q.kind) == (1.60, "spot")
    # both listings are acme's; the single-GPU one is preferred over 20.00 / 8 = 2.50: $2.80
    assert select_price(cat, "H100-SXM", provider="ACME").usd_per_hour == 2.80


@pytest.mark.parametrize(
    "body, line, field",
    [
        ("runpod,RTX-4090,1,abc,,,s,2026\n", 2, "on_demand_usd_per_hour"),
        ("runpod,RTX-4090,1,0.3,,,s,2026\nx,GTX-1080,1,0.1,,,s,2026\n", 3, "gpu"),
        ("runpod,RTX-4090,0,0.3,,,s,2026\n", 2, "gpu_count"),
        ("runpod,RTX-4090,1,0.3,,,s,March 2026\n", 2, "date"),
        ("runpod,RTX-4090,1,,,,s,2026\n", 2, "on_demand_usd_per_hour"),
        ("runpod,RTX-4090,1,-0.3,,,s,2026\n", 2, "on_demand_usd_per_hour"),
        (",RTX-4090,1,0.3,,,s,2026\n", 2, "provider"),
        ("runpod,RTX-4090,1,0.3,,1,600,s,2026\n", 2, None),  # unquoted comma: too many fields
    ],
)
def test_malformed_user_csv_names_file_line_and_field(tmp_path: Path, body, line, field):
    f = tmp_path / "bad.csv"
    f.write_text(HEADER + "\n" + body)
    with pytest.raises(ValueError) as err:
        load_prices(f)
    msg = str(err.value)
    assert msg.startswith(f"{f} line {line}")
    if field is not None:
        assert f"field {field!r}" in msg


def test_missing_column_and_missing_file(tmp_path: Path):
    with pytest.raises(ValueError, match=r"line 1, field 'spot_usd_per_hour'"):
        parse_prices_csv("provider,gpu,gpu_count,on_demand_usd_per_hour,purchase_usd,source,date\n")
    with pytest.raises(ValueError, match="nope.csv: cannot read"):
        load_prices(tmp_path / "nope.csv")


# --- CLI ------------------------------------------------------------------------------------


@pytest.fixture()
def app() -> typer.Typer:
    a = typer.Typer()
    a.command()(prices_command)
    return a


def test_cli_json_lists_rows_and_marks_default(app):
    res = CliRunner().invoke(app, ["--gpu", "rtx 4090", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    seed = [r for r in rows if r["kind"] == "seed"]
    assert {r["provider"] for r in seed} == {"runpod", "other-providers", "street"}
    # the market's cheapest 1-GPU RTX 4090 is the default, so no seed row is
    assert [(r["kind"], r["provider"]) for r in rows if r["default"]] == [("instance", "lium")]
    assert all(r["gpu"] == "RTX-4090" for r in rows)


def test_cli_table(app):
    res = CliRunner().invoke(app, ["--provider", "lambda"])
    assert res.exit_code == 0, res.output
    assert "A100-80GB-PCIe" in res.stdout and "$1.48" in res.stdout
    assert "RTX-4090" not in res.stdout
    assert "001_cd298c08d48cf0a0.txt" in res.stdout


def test_cli_bad_file_exits_2_with_one_line(app, tmp_path: Path):
    f = tmp_path / "bad.csv"
    f.write_text(HEADER + "\nrunpod,RTX-4090,1,abc,,,s,2026\n")
    res = CliRunner().invoke(app, ["--prices", str(f)])
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1
    assert "line 2, field 'on_demand_usd_per_hour'" in res.stderr


def test_cli_unknown_gpu_exits_2(app):
    res = CliRunner().invoke(app, ["--gpu", "GTX-1080"])
    assert res.exit_code == 2
    assert "unknown GPU" in res.stderr
