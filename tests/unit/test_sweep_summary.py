"""The sweep curve: knees per workload and loop mode, rate inf left off the curve."""

from pathlib import Path

import msgspec

from infer_prof.run.record import RunOutcome, sweep_summary
from tests.unit.typed_results import result_of


def outcome(workload, mode, load, tpot_p50):
    result = {
        "workload": {"name": workload},
        "load": {"mode": mode, "concurrency": load if mode == "closed" else None,
                 "rate": load if mode == "open" else None},
        "summary": {"request_throughput": 1.0, "output_throughput": 10.0,
                    "ttft_ms": {"p50": 1.0, "p99": 2.0}, "tpot_ms": {"p50": tpot_p50, "p99": 1.0},
                    "e2e_ms": {"p50": 3.0}},
        "slo": None, "validity": {"valid": True}, "complete": True,
    }
    return RunOutcome(result_of(**result), Path(f"{workload}-{mode}-{load}.json"), Path("x.jsonl"))


def test_knee_per_workload_and_mode_with_row_indices():
    outs = [
        outcome("chat", "closed", 1, 10.0),
        outcome("chat", "closed", 8, 12.0),
        outcome("chat", "closed", 32, 16.0),  # 16 > 1.5 x 10: knee of the chat curve, row 2
        outcome("chat", "open", 2.0, 10.0),
        outcome("chat", "open", float("inf"), 40.0),  # rate inf: not on the curve
        outcome("rag", "closed", 4, 20.0),
        outcome("rag", "closed", 16, 25.0),  # 25 < 30: no knee
    ]
    sweep = msgspec.to_builtins(sweep_summary(outs, None))  # as the file holds it
    assert [(k["workload"], k["mode"], k["row"], k["load"]) for k in sweep["knees"]] == [
        ("chat", "closed", 2, 32.0)
    ]
    assert [p["workload"] for p in sweep["points"]] == ["chat"] * 5 + ["rag"] * 2
    assert sweep["kind"] == "infer-prof.sweep"


def test_rows_and_knees_are_the_sweep_files_declared_types():
    from infer_prof.results.sweep_document import Knee, SweepRow, decode_sweep
    from infer_prof.run.record import sweep_knees, sweep_row

    outs = [outcome("chat", "closed", 1, 10.0), outcome("chat", "closed", 4, 20.0),
            outcome("chat", "open", float("inf"), 40.0)]
    rows = [sweep_row(o) for o in outs]
    assert all(isinstance(r, SweepRow) for r in rows)
    assert (rows[0].result_file, rows[0].mode, rows[0].load, rows[0].tpot_p50_ms,
            rows[0].ttft_p99_ms, rows[0].e2e_p50_ms, rows[0].valid) == (
        "chat-closed-1.json", "closed", 1, 10.0, 2.0, 3.0, True)
    assert rows[2].load == float("inf")  # in the rows, but no point on the curve
    assert sweep_knees(rows) == [Knee(index=1, load=4.0, tpot_p50_ms=20.0, baseline_ms=10.0,
                                      threshold_ms=15.0, row=1, workload="chat", mode="closed")]
    # the file's JSON reads back as the same rows
    sweep = decode_sweep(msgspec.to_builtins(sweep_summary(outs, None)))
    assert sweep.points == rows and sweep.knees == sweep_knees(rows)
