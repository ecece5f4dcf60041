"""`run` exits 4 when a point measured nothing: the line it prints (every_request_failed)."""

from __future__ import annotations

from pathlib import Path

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.results.document import Result
from infer_prof.results.failed_run import every_request_failed
from infer_prof.results.store import write_requests
from tests.unit.typed_results import result_of


def _summary(done: int, failed: int, kinds: dict[str, int]) -> Result:
    return result_of(summary={"requests_completed": done, "requests_failed": failed,
                              "failure_kinds": kinds})


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
    line = every_request_failed(_summary(0, 5, {"bad_chunk": 5}), tmp_path / "missing.jsonl")
    assert line == "every measured request failed (bad_chunk: 5)"


def test_a_long_prompt_array_is_elided_in_the_middle_not_cut():
    from infer_prof.results.failed_run import shorten

    ids = ", ".join(str(i) for i in range(74, 74 + 1024))
    detail = f"litellm.BadRequestError: OpenAIException - prompt=[{ids}] is not a string"
    short = shorten(detail)
    assert "[74, 75, 76, 77, ... 1,019 more ..., 1097]" in short
    assert short.endswith("is not a string") and len(short) < 240
    html = "<html><head><title>502 Bad Gateway</title></head><body><h1>502</h1></body></html>"
    assert shorten(html) == "502 Bad Gateway 502"
    assert " ... " in shorten("x" * 1000, 100) and len(shorten("x" * 1000, 100)) <= 100


def test_the_hint_names_the_likely_fix():
    from infer_prof.results.failed_run import failure_hint

    vocab = failure_hint("http_400", "Token id 31876 is out of vocabulary", "token-ids", "tiny")
    assert "--model's tokenizer (tiny)" in vocab and "--prompt text" in vocab
    refused = failure_hint("http_500", "prompt must be a string", "token-ids")
    assert "--prompt text" in refused and "--api chat" in refused
    assert failure_hint("http_500", "boom", "text") is None  # text prompts: no such advice
    assert "--api-key" in failure_hint("http_401", "no", "token-ids")


def test_a_warm_up_that_failed_whole_is_one_line(tmp_path: Path):
    from infer_prof.results.failed_run import warmup_failed

    path = tmp_path / "r.requests.jsonl"
    ids = ", ".join(["253"] * 300)
    write_requests(path, [RequestRecord(index=-i, input_len=8, max_tokens=4, warmup=True,
                                        error="http_500", error_detail=f"prompt=[{ids}] refused")
                          for i in range(1, 5)])
    result = result_of(incomplete_reason="warmup_failed", config={"prompt": "token-ids"},
                       model={"name": "llama-2-7b"})
    line = warmup_failed(result, path)
    assert line.startswith("every warm-up request failed, so the load was not sent (http_500: 4)")
    assert "... 295 more ..." in line and "--prompt text" in line
    assert warmup_failed(result_of(incomplete_reason=None), path) is None
