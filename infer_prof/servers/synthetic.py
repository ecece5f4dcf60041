"""A synthetic OpenAI-compatible streaming server with known timing, honest about it.

It answers ``POST /v1/completions`` with ``stream: true`` by sending the first token ``ttft_ms``
after the request *arrived* and then one token every ``itl_ms``, ``max_tokens`` in all, with
per-chunk usage as vLLM sends it. It is the reference the load generator is checked against
(``infer-prof calibrate`` and the integration tests).

Honesty: a request's arrival is the kernel's receive timestamp of its first byte
(``SO_TIMESTAMPNS``), not when a busy event loop got round to reading it; each token's send time
is taken right after the ``send`` call returned. Both are on the ``perf_counter`` clock, which is
the same in every process of a machine, so ``GET /truth`` gives per-request ground truth that a
client's own measurements can be compared with: true TTFT = first_sent - arrival, true ITL = gaps
between sends. Scheduling is by ``loop.call_at``; if the server itself runs late, the truth says so.

Run it as ``python -m infer_prof.servers.synthetic --port 0 --ttft-ms 50 --itl-ms 15``; it prints
``LISTENING <port>`` on stdout once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from infer_prof.loadgen.client import _CMSG_SPACE, SO_TIMESTAMPNS, kernel_arrival_ns

MODEL_NAME = "synthetic"


@dataclass
class _Stream:
    conn: _Conn
    index: int
    arrival_ns: int
    prompt_tokens: int
    max_tokens: int
    request_id: str | None = None
    sent: int = 0
    send_ns: list[int] = field(default_factory=list)
    handle: asyncio.TimerHandle | None = None


class SyntheticServer:
    """The server's state: listening socket, connections, truth records."""

    def __init__(
        self,
        ttft_ms: float,
        itl_ms: float,
        default_tokens: int = 128,
        hang_every: int = 0,
        fail_every: int = 0,
    ) -> None:
        self.hang_every = hang_every  # every n-th request stalls after 3 tokens (fault tests)
        self.fail_every = fail_every  # every n-th request is answered HTTP 500 (fault tests)
        self.ttft_ns = int(ttft_ms * 1e6)
        self.itl_ns = int(itl_ms * 1e6)
        self.default_tokens = default_tokens
        self.truth: list[dict[str, Any]] = []
        self.next_index = 0
        self.loop = asyncio.get_event_loop()
        self.conns: set[_Conn] = set()

    async def serve(self, host: str, port: int) -> None:
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind((host, port))
        lsock.listen(4096)
        lsock.setblocking(False)
        print(f"LISTENING {lsock.getsockname()[1]}", flush=True)
        while True:
            sock, _ = await self.loop.sock_accept(lsock)
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            import os
            cc = os.environ.get("SYN_CC")
            if cc:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
            self.conns.add(_Conn(self, sock))

    # --- request handling -------------------------------------------------------------
    def handle(
        self,
        conn: _Conn,
        method: str,
        path: str,
        body: bytes,
        arrival_ns: int,
        request_id: str | None = None,
    ) -> None:
        if method == "POST" and path.endswith("/v1/completions"):
            try:
                req = json.loads(body or b"{}")
            except ValueError:
                conn.respond(400, {"error": {"message": "body is not JSON"}})
                return
            prompt = req.get("prompt", "")
            if isinstance(prompt, list):
                prompt_tokens = len(prompt)
            else:
                prompt_tokens = max(1, len(str(prompt).split()))
            max_tokens = int(req.get("max_tokens") or self.default_tokens)
            if not req.get("stream"):
                conn.respond(400, {"error": {"message": "only stream=true is implemented"}})
                return
            n = self.next_index + 1
            if self.fail_every and n % self.fail_every == 0:
                self.next_index += 1
                conn.respond(500, {"error": {"message": "synthetic failure"}})
                return
            stream = _Stream(
                conn, self.next_index, arrival_ns, prompt_tokens, max_tokens, request_id
            )
            self.next_index += 1
            conn.send_raw(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            due_s = (arrival_ns + self.ttft_ns) / 1e9
            stream.handle = self.loop.call_at(self._loop_time(due_s), self._tick, stream)
            conn.active = stream
        elif path == "/health":
            conn.respond(200, None)
        elif path.endswith("/v1/models"):
            conn.respond(200, {"object": "list", "data": [{"id": MODEL_NAME, "object": "model"}]})
        elif path == "/truth":
            conn.respond(
                200, {"ttft_ns": self.ttft_ns, "itl_ns": self.itl_ns, "requests": self.truth}
            )
        elif path == "/truth/reset":
            self.truth = []
            conn.respond(200, {"ok": True})
        elif path == "/metrics":
            running = sum(1 for c in self.conns if c.active is not None)
            text = (
                f"# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{model_name="{MODEL_NAME}"}} {running}\n'
                f"# TYPE vllm:num_requests_waiting gauge\n"
                f'vllm:num_requests_waiting{{model_name="{MODEL_NAME}"}} 0\n'
            )
            conn.respond(200, text.encode(), content_type="text/plain")
        else:
            conn.respond(404, {"error": {"message": f"no route {method} {path}"}})

    def _loop_time(self, perf_s: float) -> float:
        # asyncio's loop.time() is time.monotonic(); perf_counter is the same clock on Linux,
        # but take the offset to be safe.
        return perf_s - time.perf_counter() + self.loop.time()

    def _tick(self, s: _Stream) -> None:
        s.sent += 1
        last = s.sent >= s.max_tokens
        event = {
            "id": f"cmpl-{s.index}",
            "object": "text_completion",
            "model": MODEL_NAME,
            "choices": [
                {
                    "index": 0,
                    "text": " tok",
                    "logprobs": None,
                    "finish_reason": "length" if last else None,
                }
            ],
            "usage": {
                "prompt_tokens": s.prompt_tokens,
                "completion_tokens": s.sent,
                "total_tokens": s.prompt_tokens + s.sent,
            },
        }
        data = b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"
        if last:
            final = {
                "id": f"cmpl-{s.index}",
                "object": "text_completion",
                "model": MODEL_NAME,
                "choices": [],
                "usage": event["usage"],
            }
            data += b"data: " + json.dumps(final, separators=(",", ":")).encode() + b"\n\n"
            data += b"data: [DONE]\n\n"
            payload = b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)
        else:
            payload = b"%x\r\n%s\r\n" % (len(data), data)
        if not s.conn.send_raw(payload):
            self._finish(s, aborted=True)
            return
        s.send_ns.append(time.perf_counter_ns())
        if last:
            self._finish(s, aborted=False)
        elif self.hang_every and (s.index + 1) % self.hang_every == 0 and s.sent >= 3:
            s.handle = None  # stall: the stream stays open and silent
        else:
            due = (s.arrival_ns + self.ttft_ns + s.sent * self.itl_ns) / 1e9
            s.handle = self.loop.call_at(self._loop_time(due), self._tick, s)

    def _finish(self, s: _Stream, aborted: bool) -> None:
        s.conn.active = None
        self.truth.append(
            {
                "index": s.index,
                "request_id": s.request_id,
                "arrival_ns": s.arrival_ns,
                "send_ns": s.send_ns,
                "prompt_tokens": s.prompt_tokens,
                "aborted": aborted,
            }
        )
        s.conn.request_done()


class _Conn:
    """One client connection: reads requests (with kernel arrival times), writes responses."""

    def __init__(self, server: SyntheticServer, sock: socket.socket) -> None:
        self.server = server
        self.sock = sock
        self.buf = bytearray()
        self.arrival_ns: int | None = None
        self.active: _Stream | None = None
        self.pending = bytearray()
        server.loop.add_reader(sock.fileno(), self._on_readable)

    def _on_readable(self) -> None:
        try:
            data, anc, _, _ = self.sock.recvmsg(65536, _CMSG_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        if not data:
            self.close()
            return
        if not self.buf:
            self.arrival_ns = kernel_arrival_ns(anc) or time.perf_counter_ns()
        self.buf += data
        self._try_parse()

    def _try_parse(self) -> None:
        if self.active is not None:
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        method, path = (head[0].split(" ") + ["", ""])[:2]
        length = 0
        request_id = None
        for line in head[1:]:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            if key == "content-length":
                length = int(value.strip())
            elif key == "x-request-id":
                request_id = value.strip()
        if len(self.buf) < end + 4 + length:
            return
        body = bytes(self.buf[end + 4 : end + 4 + length])
        del self.buf[: end + 4 + length]
        arrival = self.arrival_ns or time.perf_counter_ns()
        self.arrival_ns = time.perf_counter_ns() if self.buf else None
        self.server.handle(self, method, path, body, arrival, request_id)

    def request_done(self) -> None:
        if self.buf:
            self._try_parse()

    def send_raw(self, data: bytes) -> bool:
        """Send now; what the socket cannot take yet is queued and flushed when writable."""
        if self.pending:
            self.pending += data
            return True
        try:
            sent = self.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.close()
            return False
        if sent < len(data):
            self.pending += data[sent:]
            self.server.loop.add_writer(self.sock.fileno(), self._flush)
        return True

    def _flush(self) -> None:
        try:
            sent = self.sock.send(self.pending)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        del self.pending[:sent]
        if not self.pending:
            self.server.loop.remove_writer(self.sock.fileno())

    def respond(self, status: int, obj: Any, content_type: str = "application/json") -> None:
        body = obj if isinstance(obj, bytes) else (b"" if obj is None else json.dumps(obj).encode())
        reason = {
            200: "OK",
            400: "Bad Request",
            404: "Not Found",
            500: "Internal Server Error",
        }.get(status, "Error")
        head = (
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode()
        self.send_raw(head + body)
        self.request_done()

    def close(self) -> None:
        if self.sock.fileno() < 0:
            return
        self.server.loop.remove_reader(self.sock.fileno())
        self.server.loop.remove_writer(self.sock.fileno())
        if self.active is not None and self.active.handle is not None:
            self.active.handle.cancel()
            self.server._finish(self.active, aborted=True)
        self.sock.close()
        self.server.conns.discard(self)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--itl-ms", type=float, default=15.0)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument(
        "--hang-every",
        type=int,
        default=0,
        help="every n-th request goes silent after 3 tokens (fault tests)",
    )
    parser.add_argument(
        "--fail-every",
        type=int,
        default=0,
        help="every n-th request is answered HTTP 500 (fault tests)",
    )
    args = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server = SyntheticServer(
        args.ttft_ms, args.itl_ms, args.output_tokens, args.hang_every, args.fail_every
    )
    loop.add_signal_handler(signal.SIGTERM, loop.stop)
    try:
        loop.run_until_complete(server.serve(args.host, args.port))
    except RuntimeError:  # loop stopped by SIGTERM
        pass
    finally:
        sys.stdout.flush()


if __name__ == "__main__":
    main()
