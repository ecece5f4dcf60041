"""The default warm-up is the load itself: measuring starts without the load ever pausing.

Against a real local server, with output lengths that vary (so the streams fall out of step as
they do on a real server), the first measured request is sent while warm-up requests are still
in flight; a counted warm-up (``--warmup 16``) drains first, so nothing is in flight then.
"""

import pytest

from infer_prof.results.store import read_requests

from .conftest import cli, load_single_result

pytestmark = pytest.mark.integration

WORKLOAD = """
name = "varied"
input_len = 16
output_len = { kind = "uniform", min = 4, max = 40 }
num_requests = 48
seed = 3
[arrival]
concurrency = 8
"""


def _in_flight_at_first_measured_send(result_dir):
    result = load_single_result(result_dir)
    records = read_requests(result_dir / result["requests_file"])
    first = min(r.send_ns for r in records if not r.warmup)
    warm_in_flight = [r for r in records
                      if r.warmup and r.send_ns < first and (r.done_ns or 0) > first]
    return result, records, len(warm_in_flight)


@pytest.mark.parametrize("processes", ["1", "2"])
def test_steady_warmup_never_pauses_the_load(synthetic, tmp_path, processes):
    server = synthetic(ttft_ms=20.0, itl_ms=4.0, tokens=64)
    wfile = tmp_path / "varied.toml"
    wfile.write_text(WORKLOAD)
    out = tmp_path / "steady"
    p = cli("run", "--model", "llama-2-7b", "--no-progress", "--no-history", "--endpoint",
            server.url, "--workload", str(wfile), "--client-processes", processes,
            "--results-dir", str(out))
    assert p.returncode == 0, p.stderr
    result, records, in_flight = _in_flight_at_first_measured_send(out)
    w = result["warmup"]
    assert w["mode"] == "steady" and w["ended_by"] == "steady"
    assert w["requests"] >= 8 and w["seconds"] > 0
    # every one of the 8 streams finished a warm-up request before the first measured send
    first = min(r.send_ns for r in records if not r.warmup)
    assert sum(1 for r in records if r.warmup and (r.done_ns or 1 << 62) <= first) >= 8
    assert in_flight > 0, "the load paused between warm-up and measuring"
    assert w["first_wave"]["requests"] == 8 and w["first_wave"]["share"] == round(8 / 48, 4)
    assert result["summary"]["requests_completed"] == 48


def test_counted_warmup_drains_before_measuring(synthetic, tmp_path):
    server = synthetic(ttft_ms=20.0, itl_ms=4.0, tokens=64)
    wfile = tmp_path / "varied.toml"
    wfile.write_text(WORKLOAD)
    out = tmp_path / "counted"
    p = cli("run", "--model", "llama-2-7b", "--no-progress", "--no-history", "--endpoint",
            server.url, "--workload", str(wfile), "--warmup", "16", "--results-dir", str(out))
    assert p.returncode == 0, p.stderr
    result, records, in_flight = _in_flight_at_first_measured_send(out)
    assert result["warmup"]["mode"] == "requests" and result["warmup"]["requests"] == 16
    assert result["warmup"]["ended_by"] == "requests"
    assert in_flight == 0


def test_bad_warmup_is_one_line(tmp_path):
    p = cli("run", "--model", "llama-2-7b", "--endpoint", "http://127.0.0.1:9", "--warmup",
            "soon")
    assert p.returncode == 2
    assert p.stderr.strip().startswith("error: --warmup 'soon'")
    assert len(p.stderr.strip().splitlines()) == 1


FIXED = """
name = "fixed"
input_len = 16
output_len = 40
num_requests = 64
seed = 3
[arrival]
concurrency = 8
"""


@pytest.mark.parametrize("stagger", [True, False])
def test_warmup_stagger_breaks_lock_step_waves(synthetic, tmp_path, stagger):
    """Equal lengths, started together: without the stagger the 8 streams end and resend
    together every cycle (most send gaps under 1 ms); with it (the default) the first warm-up
    request of each stream asks a different length and the streams stay out of phase."""
    server = synthetic(ttft_ms=20.0, itl_ms=4.0, tokens=64)
    wfile = tmp_path / "fixed.toml"
    wfile.write_text(FIXED)
    out = tmp_path / "out"
    p = cli("run", "--model", "llama-2-7b", "--no-progress", "--no-history", "--endpoint",
            server.url, "--workload", str(wfile), "--results-dir", str(out),
            *([] if stagger else ["--no-warmup-stagger"]))
    assert p.returncode == 0, p.stderr
    result = load_single_result(out)
    records = read_requests(out / result["requests_file"])
    first_warm = sorted((r for r in records if r.warmup and r.index >= -8), key=lambda r: -r.index)
    measured = [r for r in records if not r.warmup]
    assert all(r.max_tokens == 40 for r in measured) and len(measured) == 64
    share = result["load"]["send_bunching"]["share"]
    if stagger:
        assert [r.max_tokens for r in first_warm] == [5, 10, 15, 20, 25, 30, 35, 40]
        assert result["warmup"]["phase_stagger"] == {
            "requests": 8, "output_len_min": 5, "output_len_max": 40}
        assert share < 0.25, share
        assert "phase stagger" in p.stdout
    else:
        assert {r.max_tokens for r in first_warm} == {40}
        assert result["warmup"]["phase_stagger"] is None
        assert result["config"]["warmup_stagger"] is False
        assert share > 0.4, share  # 7 of 8 gaps in a wave; fewer when the client is slowed


@pytest.mark.parametrize("processes", ["1", "2"])
def test_cool_down_holds_the_load_until_the_last_measured_request_ends(synthetic, tmp_path,
                                                                         processes):
    """Streams out of phase finish their measured requests up to one request apart; each stream
    done early keeps sending (unrecorded) requests until the last measured one has ended, so
    every measured request runs beside c - 1 others, as the server's own log shows."""
    import json
    import urllib.request

    server = synthetic(ttft_ms=20.0, itl_ms=4.0, tokens=64)
    wfile = tmp_path / "fixed.toml"
    wfile.write_text(FIXED.replace("num_requests = 64", "num_requests = 24"))  # 3 per stream
    out = tmp_path / "out"
    p = cli("run", "--model", "llama-2-7b", "--no-progress", "--no-history", "--endpoint",
            server.url, "--workload", str(wfile), "--results-dir", str(out),
            "--client-processes", processes)
    assert p.returncode == 0, p.stderr
    result = load_single_result(out)
    records = read_requests(out / result["requests_file"])
    measured = [r for r in records if not r.warmup]
    assert len(measured) == 24 and all(r.ok for r in measured)
    if processes == "1":  # (a pool's workers count their own; the parent does not sum them)
        assert result["warmup"]["cooldown_requests"] >= 4  # most streams end before the last one
    with urllib.request.urlopen(f"{server.url}/truth", timeout=30) as resp:
        truth = json.load(resp)["requests"]
    spans = [(t["arrival_ns"], t["send_ns"][-1] if t["send_ns"] else t["arrival_ns"])
             for t in truth]

    def running(at_ns):
        return sum(1 for a, b in spans if a <= at_ns < b)

    # the server's concurrency at the middle of every measured request: all 8 streams busy
    mids = [r.send_ns + (r.done_ns - r.send_ns) // 2 for r in measured]
    assert min(running(m) for m in mids) >= 7, sorted(running(m) for m in mids)
    # the cool-down requests still running at the end were cut (the client closed them)
    last_end = max(r.done_ns for r in measured)
    assert any(t["aborted"] for t in truth if t["arrival_ns"] < last_end)
