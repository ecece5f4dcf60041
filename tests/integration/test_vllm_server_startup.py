"""VllmServer follows a real child process's log while it starts: phases as they are written, and
on failure the root cause before the tail. The child replays a recorded vLLM log line by line
(tests/fixtures/vllm_logs) in place of vLLM, then serves /health or exits 1, so these run in
seconds;
tests/e2e/test_startup_failure.py does the same with the real engine."""

import os
import sys
import time
from pathlib import Path

import pytest

from infer_prof.servers.vllm_server import ServerStartError, VllmServer
from infer_prof.servers.vllm_startup import PHASES

pytestmark = pytest.mark.integration
LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"

FAKE = """
import http.server, os, sys, time
sys.path.insert(0, os.environ["FAKE_REPO"])
from infer_prof.servers.vllm_startup import StartupPhases

port = int(sys.argv[sys.argv.index("--port") + 1])
lines = open(os.environ["FAKE_LOG"]).read().split("\\n")[1:]  # infer-prof writes its own "$ cmd"
phases = StartupPhases()
for line in lines:
    sys.stdout.write(line + "\\n")
    sys.stdout.flush()
    # each new phase lasts PHASE_S, so the reader's 0.25 s polls must time it
    time.sleep(float(os.environ["PHASE_S"]) if phases.feed_lines(0, [line]) else 0.002)
if os.environ["FAKE_MODE"] == "fail":
    sys.exit(1)


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def fake_server(tmp_path: Path, log: str, mode: str, phase_s: float) -> VllmServer:
    script = tmp_path / "fake-vllm"
    script.write_text(f"#!{sys.executable}\n{FAKE}")
    script.chmod(0o755)
    return VllmServer(
        model="m",
        served_model_name="m",
        log_path=tmp_path / "server.log",
        python=str(script),
        env={
            "FAKE_REPO": str(Path(__file__).resolve().parents[2]),
            "FAKE_LOG": str(LOGS / log),
            "FAKE_MODE": mode,
            "PHASE_S": str(phase_s),
        },
    )


def test_phases_are_followed_live_and_timed(tmp_path):
    server = fake_server(tmp_path, "gpu-0.26-h100-llama-2-7b-start.log", "serve", 0.6)
    seen, ticks = [], []
    server.start()
    try:
        total = server.wait_healthy(
            30, on_wait=lambda *a: ticks.append(a), on_phase=lambda c: seen.append(c)
        )
    finally:
        server.stop()
    assert [c.phase for c in seen] == list(PHASES[1:])  # every phase after "starting"
    starts = [c.at_s for c in seen]
    assert starts == sorted(starts)
    # each phase is announced 0.6 s after the previous one's marker; polled every 0.25 s
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert all(0.3 <= g <= 1.5 for g in gaps), gaps
    d = server.startup.to_dict(total)
    assert [p["name"] for p in d["phases"]] == list(PHASES[:-1])
    assert sum(p["duration_s"] for p in d["phases"]) == pytest.approx(total, abs=0.02)
    assert ticks and {t[1] for t in ticks} <= set(PHASES)


def test_failed_start_names_phase_and_root_cause_before_the_tail(tmp_path):
    server = fake_server(tmp_path, "gpu-0.26-h100-llama-2-70b-bnb-no-weights.log", "fail", 0.3)
    server.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(ServerStartError) as err:
            server.wait_healthy(30)
    finally:
        server.stop()
    assert time.monotonic() - t0 < 15
    msg = str(err.value)
    first = msg.splitlines()[0]
    assert first.startswith("vLLM server exited with code 1 during start-up, while loading weights")
    assert str(server.log_path) in first
    cause_at = msg.index("RuntimeError: No model weights found in: `/root/.cache/infer-prof/")
    tail_at = msg.index("--- last lines of the server log")
    wrapper_at = msg.index("Engine core initialization failed")
    assert cause_at < tail_at < wrapper_at
    assert "resource_tracker" not in msg
    assert os.path.exists(server.log_path)
