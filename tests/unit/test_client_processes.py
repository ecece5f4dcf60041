"""`--client-processes`: the auto choice (pure), its validation, and the console row."""

import math

import pytest
from typer.testing import CliRunner

from infer_prof.cli import app
from infer_prof.loadgen.workers import (
    ASSUMED_ITL_S,
    EVENTS_PER_PROCESS,
    EVENTS_PER_PROCESS_BY_READER,
    choose_processes,
    expected_events_per_s,
)
from infer_prof.report.console import totals_table
from infer_prof.run.config import ConfigError, RunConfig, check_client_processes, validate
from infer_prof.run.load_points import base_workload, client_processes, load_points
from tests.unit.typed_results import result_of


def _point(**cfg):
    """The single load point the command line describes (default: 128 tokens out)."""
    c = RunConfig(**cfg)
    return load_points(c.load, base_workload(c))[0]


def test_expected_events_closed_loop_assumes_10_ms_between_tokens():
    assert ASSUMED_ITL_S == 0.010
    assert expected_events_per_s("closed", 1024) == pytest.approx(102_400)
    assert expected_events_per_s("closed", 16) == pytest.approx(1_600)


def test_expected_events_open_loop():
    # finite rate: requests/s x mean output tokens
    assert expected_events_per_s("open", rate=100.0, mean_output_tokens=256) == 25_600
    # ... but never more than the cap's streams can produce at one token per 10 ms
    assert expected_events_per_s("open", rate=1000.0, mean_output_tokens=256,
                                 max_concurrency=4) == pytest.approx(400)
    # infinite rate: the cap's streams, or unknown (0: one process) without a cap
    assert expected_events_per_s("open", rate=math.inf, max_concurrency=512) == pytest.approx(
        51_200)
    assert expected_events_per_s("open", rate=math.inf) == 0.0
    assert expected_events_per_s("open", rate=None, mean_output_tokens=128) == 0.0


def test_choose_processes_arithmetic():
    # ceil(events/s / per process), at least 1, at most the cores and the streams
    assert choose_processes(1024, 102_400, cores=16, per_process=40_000) == 3
    assert choose_processes(1024, 102_400, cores=16, per_process=80_000) == 2
    assert choose_processes(1024, 68_267, cores=2, per_process=80_000) == 1
    assert choose_processes(1024, 102_400, cores=2, per_process=40_000) == 2
    assert choose_processes(2, 102_400, cores=16, per_process=40_000) == 2
    assert choose_processes(64, 0.0, cores=16) == 1


def test_the_c_reader_gets_twice_the_events_per_process():
    assert EVENTS_PER_PROCESS_BY_READER == {"c": 80_000, "python": 40_000}
    assert EVENTS_PER_PROCESS in EVENTS_PER_PROCESS_BY_READER.values()


def test_auto_processes_for_points():
    def want(events: float, cores: int) -> int:
        return max(1, min(math.ceil(events / EVENTS_PER_PROCESS), cores))

    # closed loop: 16 streams -> 1.6k events/s -> 1 process; 1024 -> 102k/s
    assert client_processes("auto", _point(concurrency=[16]), cores=16) == 1
    assert client_processes("auto", _point(concurrency=[1024]), cores=16) == want(102_400, 16)
    assert client_processes("auto", _point(concurrency=[1024]), cores=2) == 2  # at most cores
    assert client_processes("AUTO", _point(concurrency=[1024]), cores=1) == 1
    # open loop: 1000 req/s x 128 tokens = 128k/s; capped by the max_concurrency streams
    assert client_processes("auto", _point(rates=[1000.0]), cores=16) == want(128_000, 16)
    assert client_processes("auto", _point(rates=[1000.0], max_concurrency=2), cores=16) == 1
    assert client_processes("auto", _point(rates=[math.inf]), cores=16) == 1
    # an https endpoint: each read costs about twice as much, so it counts twice
    assert client_processes("auto", _point(concurrency=[1024]), cores=16,
                            tls=True) == want(2 * 102_400, 16)
    assert client_processes("auto", _point(concurrency=[16]), cores=16, tls=True) == 1
    assert client_processes("auto", _point(rates=[math.inf], max_concurrency=2048),
                            cores=16) == choose_processes(2048, 204_800, 16) == want(204_800, 16)


def test_explicit_processes_never_exceed_the_streams():
    assert client_processes("2", _point(concurrency=[4])) == 2
    assert client_processes(8, _point(concurrency=[4])) == 4
    assert client_processes("8", _point(rates=[10.0], max_concurrency=3)) == 3
    assert client_processes("8", _point(rates=[10.0], num_requests=5)) == 5
    assert client_processes("1", _point(concurrency=[64])) == 1


@pytest.mark.parametrize("value", ["auto", "Auto", "1", "16", 4])
def test_valid_settings(value):
    check_client_processes(value)
    validate(RunConfig(client_processes=value))


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", ""])
def test_invalid_settings_name_the_option(value):
    with pytest.raises(ConfigError) as exc:
        validate(RunConfig(client_processes=value))
    msg = str(exc.value)
    assert msg.startswith("--client-processes must be a positive integer or auto")
    assert repr(value) in msg and "\n" not in msg


def test_cli_rejects_a_bad_value_before_anything_starts():
    r = CliRunner().invoke(
        app,
        ["run", "--no-progress", "--model", "llama-2-7b", "--endpoint", "http://127.0.0.1:9",
         "--client-processes", "0"],
    )
    assert r.exit_code == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --client-processes")


def _rows(result):
    t = totals_table(result_of(**result))
    return dict(zip(t.columns[0].cells, t.columns[1].cells, strict=True))


def test_console_shows_the_client_processes():
    base = {"requests_completed": 1, "requests_failed": 0, "request_throughput": 1.0,
            "output_throughput": 1.0, "total_throughput": 1.0}
    one = {"summary": base, "client": {"processes": 1, "read_lag_ms": {"p99": 0.25},
                                       "cpu_share": 0.12}}
    assert _rows(one)["client"] == "1 process, read lag p99 0.250 ms, busiest CPU 12%"
    two = {"summary": base, "client": {"processes": 2, "workers": [{}, {}], "reader": "c"}}
    assert _rows(two)["client"] == "2 processes (C reader)"
    assert "client" not in _rows({"summary": base})
