"""benchmarks/gpu_matrix.py: the table read from frontier documents (no engine)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
spec = importlib.util.spec_from_file_location("gpu_matrix", ROOT / "benchmarks" / "gpu_matrix.py")
assert spec is not None and spec.loader is not None
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def _point(c, inter, total, pareto=True):
    return {"concurrency": c, "interactivity": inter, "interactivity_p90": inter,
            "output_tok_s_per_gpu": total / 2, "input_tok_s_per_gpu": total / 2,
            "total_tok_s_per_gpu": total, "usd_per_million_output_tokens": None,
            "usd_per_million_input_tokens": None, "usd_per_million_total_tokens": None,
            "pareto": pareto}


def test_table_reads_costs_at_targets_and_says_when_out_of_reach():
    f = {"points": [_point(1, 100.0, 1000.0), _point(8, 40.0, 4000.0),
                    _point(16, 10.0, 3000.0, False)], "usd_per_gpu_hour": 3.6}
    r = {"frontier": f, "planned_kv": 118192, "vllm_kv": 118000, "log": None}
    text = bench.table([("llama-2-7b bf16", "512/128", r, (20.0, 50.0))])
    row = text.splitlines()[1]
    assert "118,192" in row and "118,000" in row
    assert bench.read_at(f, 20.0) is None  # below the front (40-100 tok/s/user): not reached
    assert "  -  " in row or row.split("512/128")[1].split()[2] == "-"
    a = bench.read_at(f, 50.0)
    assert a["interpolated"] and 1000 < a["total_tok_s_per_gpu"] < 4000
    # $/1M output = 3.6 / (out tok/s/GPU x 3600 / 1e6)
    assert a["usd_per_million_output_tokens"] == 3.6 / (a["output_tok_s_per_gpu"] * 3600 / 1e6)
    assert "1: 1,000@100, 8: 4,000@40" in row and "16:" not in row


def test_no_gpu_says_the_matrix_waits(capsys, monkeypatch):
    import infer_prof.run.environment as env

    monkeypatch.setattr(env, "has_nvidia_gpu", lambda: False)
    assert bench.main([]) == 2
    assert "waits for a lent GPU" in capsys.readouterr().err
