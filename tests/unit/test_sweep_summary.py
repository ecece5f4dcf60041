"""The sweep curve: knees per workload and loop mode, rate inf left off the curve."""

from pathlib import Path

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
    sweep = sweep_summary(outs, None)
    assert [(k["workload"], k["mode"], k["row"], k["load"]) for k in sweep["knees"]] == [
        ("chat", "closed", 2, 32.0)
    ]
    assert [p["workload"] for p in sweep["points"]] == ["chat"] * 5 + ["rag"] * 2
    assert sweep["kind"] == "infer-prof.sweep"
