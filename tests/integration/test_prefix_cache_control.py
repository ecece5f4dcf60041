"""``run --prefix-cache`` end to end on the built-in synthetic server, whose prefix cache is
exact (``--prefix-cache-block 16``: a request hits on its leading full 16-token blocks seen
before; ``POST /reset_prefix_cache`` empties it; its usage says each request's cached tokens).

The workload: 16 requests of 96 tokens in 4 prefix groups of a 64-token prefix (4 blocks).
Cold: each group's first request misses, the 12 others hit 64 tokens: 768 / 1536 = 0.5.
Warm: the 4 prefixes are sent first, all 16 hit: 1024 / 1536 = 2/3. The warm-up has prefixes
of its own, so it primes none of these.
"""

import json
from pathlib import Path

import pytest

from .conftest import cli

pytestmark = pytest.mark.integration

WORKLOAD = """name = "shared"
num_requests = 16
warmup_requests = 4
seed = 0
input_len = 96
output_len = 4
[arrival]
mode = "closed"
concurrency = 2
[shared_prefix]
fraction = 1.0
length = 64
groups = 4
"""
BASE = ("run", "--server", "synthetic", "--engine-arg=--prefix-cache-block 16",
        "--engine-arg=--itl-ms 1", "--no-progress", "--no-history")


def _results(folder: Path) -> list[dict]:
    files = sorted(p for p in folder.glob("*-c*.json") if ".requests." not in p.name)
    return [json.loads(p.read_text()) for p in files]


def test_cold_and_warm_hit_rates_are_the_workloads(tmp_path):
    wl = tmp_path / "shared.toml"
    wl.write_text(WORKLOAD)
    outs = {}
    for mode in ("cold", "warm"):
        out = tmp_path / f"{mode}.json"
        p = cli(*BASE, "--workload", str(wl), "--prefix-cache", mode, "--output", str(out),
                "--json")
        assert p.returncode == 0, p.stderr
        shown = json.loads(p.stdout)["prefix_cache"]  # --json holds the section
        outs[mode] = json.loads(out.read_text())
        assert shown == outs[mode]["prefix_cache"]
    cold, warm = outs["cold"]["prefix_cache"], outs["warm"]["prefix_cache"]
    assert cold["state"] == "cold" and cold["detail"].startswith("emptied")
    assert (cold["hit_rate"], cold["hit_rate_source"]) == (0.5, "usage")
    assert (cold["usage_cached_tokens"], cold["usage_prompt_tokens"]) == (768, 1536)
    assert warm["state"] == "warm" and (warm["primed_prefixes"], warm["primed_tokens"]) == (4, 256)
    assert warm["hit_rate"] == pytest.approx(2 / 3)
    assert outs["warm"]["summary"]["prefix_cache_hit_rate"] == warm["hit_rate"]
    # two states are two configurations: compare refuses them, and with --force flags the gap
    p = cli("compare", str(tmp_path / "cold.json"), str(tmp_path / "warm.json"))
    assert p.returncode == 2 and "prefix_cache" in p.stderr
    p = cli("compare", "--force", str(tmp_path / "cold.json"), str(tmp_path / "warm.json"))
    assert p.returncode == 0, p.stderr
    assert "prefix-cache hit rates differ by 17 points" in p.stderr


def test_points_of_one_launch_never_hit_each_others_prompts(tmp_path):
    """Three points in one launch with the cache left as it is: each point's hit rate is its
    own workload's (0.5), as on an empty cache; before the points' prompts were salted, the
    second point found the first's prompts cached (0.98)."""
    wl = tmp_path / "shared.toml"
    wl.write_text(WORKLOAD.replace("num_requests = 16", "num_requests = 16\nmin_requests = 1"))
    p = cli(*BASE, "--workload", str(wl), "--prefix-cache", "as-is", "-c", "1,2,4",
            "--results-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    results = _results(tmp_path)
    assert len(results) == 3
    for r in results:
        assert r["prefix_cache"]["state"] == "as-is" and r["prefix_cache"]["detail"] is None
        assert r["prefix_cache"]["hit_rate"] == 0.5, r["run_name"]


def test_an_endpoint_that_refuses_the_reset_is_unknown_said_once(synthetic, tmp_path):
    """An endpoint without the reset route (the synthetic server behind a path prefix, as a
    gateway that routes only the API: /gw/reset_prefix_cache is 404, as on a vLLM started
    without VLLM_SERVER_DEV_MODE): each point's state is unknown, said in one line for the
    run."""
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=4)
    p = cli("run", "--endpoint", f"{server.url}/gw/v1", "--model", "llama-2-7b", "-c", "1,2",
            "-n", "6",
            "--input-len", "16", "--output-len", "4", "--warmup-requests", "1",
            "--no-progress", "--no-history", "--results-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    said = [ln for ln in p.stderr.splitlines() if ln.startswith("prefix cache: ")]
    assert said == ["prefix cache: the server has no POST /reset_prefix_cache (HTTP 404; vLLM "
                    "serves it only when started with VLLM_SERVER_DEV_MODE=1); its state at "
                    "each point is recorded as unknown (--prefix-cache as-is does not ask)"]
    results = _results(tmp_path)
    assert [r["prefix_cache"]["state"] for r in results] == ["unknown", "unknown"]
    pc = results[0]["prefix_cache"]
    assert pc["hit_rate"] is None and "no cached_tokens" in pc["hit_rate_reason"]


def test_warm_without_shared_prefixes_is_cold(tmp_path):
    out = tmp_path / "plain.json"
    p = cli(*BASE, "-c", "2", "-n", "6", "--input-len", "32", "--output-len", "4",
            "--prefix-cache", "warm", "--output", str(out))
    assert p.returncode == 0, p.stderr
    pc = json.loads(out.read_text())["prefix_cache"]
    assert (pc["asked"], pc["state"], pc["primed_prefixes"]) == ("warm", "cold", 0)
    assert pc["detail"].endswith("the point has no shared prefix to send")
    assert pc["hit_rate"] == 0.0  # unique prompts of 2 blocks: nothing cached
