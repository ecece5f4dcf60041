"""`run` exits 4 when a point measured nothing: the line it prints (every_request_failed)."""

from __future__ import annotations

from pathlib import Path

from infer_prof.core.metrics import RequestRecord
from infer_prof.results.failed_run import every_request_failed
from infer_prof.results.store import write_requests


def _summary(done: int, failed: int, kinds: dict[str, int]) -> dict:
    return {"summary": {"requests_completed": done, "requests_failed": failed,
                        "failure_kinds": kinds}}


def test_a_point_with_any_completed_request_or_no_failure_is_a_measurement(tmp_path: Path):
    assert every_request_failed(_summary(3, 1, {"http_500": 1}), tmp_path / "none") is None
    assert every_request_failed(_summary(0, 0, {}), tmp_path / "none") is None


def test_the_line_names_the_kinds_the_first_measured_detail_and_what_to_check(tmp_path: Path):
    path = tmp_path / "r.requests.jsonl"
    recs = [
        RequestRecord(index=-1, input_len=8, max_tokens=4, warmup=True, error="http_500",
                      error_detail="warm-up detail, not shown"),
        RequestRecord(index=0, input_len=8, max_tokens=4, error="http_401",
                      error_detail="invalid API key"),
        RequestRecord(index=1, input_len=8, max_tokens=4, error="http_401",
                      error_detail="invalid API key"),
    ]
    write_requests(path, recs)
    line = every_request_failed(_summary(0, 2, {"http_401": 2}), path)
    assert line == ("every measured request failed (http_401: 2): invalid API key; "
                    "check --api-key (or OPENAI_API_KEY)")


def test_without_the_request_file_the_kinds_still_tell(tmp_path: Path):
    line = every_request_failed(_summary(0, 5, {"weird": 5}), tmp_path / "missing.jsonl")
    assert line == "every measured request failed (weird: 5)"
