"""The frontier's axes on every run point (issue 23 §1): hand-computed values, the GPUs an
engine used, older result files derived (never 0 where not measured), and the axes flowing into
compare, the gate, history and the console."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infer_prof.cli.history import KEY_METRICS
from infer_prof.core.analysis.frontier_axes import (
    AXIS_KEYS,
    engine_gpus,
    flag_value,
    gpus_used,
    point_axes,
    point_from_result,
    result_axes,
    summary_with_axes,
)
from infer_prof.report.console import print_sweep, totals_table
from infer_prof.results.comparison_rows import row_for
from infer_prof.results.document import decode_result as typed
from infer_prof.results.gate import AGGREGATE_METRICS, RunData, evaluate
from infer_prof.results.loading import history_summary
from infer_prof.results.schema import load_result, public_summary
from infer_prof.results.sweep_document import decode_sweep


def _summary(**kw: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "requests_completed": 100,
        "requests_failed": 0,
        "duration_s": 10.0,
        "rate_window_s": 10.0,
        "rate_basis": "window",
        "request_throughput": 10.0,
        "output_throughput": 1000.0,
        "total_throughput": 4000.0,
        "total_output_tokens": 10_000,
        "total_prompt_tokens": 30_000,
        "tpot_ms": {"mean": 21.0, "p50": 20.0, "p90": 25.0, "p99": 40.0, "max": 50.0},
    }
    s.update(kw)
    return s


def _result(summary: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    r: dict[str, Any] = {
        "schema_version": 1,
        "kind": "infer-prof.run",
        "run_id": "r1",
        "complete": True,
        "config": {"concurrency": 8, "endpoint": None, "gpus": None,
                   "tensor_parallel_size": None, "engine_args": []},
        "load": {"mode": "closed", "concurrency": 8, "rate": None},
        "summary": summary or _summary(),
        "server": {"command": ["python", "-m", "vllm.entrypoints.openai.api_server",
                               "--tensor-parallel-size", "2"]},
        "cost": {"available": True, "usd_per_gpu_hour": 3.6, "gpus": 2, "usd_per_hour": 7.2,
                 "usd_per_million_output_tokens": 2.0},
        "energy": {"energy_j": None},
    }
    r.update(kw)
    return r


def test_point_axes_hand_computed() -> None:
    a = point_axes(_summary(), gpus=2, usd_per_gpu_hour=3.6, energy_j=8000.0)
    assert a["interactivity_tok_s_user"] == 50.0  # 1000 / 20 ms
    assert a["interactivity_p90_tok_s_user"] == 40.0  # 1000 / 25 ms
    assert (a["output_tok_s_per_gpu"], a["input_tok_s_per_gpu"], a["total_tok_s_per_gpu"]) == (
        500.0, 1500.0, 2000.0)
    # $3.6/GPU-h; 500 out tok/s/GPU = 1.8M tokens an hour -> $2.00 per 1M
    assert a["usd_per_million_output_tokens"] == pytest.approx(2.0)
    assert a["usd_per_million_input_tokens"] == pytest.approx(3.6 / 5.4)
    assert a["usd_per_million_total_tokens"] == pytest.approx(0.5)
    # 8000 J over 10,000 output / 40,000 prompt + output tokens
    assert a["joules_per_output_token"] == pytest.approx(0.8)
    assert a["joules_per_total_token"] == pytest.approx(0.2)
    assert set(a) == set(AXIS_KEYS)


def test_point_axes_stream_span_rates_use_mean_power() -> None:
    # closed loop: rates over the streams' span; J/token = energy / window / rate (as energy_block)
    s = _summary(rate_basis="stream_spans", duration_s=12.0)
    a = point_axes(s, 1, None, 12_000.0)
    assert a["joules_per_output_token"] == pytest.approx(12_000 / 12 / 1000)
    assert a["joules_per_total_token"] == pytest.approx(12_000 / 12 / 4000)


def test_not_measured_is_none_never_zero() -> None:
    a = point_axes(_summary(tpot_ms=None, output_throughput=None, total_throughput=None), 1,
                   None, None)
    assert all(v is None for v in a.values()), a
    b = point_axes(_summary(), 1, None, None)  # no price, no NVML
    assert b["usd_per_million_total_tokens"] is None and b["joules_per_total_token"] is None
    assert b["total_tok_s_per_gpu"] == 4000.0
    with pytest.raises(ValueError):
        point_axes(_summary(), 0, None, None)


def test_engine_gpus_tp_pp_dp_from_the_command_line() -> None:
    assert engine_gpus([]) == 1
    assert engine_gpus(["--tensor-parallel-size", "4"]) == 4
    assert engine_gpus(["-tp", "2", "--pipeline-parallel-size=2", "-dp", "3"]) == 12
    assert engine_gpus(["--tensor-parallel-size", "2", "--tensor-parallel-size", "8"]) == 8
    assert engine_gpus(["--data-parallel-size", "x"]) == 1
    assert flag_value(["--a", "1", "--a=2"], ["--a"]) == "2"


def test_gpus_used_endpoint_server_and_older_files() -> None:
    ep = {"config": {"endpoint": "http://x", "gpus": 4}, "server": {"command": None}}
    assert gpus_used(ep) == (4, "--gpus")
    default = gpus_used({"config": {"endpoint": "http://x", "gpus": None}})
    assert default == (1, "endpoint default 1")
    assert gpus_used(_result())[0] == 2
    # no recorded command: the configured or planned tensor parallel size, with pp from the args
    old = {"config": {"endpoint": None, "tensor_parallel_size": None,
                      "engine_args": ["--pipeline-parallel-size", "2"]},
           "plan": {"engine_args": {"tensor_parallel_size": 4}}}
    assert gpus_used(old) == (8, "configuration (tp x pp x dp)")


def test_older_result_file_loads_with_derived_axes(tmp_path: Path) -> None:
    r = _result()
    path = tmp_path / "old.json"
    path.write_text(json.dumps(r))
    loaded = load_result(path)
    s = loaded["summary"]
    assert s["output_tok_s_per_gpu"] == 500.0 and s["interactivity_tok_s_user"] == 50.0
    assert s["usd_per_million_output_tokens"] == pytest.approx(2.0)
    assert s["joules_per_output_token"] is None  # no NVML: null, not 0
    # an older file without price or TPOT: the axes are null, never 0
    bare = _result(_summary(tpot_ms=None), cost={"available": False, "reason": "no price"})
    path.write_text(json.dumps(bare))
    s2 = load_result(path)["summary"]
    assert s2["interactivity_tok_s_user"] is None and s2["usd_per_million_total_tokens"] is None
    assert public_summary(typed(load_result(path)).summary)["total_tok_s_per_gpu"] == 4000.0 / 2


def test_recorded_axes_are_kept_not_rederived() -> None:
    s = _summary(**{k: 1.0 for k in AXIS_KEYS})
    assert summary_with_axes(_result(s))["output_tok_s_per_gpu"] == 1.0
    assert result_axes(_result(s))["output_tok_s_per_gpu"] == 500.0


def test_point_from_result() -> None:
    p = point_from_result(_result())
    assert p is not None and p.concurrency == 8 and p.total_tok_s_per_gpu == 2000.0
    assert p.interactivity == 50.0 and p.usd_per_million_total_tokens == pytest.approx(0.5)
    opened = _result(load={"mode": "open", "concurrency": None, "rate": 2.5})
    assert point_from_result(opened) is not None
    assert point_from_result(opened).concurrency == 2.5  # type: ignore[union-attr]
    assert point_from_result(_result(_summary(output_throughput=None))) is None


def test_axes_reach_compare_gate_history_and_console() -> None:
    r = _result()
    r["summary"] = summary_with_axes(r)
    row = row_for(typed(r))
    assert row["interactivity"] == 50.0 and row["total_tok_s_per_gpu"] == 2000.0
    assert row["usd_per_1m_total"] == pytest.approx(0.5)
    assert row["joules_per_total_token"] is None
    for name in ("output_tok_s_per_gpu", "total_tok_s_per_gpu", "interactivity_tok_s_user",
                 "usd_per_million_total_tokens", "joules_per_total_token"):
        assert name in AGGREGATE_METRICS
    assert "total_tok_s_per_gpu" in history_summary(r)
    assert {"interactivity_tok_s_user", "total_tok_s_per_gpu"} <= {m for _, m, _ in KEY_METRICS}
    # the gate judges interactivity: 20 % fewer tokens/s per user is a regression
    base = RunData("b", "b", {"interactivity_tok_s_user": 50.0})
    cur = RunData("c", "c", {"interactivity_tok_s_user": 40.0})
    (cmp,) = evaluate([base], [cur])
    assert cmp.name == "interactivity_tok_s_user" and cmp.regression
    t = totals_table(typed({**r, "gpu": {"engine_gpus": 2}}))
    rows = dict(zip(t.columns[0].cells, t.columns[1].cells, strict=True))
    assert rows["tokens/s/user (1000/TPOT p50 / p90)"] == "50.0 / 40.0"
    assert rows["tokens/s per GPU out / in / total (2 GPUs)"] == "500.0 / 1,500.0 / 2,000.0"
    assert rows["$ per 1M out / in / total tokens (per GPU)"] == "2.0000 / 0.6667 / 0.5000"


def test_sweep_table_shows_interactivity_and_per_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    from rich.console import Console

    row = {"result_file": "r.json", "mode": "closed", "load": 4, "request_throughput": 1.0,
           "output_throughput": 2.0,
           "ttft_p50_ms": 1.0, "ttft_p99_ms": 1.0, "tpot_p50_ms": 8.0, "tpot_p99_ms": 9.0,
           "interactivity_tok_s_user": 125.0, "total_tok_s_per_gpu": 4321.0, "goodput": None,
           "slo_passed": None, "valid": True}
    console = Console(width=300, file=None, force_terminal=False)
    with console.capture() as cap:
        print_sweep(decode_sweep({"schema_version": 1, "kind": "infer-prof.sweep",
                                  "points": [row], "knees": []}), console)
    out = cap.get()
    assert "tok/s/user" in out and "125.0" in out and "4,321.0" in out
