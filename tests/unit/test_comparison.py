"""Compare table rows, best-per-column marking, and configuration fingerprints (hand-made)."""

from __future__ import annotations

import copy
from typing import Any

from infer_prof.core.analysis.comparison import (
    COLUMNS,
    METRIC_COLUMNS,
    best_rows,
    dig,
    format_value,
    labels_text,
)
from infer_prof.results.comparison_rows import comparison_table, row_for
from infer_prof.results.document import decode_result as typed
from infer_prof.results.identity import (
    PLACEMENT_FIELDS,
    config_fields,
    config_fingerprint,
    differing_fields,
    precision_of,
)


def result(
    gpu: str | None = "NVIDIA H100 80GB HBM3",
    tput: float | None = 1000.0,
    ttft_p99: float | None = 40.0,
    cost: dict[str, Any] | None = None,
    **config: Any,
) -> dict[str, Any]:
    cfg = {
        "model": "llama-2-7b",
        "concurrency": 64,
        "input_len": 512,
        "output_len": 128,
        "dtype": None,
        "quantization": None,
        "load_format": "dummy",
        **config,
    }
    return {
        "kind": "infer-prof.run",
        "schema_version": 1,
        "run_id": "r",
        "config": cfg,
        "labels": {"zone": "b", "instance": "x"},
        "model": {"name": "llama-2-7b", "engine_path": "meta-llama/Llama-2-7b-hf"},
        "server": {"served_model_name": "llama-2-7b"},
        "environment": {
            "gpu_name": gpu,
            "gpu_count": 1 if gpu else 0,
            "cpu": "Xeon",
            "host": "vm1",
        },
        "summary": {
            "request_throughput": None if tput is None else tput / 128,
            "output_throughput": tput,
            "ttft_ms": {"p50": 20.0, "p99": ttft_p99},
            "tpot_ms": {"p50": 7.0, "p99": 9.0},
            "e2e_ms": None,
        },
        "cost": None if cost is None else {"available": True, **cost},  # as a run writes it
        "energy": None,
    }


def test_row_for_reads_every_column_and_leaves_missing_values_null() -> None:
    r = result(cost={"usd_per_hour": 2.5, "usd_per_million_output_tokens": 0.6944})
    row = row_for(typed(r))
    assert set(row) == {c.key for c in COLUMNS}
    assert row["gpu"] == "NVIDIA H100 80GB HBM3"
    assert row["label"] == "instance=x,zone=b"
    assert row["precision"] == "auto"
    assert row["concurrency"] == 64
    assert row["output_throughput"] == 1000.0
    assert row["request_throughput"] == 1000.0 / 128
    assert row["ttft_p99"] == 40.0
    assert row["e2e_p50"] is None and row["e2e_p99"] is None  # not measured: null, not 0
    assert row["usd_per_hour"] == 2.5
    assert row["usd_per_1m_output"] == 0.6944
    assert row["output_tokens_per_usd"] is None
    assert row["joules_per_token"] is None


def test_row_for_gpu_fallbacks_and_precision_order() -> None:
    r = result(gpu=None)
    assert row_for(typed(r))["gpu"] == "cpu"
    r["gpu"] = {"key": "A100-80GB", "count": 2}
    assert row_for(typed(r))["gpu"] == "2x A100-80GB"
    r2 = result(dtype="bfloat16")
    assert row_for(typed(r2))["precision"] == "bfloat16"
    r2["config"]["quantization"] = "fp8"
    assert precision_of(typed(r2)) == "fp8" and row_for(typed(r2))["precision"] == "fp8"
    r2["plan"] = {"precision": "int4"}
    assert precision_of(typed(r2)) == "int4"


def test_best_rows_by_direction_ties_and_too_few_values() -> None:
    rows = [
        row_for(typed(result(tput=1000.0, ttft_p99=40.0))),
        row_for(typed(result(tput=1200.0, ttft_p99=40.0))),
        row_for(typed(result(tput=None, ttft_p99=55.0))),
    ]
    best = best_rows(rows)
    assert best["output_throughput"] == {1}  # higher is better; the null row is never best
    assert best["ttft_p99"] == {0, 1}  # lower is better; a tie marks both
    assert best["usd_per_hour"] == set()  # no values
    one_cost = [
        row_for(typed(result(cost={"usd_per_hour": 2.0}))),
        row_for(typed(result())),
    ]
    assert best_rows(one_cost)["usd_per_hour"] == set()  # one value: nothing to compare
    assert set(best) == {c.key for c in METRIC_COLUMNS}


def test_comparison_table_orders_rows_as_given() -> None:
    rows, best = comparison_table([typed(result(tput=1.0)), typed(result(tput=2.0))])
    assert [r["output_throughput"] for r in rows] == [1.0, 2.0]
    assert best["output_throughput"] == {1}


def test_dig_alternatives_and_format_value() -> None:
    d = {"cost": {"usd_per_1m_output_tokens": 0.5}}
    assert dig(d, "cost.usd_per_million_output_tokens|cost.usd_per_1m_output_tokens") == 0.5
    assert dig(d, "cost.nope.deeper") is None
    col = next(c for c in COLUMNS if c.key == "output_throughput")
    assert format_value(col, 12345.678) == "12,345.7"
    assert format_value(col, None) == "n/a"
    assert labels_text({}) == ""


def test_fingerprint_is_stable_and_ignores_labels_host_and_run_details() -> None:
    a = result()
    b = copy.deepcopy(a)
    b["labels"] = {"instance": "other"}
    b["environment"]["host"] = "vm2"
    b["config"]["num_requests"] = 500
    b["run_id"] = "other"
    assert config_fingerprint(typed(a)) == config_fingerprint(typed(b))
    assert len(config_fingerprint(typed(a))) == 16
    # a pinned value: the fingerprint must not change between versions by accident
    assert config_fields(typed(a)) == {
        "model": "llama-2-7b",
        "engine_path": "meta-llama/Llama-2-7b-hf",
        "precision": "auto",
        "quantization": None,
        "dtype": None,
        "concurrency": 64,
        "request_rate": None,
        "burstiness": None,
        "max_concurrency": None,
        "input_len": 512,
        "output_len": 128,
        "workload": None,
        "load_format": "dummy",
        "gpu": "NVIDIA H100 80GB HBM3",
        "gpu_count": 1,
        "served_model": "llama-2-7b",
    }


def test_fingerprint_changes_with_each_defining_field() -> None:
    base = config_fingerprint(typed(result()))
    variants = [
        result(concurrency=128),
        result(input_len=1024),
        result(output_len=256),
        result(quantization="fp8"),
        result(dtype="float16"),
        result(load_format="auto"),
        result(workload="chat"),
        result(gpu="NVIDIA A100-SXM4-80GB"),
        result(gpu=None),
    ]
    fps = {config_fingerprint(typed(v)) for v in variants}
    assert base not in fps and len(fps) == len(variants)


def test_open_loop_points_differ_by_rate_burstiness_and_cap() -> None:
    def open_loop(rate, burstiness=1.0, cap=None):
        r = result(concurrency=None)
        r["load"] = {"mode": "open", "rate": rate, "burstiness": burstiness,
                     "max_concurrency": cap}
        return config_fingerprint(typed(r))

    fps = {open_loop(4.0), open_loop(float("inf")), open_loop(4.0, 0.5), open_loop(4.0, 1.0, 8)}
    assert len(fps) == 4


def test_differing_fields_lists_values_and_honours_ignore() -> None:
    a = result()
    b = result(concurrency=128, gpu="NVIDIA A100-SXM4-80GB")
    b["labels"] = {"instance": "y"}
    diff = differing_fields([typed(a), typed(b)])
    assert diff["concurrency"] == [64, 128]
    assert diff["gpu"] == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"]
    assert "labels" in diff
    assert "input_len" not in diff
    assert list(differing_fields([typed(a), typed(b)], ignore=PLACEMENT_FIELDS)) == ["concurrency"]
    assert differing_fields([typed(a), typed(copy.deepcopy(a))]) == {}
    # engine settings count too, though they are not part of the fingerprint
    c = result(tensor_parallel_size=2)
    assert list(differing_fields([typed(a), typed(c)])) == ["tensor_parallel_size"]
    assert config_fingerprint(typed(a)) == config_fingerprint(typed(c))


def test_status_marks_invalid_and_incomplete_runs_with_their_reasons():
    from infer_prof.results.comparison_rows import run_status

    r = result()
    assert run_status(typed(r)) == "ok" and row_for(typed(r))["status"] == "ok"
    r["validity"] = {"valid": False, "reasons": ["3 requests (< 10)", "window 1 s"]}
    assert row_for(typed(r))["status"] == "INVALID: 3 requests (< 10); window 1 s"
    r["complete"], r["incomplete_reason"] = False, "server_died"
    assert run_status(typed(r)) == \
        "INCOMPLETE: server_died | INVALID: 3 requests (< 10); window 1 s"
    r["validity"] = {"valid": False, "reasons": []}
    assert run_status(typed(r)).endswith("INVALID: reason not recorded")


def test_every_compare_column_path_is_declared_and_a_misspelt_one_is_refused() -> None:
    """The compare columns are read by attribute through the result type: each alternative of
    each column's path names declared fields (an older spelling too), and a misspelt path is an
    error, not a silent n/a."""
    import pytest

    from infer_prof.results.comparison_rows import UndeclaredPath, value_at

    r = typed(result(cost={"usd_per_1m_output_tokens": 0.5}))
    for col in METRIC_COLUMNS:
        for alt in col.path.split("|"):
            value_at(r, alt)  # raises for a field the type does not declare
    assert value_at(r, "cost.usd_per_million_output_tokens|cost.usd_per_1m_output_tokens") == 0.5
    assert value_at(r, "summary.ttft_ms.p99") == 40.0
    assert value_at(r, "energy.joules_per_output_token") is None  # no section: not recorded
    assert value_at(r, "config.concurrency") == 64  # an open section, read by key
    with pytest.raises(UndeclaredPath, match="summary.ttft_ms.p95"):
        value_at(r, "summary.ttft_ms.p95")
    with pytest.raises(UndeclaredPath):
        value_at(r, "sumary.output_throughput")


def test_console_table_shows_what_no_plain_run_measures_only_where_a_run_has_it() -> None:
    """compare's console table: TTFO, answer TPOT, reasoning and answer tokens (a reasoning
    model's), the server state's and the quality check's columns only where some run compared
    has a value; a pipe gets the whole table, no header cut, however wide it is."""
    import io

    from rich.console import Console

    from infer_prof.cli.compare import _natural_width, _table

    def headers(rows: list[dict[str, Any]]) -> list[str]:
        table, _ = comparison_table([typed(r) for r in rows])
        t = _table(table, {})
        return [str(c.header) for c in t.columns]

    plain = result()
    shown = headers([plain, result(tput=900.0)])
    for head in ("TTFO p50 ms", "answer TPOT p50 ms", "reasoning tok", "answer tok",
                 "prefix hit", "accept rate", "accuracy"):
        assert head not in shown
    assert "TTFT p50 ms" in shown and "TPOT p99 ms" in shown
    thinker = result()
    thinker["summary"]["ttfo_ms"] = {"p50": 300.0, "p99": 400.0}
    thinker["summary"]["answer_tpot_ms"] = {"p50": 7.5, "p99": 9.5}
    thinker["reasoning"] = {"streamed": True, "requests": 10, "ended_in_reasoning": 0,
                            "reasoning_tokens": {"mean": 40.0}, "answer_tokens": {"mean": 88.0}}
    rows, _ = comparison_table([typed(plain), typed(thinker)])
    both = headers([plain, thinker])
    for head in ("TTFO p50 ms", "TTFO p99 ms", "answer TPOT p50 ms", "reasoning tok",
                 "answer tok"):
        assert head in both, head
    assert rows[0]["ttfo_p50"] is None and rows[1]["reasoning_tokens"] == 40.0
    long = result()
    long["labels"] = {"instance": "x" * 300}
    t, _ = comparison_table([typed(long), typed(thinker)])
    table = _table(t, {})
    out = io.StringIO()
    Console(file=out, width=max(400, _natural_width(table))).print(table)
    assert "x" * 300 in out.getvalue() and "…" not in out.getvalue()
