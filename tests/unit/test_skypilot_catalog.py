"""SkyPilot's catalogs as infer-prof's price market: reading vms.csv, the accelerator mapping,
live folders and their fallback, the shipped snapshot and the script that rebuilds it."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest

from infer_prof.catalog.accelerators import ACCELERATOR_KEYS, match_accelerator
from infer_prof.catalog.gpus import catalog
from infer_prof.catalog.market import (
    SNAPSHOT_DATA,
    SNAPSHOT_PROVENANCE,
    find_instance,
    load_market,
    snapshot_market,
)
from infer_prof.catalog.prices import CANONICAL_GPU_KEYS, canonical_gpu_key
from infer_prof.catalog.skypilot import gpu_memory_gib, parse_vms_csv
from infer_prof.core.catalog.market import cheapest_offer, filter_offers

REPO = Path(__file__).resolve().parents[2]
EXCERPT = REPO / "tests" / "data" / "skypilot_excerpt"

# SkyPilot's exact headers (Lambda's order; AWS's order with zones)
LAMBDA_HEADER = ("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,"
                 "GpuInfo,SpotPrice")
AWS_HEADER = ("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,"
              "SpotPrice,Region,AvailabilityZone")
H100_INFO = ("\"{'Gpus': [{'Name': 'H100', 'Manufacturer': 'NVIDIA', 'Count': 8, 'MemoryInfo': "
             "{'SizeInMiB': 81920}}], 'TotalGpuMemoryInMiB': 655360}\"")


def lambda_row(itype: str, acc: str, count: str, price: str, region: str, mib: int = 81920,
               spot: str = "") -> str:
    info = (f"\"{{'Gpus': [{{'Name': '{acc}', 'Manufacturer': 'NVIDIA', 'Count': {count}, "
            f"'MemoryInfo': {{'SizeInMiB': {mib}}}}}], 'TotalGpuMemoryInMiB': {mib}}}\"")
    return f"{itype},{acc},{count},26.0,225.0,{price},{region},{info},{spot}"


def write_live_catalog(root: Path) -> Path:
    """``root/.sky/catalogs/v7/{lambda,aws}/vms.csv`` with good and malformed rows."""
    lam = root / ".sky" / "catalogs" / "v7" / "lambda"
    lam.mkdir(parents=True)
    (lam / "vms.csv").write_text("\n".join([
        LAMBDA_HEADER,
        "cpu_4x_general,,,4.0,16.0,0.2,us-east-1,,",                          # no GPU: not a row
        lambda_row("gpu_1x_h100_sxm5", "H100", "1.0", "2.50", "us-east-1"),
        lambda_row("gpu_1x_h100_sxm5", "H100", "1.0", "2.75", "us-west-1"),
        lambda_row("gpu_8x_h100_sxm5", "H100", "8.0", "19.20", "us-east-1"),
        lambda_row("gpu_1x_h100_sxm5", "H100", "1.0", "", "europe-central-1"),  # empty price
        lambda_row("gpu_1x_mi300x", "MI300X", "1.0", "3.10", "us-east-1", 196608),
        lambda_row("gpu_1x_a2", "A2", "1.0", "0.40", "us-east-1", 16384),  # not in the catalog
        "gpu_1x_a10,A10,1.0,30.0,200.0,0.75,us-east-1",                      # a missing column
    ]) + "\n")
    aws = root / ".sky" / "catalogs" / "v7" / "aws"
    aws.mkdir(parents=True)
    (aws / "vms.csv").write_text("\n".join([
        AWS_HEADER,
        f"p5.48xlarge,H100,8.0,192.0,2048.0,{H100_INFO},98.32,30.3,us-east-1,use1-az1",
        f"p5.48xlarge,H100,8.0,192.0,2048.0,{H100_INFO},98.32,20.99,us-east-1,use1-az3",
        f"p5.48xlarge,H100,8.0,192.0,2048.0,{H100_INFO},122.9,,us-west-1,usw1-az1",
    ]) + "\n")
    return root / ".sky" / "catalogs"


# --------------------------------------------------------------------------- reading


def test_zones_reduce_to_the_cheapest_per_region_each_tier_apart():
    text = (EXCERPT / "catalogs/v7/aws/vms.csv").read_text()
    read = parse_vms_csv(text, "aws", "aws.csv", "2026-11-24")
    p5 = {o.region: o for o in read.offers if o.instance_type == "p5.48xlarge"}
    # us-east-1 lists 6 zones at $98.32 on-demand; the cheapest spot is use1-az3's $20.9934
    assert p5["us-east-1"].on_demand_usd_per_hour == 98.32
    assert p5["us-east-1"].spot_usd_per_hour == 20.9934
    assert p5["us-east-1"].gpu == "H100-SXM" and p5["us-east-1"].gpu_count == 8
    assert p5["us-east-1"].per_gpu("on-demand") == pytest.approx(12.29)
    # p5e rows with neither price are skipped and counted; the ones with spot stay
    assert read.skipped == {"no price": 3}
    p5e = [o for o in read.offers if o.instance_type == "p5e.48xlarge"]
    assert p5e and all(o.on_demand_usd_per_hour is None and o.spot_usd_per_hour for o in p5e)
    assert p5e[0].gpu == "H200" and p5e[0].gpu_memory_gib == pytest.approx(141.0)


def test_gcp_accelerators_are_priced_with_their_host_vm():
    text = (EXCERPT / "catalogs/v7/gcp/vms.csv").read_text()
    read = parse_vms_csv(text, "gcp", "gcp.csv", None)
    a3 = {o.region: o for o in read.offers if o.instance_type == "a3-highgpu-8g"}
    # us-central1-a: host $9.46006 + 8x H100 $33.60609; spot $2.17547 + $18.024
    assert a3["us-central1"].on_demand_usd_per_hour == pytest.approx(9.46006 + 33.60609)
    assert a3["us-central1"].spot_usd_per_hour == pytest.approx(2.17547 + 18.024)
    assert a3["us-central1"].gpu == "H100-SXM"
    # asia-northeast3 sells the H100s but lists no a3-highgpu-8g host there: no offer
    assert "asia-northeast3" not in a3
    # a2-highgpu-1g in us-central1-a: host $0.73948 + 1x A100 $2.93391; spot $0.29576 + $1.1472
    a2 = {o.region: o for o in read.offers if o.instance_type == "a2-highgpu-1g"}
    assert a2["us-central1"].on_demand_usd_per_hour == pytest.approx(0.73948 + 2.93391)
    assert a2["us-central1"].spot_usd_per_hour == pytest.approx(0.29576 + 1.1472)
    assert a2["us-central1"].gpu == "A100-40GB-SXM"
    assert {o.gpu for o in read.offers} == {"H100-SXM", "H200", "A100-40GB-SXM", "A100-80GB-SXM"}


def test_gpu_info_memory():
    assert gpu_memory_gib(H100_INFO.strip('"')) == 80.0
    assert gpu_memory_gib("{'Gpus': [{'MemoryInfo': {'SizeInMiB': 24576}}]}") == 24.0
    assert gpu_memory_gib("A100-80GB") is None  # Azure, RunPod: a bare name
    assert gpu_memory_gib("{'Gpus': [") is None


# --------------------------------------------------------------------------- mapping


def test_every_mapped_accelerator_is_a_gpu_catalog_key():
    assert set(ACCELERATOR_KEYS.values()) <= set(catalog())


@pytest.mark.parametrize(
    ("cloud", "itype", "acc", "mem", "key"),
    [
        ("aws", "p5.48xlarge", "H100", 80.0, "H100-SXM"),
        ("lambda", "gpu_1x_h100_pcie", "H100", 80.0, "H100-PCIe"),
        ("azure", "Standard_NC40ads_H100_v5", "H100", None, "H100-NVL"),
        ("runpod", "1x_A100-80GB_SECURE", "A100-80GB", None, "A100-80GB-PCIe"),
        ("runpod", "1x_A100-80GB-SXM_SECURE", "A100-80GB-SXM", None, "A100-80GB-SXM"),
        ("gcp", "a3-megagpu-8g", "H100-MEGA", 80.0, "H100-SXM"),
        ("runpod", "1x_RTX4090_SECURE", "RTX4090", None, "RTX-4090"),
        ("aws", "g5.xlarge", "A10G", 24.0, "A10G"),
        ("lambda", "gpu_1x_gh200", "GH200", 96.0, "GH200"),
        ("lambda", "gpu_1x_rtx6000", "RTX6000", 24.0, None),  # Turing, not the RTX 6000 Ada
        ("runpod", "1x_MI300X_SECURE", "MI300X", None, "MI300X"),
        ("aws", "p6-b200.48xlarge", "B200", 179.06, "B200"),
    ],
)
def test_accelerator_names_map_to_gpu_keys(cloud, itype, acc, mem, key):
    match = match_accelerator(cloud, itype, acc, mem)
    assert match.gpu == key
    if key:
        assert match.memory_gib == pytest.approx(mem or catalog()[key].memory_gib)


def test_memory_picks_the_variant_and_a_memory_no_variant_has_is_unknown():
    # a 32 GB V100 is the V100-32GB; an 80 GB A100 the A100-80GB of the same form factor
    assert match_accelerator("aws", "p3dn.24xlarge", "V100", 32.0).gpu == "V100-32GB"
    assert match_accelerator("mithril", "x", "A100", 80.0).gpu == "A100-80GB-SXM"
    assert match_accelerator("x", "x", "H100", 94.0).gpu == "H100-NVL"
    # a 48 GB RTX 4090 (a modded card) is no catalog GPU: unknown, with the reason
    match = match_accelerator("vast", "1x-RTX_4090-32-65536", "RTX4090", 48.0)
    assert match.gpu is None and "not RTX-4090 (24 GiB)" in (match.note or "")


def test_price_keys_come_from_the_gpu_catalog():
    assert tuple(catalog()) == CANONICAL_GPU_KEYS
    assert canonical_gpu_key("H100-SXM5") == "H100-SXM"  # an alias of the GPU catalog
    assert canonical_gpu_key("H100") is None  # a family: every H100, not one key
    assert canonical_gpu_key("H200 NVL") == "H200-NVL"


# --------------------------------------------------------------------------- live / fallback


def test_live_catalog_is_read_with_bad_rows_skipped_and_counted(tmp_path, monkeypatch):
    write_live_catalog(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    market = load_market(today=dt.date.today())
    assert market.source == "live" and market.notice is None
    assert market.age_days == 0 and not market.stale
    assert "2 bad rows skipped" in market.read
    assert "no price: 1" in market.read and "wrong number of fields: 1" in market.read
    assert "does not know: A2" in market.read  # listed as unknown, not skipped
    a2 = [o for o in market.offers if o.accelerator == "A2"]
    assert a2 and a2[0].gpu is None and "not in infer-prof's GPU catalog" in (a2[0].note or "")
    mi = [o for o in market.offers if o.accelerator == "MI300X"]
    assert mi and mi[0].gpu == "MI300X" and mi[0].gpu_memory_gib == 192.0
    q = cheapest_offer(market.offers, "H100-SXM", "on-demand", 1)
    assert q is not None
    assert (q.provider, q.instance_type, q.region, q.usd_per_hour) == (
        "lambda", "gpu_1x_h100_sxm5", "us-east-1", 2.50)
    # 8 GPUs: the 8x instance at $19.20/8 = $2.40 beats p5's $12.29; range over both
    q8 = cheapest_offer(market.offers, "H100-SXM", "on-demand", 8)
    assert q8 is not None and q8.instance_type == "gpu_8x_h100_sxm5"
    assert (q8.low, q8.high) == pytest.approx((2.40, 122.9 / 8))


def test_old_live_catalog_says_how_old(tmp_path, monkeypatch):
    root = write_live_catalog(tmp_path)
    old = time.time() - 120 * 86400
    for f in root.rglob("vms.csv"):
        os.utime(f, (old, old))
    market = load_market(str(root))
    assert market.age_days in (119, 120, 121) and market.stale
    assert "older than 90 days" in market.describe()


@pytest.mark.parametrize("kind", ["missing", "empty", "unreadable"])
def test_unusable_folder_is_one_line_and_falls_back_to_the_snapshot(tmp_path, kind):
    folder = tmp_path / "cat"
    if kind == "empty":
        folder.mkdir()
    if kind == "unreadable":
        (folder / "aws").mkdir(parents=True)
        (folder / "aws" / "vms.csv").write_text("not,a,skypilot,header\n1,2,3,4\n")
    market = load_market(str(folder))
    assert market.source == "snapshot"
    assert market.notice and "\n" not in market.notice and str(folder) in market.notice
    assert market.notice.endswith("using the shipped snapshot")


def test_no_sky_folder_means_the_snapshot(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    market = load_market()
    assert market.source == "snapshot" and market.notice is None


# --------------------------------------------------------------------------- snapshot


def test_snapshot_has_h100_from_the_five_clouds():
    market = snapshot_market()
    clouds = {o.cloud for o in filter_offers(market.offers, gpu="H100-SXM")}
    assert {"aws", "gcp", "azure", "lambda", "runpod"} <= clouds
    assert market.provenance["commit"] and market.provenance["date"]
    assert market.provenance["repository"] == "skypilot-org/skypilot-catalog"
    nd96 = [o for o in market.offers if o.instance_type == "Standard_ND96isr_H100_v5"]
    assert nd96 and all(o.gpu_count == 8 and "says 12" in (o.note or "") for o in nd96)


def _shared_catalog() -> Path | None:
    """The GPU rows of SkyPilot's catalogs the shipped snapshot is built from
    (``$INFER_PROF_SKYPILOT_CATALOG``, else ``shared/skypilot-catalog`` beside the checkout)."""
    for p in (os.environ.get("INFER_PROF_SKYPILOT_CATALOG"), REPO.parent / "shared" /
              "skypilot-catalog"):
        if p and (Path(p) / "PROVENANCE.json").is_file():
            return Path(p)
    return None


def test_shipped_snapshot_is_what_the_script_builds_from_the_shared_catalog(tmp_path):
    source = _shared_catalog()
    if source is None:
        pytest.skip("shared/skypilot-catalog (the snapshot's source) is not beside this checkout")
    data = resources.files("infer_prof.catalog.data")
    shipped = json.loads(data.joinpath(SNAPSHOT_PROVENANCE).read_text())
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "scripts/refresh_prices.py", str(source), "--out",
                    str(tmp_path), "--date", shipped["date"]], check=True, cwd=REPO, env=env,
                   capture_output=True)
    assert (tmp_path / SNAPSHOT_DATA).read_bytes() == data.joinpath(SNAPSHOT_DATA).read_bytes()
    assert json.loads((tmp_path / SNAPSHOT_PROVENANCE).read_text()) == shipped


def test_the_script_records_each_files_commit_from_a_per_file_provenance(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "scripts/refresh_prices.py", str(EXCERPT), "--out",
                    str(tmp_path), "--date", "2026-11-24"], check=True, cwd=REPO, env=env,
                   capture_output=True)
    prov = json.loads((tmp_path / SNAPSHOT_PROVENANCE).read_text())
    assert prov["date"] == "2026-11-24" and prov["repository"] == "skypilot-org/skypilot-catalog"
    assert prov["clouds"]["aws"]["commit"] == "001367d22a0033fac286a8c71aeac7109e431bcb"
    m = prov["mapped"]
    assert m["gpu_offers"] <= m["offers"] and m["mapped_gpu_offers"] <= m["gpu_offers"]
    # the shipped snapshot records the commit of each cloud's file it was built from
    shipped = json.loads(resources.files("infer_prof.catalog.data").joinpath(
        SNAPSHOT_PROVENANCE).read_text())
    assert shipped["commit"] == "per-file" and len(shipped["clouds"]) == 29
    assert all(len(c["commit"]) == 40 for c in shipped["clouds"].values())


def test_script_reads_a_bare_git_repository(tmp_path):
    work = tmp_path / "work"
    (work / "catalogs" / "v7" / "lambda").mkdir(parents=True)
    (work / "catalogs" / "v7" / "lambda" / "vms.csv").write_text("\n".join([
        LAMBDA_HEADER, lambda_row("gpu_1x_h100_sxm5", "H100", "1.0", "2.99", "us-east-1")]) + "\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", str(work)], check=True)
    subprocess.run([*git, "-C", str(work), "add", "."], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-qm", "c"], check=True,
                   env={**os.environ, "GIT_COMMITTER_DATE": "2026-01-02T03:04:05Z"})
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    head = subprocess.run(["git", f"--git-dir={bare}", "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "scripts/refresh_prices.py", str(bare), "--out", str(out)],
                   check=True, cwd=REPO, env=env, capture_output=True)
    prov = json.loads((out / SNAPSHOT_PROVENANCE).read_text())
    assert (prov["commit"], prov["date"], prov["catalog_version"]) == (head, "2026-01-02", "v7")
    rows = gzip.decompress((out / SNAPSHOT_DATA).read_bytes()).decode().splitlines()
    assert rows[1].startswith("lambda,gpu_1x_h100_sxm5,H100,H100-SXM,1,80.0,us-east-1,2.99,")


# --------------------------------------------------------------------------- --instance


def test_find_instance_names_the_nearest_match():
    market = snapshot_market()
    assert find_instance(market, "aws:p5.48xlarge:us-east-1").on_demand_usd_per_hour == 55.04
    # no region: its cheapest on-demand region
    assert find_instance(market, "AWS:p5.48xlarge").region == "us-east-1"
    with pytest.raises(ValueError, match="nearest: p5.48xlarge"):
        find_instance(market, "aws:p5.48xl")
    with pytest.raises(ValueError, match="nearest: aws"):
        find_instance(market, "awss:p5.48xlarge")
    with pytest.raises(ValueError, match="region 'us-est-1'; nearest: .*us-east-1"):
        find_instance(market, "aws:p5.48xlarge:us-est-1")
    with pytest.raises(ValueError, match="aws has no RTX-4090 instance"):
        find_instance(market, "aws:g6.xlarg", gpu="RTX-4090")
    with pytest.raises(ValueError, match="has 1x L4, not RTX-4090"):
        find_instance(market, "aws:g6.xlarge", gpu="RTX-4090")
    with pytest.raises(ValueError, match="write CLOUD:TYPE"):
        find_instance(market, "p5.48xlarge")
