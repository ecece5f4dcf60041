"""A small OpenAI-compatible completions server for the quality check's tests: it adds the
sums a task file asks (``a+b=``), wrong on the items ``wrong`` names, and scores a prompt's
characters with known log-probabilities (each character after the first ln ``p_char``, its
top-2 the character and ``"#"``). ``logprobs=False`` answers without log-probabilities;
``fail_after`` answers HTTP 500 from that many requests on. A streamed request (the load of
``run --endpoint``) gets ``max_tokens`` tokens ``" x"`` as server-sent events, vLLM's
completions form, with the usage in the last chunk."""

from __future__ import annotations

import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Behaviour:
    model: str = "adder"
    wrong: set[str] = field(default_factory=set)  # prompts answered wrong
    p_char: float = 0.5
    logprobs: bool = True
    fail_after: int | None = None
    requests: int = 0


def _answer(b: Behaviour, body: dict) -> tuple[int, dict]:
    b.requests += 1
    if b.fail_after is not None and b.requests > b.fail_after:
        return 500, {"error": "engine died"}
    prompt = body["prompt"]
    if body.get("echo"):
        n = len(prompt)
        lp = {"tokens": list(prompt) + ["\n"],
              "token_logprobs": [None] + [math.log(b.p_char)] * (n - 1) + [-0.1],
              "top_logprobs": [None] + [{c: math.log(b.p_char), "#": math.log(0.1)}
                                        for c in prompt[1:]] + [{"\n": -0.1}]}
        choice = {"text": prompt + "\n", "logprobs": lp if b.logprobs else None}
        return 200, {"choices": [choice], "usage": {"prompt_tokens": n, "completion_tokens": 1}}
    m = re.fullmatch(r"(\d+)\+(\d+)=", prompt)
    total = int(m.group(1)) + int(m.group(2)) if m else 0
    text = str(total + 1 if prompt in b.wrong else total)
    return 200, {"choices": [{"text": text, "logprobs": None}], "usage": {"prompt_tokens": 4}}


class QualityServer:
    """The server on 127.0.0.1 (``url``), in a thread; ``stop()`` ends it."""

    def __init__(self, behaviour: Behaviour) -> None:
        b = self.behaviour = behaviour

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if body.get("stream"):
                    self._stream(int(body.get("max_tokens") or 8))
                    return
                status, reply = _answer(b, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, n: int) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()  # HTTP/1.0: the body ends when the connection closes
                for i in range(1, n + 1):
                    usage = {"prompt_tokens": 8, "completion_tokens": i,
                             "total_tokens": 8 + i}
                    chunk = {"object": "text_completion", "model": b.model, "usage": usage,
                             "choices": [{"index": 0, "text": " x", "logprobs": None,
                                          "finish_reason": "length" if i == n else None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(0.002)
                last = {"object": "text_completion", "model": b.model, "choices": [],
                        "usage": {"prompt_tokens": 8, "completion_tokens": n,
                                  "total_tokens": 8 + n}}
                self.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())

            def do_GET(self) -> None:  # noqa: N802 (http.server's name): /v1/models
                data = json.dumps({"object": "list", "data": [{"id": b.model}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
