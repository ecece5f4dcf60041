"""The chat API's request, configuration and result block (pure parts), and the SSE parser's
error fields; the wire and end-to-end behaviour is tested in tests/integration."""

from __future__ import annotations

import json

import msgspec
import pytest
from typer.testing import CliRunner

from infer_prof.cli import app
from infer_prof.core.measurement.api_tokens import api_block
from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.workload.workload_fields import WorkloadError
from infer_prof.core.workload.workloads import Workload
from infer_prof.loadgen.client import chunk_tokens_of, error_message
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.loadgen.http_stream import SseResponseParser
from infer_prof.loadgen.openai_requests import (
    build_chat_request,
    build_completion_request,
    chat_messages,
)
from infer_prof.run.config import ConfigError, RunConfig, resolve_api
from infer_prof.run.load_points import prompt_mode


def _body(req: bytes) -> tuple[str, dict]:
    head, _, body = req.partition(b"\r\n\r\n")
    return head.decode(), json.loads(body)


def test_chat_request_sends_messages_with_the_same_asks_as_completions():
    ep = Endpoint.from_url("http://h:8000/prefix/v1", api_key="k1")
    head, body = _body(build_chat_request(ep, "m", chat_messages("hello"), 7, request_id="r-1"))
    assert head.startswith("POST /prefix/v1/chat/completions HTTP/1.1\r\n")
    assert "Authorization: Bearer k1" in head and "X-Request-Id: r-1" in head
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert body["max_completion_tokens"] == 7 and body["max_tokens"] == 7
    assert body["min_tokens"] == 7 and body["ignore_eos"] is True
    assert body["stream"] is True and body["temperature"] == 0.0
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    _, plain = _body(build_chat_request(ep, "m", chat_messages("x"), 3, ignore_eos=False))
    assert "ignore_eos" not in plain and "min_tokens" not in plain
    _, comp = _body(build_completion_request(ep, "m", "x", 3))
    assert {k for k in comp if k != "prompt"} == {k for k in body if k not in (
        "messages", "max_completion_tokens")}


def test_chat_messages_text_messages_and_token_ids():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert chat_messages(msgs) == msgs and chat_messages(msgs) is not msgs
    with pytest.raises(ValueError, match="--prompt text"):
        chat_messages([1, 2, 3])
    with pytest.raises(ValueError, match="--api chat"):
        build_completion_request(Endpoint("h", 1), "m", msgs, 3)


@pytest.mark.parametrize("choice,tokens", [
    ({"delta": {"role": "assistant", "content": ""}}, 0),
    ({"delta": {"role": "assistant", "content": None}}, 0),
    ({"delta": {}}, 0),
    ({"delta": {"content": "x"}}, 1),
    ({"delta": {"reasoning_content": "think", "content": None}}, 1),
    ({"delta": {"reasoning": "think"}}, 1),
    ({"delta": {"tool_calls": [{"index": 0}]}}, 1),
    ({"text": " a"}, 1),
    ({"text": ""}, 0),
    ({"text": " a b", "token_ids": [5, 6]}, 2),
])
def test_tokens_of_a_chunk_without_usage(choice, tokens):
    assert chunk_tokens_of(choice) == tokens


def test_error_messages_of_each_server():
    assert error_message({"message": "m1", "type": "BadRequestError"}) == "m1"
    assert error_message({"error": {"code": 500, "message": "m2"}}) == "m2"
    assert error_message("m3") == "m3"


def test_sse_error_field_and_error_event_become_error_objects():
    p = SseResponseParser()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
    events = p.feed(head + b"data:{\"a\":1}\r\n\r\n: ping\r\n\r\nerror: {\"error\":{\"message\":"
                    b"\"boom\"}}\n\nevent: error\ndata: plain text\n\ndata:  two spaces\n\n", 1)
    assert [e for e, _ in events] == [b'{"a":1}', b'{"error":{"message":"boom"}}',
                                      b'{"error":"plain text"}', b" two spaces"]


def test_workload_api_field_and_resolution():
    base = {"input_len": 8, "output_len": 4, "num_requests": 2}
    w = Workload.from_dict({**base, "api": "chat"}, "w.toml", "w")
    assert w.api == "chat" and Workload.from_dict(w.to_dict(), "again").api == "chat"
    assert Workload.from_dict(base, "w.toml", "w").api is None
    with pytest.raises(WorkloadError, match="api"):
        Workload.from_dict({**base, "api": "responses"}, "w.toml", "w")
    assert resolve_api(RunConfig().engine, [None]) == "completions"
    assert resolve_api(RunConfig().engine, ["chat", None]) == "chat"
    assert resolve_api(RunConfig(api="completions").engine, ["chat"]) == "completions"
    with pytest.raises(ConfigError, match="--api"):
        resolve_api(RunConfig().engine, ["chat", "completions"])


def test_chat_prompts_are_text_by_default():
    assert prompt_mode(RunConfig(api="chat"), None) == "text"
    assert prompt_mode(RunConfig(api="completions"), None) == "token-ids"


def test_token_id_prompts_with_chat_are_refused_in_one_line():
    r = CliRunner().invoke(app, ["run", "--model", "llama-2-7b", "--endpoint",
                                 "http://127.0.0.1:9", "--api", "chat", "--prompt", "token-ids"])
    assert r.exit_code == 2
    out = (r.stderr if r.stderr_bytes is not None else r.output).strip()
    assert "--api chat" in out and "token-ids" in out and len(out.splitlines()) == 1
    r = CliRunner().invoke(app, ["run", "--model", "llama-2-7b", "--endpoint",
                                 "http://127.0.0.1:9", "--api", "responses"])
    assert r.exit_code == 2 and "--api must be completions or chat" in (r.stderr or r.output)


def _rec(i: int, source: str, prompt_tokens: int | None, warmup: bool = False) -> RequestRecord:
    return RequestRecord(index=i, input_len=10, max_tokens=2, warmup=warmup, send_ns=0,
                         chunk_ns=[1, 2], chunk_tokens=[1, 1], done_ns=3,
                         prompt_tokens=prompt_tokens, output_tokens=2, token_count_source=source)


def test_api_block_template_tokens_and_the_run_label():
    recs = [_rec(0, "usage", 14), _rec(1, "usage", 16), _rec(2, "chunks", 99, warmup=True)]
    b = api_block("chat", recs)
    assert b.path == "/v1/chat/completions" and b.token_count_source == "usage"
    assert msgspec.to_builtins(b.chat_template_tokens) == {
        "mean": 5.0, "min": 4, "max": 6, "requests": 2}
    mixed = api_block("chat", [_rec(0, "usage", None), _rec(1, "usage_total", None),
                               _rec(2, "usage_total", None)])
    assert mixed.token_count_source == "usage_total+usage"  # never one word for a mix
    assert mixed.token_count_sources == {"usage_total": 2, "usage": 1}
    assert mixed.chat_template_tokens is None
    assert "prompt_tokens" in (mixed.chat_template_tokens_reason or "")
    comp = api_block("completions", [_rec(0, "chunks", 10)])
    assert comp.chat_template_tokens is None and comp.token_count_source == "chunks"
    assert api_block("chat", []).token_count_source is None


def test_a_chat_result_is_another_configuration_and_completions_fingerprints_stay():
    from infer_prof.results.document import decode_result as typed
    from infer_prof.results.identity import config_fields, config_fingerprint

    base = {"kind": "infer-prof.run", "schema_version": 1, "run_id": "r", "summary": {},
            "config": {"model": "m", "concurrency": 4}, "model": {"name": "m"}}
    old = config_fingerprint(typed(base))
    comp = {**base, "config": {**base["config"], "api": "completions"}}
    chat = {**base, "config": {**base["config"], "api": "chat"}}
    assert config_fingerprint(typed(comp)) == old and "api" not in config_fields(typed(comp))
    assert config_fingerprint(typed(chat)) != old and config_fields(typed(chat))["api"] == "chat"


def test_chat_on_a_started_server_needs_a_chat_template(tmp_path):
    import json
    import shutil

    from infer_prof.catalog.tinymodel import ensure_tiny_llama
    from infer_prof.run.load_points import check_chat_template

    folder = tmp_path / "no-template"  # tiny-llama without its chat template
    shutil.copytree(ensure_tiny_llama(), folder)
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    tiny = str(folder)
    r = CliRunner().invoke(app, ["run", "--no-progress", "--no-history", "--model", tiny,
                                 "--api", "chat", "--results-dir", str(tmp_path)])
    assert r.exit_code == 2
    out = (r.stderr or r.output).strip()
    assert "no chat template" in out and "--chat-template" in out
    assert len(out.splitlines()) == 1
    check_chat_template(RunConfig(api="chat", engine_args=["--chat-template=t.jinja"]).engine, tiny)
    check_chat_template(RunConfig(api="chat", endpoint="http://h:1").engine, tiny)
    check_chat_template(RunConfig(api="completions").engine, tiny)
    check_chat_template(RunConfig(api="chat").engine, str(ensure_tiny_llama()))  # it has one
    with pytest.raises(ConfigError, match="no chat template"):
        check_chat_template(RunConfig(api="chat").engine, tiny)
