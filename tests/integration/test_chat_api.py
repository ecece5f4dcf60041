"""``infer-prof run --api chat`` against a real local chat server (a socket server in this
test, streaming as SGLang does: a role-only first chunk, no per-chunk usage, the usage in a last
event with empty choices), and the API key: sent on every request, written nowhere."""

from __future__ import annotations

import json
import os
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infer_prof.results.schema import load_result
from infer_prof.results.store import read_requests

from .conftest import cli

pytestmark = pytest.mark.integration
TEMPLATE_TOKENS = 9  # what this server says its "chat template" added to every prompt


def _chunk(obj: dict) -> bytes:
    data = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


class ChatServer:
    """Answers GET /v1/models and streaming POST /v1/chat/completions on kept-alive
    connections; records each request's line, Authorization header and JSON body."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, dict | None]] = []
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                while True:
                    line = self.rfile.readline()
                    if not line:
                        return
                    headers: dict[str, str] = {}
                    while (h := self.rfile.readline()) not in (b"\r\n", b""):
                        k, _, v = h.decode().partition(":")
                        headers[k.strip().lower()] = v.strip()
                    raw = self.rfile.read(int(headers.get("content-length", "0")))
                    body = json.loads(raw) if raw else None
                    path = line.decode().split(" ")[1]
                    outer.seen.append((path, headers.get("authorization"), body))
                    if path.endswith("/v1/models"):
                        data = json.dumps({"object": "list", "data": [{"id": "canned"}]}).encode()
                        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                         b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
                                         % (len(data), data))
                        return
                    if not path.endswith("/v1/chat/completions") or body is None:
                        self.wfile.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                        continue
                    self._stream(body)

            def _stream(self, body: dict) -> None:
                n = int(body["max_completion_tokens"])
                prompt = 40 + TEMPLATE_TOKENS  # the run asks for 40-token prompts
                base = {"id": "x", "object": "chat.completion.chunk", "model": "canned"}
                w = self.wfile
                w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                        b"transfer-encoding: chunked\r\n\r\n")
                w.write(_chunk({**base, "choices": [{"index": 0, "delta": {
                    "role": "assistant", "content": ""}, "finish_reason": None}], "usage": None}))
                w.flush()
                for i in range(n):
                    time.sleep(0.002)
                    w.write(_chunk({**base, "choices": [{"index": 0, "delta": {
                        "content": f" w{i}"}, "finish_reason": "length" if i == n - 1 else None}],
                        "usage": None}))
                    w.flush()
                w.write(_chunk({**base, "choices": [], "usage": {
                    "prompt_tokens": prompt, "completion_tokens": n,
                    "total_tokens": prompt + n}}))
                w.write(b"e\r\ndata: [DONE]\n\n\r\n")
                w.write(b"0\r\n\r\n")
                w.flush()

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    s = ChatServer()
    yield s
    s.close()


def _run(server: ChatServer, tmp_path: Path, *extra: str, env: dict | None = None):
    out = tmp_path / "results" / "chat.json"
    args = ("run", "--model", "tiny-llama", "--endpoint", server.url + "/v1", "--api", "chat",
            "-c", "2", "-n", "6", "--warmup", "none", "--input-len", "40", "--output-len", "5",
            "--results-dir", str(tmp_path / "results"), "--output", str(out),
            "--history-db", str(tmp_path / "history.sqlite"), *extra)
    if env is None:
        return cli(*args), out
    import subprocess
    import sys

    from .conftest import REPO

    p = subprocess.run([sys.executable, "-m", "infer_prof", *args], capture_output=True,
                       text=True, timeout=300, cwd=REPO, env={**os.environ, **env})
    return p, out


def test_chat_run_reports_template_tokens_and_how_tokens_were_counted(chat_server, tmp_path):
    p, out = _run(chat_server, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    result = load_result(out)
    api = result["api"]
    assert api["name"] == "chat" and api["path"] == "/v1/chat/completions"
    # no per-chunk usage: the split is counted per chunk, the total from the final usage
    assert api["token_count_source"] == "usage_total"
    assert api["chat_template_tokens"] == {"mean": TEMPLATE_TOKENS, "min": TEMPLATE_TOKENS,
                                           "max": TEMPLATE_TOKENS, "requests": 6}
    assert "chat template prompt tokens" in p.stdout and "usage at the end only" in p.stdout
    # every request's prompt made and bytes built before the load (loadgen.prepared)
    assert result["client"]["prepared_requests"] == 6
    assert result["client"]["requests_built_at_send"] == 0
    chats = [b for path, _, b in chat_server.seen if path == "/v1/chat/completions"]
    assert len(chats) == 6
    for body in chats:
        msgs = body["messages"]
        assert len(msgs) == 1 and msgs[0]["role"] == "user" and msgs[0]["content"]
        assert body["max_completion_tokens"] == 5 and body["max_tokens"] == 5
        assert body["stream"] is True and body["ignore_eos"] is True
        assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    recs = [r for r in read_requests(out.with_name("chat.requests.jsonl")) if not r.warmup]
    assert len(recs) == 6 and all(r.ok for r in recs)
    # the role-only first chunk is no token: 5 token chunks, the first one timed
    assert all(r.chunk_tokens == [1] * 5 and r.output_tokens == 5 for r in recs)
    assert all(r.prompt_tokens == 40 + TEMPLATE_TOKENS for r in recs)


def test_chat_refuses_token_id_prompts(chat_server, tmp_path):
    p, _ = _run(chat_server, tmp_path, "--prompt", "token-ids")
    assert p.returncode == 2
    assert "--api chat" in p.stderr and "token-ids" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.parametrize("how", ["flag", "env"])
def test_api_key_is_sent_and_written_nowhere(chat_server, tmp_path, how):
    key = "sk-infer-prof-SECRET-" + how
    if how == "flag":
        p, out = _run(chat_server, tmp_path, "--api-key", key)
    else:
        p, out = _run(chat_server, tmp_path, env={"OPENAI_API_KEY": key})
    assert p.returncode == 0, p.stderr[-3000:]
    # the server got it on every request (/v1/models and each chat request)
    assert chat_server.seen and all(auth == f"Bearer {key}" for _, auth, _ in chat_server.seen)
    # ... and no file the run wrote (result, requests, history database), no output line has it
    files = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert out in files and (tmp_path / "history.sqlite") in files
    for f in files:
        assert key.encode() not in f.read_bytes(), f
    assert key not in p.stdout and key not in p.stderr
    assert load_result(out)["config"]["api_key"] == "***"


def test_a_messages_dataset_is_sent_as_its_messages(chat_server, tmp_path):
    data = Path(__file__).parent.parent / "fixtures" / "datasets" / "messages.jsonl"
    out = tmp_path / "results" / "ds.json"
    p = cli("run", "--model", "tiny-llama", "--endpoint", chat_server.url, "--api", "chat",
            "--dataset", str(data), "-c", "1", "-n", "4", "--warmup", "none", "--no-history",
            "--results-dir", str(tmp_path / "results"), "--output", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    want = []
    for line in data.read_text().splitlines():
        msgs = json.loads(line)["messages"]
        if len(msgs) > 1 and msgs[-1]["role"] == "assistant":
            msgs = msgs[:-1]  # the answer gives the output length; it is not sent
        want.append(msgs)
    sent = [b["messages"] for path, _, b in chat_server.seen if path == "/v1/chat/completions"]
    assert sent == want
    result = load_result(out)
    assert result["config"]["api"] == "chat" and result["config"]["dataset"]["format"] == "messages"


def _sent_messages(server: ChatServer) -> list[list[dict]]:
    return [b["messages"] for path, _, b in server.seen if path == "/v1/chat/completions"]


def test_synthetic_sessions_go_as_alternating_chat_messages(chat_server, tmp_path):
    """--turns with --api chat: each turn resends the conversation as messages (the earlier
    user messages and answer stand-ins, then the new user message), not one flattened text."""
    out = tmp_path / "results" / "s.json"
    p = cli("run", "--model", "tiny-llama", "--endpoint", chat_server.url, "--api", "chat",
            "--turns", "3", "-c", "1", "-n", "3", "--warmup", "none", "--input-len", "12",
            "--output-len", "5", "--no-history", "--results-dir", str(tmp_path / "results"),
            "--output", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    sent = _sent_messages(chat_server)
    assert [[m["role"] for m in msgs] for msgs in sent] == [
        ["user"], ["user", "assistant", "user"], ["user", "assistant", "user", "assistant", "user"]]
    assert sent[1][:1] == sent[0] and sent[2][:3] == sent[1]  # each turn holds the last one
    assert all(isinstance(m["content"], str) and m["content"] for m in sent[2])
    result = load_result(out)
    assert result["config"]["sessions"]["prompt"] == "messages"
    # every turn made and built before the load, none at its send (loadgen.prepared)
    assert (result["client"]["prepared_requests"], result["client"]["requests_built_at_send"]) \
        == (3, 0)
    recs = sorted((r for r in read_requests(out.with_name("s.requests.jsonl")) if not r.warmup),
                  key=lambda r: r.index)
    # the messages' own tokens: 12 per user message, 5 per answer stand-in
    assert [r.input_len for r in recs] == [12, 29, 46]
    assert all(r.ok for r in recs)


def test_sharegpt_sessions_go_as_the_datas_chat_messages(chat_server, tmp_path):
    data = Path(__file__).parent.parent / "fixtures" / "datasets" / "sharegpt.json"
    out = tmp_path / "results" / "g.json"
    p = cli("run", "--model", "tiny-llama", "--endpoint", chat_server.url, "--api", "chat",
            "--turns", "4", "--dataset", str(data), "-c", "1", "-n", "4", "--output-len", "5",
            "--warmup", "none", "--no-history", "--results-dir", str(tmp_path / "results"),
            "--output", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    convs = json.loads(data.read_text())
    first = convs[0]["conversations"]  # a1: two human/gpt pairs
    sent = _sent_messages(chat_server)
    assert sent[0] == [{"role": "user", "content": first[0]["value"]}]
    assert sent[1] == [{"role": "user", "content": first[0]["value"]},
                       {"role": "assistant", "content": first[1]["value"]},
                       {"role": "user", "content": first[2]["value"]}]
    assert load_result(out)["config"]["sessions"]["prompt"] == "messages"
