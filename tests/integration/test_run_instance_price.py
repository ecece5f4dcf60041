"""`infer-prof run --instance`: a real run costed as a rented instance; bad input stops first."""

import json

import pytest

from .conftest import cli

pytestmark = pytest.mark.integration

BASE = ("run", "--model", "llama-2-7b", "--no-progress", "-c", "2", "-n", "6",
        "--input-len", "16", "--output-len", "8", "--warmup-requests", "0", "--no-history")


def test_run_costed_as_an_instance(synthetic, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.sky/catalogs: the shipped snapshot
    server = synthetic(ttft_ms=10.0, itl_ms=2.0, tokens=8)
    out = tmp_path / "r.json"
    p = cli(*BASE, "--endpoint", server.url, "--instance", "aws:p5.48xlarge:us-east-1",
            "--spot", "--json", "--output", str(out))
    assert p.returncode == 0, p.stderr
    result = json.loads(out.read_text())
    assert result["gpu"]["key"] == "H100-SXM"  # the instance's GPU, no --gpu needed
    cost = result["cost"]
    assert cost["available"] and cost["gpus"] == 8
    assert cost["usd_per_hour"] == pytest.approx(14.246)
    assert cost["usd_per_gpu_hour"] == pytest.approx(14.246 / 8)
    price = cost["price"]
    assert (price["cloud"], price["instance_type"], price["region"], price["tier"]) == (
        "aws", "p5.48xlarge", "us-east-1", "spot")
    assert price["source"].startswith("skypilot-org/skypilot-catalog@") and price["date"]
    summary = json.loads(p.stdout)
    assert summary["cost"]["usd_per_million_output_tokens"] == pytest.approx(
        14.246 / (summary["output_throughput"] * 3600) * 1e6)
    # the endpoint used one of the eight GPUs (--gpus default 1): filled with eight replicas,
    # the instance's $/1M is the frontier's per-GPU figure
    assert cost["run_gpus"] == 1
    filled = cost["filled"]
    assert filled["replicas"] == 8 and filled["idle_gpus"] == 0
    assert filled["usd_per_million_output_tokens"] == pytest.approx(
        14.246 / (8 * summary["output_throughput"] * 3600) * 1e6)
    assert summary["usd_per_million_output_tokens"] == pytest.approx(
        filled["usd_per_million_output_tokens"])
    text = cli(*BASE, "--endpoint", server.url, "--instance", "aws:p5.48xlarge:us-east-1")
    assert text.returncode == 0, text.stderr
    flat = " ".join(text.stdout.split())
    assert "$ per 1M out, 8 replicas" in flat
    assert "the engine used 1 of the instance's 8 GPUs" in flat


@pytest.mark.parametrize(
    ("instance", "words"),
    [
        ("aws:p5.48xl", "nearest: p5.48xlarge"),
        ("gcp:p5.48xlarge", "nearest: "),
        ("aws:p5.48xlarge:mars-1", "not listed in region 'mars-1'"),
    ],
)
def test_bad_instance_exits_2_before_anything_starts(tmp_path, monkeypatch, instance, words):
    monkeypatch.setenv("HOME", str(tmp_path))
    p = cli(*BASE, "--endpoint", "http://127.0.0.1:9/v1", "--instance", instance,
            "--results-dir", str(tmp_path / "results"))
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and words in p.stderr
    assert not (tmp_path / "results").exists()
