"""`infer-prof estimate`'s configuration search (issue 43): the search finds a configuration at
least as cheap as any one asked for, vLLM's support table keeps out what vLLM does not run, the
all-reduce over PCIe by hand, tensor parallelism of a small model does not scale past one GPU,
lossy configurations are marked and kept out on demand, rows rank by how sure they are, and bad
input gives one line and exit 2."""

from __future__ import annotations

import dataclasses
import json

import msgspec
import pytest

from infer_prof.catalog.gpus import catalog
from infer_prof.catalog.market import load_market
from infer_prof.catalog.models import resolve_model
from infer_prof.estimate.document import EstimateDocument, Row
from infer_prof.estimate.expected_error import ExpectedError, parse_errors
from infer_prof.estimate.ranking import rank
from infer_prof.estimate.workflow import EstimateRequest, estimate, plan_all
from tests.unit.estimate_cli import no_sky_home, run  # noqa: F401 (autouse fixture)


def _estimate(model: str, gpus: tuple[str, ...], **kw: object) -> EstimateDocument:
    """The library path `estimate` runs, at 1024 in / 1024 out and 30 tokens/s per user."""
    cat = catalog()
    market = load_market()
    request = EstimateRequest(model=resolve_model(model).spec, input_len=1024, output_len=1024,
                              target_interactivity=30.0, gpus=tuple(cat[g] for g in gpus),
                              **kw)  # type: ignore[arg-type]
    found = plan_all(request, list(request.gpus), list(cat.values()), market.offers)
    return estimate(request, found.configs, found.skipped, market.offers, prices="snapshot",
                    expected=ExpectedError(None, {}, "not validated"), searched=found)


def _cheapest(doc: EstimateDocument) -> float | None:
    usd = [r.usd_per_million_output_tokens for r in doc.rows
           if r.usd_per_million_output_tokens is not None]
    return min(usd) if usd else None


def test_the_issues_command_shows_a_configuration_cheaper_than_the_planners_one():
    res = run("--model", "llama-3.1-70b", "--input-len", "1024", "--output-len", "1024",
              "--target-interactivity", "30", "--gpu", "H100-SXM", "--rank-by", "point",
              "--json")
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)["rows"]
    asked = []
    for n in ("1", "2", "4", "8"):
        for q in ("bf16", "fp8"):
            one = run("--model", "llama-3.1-70b", "--input-len", "1024", "--output-len",
                      "1024", "--target-interactivity", "30", "--gpu", "H100-SXM", "--gpus", n,
                      "--quantization", q, "--rank-by", "point", "--json")
            if one.exit_code == 0:
                asked += [r["usd_per_million_output_tokens"] for r in json.loads(one.stdout)["rows"]
                          if r["usd_per_million_output_tokens"] is not None]
    assert len(asked) >= 4
    assert row["usd_per_million_output_tokens"] <= min(asked) + 1e-9
    assert row["gpu_count"] > 1  # one H100 holds the fp8 weights but no batch (issue 43)


@pytest.mark.parametrize(("model", "gpu"), [
    ("llama-3.1-8b", "L40S"), ("llama-3.1-70b", "A100-80GB-SXM"), ("llama-3.1-8b", "MI300X"),
    ("qwen3-30b-a3b", "H200"), ("llama-2-7b", "L4"),
])
def test_the_search_is_at_least_as_cheap_as_every_count_and_precision(model, gpu):
    best = _cheapest(_estimate(model, (gpu,), rank_by="point"))
    asked = [c for n in (1, 2, 4, 8) for q in ("bf16", "fp8")
             if (c := _cheapest(_estimate(model, (gpu,), rank_by="point", gpu_count=n,
                                          quantization=q))) is not None]
    assert asked and best is not None
    assert best <= min(asked) + 1e-9


def test_the_support_table_keeps_what_vllm_cannot_run_out_of_the_ranking():
    from infer_prof.catalog.vllm_support import (
        gpu_support,
        precision_support,
        support_table,
    )

    cat = catalog()
    table = support_table()
    assert table.cuda.min_compute_capability == "7.5" and "gfx900" not in table.rocm.rocm_targets
    assert gpu_support(cat["P100"]) and gpu_support(cat["MI25"])  # Pascal, gfx900
    assert precision_support(cat["V100"], "bf16").dtype == "float16"  # no bf16 before sm80
    assert not precision_support(cat["T4"], "fp8").runs_as.startswith("W8A8")  # Marlin only
    assert precision_support(cat["A100-80GB-SXM"], "fp8").weight_only
    assert not precision_support(cat["MI300X"], "bnb-nf4").runs
    res = run("--model", "llama-3.1-8b", "--input-len", "1024", "--output-len", "256",
              "--target-interactivity", "20", "--all-configs", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    ranked = {(r["gpu"], r["dtype"]) for r in doc["rows"]}
    assert not any(g in ("P100", "MI25") for g, _ in ranked)
    assert not any(g.startswith("V100") and d == "bfloat16" for g, d in ranked)
    apart = {u["gpu"]: u["why"] for u in doc["unsupported"]}
    assert "compute capability >= 7.5" in apart["P100"] and "gfx900" in apart["MI25"]
    assert ("MI300X", "bnb-nf4") in {(u["gpu"], u["precision"]) for u in doc["unsupported"]}
    assert any(r["gpu"] == "A100-80GB-SXM" and r["precision"] == "fp8" and r["weight_only"]
               for r in doc["rows"])  # fp8 weight-only through Marlin on Ampere


def test_gpt_oss_runs_on_the_amd_gpus_vllms_rocm_build_runs_mxfp4_on():
    """vLLM's ROCm build serves gpt-oss's MXFP4 experts (Triton matmul_ogs on gfx9, AITER on
    gfx950): the planner and the support table agree, and the estimate ranks MI300X/MI355X."""
    from infer_prof.catalog.vllm_support import precision_support, support_table
    from infer_prof.core.planning.precisions import MXFP4_ROCM_TARGETS

    cat = catalog()
    table = support_table()
    assert tuple(table.precisions["mxfp4"].rocm_targets) == MXFP4_ROCM_TARGETS
    assert set(MXFP4_ROCM_TARGETS) <= set(table.rocm.rocm_targets)
    s = precision_support(cat["MI300X"], "mxfp4")
    assert s.runs and "Triton" in s.runs_as, s
    assert not precision_support(cat["MI100"], "mxfp4").runs  # gfx908: not a vLLM target
    from infer_prof.core.planning.precisions import EngineCaps, why_not
    caps = EngineCaps()
    assert why_not("mxfp4", cat["MI300X"], caps, None, checkpoint=True, moe=True) == ""
    assert "MI100 is gfx908" in why_not("mxfp4", cat["MI100"], caps, None, checkpoint=True)
    res = run("--model", "gpt-oss-120b", "--input-len", "1024", "--output-len", "1024",
              "--target-interactivity", "30", "--all-configs", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    ranked = {(r["gpu"], r["precision"]) for r in doc["rows"]}
    assert ("MI300X", "mxfp4") in ranked and ("MI355X", "mxfp4") in ranked
    assert not any(u["gpu"] == "MI300X" and u["precision"] == "mxfp4"
                   for u in doc["unsupported"])


def test_allreduce_over_pcie_by_hand():
    from infer_prof.catalog.interconnects import tp_link
    from infer_prof.core.estimate.collectives import allreduce_step_s
    from infer_prof.core.estimate.decode_step import step_cost
    from infer_prof.core.estimate.deployment import Deployment
    from infer_prof.core.estimate.factors import HOPPER_FIT

    link = tp_link("L40S", 4)
    assert link is not None and link.kind == "pcie" and link.bidirectional_gbps == 64
    # 8 tokens x hidden 8192 x 2 B = 131,072 B; a ring moves 2 x 3/4 of it = 196,608 B each
    # way over 32 GB/s x 0.62 = 19.84 GB/s: 9.909 us, + 30 us a call; 2 calls x 80 layers
    call = 196_608 / (32e9 * 0.62) + 30e-6
    assert call == pytest.approx(39.909e-6, rel=1e-4)
    by_hand = 2 * 80 * call
    assert by_hand == pytest.approx(6.3855e-3, rel=1e-4)
    got = allreduce_step_s(tokens=8, hidden=8192, layers=80, gpus=4,
                           link_bytes_per_s=32e9, efficiency=0.62, latency_s=30e-6)
    assert got == pytest.approx(by_hand, rel=1e-12)
    # the deployment takes the PCIe share over PCIe and the NVLink share otherwise
    arch, gpu = resolve_model("llama-3.1-70b").spec, catalog()["L40S"]
    f = msgspec.structs.replace(HOPPER_FIT, allreduce_efficiency=0.9,
                                pcie_allreduce_efficiency=0.62, allreduce_latency_us=30.0)
    pcie = Deployment(arch=arch, gpu=gpu, gpu_count=4, precision="fp8", factors=f,
                      link_gbps=64, over_pcie=True)
    assert step_cost(pcie, batch=8, context=100).allreduce_s == pytest.approx(by_hand, rel=1e-9)
    nvlink = dataclasses.replace(pcie, over_pcie=False)
    fast = 2 * 80 * (196_608 / (32e9 * 0.9) + 30e-6)
    assert step_cost(nvlink, batch=8, context=100).allreduce_s == pytest.approx(fast, rel=1e-9)


@pytest.mark.parametrize("gpu", ["H100-SXM", "L40S", "A100-80GB-SXM"])
def test_tp4_of_a_7b_model_is_not_predicted_faster_per_gpu_than_tp1(gpu):
    from infer_prof.catalog.estimate_factors import factors_for
    from infer_prof.core.estimate.frontier_model import predict_point
    from infer_prof.estimate.configs import ConfigRequest, config_for

    arch, g = resolve_model("llama-2-7b").spec, catalog()[gpu]
    one, four = (config_for(arch, ConfigRequest(g, n, input_len=1024, output_len=1024,
                                                quantization="bf16"))
                 for n in (1, 4))
    assert not isinstance(one, str) and not isinstance(four, str)
    assert four.link is not None  # NVLink or PCIe: the all-reduce is counted
    d1, d4 = one.deployment(arch, factors_for(g)), four.deployment(arch, factors_for(g))
    for c in (1, 2, 4, 8, 16, one.max_concurrency):  # the same load on 1 and on 4 GPUs
        p1, p4 = (predict_point(d, input_len=1024, output_len=1024, concurrency=c)
                  for d in (d1, d4))
        assert p4.output_tok_s_per_gpu <= p1.output_tok_s_per_gpu, (c, p1, p4)


def test_lossy_configurations_are_marked_and_kept_out_by_min_quality():
    base = ("--model", "llama-3.1-70b", "--input-len", "1024", "--output-len", "1024",
            "--target-interactivity", "30", "--gpu", "L40S", "--gpu", "H100-SXM")
    res = run(*base, "--all-configs", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    for r in rows:
        assert bool(r["lossy"]) == (r["precision"] == "bnb-nf4" or r["kv_cache_dtype"] == "fp8")
    assert any(r["lossy"] for r in rows)
    table = run(*base, columns=120)
    assert "†" in table.stdout and "lossy" in table.stdout
    kept = run(*base, "--min-quality", "0.99", "--all-configs", "--json")
    assert kept.exit_code == 0, kept.output
    doc = json.loads(kept.stdout)
    assert doc["rows"] and not any(r["lossy"] for r in doc["rows"])
    assert doc["search"]["kv_cache_dtypes"] == ["auto"]
    fp8_kv = run(*base, "--kv-cache-dtype", "fp8", "--quantization", "fp8", "--json")
    assert {(r["kv_cache_dtype"], r["precision"]) for r in json.loads(fp8_kv.stdout)["rows"]} \
        == {("fp8", "fp8")}


def test_a_checkpoints_native_4bit_weights_are_not_lossy():
    """gpt-oss was trained in MXFP4 and published only so (catalog/data/native_precisions.json):
    its MXFP4 rows are not marked lossy, and --min-quality keeps them (with a 16-bit KV cache)."""
    res = run("--model", "gpt-oss-120b", "--gpu", "H100-SXM", "--input-len", "1024",
              "--output-len", "1024", "--min-quality", "0.99", "--all-configs", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert rows and {(r["precision"], r["kv_cache_dtype"]) for r in rows} == {("mxfp4", "auto")}
    assert not any(r["lossy"] for r in rows)
    table = run("--model", "gpt-oss-120b", "--gpu", "H100-SXM", "--input-len", "1024",
                "--output-len", "1024", "--kv-cache-dtype", "auto")
    assert "mxfp4 " in table.stdout and "mxfp4\u2020" not in table.stdout
    forced = run("--model", "gpt-oss-120b", "--gpu", "H100-SXM", "--quantization", "mxfp4",
                 "--min-quality", "0.99", "--json")
    assert forced.exit_code == 0, forced.output


def test_a_4bit_checkpoint_of_a_16bit_model_under_min_quality_says_why_nothing_is_left():
    """The same MXFP4 weights as a quantization of 16-bit ones (a checkpoint not listed as
    native): --min-quality keeps every configuration out, and the GPU's line says that, not only
    the GPU counts that do not split its heads."""
    from infer_prof.estimate.configs import costs_accuracy
    from infer_prof.estimate.search import search

    gpt = resolve_model("gpt-oss-120b", create_tiny=False).spec
    assert gpt is not None and not costs_accuracy("mxfp4", gpt)
    quantized = dataclasses.replace(gpt, hub_id="someone/gpt-oss-120b-requantized")
    assert costs_accuracy("mxfp4", quantized) and costs_accuracy("awq", gpt)
    cat = catalog()
    request = EstimateRequest(model=quantized, input_len=1024, output_len=1024,
                              target_interactivity=30.0, gpus=(cat["H100-SXM"],),
                              min_quality=0.99)
    found = search(request, [cat["H100-SXM"]], load_market().offers, list(cat.values()))
    assert not found.configs and len(found.skipped) == 1
    assert "1, 2, 4, 8 x H100-SXM: mxfp4 weights (4-bit) cost accuracy" in found.skipped[0].why


def _row(gpu: str, usd: float, **kw: object) -> Row:
    from infer_prof.core.estimate.factors import HOPPER_FIT

    return Row(gpu=gpu, gpu_name=gpu, gpu_count=1, precision="bf16", max_concurrency=8,
               points=[], at_target=None, reaches_target=True, best_interactivity=50.0,
               ttft_ms_p50=None, tpot_ms_p50=None, usd_per_million_output_tokens=usd,
               usd_per_million_input_tokens=None, usd_per_million_total_tokens=None,
               instance=None, factors=HOPPER_FIT, expected_error_pct=None,
               **kw)  # type: ignore[arg-type]


def test_rows_rank_by_the_slow_end_validated_first_unless_by_point():
    from infer_prof.estimate.configs import ConfigRequest, config_for
    from infer_prof.estimate.ranking import pessimistic_usd, with_interval

    stats = {"n": 9, "median_abs_error_pct": 6.0, "p90_abs_error_pct": 25.0}
    errors = parse_errors({"expected_error_pct": 7.0, "held_out": {
        "overall": {"n": 40, "median_abs_error_pct": 9.0, "p90_abs_error_pct": 30.0},
        "by_family": {"Hopper": stats}, "by_precision": {"bf16": stats},
        "by_tp": {"1": stats}, "by_interconnect": {"none": stats}}})
    sure = errors.interval("Hopper", "bf16", 1, "none")
    assert sure.validated and sure.p90_pct == 25.0
    assert not errors.interval("Ampere", "bf16", 1, "none").validated  # no Ampere point
    assert not errors.interval("Hopper", "bnb-nf4", 1, "none").validated
    assert pessimistic_usd(1.0, sure) == pytest.approx(1.25)
    g = catalog()["H100-SXM"]
    c = config_for(resolve_model("llama-2-7b").spec,
                   ConfigRequest(g, 1, input_len=512, output_len=128, quantization="bf16"))
    assert not isinstance(c, str)
    row = with_interval(_row("H100-SXM", 1.0), c, errors)
    assert row.validated and row.usd_per_million_output_tokens_pessimistic == pytest.approx(1.25)
    assert row.expected_error is not None and row.expected_error.p90_abs_pct == 25.0
    bare = with_interval(_row("H100-SXM", 1.0), c, ExpectedError(None, {}, "none"))
    assert not bare.validated and bare.expected_error is None
    surer = _row("H200", 1.1, validated=True, usd_per_million_output_tokens_pessimistic=1.2)
    guess = _row("A100-80GB-SXM", 0.5)  # cheapest, but nobody checked
    assert [r.gpu for r in rank([row, guess, surer])] == ["H200", "H100-SXM", "A100-80GB-SXM"]
    assert [r.gpu for r in rank([row, guess, surer], "point")] == [
        "A100-80GB-SXM", "H100-SXM", "H200"]


@pytest.mark.parametrize(("args", "says"), [
    (("--gpu", "V100", "--quantization", "fp8"), "vLLM does not run what was asked on V100"),
    (("--gpu", "T4", "--quantization", "bf16"), "bf16 needs compute capability >= 8.0"),
    (("--gpu", "MI300X", "--quantization", "bitsandbytes"), "vLLM does not run bnb-nf4 on AMD"),
    (("--kv-cache-dtype", "fp4"), "unknown --kv-cache-dtype 'fp4'"),
    (("--rank-by", "cheapest"), "unknown --rank-by 'cheapest'"),
    (("--quantization", "awq", "--min-quality", "0.99"), "--min-quality keeps out lossy"),
])
def test_bad_search_input_one_line_exit_2(args, says):
    res = run("--model", "llama-3.1-8b", *args)
    assert res.exit_code == 2, res.output
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and says in errors[0], res.stderr
    assert not res.stdout


def test_a_gpu_without_a_flops_figure_is_left_out_in_one_clause_for_all_its_precisions():
    # the RTX A4500 has no tensor figure (gpus.json): every precision it would run at 1, 2 and
    # 4 GPUs misses for the same reason, said once, before the reasons of other counts
    doc = _estimate("llama-3.1-8b", ("A4500",))
    assert not doc.rows
    (skipped,) = doc.skipped
    assert skipped.gpu == "A4500"
    first, *rest = skipped.why.split("; ")
    assert first.startswith("1, 2, 4 x A4500: the GPU catalog has no 16-bit FLOP/s figure for "
                            "A4500 (what bf16")
    assert first.endswith(" compute at)") and first.count("FLOP/s") == 1
    assert "bnb-nf4" in first and all("FLOP/s" not in r for r in rest)
