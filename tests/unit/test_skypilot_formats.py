"""The other clouds' ``vms.csv`` formats (rows in SkyPilot's exact format, copied from the
catalog), the accelerator names they use, catalogs spread over several versions, and
``prices --gpu`` for an accelerator infer-prof's GPU catalog does not have."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from infer_prof.catalog.accelerators import match_accelerator
from infer_prof.catalog.market import catalog_files, load_market, snapshot_market
from infer_prof.catalog.skypilot import gpu_memory_gib, parse_vms_csv
from infer_prof.cli.prices import prices_command
from infer_prof.core.catalog.market import filter_offers

REPO = Path(__file__).resolve().parents[2]


def only(text: str, cloud: str):
    read = parse_vms_csv(text, cloud, f"{cloud}/vms.csv", "2026-11-24")
    return read, {o.instance_type: o for o in read.offers}


def test_vast_total_memory_zero_spot_and_quoted_regions():
    # catalogs/v8/vast/vms.csv: GpuInfo holds the instance's memory, 0.00 means no spot price,
    # regions are "City, CC, continent" with commas inside quotes
    text = (
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,"
        "Region\n"
        "2x-H100_SXM-32-65536,H100,2,32,64.0,\"{'Gpus': [{'Name': 'H100', 'Count': 2, "
        "'MemoryInfo': {'SizeInMiB': 163118}}], 'TotalGpuMemoryInMiB': 163118}\",3.73,0.00,"
        "\"Thailand, TH, AS\"\n"
        "1x-H100_NVL-32-65536,H100,1,32,64.0,\"{'Gpus': [{'Name': 'H100', 'Count': 1, "
        "'MemoryInfo': {'SizeInMiB': 95830}}], 'TotalGpuMemoryInMiB': 95830}\",2.08,0.00,"
        "\"Bulgaria, BG, EU\"\n"
        "1x-RTX_4090-32-65536,RTX4090,1,32,64.0,\"{'Gpus': [{'Name': 'RTX4090', 'Count': 1, "
        "'MemoryInfo': {'SizeInMiB': 49140}}], 'TotalGpuMemoryInMiB': 49140}\",0.40,0.00,"
        "\"Hong Kong, HK, AS\"\n"
    )
    read, by = only(text, "vast")
    sxm = by["2x-H100_SXM-32-65536"]
    assert (sxm.gpu, sxm.gpu_count, sxm.region) == ("H100-SXM", 2, "Thailand, TH, AS")
    assert sxm.gpu_memory_gib == pytest.approx(163118 / 2 / 1024)
    assert sxm.spot_usd_per_hour is None and sxm.on_demand_usd_per_hour == 3.73
    assert by["1x-H100_NVL-32-65536"].gpu == "H100-NVL"   # named by the instance type
    modded = by["1x-RTX_4090-32-65536"]                     # a 48 GB card is not an RTX 4090
    assert modded.gpu is None and "RTX4090" in read.unknown and "47.9883 GiB" in (modded.note or "")


def test_primeintellect_json_gpuinfo_with_the_instance_memory():
    # catalogs/v8/primeintellect/vms.csv: JSON GpuInfo, the instance's memory in Gpus[0]
    text = (
        "InstanceType,UpstreamCloudId,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,"
        "Region,AvailabilityZone,Price,SpotPrice\n"
        "datacrunch__2xA100_80GB__44__240,2A100.44V,44.0,240,A100-80GB,2.0,\"{\"\"Gpus\"\":[{"
        "\"\"Name\"\":\"\"A100-80GB\"\",\"\"Count\"\":2,\"\"MemoryInfo\"\":{\"\"SizeInMiB\"\":"
        "163840}}],\"\"TotalGpuMemoryInMiB\"\":327680}\",FI,FIN-01,2.23,\n"
        "datacrunch__2xA100_80GB__44__240__SPOT,2A100.44V_SPOT,44.0,240,A100-80GB,2.0,\"{"
        "\"\"Gpus\"\":[{\"\"Name\"\":\"\"A100-80GB\"\",\"\"Count\"\":2,\"\"MemoryInfo\"\":{"
        "\"\"SizeInMiB\"\":163840}}],\"\"TotalGpuMemoryInMiB\"\":327680}\",FI,FIN-01,,1.05\n"
        "hyperstack__1xH100_80GB__28__180,n3-H100x1,28.0,180,H100,1.0,\"{\"\"Gpus\"\":[{"
        "\"\"Name\"\":\"\"H100\"\",\"\"Count\"\":1,\"\"MemoryInfo\"\":{\"\"SizeInMiB\"\":81920}}"
        "],\"\"TotalGpuMemoryInMiB\"\":81920}\",CA,CANADA-1,1.9,\n"
    )
    read, by = only(text, "primeintellect")
    a100 = by["datacrunch__2xA100_80GB__44__240"]
    assert (a100.gpu, a100.gpu_memory_gib, a100.gpu_count) == ("A100-80GB-SXM", 80.0, 2)
    spot_only = by["datacrunch__2xA100_80GB__44__240__SPOT"]
    assert (spot_only.on_demand_usd_per_hour, spot_only.spot_usd_per_hour) == (None, 1.05)
    assert by["hyperstack__1xH100_80GB__28__180"].gpu == "H100-PCIe"  # Hyperstack's n3-H100x1
    assert not read.unknown and not read.skipped


def test_hyperstack_null_and_its_own_names():
    # catalogs/v8/hyperstack/vms.csv: 'Manufacturer': null is JSON, not a Python literal
    info = ("\"{'Gpus': [{'Name': 'H100-80G-PCIe', 'Manufacturer': null, 'Count': 1, "
            "'MemoryInfo': {'SizeInMiB': 81920}}], 'TotalGpuMemoryInMiB': 81920}\"")
    text = ("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,Region,"
            f"SpotPrice\nn3-H100x1,H100-80G-PCIe,1,28,180.0,{info},1.9,CANADA-1,\n")
    _, by = only(text, "hyperstack")
    assert (by["n3-H100x1"].gpu, by["n3-H100x1"].gpu_memory_gib) == ("H100-PCIe", 80.0)


@pytest.mark.parametrize(
    ("cell", "gib"),
    [
        # DigitalOcean (v6): lower-case keys
        ("{'gpus': [{'name': 'h100', 'manufacturer': 'nvidia', 'count': 8.0, 'memoryinfo': "
         "{'sizeinmib': 81559}}], 'totalgpumemoryinmib': 81559}", 81559 / 1024),
        # RunPod (v8) and Shadeform: "SizeInMiB" that is GB
        ("{'Gpus': [{'Name': 'A100 PCIe', 'Manufacturer': 'Nvidia', 'Count': 1, 'MemoryInfo': "
         "{'SizeInMiB': 80}}], 'TotalGpuMemoryInMiB': 80}", 80.0),
        # Seeweb: a size of 0 says nothing
        ("{'Gpus': [{'Name': 'RTX PRO 6000 96GB', 'Manufacturer': 'NVIDIA', 'Count': 1.0, "
         "'MemoryInfo': {'SizeInMiB': 0}}], 'TotalGpuMemoryInMiB': 0}", None),
        # Paperspace (v6): the bare name
        ("H100", None),
    ],
)
def test_gpu_memory_of_each_gpuinfo_dialect(cell, gib):
    assert gpu_memory_gib(cell) == (pytest.approx(gib) if gib else None)


def test_runpod_v8_header_order_and_gib_sizes():
    # catalogs/v8/runpod/vms.csv: Region before SpotPrice and Price, GpuInfo last
    text = (
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Region,SpotPrice,Price,"
        "AvailabilityZone,GpuInfo\n"
        "1x_A100-80GB_SECURE,A100-80GB,1.0,8.0,117.0,CA,1.39,1.39,CA-MTL-1,\"{'Gpus': [{'Name': "
        "'A100 PCIe', 'Manufacturer': 'Nvidia', 'Count': 1, 'MemoryInfo': {'SizeInMiB': 80}}], "
        "'TotalGpuMemoryInMiB': 80}\"\n"
    )
    _, by = only(text, "runpod")
    offer = by["1x_A100-80GB_SECURE"]
    assert (offer.gpu, offer.gpu_memory_gib, offer.region) == ("A100-80GB-PCIe", 80.0, "CA")


@pytest.mark.parametrize(
    ("cloud", "itype", "acc", "gib", "key"),
    [
        ("spheron", "x", "H100_SXM5", 80, "H100-SXM"),
        ("spheron", "x", "H100_PCIE_BAREMETAL", 80, "H100-PCIe"),
        ("spheron", "x", "A100_80G_SXM4", 80, "A100-80GB-SXM"),
        ("spheron", "x", "L40S_PCIE", 48, "L40S"),
        ("hyperstack", "n3-RTX-A6000x1", "RTX-A6000", 48, "A6000"),
        ("verda", "1RTX6000ADA.10V", "RTX-6000-Ada", 48, "RTX-6000-Ada"),
        ("shadeform", "massedcompute_RTX6000Adax4", "RTX6000Ada", 48, "RTX-6000-Ada"),
        ("cudo", "epyc-genoa-a100-pcie_1x2v4gb", "A100", 80, "A100-80GB-PCIe"),
        ("scaleway", "H100-1-80G", "H100", 79.6, "H100-PCIe"),
        ("shadeform", "scaleway_H100x2", "H100", 80, "H100-PCIe"),
        ("aws", "g6e.xlarge", "L40S", 45776 / 1024, "L40S"),
        ("aws", "p5e.48xlarge", "H200", 141, "H200"),
        ("aws", "g6.xlarge", "L4", 22.4, "L4"),
        ("aws", "g5.xlarge", "A10G", 22.4, "A10G"),
        ("aws", "g4dn.xlarge", "T4", 16, "T4"),
        ("aws", "g5g.xlarge", "T4g", 16, "T4"),
        ("oci", "BM.GPU.MI300X.8", "MI300X", 192, "MI300X"),
        ("nebius", "gpu-b200-sxm_8gpu-160vcpu-1792gb", "B200", 180, "B200"),
        ("oci", "BM.GPU.GB200.4", "GB200", 192, "GB200"),
        ("lambda", "gpu_1x_gh200", "GH200", 96, "GH200"),
        ("ovhcloud", "t2-45", "V100-32GB", 32, "V100-32GB"),
        ("runpod", "1x_RTXPRO6000-WK_SECURE", "RTXPRO6000-WK", 96, "RTX-PRO-6000"),
        ("runpod", "1x_NVIDIA-H200-NVL_SECURE", "NVIDIA-H200-NVL", 143, "H200-NVL"),
        # the memory picks the variant of a family
        ("mithril", "a100-80gb.sxm.1x", "A100", 80, "A100-80GB-SXM"),
        ("verda", "1V100.6V", "Tesla-V100", 32, "V100-32GB"),
        # not in infer-prof's GPU catalog: listed with their own name, never merged
        ("fluidstack", "H100_NVLINK_80GB::8", "H100-NVLINK", 80, None),
        ("aws", "g4ad.xlarge", "Radeon Pro V520", 8, None),
        ("vast", "1x-RTX4090-8-32768", "RTX4090", 48, None),  # a 48 GB modded card
    ],
)
def test_other_clouds_names_map_to_the_gpu_catalog_or_stay_unknown(cloud, itype, acc, gib, key):
    assert match_accelerator(cloud, itype, acc, gib).gpu == key


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


LAMBDA = ("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,"
          "SpotPrice\ngpu_1x_a6000,A6000,1.0,14.0,100.0,{price},us-east-1,,\n")


def test_each_cloud_is_read_from_the_newest_version_that_has_it(tmp_path):
    root = tmp_path / "catalogs"
    write(root, "v7/lambda/vms.csv", LAMBDA.format(price="0.80"))
    write(root, "v8/lambda/vms.csv", LAMBDA.format(price="1.09"))
    old = write(root, "v6/paperspace/vms.csv",
                "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Region,"
                "SpotPrice,Price\nA4000,A4000,1.0,8,32.0,A4000,East Coast (NY2),,0.76\n")
    assert [(c, p.parent.parent.name) for c, p in catalog_files(root)] == [
        ("lambda", "v8"), ("paperspace", "v6")]
    # the prices are as current as the oldest file read
    stamp = time.time() - 120 * 86400
    os.utime(old, (stamp, stamp))
    market = load_market(str(tmp_path))
    by = {o.cloud: o for o in market.offers}
    assert by["lambda"].on_demand_usd_per_hour == 1.09 and by["paperspace"].gpu == "A4000"
    assert market.stale and market.age_days in (119, 120, 121)
    # the script does the same and records which version each cloud came from
    out = tmp_path / "out"
    subprocess.run([sys.executable, "scripts/refresh_prices.py", str(tmp_path), "--out", str(out),
                    "--commit", "c0ffee", "--date", "2026-11-24"], check=True, cwd=REPO,
                   env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True)
    prov = json.loads((out / "skypilot_gpu_prices.json").read_text())
    assert prov["catalog_versions"] == {"lambda": "v8", "paperspace": "v6"}
    assert set(prov["clouds"]) == {"lambda", "paperspace"}


def test_an_unknown_accelerator_says_why():
    assert "does not say which H100" in (match_accelerator(
        "fluidstack", "x", "H100-NVLINK", 80).note or "")
    assert "not in infer-prof's GPU catalog" in (match_accelerator(
        "simplepod", "x", "RTX3060", 12).note or "")
    assert match_accelerator("aws", "inf2.xlarge", "Inferentia2", None).note == (
        "not an NVIDIA or AMD GPU")
    assert "is not RTX-4090 (24 GiB)" in (match_accelerator(
        "vast", "x", "RTX4090", 48).note or "")


def test_the_snapshot_covers_the_other_clouds():
    market = snapshot_market()
    clouds = {o.cloud for o in market.offers}
    assert {"oci", "vast", "nebius", "cudo", "do", "paperspace", "fluidstack", "hyperbolic",
            "lium", "verda", "shadeform", "primeintellect", "ibm", "scp"} <= clouds
    assert len(clouds) >= 25
    h100 = {o.cloud for o in filter_offers(market.offers, gpu="H100-SXM")}
    assert len(h100) >= 15
    l40s = {o.instance_type for o in filter_offers(market.offers, gpu="L40S", cloud="aws")}
    assert "g6e.xlarge" in l40s
    a100 = {o.instance_type for o in filter_offers(market.offers, gpu="A100-40GB-SXM",
                                                   cloud="gcp")}
    assert {"a2-highgpu-1g", "a2-highgpu-8g"} <= a100
    # shared/skypilot-catalog keeps GCP's accelerator rows but not its host VMs' rows: the
    # built-in GPUs are priced alone, and say so
    a2 = [o for o in market.offers if o.instance_type == "a2-highgpu-1g"]
    assert a2 and all("has no price for its host VM a2-highgpu-1g" in (o.note or "") for o in a2)


def test_the_snapshot_maps_98_percent_of_its_nvidia_and_amd_gpu_offers():
    from infer_prof.catalog.accelerators import is_gpu_accelerator

    market = snapshot_market()
    gpus = [o for o in market.offers if is_gpu_accelerator(o.accelerator)]
    mapped = [o for o in gpus if o.gpu]
    assert len(mapped) / len(gpus) >= 0.98
    assert market.provenance["mapped"] == {
        "offers": len(market.offers), "gpu_offers": len(gpus), "mapped_gpu_offers": len(mapped),
        "mapped_share": round(len(mapped) / len(gpus), 4)}
    # every GPU clouds rent most is there, from several clouds
    for key in ("B200", "L4", "T4", "A10G", "MI300X", "H200", "RTX-PRO-6000"):
        assert len({o.cloud for o in gpus if o.gpu == key}) >= 2 or key == "A10G", key


@pytest.fixture()
def app(tmp_path, monkeypatch) -> typer.Typer:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    a = typer.Typer()
    a.command()(prices_command)
    return a


def test_prices_lists_an_accelerator_the_gpu_catalog_lacks(app):
    res = CliRunner().invoke(app, ["--gpu", "Radeon Pro V520", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert rows and all(r["kind"] == "instance" and r["gpu"] is None for r in rows)
    assert {r["accelerator"] for r in rows} == {"Radeon Pro V520"}
    assert {r["cloud"] for r in rows} == {"aws"}
    table = CliRunner().invoke(app, ["--gpu", "rtx3060"])
    assert table.exit_code == 0 and "? RTX3060" in table.stdout
    assert "not in infer-prof's GPU catalog" in table.stdout
    res = CliRunner().invoke(app, ["--gpu", "RTX3060", "--cloud", "lambda"])
    assert res.exit_code == 2 and "lambda has no RTX3060 instance" in res.stderr


def test_prices_lists_l4_from_the_clouds_that_rent_it(app):
    res = CliRunner().invoke(app, ["--gpu", "L4", "--json"])
    assert res.exit_code == 0, res.output
    rows = [r for r in json.loads(res.stdout) if r["kind"] == "instance"]
    assert rows and all(r["gpu"] == "L4" for r in rows)
    assert {"aws", "gcp", "runpod"} <= {r["cloud"] for r in rows}
