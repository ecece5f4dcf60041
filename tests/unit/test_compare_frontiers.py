"""`compare --target-interactivity` / `--slo` on result files written by hand: two sweeps
(per-point results, no ``frontier`` section, no recorded axes: an older file) and one
``run --frontier`` result, read at a target, cheapest first, and from the history."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from infer_prof.cli import app
from infer_prof.core.analysis.frontier import steffen, usd_per_million
from infer_prof.results.loading import record_result

runner = CliRunner()


@dataclass(frozen=True)
class SweepGpu:
    """A GPU whose speed falls with load in a known way: TPOT(c) = a + b c (ms), each of c
    streams makes 1000 / TPOT output tokens/s, prompts are 4x the output (input tok/s = 4 out)."""

    name: str
    price: float  # $/GPU-hour
    a_ms: float
    b_ms: float
    label: str

    def tpot(self, c: int) -> float:
        return self.a_ms + self.b_ms * c

    def out_tps(self, c: int) -> float:
        return c * 1000.0 / self.tpot(c)


H100 = SweepGpu("H100-SXM", 3.0, 10.0, 1.0, "cloud=a")
A100 = SweepGpu("A100-80GB", 1.8, 20.0, 2.0, "cloud=b")
LOADS = (1, 2, 4, 8)


def point_result(gpu: SweepGpu, c: int, model: str = "llama-2-7b") -> dict[str, Any]:
    """One load point's result as `run` writes it (before the frontier axes were recorded)."""
    tpot, out = gpu.tpot(c), gpu.out_tps(c)
    key, value = gpu.label.split("=")
    return {
        "schema_version": 1,
        "kind": "infer-prof.run",
        "run_id": f"{gpu.name}-c{c}",
        "started_at": f"2026-11-01T00:00:{c:02d}+00:00",
        "finished_at": f"2026-11-01T00:01:{c:02d}+00:00",
        "complete": True,
        "config": {"model": model, "concurrency": c, "input_len": 512, "output_len": 128,
                   "endpoint": "http://gpu:8000", "gpus": 1, "labels": {key: value}},
        "labels": {key: value},
        "model": {"name": model},
        "load": {"mode": "closed", "concurrency": c, "rate": None},
        "environment": {"gpu_name": None},
        "gpu": {"key": gpu.name, "count": 1},
        "precision": "bf16",
        "summary": {
            "requests_completed": 100, "requests_failed": 0, "duration_s": 60.0,
            "request_throughput": out / 128, "output_throughput": out,
            "total_throughput": 5 * out,
            "total_output_tokens": 12800, "total_prompt_tokens": 51200,
            "tpot_ms": {"mean": tpot, "p50": tpot, "p90": 1.2 * tpot, "p99": 1.5 * tpot,
                        "max": 2 * tpot},
            "ttft_ms": {"mean": 50.0, "p50": 50.0, "p90": 60.0, "p99": 80.0, "max": 90.0},
        },
        "cost": {"available": True, "usd_per_gpu_hour": gpu.price, "gpus": 1,
                 "usd_per_hour": gpu.price},
        "energy": {"energy_j": None},
    }


#: A `run --frontier` result on an L4 at $0.80/h (its own points as that run placed them).
L4_FRONT = [  # (concurrency, interactivity, output tok/s/GPU)
    (1, 80.0, 80.0), (2, 60.0, 150.0), (4, 40.0, 220.0)]


def frontier_result() -> dict[str, Any]:
    r = point_result(SweepGpu("L4", 0.8, 12.5, 0.0, "cloud=c"), 4)
    r["run_id"] = "L4-frontier"
    pts = [{"concurrency": c, "interactivity": i, "interactivity_p90": i / 1.2,
            "output_tok_s_per_gpu": o, "input_tok_s_per_gpu": 4 * o,
            "total_tok_s_per_gpu": 5 * o,
            "usd_per_million_output_tokens": usd_per_million(0.8, o),
            "usd_per_million_input_tokens": usd_per_million(0.8, 4 * o),
            "usd_per_million_total_tokens": usd_per_million(0.8, 5 * o),
            "pareto": True, "requests": 100, "precision": {}} for c, i, o in L4_FRONT]
    r["frontier"] = {"points": pts, "stopped_because": "max concurrency", "target": None,
                     "at_target": None, "gpus": 1, "usd_per_gpu_hour": 0.8}
    return r


@pytest.fixture
def files(tmp_path: Path) -> Path:
    for gpu in (H100, A100):
        for c in LOADS:
            (tmp_path / f"{gpu.name}-c{c}.json").write_text(json.dumps(point_result(gpu, c)))
    (tmp_path / "L4-frontier.json").write_text(json.dumps(frontier_result()))
    return tmp_path


def compare_json(*args: str) -> tuple[int, dict[str, Any] | None, str]:
    r = runner.invoke(app, ["compare", *args, "--format", "json"])
    try:
        payload = json.loads(r.stdout) if r.stdout.strip() else None
    except ValueError:
        payload = None
    return r.exit_code, payload, r.stderr


def test_cheapest_first_at_a_target(files: Path) -> None:
    code, payload, err = compare_json(str(files), "--target-interactivity", "60")
    assert code == 0, err
    assert payload is not None
    rows = payload["rows"]
    assert [r["gpu"] for r in rows] == ["L4", "H100-SXM", "A100-80GB"]
    l4, h100, a100 = rows
    # L4: a measured point sits at 60 tok/s/user: 150 out tok/s/GPU at $0.80/h
    assert l4["source"] == "frontier" and l4["interpolated"] is False
    assert l4["note"] == "measured at 2"
    assert l4["usd_per_million_output_tokens"] == pytest.approx(0.8 / (150 * 3600 / 1e6))
    # H100 (an older sweep, axes derived on load): between c8 (55.6) and c4 (71.4 tok/s/user)
    assert h100["source"] == "sweep" and h100["interpolated"] is True
    assert h100["between"] == [8.0, 4.0] and h100["note"] == "interpolated between 8 and 4"
    xs = [1000 / H100.tpot(c) for c in (8, 4, 2, 1)]
    ys = [H100.out_tps(c) for c in (8, 4, 2, 1)]
    expect = steffen(xs, ys, 60.0)
    assert expect is not None
    assert h100["output_tok_s_per_gpu"] == pytest.approx(expect, rel=1e-9)
    assert h100["total_tok_s_per_gpu"] == pytest.approx(5 * expect, rel=1e-9)
    assert h100["usd_per_million_output_tokens"] == pytest.approx(3.0 / (expect * 3600 / 1e6))
    # the known speed model: TPOT = 1000/60 ms at c = (16.67 - 10) / 1 = 6.67 streams, 400 tok/s
    assert h100["output_tok_s_per_gpu"] == pytest.approx(400.0, rel=0.03)
    # A100: its fastest user sees 1000/22 = 45.5 tok/s: it does not reach 60
    assert a100["reaches"] is False and a100["usd_per_million_output_tokens"] is None
    assert a100["note"] == "does not reach 60 tok/s/user (front: 27.8-45.5)"


def test_a_target_below_the_front_says_the_load_stopped_short(files: Path) -> None:
    code, payload, _ = compare_json(str(files), "--target-interactivity", "50")
    assert payload is not None
    h100 = next(r for r in payload["rows"] if r["gpu"] == "H100-SXM")
    assert not h100["reaches"]
    assert h100["note"].startswith("front stops at 55.6 tok/s/user")
    assert code == 0  # the L4 reaches it (between its 60 and 40)


def test_slo_alone_and_with_a_target(files: Path) -> None:
    # TPOT p99 = 1.5 TPOT: <= 20 ms holds on the H100 at c1, c2 (16.5, 18), on no A100 point
    code, payload, err = compare_json(str(files), "--slo", "tpot_p99=20")
    assert code == 0, err
    assert payload is not None
    by_gpu = {r["gpu"]: r for r in payload["rows"]}
    assert by_gpu["H100-SXM"]["note"] == "measured at 2, best meeting the SLOs"
    assert by_gpu["H100-SXM"]["output_tok_s_per_gpu"] == pytest.approx(H100.out_tps(2))
    assert by_gpu["A100-80GB"]["note"] == "no point meets the SLOs"
    # with a target: the H100's points within the SLO span 83.3-90.9 tok/s/user, not 60
    code, payload, _ = compare_json(str(files), "--slo", "tpot_p99=20",
                                    "--target-interactivity", "85")
    assert payload is not None
    h100 = next(r for r in payload["rows"] if r["gpu"] == "H100-SXM")
    assert h100["interpolated"] and h100["between"] == [2.0, 1.0]


def test_no_frontier_reaches_the_target_exits_2_after_the_table(files: Path) -> None:
    code, payload, err = compare_json(str(files), "--target-interactivity", "500")
    assert code == 2
    assert payload is not None and not any(r["reaches"] for r in payload["rows"])
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: no frontier reaches 500 tokens/s/user")


@pytest.mark.parametrize(("args", "says"), [
    (("--target-interactivity", "0"), "give tokens/s per user > 0"),
    (("--target-interactivity", "nan"), "give tokens/s per user > 0"),
    (("--slo", "ttft_p99"), "--slo"),
    (("--model", "x", "--target-interactivity", "5"), "--model filters the history"),
])
def test_bad_input_is_one_line_exit_2(files: Path, args: tuple[str, ...], says: str) -> None:
    r = runner.invoke(app, ["compare", str(files), *args])
    assert r.exit_code == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], r.stderr


def test_different_models_are_refused_unless_forced(files: Path) -> None:
    (files / "other.json").write_text(json.dumps(point_result(H100, 16, model="llama-3.1-8b")))
    code, _, err = compare_json(str(files), "--target-interactivity", "60")
    assert code == 2 and "model" in err and "--force" in err
    code, payload, _ = compare_json(str(files), "--target-interactivity", "60", "--force")
    assert code == 0 and payload is not None
    assert len(payload["rows"]) == 4  # the other model is another curve


def test_table_and_csv(files: Path) -> None:
    r = runner.invoke(app, ["compare", str(files), "--target-interactivity", "60"])
    assert r.exit_code == 0, r.stderr
    assert "3 frontier(s) at 60 tokens/s/user" in r.stdout
    assert "does not reach 60" in r.stdout and "interpolated between 8 and 4" in r.stdout
    r = runner.invoke(app, ["compare", str(files), "--target-interactivity", "60", "-f", "csv"])
    header, first = r.stdout.splitlines()[:2]
    assert header.startswith("gpu,instance,configuration,usd_per_million_output_tokens")
    assert first.startswith("L4,cloud=c,bf16,")


def test_from_the_history(files: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    for f in sorted(files.glob("*.json")):
        record_result(db, json.loads(f.read_text()), f)
    code, payload, err = compare_json("--history", str(db), "--target-interactivity", "60")
    assert code == 0, err
    assert payload is not None
    assert [r["gpu"] for r in payload["rows"]] == ["L4", "H100-SXM", "A100-80GB"]
    assert payload["rows"][0]["files"] == ["history:L4-frontier"]
    code, _, err = compare_json("--history", str(db), "--model", "nope",
                                "--target-interactivity", "60")
    assert code == 2 and "nothing to compare" in err


def test_an_invalid_point_is_said_in_its_row(files: Path) -> None:
    bad = point_result(H100, 4)
    bad["validity"] = {"valid": False, "reasons": ["too few requests: 3 < 10"]}
    (files / "H100-SXM-c4.json").write_text(json.dumps(bad))
    code, payload, _ = compare_json(str(files), "--target-interactivity", "60")
    assert code == 0 and payload is not None
    h100 = next(r for r in payload["rows"] if r["gpu"] == "H100-SXM")
    assert h100["problems"] == [f"{files / 'H100-SXM-c4.json'}: INVALID: too few requests: 3 < 10"]
    assert "[1 point(s) not ok: " in h100["note"]
    l4 = next(r for r in payload["rows"] if r["gpu"] == "L4")
    assert l4["problems"] == []
