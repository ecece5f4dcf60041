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
between sends. If the server itself runs late, the truth says so.

Cheap at 1000+ streams (it shares the machine with the client it checks): token sends due within
the same ``tick_ms`` (0.5 ms) are made by one timer callback, at the tick's end, and each event's
bytes come from a precomputed template (``bytes %`` formatting, no JSON encoder). Under uvloop,
whose clock counts whole milliseconds, a timer can fire up to ~1 ms before its tick ends, so a
true TTFT can read a little under ``ttft_ms`` (49.7 ms for 50 once in CI); the truth records the
actual sends, which is what the client is checked against.
With ``--tick-ms 0`` every token gets its own timer.

A real server costs CPU on the host it shares with the client (vLLM's API server detokenizes and
serialises every chunk). ``--cost-us N`` makes this one burn N us of its own CPU time per streamed
token (a busy-wait on ``time.thread_time_ns``, before the token's send), so the client can be
judged beside a server that takes its share of the cores: at 1024 streams and 15 ms between
tokens, 15 us per token is about one core.

Run it as ``python -m infer_prof.servers.synthetic --port 0 --ttft-ms 50 --itl-ms 15``; it prints
``LISTENING <port>`` on stdout once it accepts connections.

``POST /v1/chat/completions`` streams chat chunks, thinking first with ``--reasoning-tokens R``
(:mod:`infer_prof.servers.synthetic_events`; the truth's ``reasoning_tokens`` give true TTFO).

With ``--tls-cert FILE --tls-key FILE`` it speaks HTTPS, with TLS done over the same raw sockets
(``ssl.SSLObject`` on ``MemoryBIO``s, in :mod:`infer_prof.servers.synthetic_conn`): a request's
arrival is still the kernel's receive time, of the segment that completed the TLS record holding
its first byte, and a token's send time is taken after its encrypted record was handed to
``send``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import signal
import socket
import ssl
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from infer_prof.loadgen.endpoint import no_pacing
from infer_prof.loadgen.stamped_reader import SO_TIMESTAMPNS
from infer_prof.servers.cpu_burn import burn_cpu, cpu_clock_call_ns
from infer_prof.servers.synthetic_conn import Conn
from infer_prof.servers.synthetic_events import (
    CHAT_PREFIX,
    EVENT_PREFIX,
    EVENT_TAIL,
    LAST_EVENT,
    LAST_EVENT_CACHED,
    MODEL_NAME,
    THINK_PREFIX,
    last_chat_event,
)
from infer_prof.servers.synthetic_prefix_cache import SyntheticPrefixCache

__all__ = ["MODEL_NAME", "SyntheticServer", "main"]


@dataclass
class Stream:
    """One streamed completion: the request's arrival (perf_counter ns), its token counts, the
    send time of every token sent so far, and its place in the send schedule."""

    conn: Conn
    index: int
    arrival_ns: int
    prompt_tokens: int
    max_tokens: int
    request_id: str | None = None
    sent: int = 0
    send_ns: list[int] = field(default_factory=list)
    handle: asyncio.TimerHandle | None = None
    due_ns: int = 0
    cancelled: bool = False
    finished: bool = False
    prefix: bytes = b""  # the event up to the completion-token count (same for every token)
    cached: int | None = None  # prompt tokens found in the prefix cache (--prefix-cache-block)
    framed: bool = True  # chunked transfer encoding (HTTP/1.1); else the close ends the body
    itl_ns: int = 0  # this stream's gap between tokens (load-dependent with --itl-per-stream-ms)
    ttft_ns: int = 0  # this stream's time to first token (its LoRA adapter's, --lora NAME=MS)
    chat: bool = False  # /v1/chat/completions: chat chunks
    reasoning: int = 0  # the first `reasoning` tokens are thinking (chat, --reasoning-tokens)
    think_prefix: bytes = b""  # the event of a thinking token up to its completion-token count


class SyntheticServer:
    """The server's state: listening socket, connections, truth records."""

    def __init__(
        self,
        ttft_ms: float,
        itl_ms: float,
        default_tokens: int = 128,
        hang_every: int = 0,
        fail_every: int = 0,
        tick_ms: float = 0.5,
        ssl_context: ssl.SSLContext | None = None,
        cost_us: float = 0.0,
        itl_per_stream_ms: float = 0.0,
    ) -> None:
        self.ssl_context = ssl_context  # HTTPS when set
        if cost_us < 0:
            raise ValueError(f"cost_us must be >= 0, got {cost_us}")
        self.cost_ns = int(cost_us * 1000)  # CPU burnt per streamed token (see burn_cpu)
        # what to ask burn_cpu for, so that the burn, overshoot included, is cost_ns
        self._burn_ns = max(1, self.cost_ns - cpu_clock_call_ns()) if self.cost_ns else 0
        self.hang_every = hang_every  # every n-th request stalls after 3 tokens (fault tests)
        self.fail_every = fail_every  # every n-th request is answered HTTP 500 (fault tests)
        self.ttft_ns = int(ttft_ms * 1e6)
        self.itl_ns = int(itl_ms * 1e6)
        # --itl-per-stream-ms b: a request arriving with n streams in service (itself
        # included) gets ITL = itl_ms + b x n for all its tokens, as a batched engine's decode
        # step grows with its batch: a server whose speed falls with load in a known way
        if itl_per_stream_ms < 0:
            raise ValueError(f"itl_per_stream_ms must be >= 0, got {itl_per_stream_ms}")
        self.itl_slope_ns = int(itl_per_stream_ms * 1e6)
        self.active = 0  # streams in service (arrived, not finished)
        self.default_tokens = default_tokens
        self.truth: list[dict[str, Any]] = []
        self.next_index = 0
        self.loop = asyncio.get_event_loop()
        self.conns: set[Conn] = set()
        self.tick_ns = int(tick_ms * 1e6)
        self.buckets: dict[int, list[Stream]] = {}
        # --prefix-cache-block B: a prefix cache over token-ID prompts in blocks of B tokens
        # (servers.synthetic_prefix_cache); None: none, and no such counters
        self.prefix_cache: SyntheticPrefixCache | None = None
        # --empty-text: every token's event but the last has text "" (as a random-weight model's
        # partial UTF-8 sequences stream), its per-chunk usage still counting it
        self.event_prefix = EVENT_PREFIX
        self.reasoning_tokens = 0  # --reasoning-tokens: a chat stream's thinking tokens
        self.reasoning_usage = True  # the final usage counts them (completion_tokens_details)
        self.lora_ttft_ns: dict[str, int] = {}  # --lora NAME=TTFT_MS: adapters and their TTFT
        # perf_counter -> loop.time() offset (both CLOCK_MONOTONIC on Linux; measured anyway)
        self._loop_offset_s = self.loop.time() - time.perf_counter()

    async def serve(self, host: str, port: int) -> None:
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # accepted connections inherit it; it must be set before the handshake, since BBR
        # leaves pacing switched on for a connection even after a later switch
        self.congestion_control = no_pacing(lsock)
        lsock.bind((host, port))
        lsock.listen(4096)
        lsock.setblocking(False)
        print(f"LISTENING {lsock.getsockname()[1]}", flush=True)
        self.loop.add_reader(lsock.fileno(), self._accept_all, lsock)
        await self.loop.create_future()  # serve until the loop is stopped

    def _accept_all(self, lsock: socket.socket) -> None:
        for _ in range(256):
            try:
                sock, _addr = lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            self.conns.add(Conn(self, sock))

    # --- request handling -------------------------------------------------------------
    def handle(
        self,
        conn: Conn,
        method: str,
        path: str,
        body: bytes,
        arrival_ns: int,
        request_id: str | None = None,
    ) -> None:
        chat = path.endswith("/v1/chat/completions")
        if method == "POST" and (chat or path.endswith("/v1/completions")):
            try:
                req = json.loads(body or b"{}")
            except ValueError:
                conn.respond(400, {"error": {"message": "body is not JSON"}})
                return
            prompt, cached = req.get("prompt", ""), None
            if chat:  # the words of its messages
                prompt = " ".join(str(m.get("content", "")) for m in req.get("messages") or [])
            if isinstance(prompt, list):
                prompt_tokens = len(prompt)
                if self.prefix_cache is not None:
                    cached = self.prefix_cache.lookup(prompt)
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
            stream = Stream(
                conn, self.next_index, arrival_ns, prompt_tokens, max_tokens, request_id
            )
            stream.prefix = self.event_prefix % (stream.index, prompt_tokens)
            stream.cached = cached
            if chat:
                stream.chat, stream.reasoning = True, self.reasoning_tokens
                stream.prefix = CHAT_PREFIX % (stream.index, prompt_tokens)
                stream.think_prefix = THINK_PREFIX % (stream.index, prompt_tokens)
            self.active += 1
            stream.itl_ns = self.itl_ns + self.itl_slope_ns * self.active
            self.next_index += 1
            # HTTP/1.0 (nginx's default to an upstream): no chunked framing, the close ends
            # the body, as uvicorn answers it
            stream.framed = not conn.http10
            conn.send_raw(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                + (b"transfer-encoding: chunked\r\n\r\n" if stream.framed
                   else b"connection: close\r\n\r\n")
            )
            conn.active = stream
            stream.ttft_ns = self.lora_ttft_ns.get(str(req.get("model")), self.ttft_ns)
            self._schedule(stream, arrival_ns + stream.ttft_ns)
        elif path == "/health":
            conn.respond(200, None)
        elif path.endswith("/v1/models"):
            adapters = [{"id": n, "object": "model", "parent": MODEL_NAME}
                        for n in self.lora_ttft_ns]
            conn.respond(200, {"object": "list",
                               "data": [{"id": MODEL_NAME, "object": "model"}, *adapters]})
        elif path == "/truth":
            conn.respond(
                200,
                {
                    "ttft_ns": self.ttft_ns,
                    "itl_ns": self.itl_ns,
                    "itl_per_stream_ns": self.itl_slope_ns,
                    "cost_ns_per_token": self.cost_ns,
                    "requests": self.truth,
                },
            )
        elif method == "POST" and path == "/reset_prefix_cache":  # as vLLM's dev route
            if self.prefix_cache is not None:
                self.prefix_cache.reset()
            conn.respond(200, {"success": True})
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
            if self.prefix_cache is not None:
                text += self.prefix_cache.metrics_text(MODEL_NAME)
            conn.respond(200, text.encode(), content_type="text/plain")
        else:
            conn.respond(404, {"error": {"message": f"no route {method} {path}"}})

    def _loop_time(self, perf_ns: int) -> float:
        return perf_ns / 1e9 + self._loop_offset_s

    def _schedule(self, s: Stream, due_ns: int) -> None:
        """Send ``s``'s next token at ``due_ns`` (perf_counter ns), batched per tick."""
        s.due_ns = due_ns
        if self.tick_ns <= 0:
            s.handle = self.loop.call_at(self._loop_time(due_ns), self._send_one, s)
            return
        k = -(-due_ns // self.tick_ns)  # the tick that ends at or after due: never early
        bucket = self.buckets.get(k)
        if bucket is None:
            self.buckets[k] = [s]
            self.loop.call_at(self._loop_time(k * self.tick_ns), self._fire, k)
        else:
            bucket.append(s)

    def _fire(self, k: int) -> None:
        """Send every token due in tick ``k``: the hot path (68k tokens/s at 1024 streams),
        kept flat so that the server's own cost stays small next to the client it checks."""
        bucket = self.buckets.pop(k, None)
        if not bucket:
            return
        perf_ns = time.perf_counter_ns
        buckets = self.buckets
        tick = self.tick_ns
        cost = self._burn_ns
        for s in bucket:
            if s.cancelled:
                continue
            n = s.sent + 1
            if n >= s.max_tokens or self.hang_every:
                self._send_token(s)  # the last token, or fault injection: the general path
                continue
            if cost:
                burn_cpu(cost)
            s.sent = n
            data = ((s.prefix if n > s.reasoning else s.think_prefix)
                    + EVENT_TAIL % (n, s.prompt_tokens + n))
            if not s.conn.send_raw(b"%x\r\n%s\r\n" % (len(data), data) if s.framed else data):
                continue  # the connection is gone; closing it finished the stream
            s.send_ns.append(perf_ns())
            due = s.arrival_ns + s.ttft_ns + n * s.itl_ns
            s.due_ns = due
            kk = -(-due // tick)
            nxt = buckets.get(kk)
            if nxt is None:
                buckets[kk] = [s]
                self.loop.call_at(self._loop_time(kk * tick), self._fire, kk)
            else:
                nxt.append(s)

    def _send_one(self, s: Stream) -> None:
        s.handle = None
        self._send_token(s)

    def _send_token(self, s: Stream) -> None:
        if self._burn_ns:
            burn_cpu(self._burn_ns)
        s.sent += 1
        n = s.sent
        last = n >= s.max_tokens
        p = s.prompt_tokens
        if last:
            data = (last_chat_event(s.index, p, n, s.reasoning, self.reasoning_usage) if s.chat
                    else LAST_EVENT % (s.index, p, n, p + n, s.index, p, n, p + n)
                    if s.cached is None else
                    LAST_EVENT_CACHED % (s.index, p, n, p + n, s.index, p, n, p + n, s.cached))
            payload = b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data) if s.framed else data
        else:
            data = (s.prefix if n > s.reasoning else s.think_prefix) + EVENT_TAIL % (n, p + n)
            payload = b"%x\r\n%s\r\n" % (len(data), data) if s.framed else data
        if not s.conn.send_raw(payload):
            self.finish(s, aborted=True)
            return
        s.send_ns.append(time.perf_counter_ns())
        if last:
            self.finish(s, aborted=False)
            if not s.framed:
                s.conn.end_unframed()
        elif self.hang_every and (s.index + 1) % self.hang_every == 0 and n >= 3:
            s.handle = None  # stall: the stream stays open and silent
        else:
            self._schedule(s, s.arrival_ns + s.ttft_ns + n * s.itl_ns)

    def finish(self, s: Stream, aborted: bool) -> None:
        """End stream ``s`` (once): record its truth (``aborted``: it did not send every token)
        and let its connection read the next request."""
        if s.finished:
            return
        s.finished = True
        s.cancelled = True
        self.active -= 1
        s.conn.active = None
        self.truth.append(
            {
                "index": s.index,
                "request_id": s.request_id,
                "arrival_ns": s.arrival_ns,
                "send_ns": s.send_ns,
                "prompt_tokens": s.prompt_tokens,
                "reasoning_tokens": min(s.sent, s.reasoning),
                "aborted": aborted,
            }
        )
        s.conn.request_done()


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
    parser.add_argument(
        "--tick-ms",
        type=float,
        default=0.5,
        help="token sends due within one tick share one timer callback (0: one timer each)",
    )
    parser.add_argument(
        "--cost-us",
        type=float,
        default=0.0,
        help="CPU time (us) the server burns per streamed token, like a real server's per-chunk "
        "work (0: as lean as it can be)",
    )
    parser.add_argument(
        "--prefix-cache-block",
        type=int,
        default=0,
        help="count prefix-cache hits of token-ID prompts in blocks of N tokens (0: no cache)",
    )
    parser.add_argument(
        "--itl-per-stream-ms", type=float, default=0.0,
        help="ITL grows by this many ms per stream in service at a request's arrival "
        "(a server whose speed falls with load in a known way)",
    )
    parser.add_argument("--reasoning-tokens", type=int, default=0, help="chat: N thinking first")
    parser.add_argument("--no-reasoning-usage", action="store_true", help="usage leaves them out")
    parser.add_argument("--tls-cert", help="PEM certificate (chain): serve HTTPS")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument("--empty-text", action="store_true",
                        help='every event but the last carries text "" (usage still counts it)')
    parser.add_argument("--lora", action="append", default=[], help="NAME=TTFT_MS: a LoRA "
                        "adapter listed at /v1/models, its requests' first token after TTFT_MS")
    args = parser.parse_args(argv)
    if args.cost_us < 0:
        parser.error("--cost-us must be >= 0")
    ctx = None
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        ctx.set_alpn_protocols(["http/1.1"])
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server = SyntheticServer(
        args.ttft_ms,
        args.itl_ms,
        args.output_tokens,
        args.hang_every,
        args.fail_every,
        args.tick_ms,
        ctx,
        args.cost_us,
        args.itl_per_stream_ms,
    )
    if args.prefix_cache_block > 0:
        server.prefix_cache = SyntheticPrefixCache(args.prefix_cache_block)
    server.reasoning_tokens = max(0, args.reasoning_tokens)
    server.reasoning_usage = not args.no_reasoning_usage
    for item in args.lora:
        name, _, ms = item.partition("=")
        server.lora_ttft_ns[name] = int(float(ms or args.ttft_ms) * 1e6)
    if args.empty_text:
        server.event_prefix = EVENT_PREFIX.replace(b'"text":" tok"', b'"text":""')
    loop.add_signal_handler(signal.SIGTERM, loop.stop)
    # No collector pauses: a full collection of the truth records stalls sends for milliseconds
    # and then releases them as one burst, which a client 2 cores share with this server then
    # has to read at once. A finished stream is freed by reference counting (it drops its
    # connection's reference to it); the server lives only as long as the run that started it.
    gc.freeze()
    gc.disable()
    try:
        loop.run_until_complete(server.serve(args.host, args.port))
    except RuntimeError:  # loop stopped by SIGTERM
        pass
    finally:
        sys.stdout.flush()


if __name__ == "__main__":
    main()
