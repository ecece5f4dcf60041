"""`infer-prof plan` on the GPUs clouds rent and on a GPU family name (every variant planned)."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from infer_prof.cli.plan import plan_command


def _run(args: list[str]):
    app = typer.Typer()
    app.command()(plan_command)
    return CliRunner().invoke(app, args)


def test_plan_on_a_b200_uses_its_catalog_memory():
    r = _run(["--model", "llama-2-70b", "--gpu", "B200", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["gpu"] == "B200"
    # 0.9 x the catalog's CUDA-visible 178.16 GiB: 70B bf16 (128.5 GiB of weights) fits on one
    assert d["precision"] == "bf16"


def test_a_family_name_plans_every_variant():
    r = _run(["--model", "llama-2-70b", "--gpu", "A100", "--json"])
    assert r.exit_code == 0, r.output
    docs = json.loads(r.stdout)
    assert [d["gpu"] for d in docs] == [
        "A100-40GB-PCIe", "A100-80GB-PCIe", "A100-40GB-SXM", "A100-80GB-SXM"]
    assert {d["precision"] for d in docs if d["gpu"].startswith("A100-80GB")} == {"bnb-nf4"}
    table = _run(["--model", "llama-2-7b", "--gpu", "h100"])
    assert table.exit_code == 0, table.output
    assert table.output.count("llama-2-7b on 1 x H100-") == 3
    assert "H100 is a GPU family: planned on each variant; fits on H100-PCIe, H100-SXM, H100-NVL" \
        in " ".join(table.output.split())


def test_a_family_where_nothing_fits_exits_1():
    r = _run(["--model", "llama-2-70b", "--gpu", "A100", "--gpu-memory-utilization", "0.2"])
    assert r.exit_code == 1, r.output
    assert "fits on none" in r.output


def test_fp8_plans_on_an_amd_gpu_with_fp8_math_and_not_on_one_without():
    from infer_prof.catalog.gpus import find_gpu
    from infer_prof.core.planning.precisions import EngineCaps, why_not

    caps = EngineCaps(build="cuda", checked=False)
    assert why_not("fp8", find_gpu("MI300X"), caps, None) == ""
    assert "no FP8 tensor math" in why_not("fp8", find_gpu("MI25"), caps, None)
