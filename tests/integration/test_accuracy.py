"""The load generator against a real local streaming server with known timing.

The synthetic server stamps each request's arrival with the kernel's receive time and each
token's send time right after ``send``; the client's numbers are compared with that truth,
per request. Tolerances are the issue's targets (they are loose compared with what is
measured, a few microseconds, so they do not flake).
"""

import pytest

from infer_prof.run.calibrate import calibrate_point

pytestmark = pytest.mark.integration


def test_accuracy_at_concurrency_128(synthetic):
    server = synthetic()
    rep = calibrate_point(server, concurrency=128, num_requests=256, input_len=32, output_len=128)
    assert rep.failed == 0
    assert rep.matched_requests == 256
    ttft, itl, rps = rep.ttft, rep.itl, rep.request_throughput
    # the truth itself is what the server was asked for (it is not running late)
    assert 49.0 <= ttft.p50_truth_ms <= 55.0  # uvloop timers: up to ~1 ms early
    assert abs(ttft.p50_error_ms) <= 1.0
    assert abs(ttft.p99_error_ms) <= 3.0
    assert abs(itl.p50_error_ms) <= 0.5
    assert abs(itl.p99_error_ms) <= 1.0
    assert abs(rps.error_pct) <= 1.0


def test_accuracy_single_stream(synthetic):
    server = synthetic(ttft_ms=20.0, itl_ms=5.0, tokens=16)
    rep = calibrate_point(server, concurrency=1, num_requests=5, input_len=8, output_len=16)
    assert rep.matched_requests == 5
    assert abs(rep.ttft.p50_error_ms) <= 1.0
    assert abs(rep.itl.p50_error_ms) <= 0.5
    # the per-request ITL truth is ~5 ms; a client that measured read time would not care
    assert 4.5 <= rep.itl.p50_client_ms <= 6.0


def test_chat_calibration_reads_chat_chunks_as_accurately(synthetic):
    """``calibrate --api chat``: chat requests, streamed back as chat chunks (the role-only
    first chunk is no token), held to the same truth."""
    server = synthetic(ttft_ms=20.0, itl_ms=5.0, tokens=32)
    rep = calibrate_point(server, concurrency=8, num_requests=16, input_len=8, output_len=32,
                          api="chat")
    assert rep.api == "chat" and rep.failed == 0 and rep.matched_requests == 16
    assert abs(rep.ttft.p50_error_ms) <= 1.0
    assert abs(rep.itl.p50_error_ms) <= 0.5
    assert 4.5 <= rep.itl.p50_client_ms <= 6.0


#: Above this share of CPU taken by the hypervisor during a level, the machine was not fair to
#: the client (37.5 % was seen on a CI-like box) and only the verdict's consistency is checked.
FAIR_STEAL_PCT = 10.0
#: CPU pressure (PSI avg10, % of time some task waited for a CPU) above which the machine was
#: busy with other work (e.g. a vLLM server of the test before still shutting down). An idle
#: 2-core VM reads 0-0.3 %; two CPU-bound loops beside calibrate read about 4 % and make it say,
#: honestly, "not within them".
FAIR_PRESSURE_PCT = 1.0


def test_calibrate_command_prints_the_verdict_and_json_names_the_misses():
    import json
    import re
    import subprocess
    import sys

    args = [sys.executable, "-m", "infer_prof", "calibrate", "-c", "1,4", "--ttft-ms", "5"]
    args += ["--itl-ms", "2", "--output-len", "6", "--requests-per-stream", "6"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "targets: |error| <= 2 / 5 ms TTFT" in out.stdout
    said = " ".join(out.stderr.split())
    stolen = [float(x) for x in re.findall(r"stolen by the hypervisor ([\d.]+)%", said)]
    pressure = [float(x) for x in re.findall(r"PSI avg10\) ([\d.]+)%", said)]
    text = " ".join(out.stdout.split())
    if (max(stolen, default=0.0) <= FAIR_STEAL_PCT
            and max(pressure, default=0.0) <= FAIR_PRESSURE_PCT):
        assert "the client is within them up to 4 streams" in text
    else:  # the machine says it was not fair: the verdict must still be there
        assert "the client is within them up to" in text or "Not within them" in text
    js = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=120)
    levels = json.loads(js.stdout)
    assert [lv["concurrency"] for lv in levels] == [1, 4]
    for lv in levels:
        assert isinstance(lv["misses"], list)
        if ((lv["cpu_steal_pct"] or 0.0) <= FAIR_STEAL_PCT
                and (lv["cpu_pressure_pct"] or 0.0) <= FAIR_PRESSURE_PCT):
            assert lv["misses"] == [], lv


def test_server_cost_knob_really_burns_the_servers_cpu(synthetic):
    """`--cost-us` makes the built-in server use that much of its own CPU per streamed token:
    its process CPU over a level (from /proc) is at least half of tokens x cost, well above
    what the lean server needs for the same tokens (a few us each)."""
    cost_us = 1000.0
    server = synthetic("--cost-us", str(cost_us), ttft_ms=5.0, itl_ms=10.0, tokens=40)
    rep = calibrate_point(server, concurrency=4, num_requests=8, input_len=8, output_len=40,
                          mode="server_cost")
    srv = rep.server
    assert rep.failed == 0
    assert srv.cost_us_per_token == cost_us
    assert srv.tokens >= 8 * 40
    assert srv.cpu_s is not None
    assert srv.cpu_s > 0.5 * srv.tokens * cost_us / 1e6
    assert rep.mode == "server_cost" and rep.targets["itl_p50_ms"] == 0.5


def test_calibrate_server_cost_is_recorded_and_named_in_the_verdict():
    import json
    import subprocess
    import sys

    # 2 ms per token: the ~30 tokens' burn (~60 ms) is well above /proc's 10 ms CPU ticks
    args = [sys.executable, "-m", "infer_prof", "calibrate", "-c", "2", "--ttft-ms", "5",
            "--itl-ms", "10", "--output-len", "6", "--requests-per-stream", "2",
            "--server-cost-us", "2000"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "targets (server costing 2000 us/token): |error| <= 2 / 5 ms TTFT" in out.stdout
    assert "asked 2000" in out.stderr
    js = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=120)
    rep = json.loads(js.stdout)[0]
    assert rep["nominal"]["server_cost_us"] == 2000
    assert rep["mode"] == "server_cost"
    assert rep["server"]["cost_us_per_token"] == 2000
    assert rep["server"]["cpu_us_per_token"] > 1000


def test_a_negative_server_cost_is_refused():
    import subprocess
    import sys

    args = [sys.executable, "-m", "infer_prof", "calibrate", "--server-cost-us", "-1"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "--server-cost-us" in out.stderr
