"""`infer-prof run --endpoint` against a real local server: output, faults, Ctrl-C."""

import json
import signal

import pytest

from infer_prof.results.schema import load_result
from infer_prof.results.store import read_requests

from .conftest import cli, load_single_result, long_run, wait_until_served
from .misbehaving_server import MisbehavingServer, Reply
from .test_stream_client import full_stream

pytestmark = pytest.mark.integration

# llama-2-7b's shipped config gives the vocabulary for token-ID prompts: no download needed.
BASE = ("run", "--model", "llama-2-7b", "--no-progress")


def test_json_summary_and_result_files(synthetic, tmp_path):
    server = synthetic(ttft_ms=20.0, itl_ms=5.0, tokens=16)
    out = tmp_path / "r.json"
    p = cli(
        *BASE,
        "--endpoint",
        server.url,
        "-c",
        "4",
        "-n",
        "12",
        "--input-len",
        "32",
        "--output-len",
        "16",
        "--warmup-requests",
        "2",
        "--json",
        "--output",
        str(out),
        "--label",
        "instance=local",
        "--gpu",
        "H100-SXM",
        "--gpus",
        "2",
        "--price-per-hour",
        "1.5",
    )
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["requests_completed"] == 12
    assert summary["requests_failed"] == 0
    for key in ("request_throughput", "output_throughput", "total_throughput"):
        assert summary[key] > 0
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        assert set(summary[key]) == {"mean", "p50", "p90", "p99", "max"}
    assert 19.0 < summary["ttft_ms"]["p50"] < 40.0
    # cost, energy and efficiency stand next to the speeds: here priced by hand, no NVML
    assert summary["cost"]["usd_per_hour"] == pytest.approx(2 * 1.5)
    assert summary["cost"]["usd_per_million_output_tokens"] == pytest.approx(
        3.0 / (summary["output_throughput"] * 3600) * 1e6
    )
    assert summary["energy"]["joules_per_output_token"] is None and summary["energy"]["reason"]
    assert summary["efficiency"]["mbu_pct"] is not None
    assert 4.5 < summary["itl_ms"]["p50"] < 8.0
    # the frontier's axes (issue 23 section 1): per user, and per GPU of the endpoint's --gpus 2
    assert summary["interactivity_tok_s_user"] == pytest.approx(1000 / summary["tpot_ms"]["p50"])
    assert summary["interactivity_p90_tok_s_user"] == pytest.approx(
        1000 / summary["tpot_ms"]["p90"])
    assert summary["output_tok_s_per_gpu"] == pytest.approx(summary["output_throughput"] / 2)
    assert summary["total_tok_s_per_gpu"] == pytest.approx(summary["total_throughput"] / 2)
    assert summary["input_tok_s_per_gpu"] == pytest.approx(
        (summary["total_throughput"] - summary["output_throughput"]) / 2)
    assert summary["usd_per_million_output_tokens"] == pytest.approx(
        summary["cost"]["usd_per_million_output_tokens"])
    assert summary["usd_per_million_total_tokens"] == pytest.approx(
        1.5 / (summary["total_tok_s_per_gpu"] * 3600 / 1e6))
    assert summary["joules_per_output_token"] is None  # no NVML: null, never 0

    result = load_result(out)
    assert result["complete"] is True
    assert result["schema_version"] == 1
    assert result["server"]["kind"] == "endpoint"
    assert result["gpu"]["engine_gpus"] == 2 and result["gpu"]["engine_gpus_how"] == "--gpus"
    assert result["summary"]["total_tok_s_per_gpu"] == summary["total_tok_s_per_gpu"]
    assert result["server"]["served_model_name"] == "synthetic"  # read from /v1/models
    assert result["labels"] == {"instance": "local"}
    assert result["config"]["concurrency"] == 4
    assert result["environment"]["infer_prof"]
    assert result["client"]["timestamp_source"] == "kernel"
    recs = read_requests(out.with_name("r.requests.jsonl"))
    measured = [r for r in recs if not r.warmup]
    assert len(measured) == 12 and len([r for r in recs if r.warmup]) == 2
    assert all(r.output_tokens == 16 and r.prompt_tokens == 32 for r in measured)
    assert summary["output_throughput"] == pytest.approx(
        summary["request_throughput"] * 16, rel=1e-9
    )
    # window and decode-step MBU, at the batch the server's running gauge showed while busy
    roof = result["roofline"]
    assert roof["batch_source"] == "server_running_busy_mean"
    assert 1.0 <= roof["batch_size"] <= 4.0
    assert roof["decode_step_time_source"] == "itl_p50"
    assert roof["decode_step_time_s"] == pytest.approx(summary["itl_ms"]["p50"] / 1000, rel=1e-12)
    assert roof["decode_step_mbu"] == pytest.approx(
        roof["decode_bytes_per_step"] / roof["decode_step_time_s"] / (2 * 3.35e12), rel=1e-12
    )
    assert summary["efficiency"]["decode_step_mbu_pct"] == roof["decode_step_mbu_pct"]
    assert set(roof["definitions"]) >= {"mbu", "decode_step_mbu"}
    # a server without the counter: null with the reason, never 0
    metrics = result["telemetry"]["server_metrics"]["summary"]
    assert metrics["estimated_read_bytes_per_gpu"] is None
    assert metrics["estimated_read_bytes_per_gpu_reason"] == (
        "the server does not expose vllm:estimated_read_bytes_per_gpu_total"
    )


def test_hung_streams_time_out_and_are_counted(synthetic, tmp_path):
    server = synthetic("--hang-every", "3", ttft_ms=10.0, itl_ms=5.0, tokens=10)
    p = cli(
        *BASE,
        "--endpoint",
        server.url,
        "-c",
        "3",
        "-n",
        "6",
        "--input-len",
        "8",
        "--output-len",
        "10",
        "--warmup-requests",
        "0",
        "--timeout",
        "1.5",
        "--results-dir",
        str(tmp_path),
        "--json",
    )
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["requests_failed"] == 2
    assert summary["failure_kinds"] == {"timeout": 2}
    assert summary["requests_completed"] == 4
    recs = [r for r in read_requests(next(tmp_path.glob("*.requests.jsonl")))]
    timed_out = [r for r in recs if r.error == "timeout"]
    assert all(len(r.chunk_ns) == 3 for r in timed_out)  # what arrived before the hang is kept


def test_http_errors_are_failures_with_their_kind(synthetic, tmp_path):
    server = synthetic("--fail-every", "4", ttft_ms=5.0, itl_ms=1.0, tokens=4)
    p = cli(
        *BASE,
        "--endpoint",
        server.url,
        "-c",
        "2",
        "-n",
        "8",
        "--input-len",
        "8",
        "--output-len",
        "4",
        "--warmup-requests",
        "0",
        "--results-dir",
        str(tmp_path),
        "--json",
    )
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["failure_kinds"] == {"http_500": 2}
    assert summary["requests_completed"] == 6


#: What a FastAPI server (vLLM's API server is one) answers for a route it does not have.
NOT_FOUND_BODY = b'{"detail":"Not Found"}'
NOT_FOUND = (b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n"
             b"content-length: %d\r\n\r\n" % len(NOT_FOUND_BODY) + NOT_FOUND_BODY)


def completions_only(_number: int, head: bytes) -> Reply:
    """Four tokens for ``POST /v1/completions``, :data:`NOT_FOUND` for any other route."""
    served = head.startswith(b"POST /v1/completions ")
    return Reply(full_stream(4, compact=True) if served else [NOT_FOUND])


def test_a_run_where_every_request_failed_exits_4_with_the_reason(tmp_path):
    """A server that serves completions but has no chat route: every ``--api chat`` request is
    answered 404. The result is still written, and the exit code and one line say that nothing
    was measured, and why."""
    out = tmp_path / "r.json"
    with MisbehavingServer(completions_only) as server:
        p = cli("run", "--model", "tiny-llama", "--no-progress", "--endpoint", server.url,
                "--api", "chat", "-c", "2", "-n", "4", "--input-len", "8", "--output-len", "4",
                "--warmup", "none", "--no-history", "--output", str(out))
    assert p.returncode == 4, p.stderr
    assert server.requests == 4
    assert all(h.startswith(b"POST /v1/chat/completions ") for h in server.heads)
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("error: every measured request failed (http_404: 4)")
    assert "Not Found" in line and "--api" in line
    assert str(out) in line
    assert load_result(out)["summary"]["requests_failed"] == 4


def test_the_completions_only_server_serves_completions(tmp_path):
    """The same server answers ``--api completions``: the 404s above are the missing chat
    route, not a broken server."""
    with MisbehavingServer(completions_only) as server:
        p = cli(*BASE, "--endpoint", server.url, "--api", "completions", "-c", "2", "-n", "4",
                "--input-len", "8", "--output-len", "4", "--warmup", "none", "--no-history",
                "--output", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("processes", ["auto", "2"])
def test_server_death_mid_run_writes_incomplete_result(synthetic, tmp_path, processes):
    server = synthetic(ttft_ms=10.0, itl_ms=10.0, tokens=50)
    proc = long_run(server.url, tmp_path, "--client-processes", processes)
    wait_until_served(server.url, 8)  # measuring for a while
    server.proc.kill()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    result = load_single_result(tmp_path)
    assert result["complete"] is False
    assert result["incomplete_reason"] == "server_died"
    s = result["summary"]
    assert s["requests_completed"] > 0
    assert s["failure_kinds"].get("server_died", 0) >= 1
    assert s["requests_completed"] + s["requests_failed"] < 400


def test_ctrl_c_keeps_what_was_measured(synthetic, tmp_path):
    server = synthetic(ttft_ms=10.0, itl_ms=10.0, tokens=50)
    proc = long_run(server.url, tmp_path)
    wait_until_served(server.url, 8)  # measuring for a while
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    result = load_single_result(tmp_path)
    assert result["complete"] is False
    assert result["incomplete_reason"] == "interrupted"
    s = result["summary"]
    assert s["requests_completed"] > 0
    assert s["failure_kinds"].get("cancelled", 0) >= 1  # streams in flight at Ctrl-C
