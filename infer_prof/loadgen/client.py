"""A streaming OpenAI client (completions and chat) whose timestamps come from the kernel.

Each received TCP segment carries the time the kernel queued it (``SO_TIMESTAMPNS``), read with
``recvmsg``. A token's arrival time is therefore when its bytes reached this machine, not when a
busy event loop got round to reading them: event-loop lag delays the reading, not the number.
Timestamps are converted onto ``time.perf_counter_ns`` by subtracting the data's age
(``time.time_ns() - kernel_realtime_ns``) from ``perf_counter_ns()`` taken at the same moment.

Each read is made by a reader object the event loop calls when the socket is readable: the C
``_stamped.StampedReader`` where the extension was built (the common case costs no Python), else
its pure-Python twin :class:`PyStampedReader`; both hand what they do not recognise to the same
general parser, and the tests check that they agree.

Connections are kept alive and reused by the stream that opened them (one connection per stream,
as a real client pool does); a request that fails on a reused connection before any response byte
arrives is retried once on a fresh one.

``https://`` endpoints: TLS is done on the same raw socket (:mod:`infer_prof.loadgen.tls`); the
reader still takes each segment's kernel time and decrypts before the HTTP handling, so a token's
time is that of the TCP segment completing the TLS record that carries it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import re
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from infer_prof.core.metrics import RequestRecord
from infer_prof.loadgen.http_stream import HttpProtocolError, SseResponseParser
from infer_prof.loadgen.pacing import SendPacer
from infer_prof.loadgen.tls import (
    TlsError,
    TlsSession,
    TlsSettings,
    check_ca_bundle,
    client_context,
)

try:
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
    _dumps: Callable[[Any], bytes] = orjson.dumps
except ImportError:  # pragma: no cover - orjson is a dependency, this is a fallback
    _loads = json.loads

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


# Linux constants; Python's socket module does not export them.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
_CMSG_SPACE = socket.CMSG_SPACE(16)
_RECV_SIZE = 256 * 1024
# One receive buffer per thread, reused by every read: allocating a fresh 256 KiB bytes object
# per read goes through mmap/munmap in glibc and cost ~80 us per read on the 2-core machines
# (page faults and TLB shootdowns), more than everything else a read does.
_RECV_BUF = threading.local()


def _recv_buffer() -> memoryview:
    buf = getattr(_RECV_BUF, "view", None)
    if buf is None:
        buf = _RECV_BUF.view = memoryview(bytearray(_RECV_SIZE))
    return buf


_TIMESPEC = struct.Struct("qq")
_CHUNKED_END = b"\r\n0\r\n\r\n"  # how a chunked HTTP response ends
_SOL_SOCKET = socket.SOL_SOCKET
_REPORT_EVERY = 16  # tokens between on_token calls (progress display) on the fast path
# One whole HTTP chunk holding one SSE event that carries generated tokens and per-chunk usage,
# as vLLM streams them (compact JSON, choices before usage, no finish reason yet): the steady
# state of a stream, read without a JSON parser. Groups: chunk size (hex), the SSE data line,
# completion_tokens. A JSON string cannot hold an unescaped quote, so the quoted key patterns
# can only match keys. Anything else (first and last events, errors, other servers' layouts)
# goes through the general parser.
_TOKEN_CHUNK = re.compile(
    rb'([0-9a-fA-F]{1,8})\r\n(data: [^\n]*"finish_reason":null[^\n]*'
    rb'"completion_tokens":(\d+)[^\n]*)\n\n\r\n'
)


def match_token_chunk_py(data: bytes) -> int:
    """Completion tokens if ``data`` is exactly one vLLM token chunk (``_TOKEN_CHUNK`` with a
    chunk size that fits), else -1. The pure-Python twin of the C ``match_token_chunk``."""
    m = _TOKEN_CHUNK.fullmatch(data)
    if m is None or int(m.group(1), 16) != m.end(2) - m.start(2) + 2:
        return -1
    return int(m.group(3))


class PyStampedReader:
    """One stream socket's reader, called by the event loop whenever the socket is readable.

    Each call reads once; the data's time is the kernel's receive time (``SO_TIMESTAMPNS``) on
    the perf_counter clock: ``now - (wall_now - kernel_wall)``, never later than ``now``, and
    ``lags`` gets ``now - t`` (ns). While ``fast`` (the HTTP parser is at a chunk boundary) a
    read that is exactly one vLLM token chunk is counted here; anything else goes to
    ``general(data, t_ns) -> bool`` (``data`` is ``b""`` at end of stream), whose result is the
    new ``fast``. A receive error calls ``failed(errno)``.

    With ``decrypt`` (TLS, see :mod:`infer_prof.loadgen.tls`) the bytes read are ciphertext:
    ``decrypt(data)`` gives the plaintext they complete, which is then handled as above with the
    read's kernel time (the time of the segment that completed the TLS record); a read that
    completes no application data (``b""``) ends there.

    The pure-Python twin of the C ``_stamped.StampedReader`` (used where that was not built).
    """

    def __init__(
        self,
        sock: socket.socket,
        chunk_ns: list[int],
        chunk_tokens: list[int],
        lags: list[int],
        general: Callable[[bytes, int], bool],
        failed: Callable[[int], None],
        on_token: Callable[[int], None] | None,
        report_every: int = 16,
        decrypt: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self.fast = 0
        self.last_ct = 0
        self.reported = 0
        self._recv = sock.recvmsg_into
        self._decrypt = decrypt
        self._args = (chunk_ns, chunk_tokens, lags, general, failed, on_token, report_every)

    def close(self) -> None:
        """Forget the callbacks (the request is over): they are closures that refer back to
        this reader, a reference cycle per request that only the (paused) garbage collector
        could free."""
        self._args = None  # type: ignore[assignment]
        self._decrypt = None

    def __call__(self) -> None:
        # The hot path: one call per received segment, 68k/s at 1024 streams on a machine
        # where a Python-level call costs ~0.3 us, so it is kept flat on purpose.
        chunk_ns, chunk_tokens, lags, general, failed, on_token, report_every = self._args
        rbuf = _recv_buffer()
        try:
            nbytes, anc, _flags, _addr = self._recv((rbuf,), _CMSG_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            failed(exc.errno or 0)
            return
        now = time.perf_counter_ns()
        t_ns = now
        if anc:  # only SO_TIMESTAMPNS is switched on, so this is the kernel's receive time
            try:
                sec, nsec = _TIMESPEC.unpack_from(anc[0][2])
            except struct.error:
                pass
            else:
                t_ns = now - (time.time_ns() - (sec * 1_000_000_000 + nsec))
                if t_ns > now:  # the two clocks were read a few ns apart
                    t_ns = now
        lags.append(now - t_ns)
        data = rbuf[:nbytes].tobytes()
        if nbytes and self._decrypt is not None:
            data = self._decrypt(data)
            if not data:
                return
        if nbytes and self.fast:
            ct = match_token_chunk_py(data)
            if ct >= 0:
                if ct > self.last_ct:
                    chunk_ns.append(t_ns)
                    chunk_tokens.append(ct - self.last_ct)
                    self.last_ct = ct
                    if ct - self.reported >= report_every and on_token is not None:
                        on_token(ct - self.reported)
                        self.reported = ct
                return
        self.fast = general(data, t_ns)


try:
    from infer_prof.loadgen._stamped import StampedReader as _CStampedReader
    from infer_prof.loadgen._stamped import match_token_chunk
except ImportError:  # not built (no C compiler, not Linux): the Python twin, same numbers
    _CStampedReader = None
    match_token_chunk = match_token_chunk_py

#: Which reader the client uses: "c" (compiled hot path) or "python".
READER = "c" if _CStampedReader is not None else "python"


def reader_in_use() -> str:
    """The reader streams get: ``c`` where the extension was built, else ``python``;
    ``INFER_PROF_READER=python`` forces the pure-Python one (for comparisons)."""
    if os.environ.get("INFER_PROF_READER") == "python" or _CStampedReader is None:
        return "python"
    return "c"


def make_reader(
    sock: socket.socket,
    chunk_ns: list[int],
    chunk_tokens: list[int],
    lags: list[int],
    general: Callable[[bytes, int], bool],
    failed: Callable[[int], None],
    on_token: Callable[[int], None] | None,
    implementation: str | None = None,
    decrypt: Callable[[bytes], bytes] | None = None,
) -> Any:
    """A reader for one stream socket (see ``PyStampedReader``): the C one where it was built,
    unless ``implementation`` (or ``INFER_PROF_READER``) says ``python``. ``decrypt``: the
    TLS session's decrypter for an https stream (None for plain HTTP)."""
    which = implementation or reader_in_use()
    args = (chunk_ns, chunk_tokens, lags, general, failed, on_token, _REPORT_EVERY)
    if which == "c" and _CStampedReader is not None:
        if decrypt is None:
            return _CStampedReader(sock.fileno(), *args)
        return _CStampedReader(sock.fileno(), *args, decrypt=decrypt)
    return PyStampedReader(sock, *args, decrypt=decrypt)


def kernel_arrival_ns(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    """The kernel's receive time of the data, on the perf_counter clock; None if absent."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = _TIMESPEC.unpack_from(data)
            age = time.time_ns() - (sec * 1_000_000_000 + nsec)
            return time.perf_counter_ns() - max(age, 0)
    return None


# Congestion controls that send a segment as soon as the window allows. BBR (the default on many
# Linux hosts, including these) paces segments with a timer at its estimate of the bandwidth;
# for a stream that sends ~250 bytes every 15 ms that estimate is tiny, and segments leave the
# kernel up to tens of ms after send() returned.
_UNPACED_CC = (b"cubic", b"reno")


def no_pacing(sock: socket.socket) -> str | None:
    """Switch ``sock`` from a pacing congestion control (BBR) to cubic (or reno), so that bytes
    leave when ``send`` returns; returns the control in use, or None where the kernel cannot say.
    Unprivileged processes may pick any control in ``net.ipv4.tcp_allowed_congestion_control``
    (cubic and reno are there by default); where that fails the socket is left as it is."""
    opt = getattr(socket, "TCP_CONGESTION", None)
    if opt is None:
        return None
    try:
        current = sock.getsockopt(socket.IPPROTO_TCP, opt, 16).rstrip(b"\0")
    except OSError:
        return None
    if current in _UNPACED_CC:
        return current.decode()
    for cc in _UNPACED_CC:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, opt, cc)
            return cc.decode()
        except OSError:
            continue
    return current.decode()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No garbage-collector pauses while timing: collect once, freeze what exists, disable the
    collector for the block, then restore it. A full collection of a large heap stalls the
    event loop for tens of milliseconds, long enough for two tokens of a stream to arrive
    together and be timed as one read."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


async def loop_lag_probe(
    samples: list[float], interval_s: float = 0.01, record: Callable[[], bool] = lambda: True
) -> None:
    """Measure the event loop's own lag, forever: how late a ``sleep(interval_s)`` wakes up,
    appended to ``samples`` in ms whenever ``record()`` is true."""
    while True:
        t0 = time.perf_counter()
        await asyncio.sleep(interval_s)
        if record():
            samples.append(max(0.0, (time.perf_counter() - t0 - interval_s) * 1000.0))


@dataclass
class ReadStats:
    """The client's own health: how long received data waited before the loop read it.

    With kernel timestamps a late read does not move a token's timestamp, as long as the next
    token of that stream has not arrived yet: the kernel merges queued segments and keeps the
    newest one's time. Read lag approaching the inter-token gap is therefore the sign that the
    client could not keep up; it is reported with every run.
    """

    read_lag_ns: list[int] = field(default_factory=list)

    @property
    def reads(self) -> int:
        """Reads (``recvmsg`` calls that returned data or end of stream) so far."""
        return len(self.read_lag_ns)


_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Endpoint:
    """Where requests go: ``http(s)://host:port`` plus the API path prefix and auth; ``tls``
    (how the certificate is checked) is set for ``https``."""

    host: str
    port: int
    base_path: str = ""
    api_key: str | None = None
    scheme: str = "http"
    tls: TlsSettings | None = None

    @classmethod
    def from_url(
        cls,
        url: str,
        api_key: str | None = None,
        *,
        ca_bundle: str | None = None,
        insecure: bool = False,
    ) -> Endpoint:
        """Parse ``http(s)://host[:port][/prefix]`` (default port 80 or 443); a trailing ``/v1``
        is dropped (paths add it). ``ca_bundle``/``insecure`` apply to https only."""
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in _DEFAULT_PORTS:
            raise ValueError(
                f"endpoint {url!r}: give an http:// or https:// URL, e.g. https://host/v1"
            )
        if not parts.hostname:
            raise ValueError(f"endpoint {url!r} has no host; give e.g. http://127.0.0.1:8000")
        try:
            port = parts.port or _DEFAULT_PORTS[parts.scheme]
        except ValueError as exc:
            raise ValueError(f"endpoint {url!r}: {exc}") from None
        path = parts.path.rstrip("/")
        if path.endswith("/v1"):
            path = path[:-3]
        tls = None
        if parts.scheme == "https":
            check_ca_bundle(ca_bundle)
            tls = TlsSettings(ca_bundle, insecure)
        return cls(parts.hostname, port, path, api_key, parts.scheme, tls)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.base_path}"

    @property
    def host_header(self) -> str:
        """The ``Host`` header: the host, with the port unless it is the scheme's default."""
        if self.port == _DEFAULT_PORTS.get(self.scheme):
            return self.host
        return f"{self.host}:{self.port}"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for control-plane requests (models, health, metrics); None for
        http."""
        return client_context(self.tls) if self.tls is not None else None


def build_completion_request(
    endpoint: Endpoint,
    model: str,
    prompt: list[int] | str | list[dict[str, str]],
    max_tokens: int,
    *,
    ignore_eos: bool = True,
    extra: dict[str, Any] | None = None,
    request_id: str | None = None,
) -> bytes:
    """The bytes of one streaming ``POST /v1/completions`` request with a token-ID or text
    ``prompt`` (chat messages raise ValueError: they need :func:`build_chat_request`).

    Asks for per-chunk usage (``continuous_usage_stats``) so that token counts come from the
    server, and ``ignore_eos`` so that outputs have exactly ``max_tokens`` tokens.
    """
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], dict):
        raise ValueError("chat messages need the chat API (--api chat)")
    body = _stream_body(model, max_tokens, ignore_eos, extra, prompt=prompt,
                        max_tokens=max_tokens)
    return _post(endpoint, "/v1/completions", body, request_id)


def build_chat_request(
    endpoint: Endpoint,
    model: str,
    messages: list[dict[str, Any]],
    max_tokens: int,
    *,
    ignore_eos: bool = True,
    extra: dict[str, Any] | None = None,
    request_id: str | None = None,
) -> bytes:
    """The bytes of one streaming ``POST /v1/chat/completions`` request with ``messages``
    (OpenAI chat messages, sent as they are).

    The same asks as :func:`build_completion_request`: per-chunk usage, ``ignore_eos`` and
    ``min_tokens`` so outputs have exactly ``max_tokens`` tokens, greedy sampling. The length
    is sent both as ``max_completion_tokens`` (the current OpenAI name) and ``max_tokens``
    (what older servers read); servers take the one they know.
    """
    body = _stream_body(model, max_tokens, ignore_eos, extra, messages=messages,
                        max_completion_tokens=max_tokens, max_tokens=max_tokens)
    return _post(endpoint, "/v1/chat/completions", body, request_id)


def _stream_body(
    model: str, length: int, ignore_eos: bool, extra: dict[str, Any] | None, **fields: Any
) -> dict[str, Any]:
    """The JSON body both APIs share: ``model``, the API's own ``fields`` (prompt or messages,
    length), streaming with per-chunk usage, greedy sampling, ``ignore_eos``/``min_tokens`` so
    outputs have exactly ``length`` tokens, then ``extra`` over all of it."""
    body: dict[str, Any] = {
        "model": model,
        **fields,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "temperature": 0.0,
    }
    if ignore_eos:
        body["ignore_eos"] = True
        body["min_tokens"] = length
    if extra:
        body.update(extra)
    return body


def chat_messages(prompt: str | list[Any]) -> list[dict[str, Any]]:
    """The ``messages`` for a chat request: a text prompt becomes one user message; a list of
    messages (a dataset's) is sent as it is. Token-ID prompts cannot be sent (ValueError)."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if prompt and all(isinstance(m, dict) for m in prompt):
        return [dict(m) for m in prompt]
    raise ValueError("the chat API takes text, not token IDs; use --prompt text")


def _post(endpoint: Endpoint, path: str, body: dict[str, Any], request_id: str | None) -> bytes:
    """A ``POST`` of ``body`` as JSON to ``path`` under the endpoint's prefix, with the
    headers every streaming request carries (and the API key, when there is one)."""
    payload = _dumps(body)
    head = (
        f"POST {endpoint.base_path}{path} HTTP/1.1\r\n"
        f"Host: {endpoint.host_header}\r\n"
        "User-Agent: infer-prof\r\n"
        "Content-Type: application/json\r\n"
        "Accept: text/event-stream\r\n"
        f"Content-Length: {len(payload)}\r\n"
    )
    if request_id:
        head += f"X-Request-Id: {request_id}\r\n"
    if endpoint.api_key:
        head += f"Authorization: Bearer {endpoint.api_key}\r\n"
    return (head + "\r\n").encode() + payload


def chunk_tokens_of(choice: dict[str, Any]) -> int:
    """Generated tokens in one stream chunk's choice when the server sends no per-chunk usage:
    ``len(token_ids)`` where the server gives them, else 1 for a chunk with any generated text
    (``text``; or in a chat ``delta``: ``content``, ``reasoning_content``/``reasoning``,
    ``tool_calls``), else 0 (a role-only or empty chunk). One per chunk undercounts a chunk that
    holds several tokens; the final usage, when sent, corrects the total (not the split)."""
    ids = choice.get("token_ids")
    if ids:
        return len(ids)
    if choice.get("text"):
        return 1
    delta = choice.get("delta")
    if isinstance(delta, dict) and (
        delta.get("content")
        or delta.get("reasoning_content")
        or delta.get("reasoning")
        or delta.get("tool_calls")
    ):
        return 1
    return 0


def error_message(err: Any) -> str:
    """The message of an error a stream reported: ``{"message": ...}`` (OpenAI, vLLM, SGLang,
    llama.cpp, possibly nested under another ``error``), or a plain string (TGI)."""
    while isinstance(err, dict):
        if err.get("message") is not None:
            return str(err["message"])
        if "error" not in err:
            return json.dumps(err)[:300]
        err = err["error"]
    return str(err)


class _Failure(Exception):
    def __init__(self, kind: str, detail: str, *, before_response: bool = False) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.before_response = before_response


@dataclass
class StreamConnection:
    """One kept-alive TCP connection with kernel receive timestamps enabled; with ``tls``
    (an https endpoint) a TLS session is set up on it when it opens (see
    :mod:`infer_prof.loadgen.tls`)."""

    addr: tuple[Any, ...]
    family: int
    endpoint: Endpoint | None = None  # where it connects; its ``tls`` makes it an https one
    sock: socket.socket | None = None
    uses: int = 0
    timestamps: str = "kernel"
    session: TlsSession | None = None
    _closed_cbs: list[Callable[[], None]] = field(default_factory=list)

    async def ensure_open(self) -> None:
        if self.sock is not None:
            return
        loop = asyncio.get_running_loop()
        sock = socket.socket(self.family, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        no_pacing(sock)  # a long prompt must not be paced out by BBR after send_ns was taken
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:
            self.timestamps = "userspace"
        try:
            await loop.sock_connect(sock, self.addr)
        except OSError as exc:
            sock.close()
            raise _Failure("connect_failed", f"{type(exc).__name__}: {exc}") from None
        ep = self.endpoint
        if ep is not None and ep.tls is not None:
            session = TlsSession(client_context(ep.tls), sock, ep.host, ep.port)
            try:
                await session.handshake()
            except TlsError as exc:
                sock.close()
                raise _Failure("tls_error", str(exc)) from None
            self.session = session
        self.sock = sock
        self.uses = 0

    def close(self) -> None:
        self.session = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None


async def resolve(endpoint: Endpoint) -> tuple[int, tuple[Any, ...]]:
    """Resolve the endpoint's host once: (address family, socket address)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM)
    if not infos:
        raise OSError(f"cannot resolve {endpoint.host}")
    family, _, _, _, addr = infos[0]
    return family, addr


async def stream_request(
    conn: StreamConnection,
    request: bytes,
    record: RequestRecord,
    timeout_s: float,
    on_token: Callable[[int], None] | None = None,
    stats: ReadStats | None = None,
    pacer: SendPacer | None = None,
) -> None:
    """Send one streaming request on ``conn`` and fill ``record`` with what arrives.

    Never raises for request-level failures: they land in ``record.error`` (kind) and
    ``record.error_detail``. ``on_token(n)`` is called as tokens arrive (for progress display).
    With a ``pacer``, the parsing of the response's final read waits for room in the pacer's
    per-turn budget (its arrival time is already taken; see :mod:`infer_prof.loadgen.pacing`).
    Cancellation marks the record ``cancelled`` and re-raises.
    """
    for attempt in (0, 1):
        reused = conn.sock is not None and conn.uses > 0
        try:
            await conn.ensure_open()
            await _exchange(conn, request, record, timeout_s, on_token, stats, pacer)
            return
        except _Failure as f:
            conn.close()
            if f.before_response and reused and attempt == 0:
                record.chunk_ns.clear()
                record.chunk_tokens.clear()
                continue  # a kept-alive connection the server had closed: retry fresh
            record.error, record.error_detail = f.kind, f.detail
            return
        except asyncio.CancelledError:
            conn.close()
            record.error = record.error or "cancelled"
            record.error_detail = record.error_detail or "run interrupted before the response ended"
            raise


async def _exchange(
    conn: StreamConnection,
    request: bytes,
    record: RequestRecord,
    timeout_s: float,
    on_token: Callable[[int], None] | None,
    stats: ReadStats | None,
    pacer: SendPacer | None,
) -> None:
    loop = asyncio.get_running_loop()
    sock = conn.sock
    assert sock is not None
    fd = sock.fileno()
    parser = SseResponseParser()
    done: asyncio.Future[None] = loop.create_future()
    got_bytes = False
    record.timestamp_source = conn.timestamps

    def fail(kind: str, detail: str) -> None:
        if not done.done():
            done.set_exception(_Failure(kind, detail, before_response=not got_bytes))

    chunk_ns = record.chunk_ns
    chunk_tokens = record.chunk_tokens

    def handle_event(payload: bytes, t_ns: int) -> int:
        """Account one SSE data payload (the general path); return the tokens it carried.

        Tokens come from the server's per-chunk usage (``completion_tokens``, cumulative) when
        its content chunks carry it; else each chunk is counted on its own (:func:`chunk_tokens`)
        and a final usage, if any, gives the total. A chunk with no generated text (a role-only
        first chunk, an empty ``choices`` list) carries no token and cannot be the first."""
        if payload == b"[DONE]":
            return 0
        try:
            obj = _loads(payload)
        except ValueError:
            fail("bad_event", f"unparseable SSE data: {payload[:120]!r}")
            return 0
        if not isinstance(obj, dict):
            return 0
        if "error" in obj and not obj.get("choices"):
            fail("server_error", error_message(obj["error"])[:300])
            return 0
        usage = obj.get("usage")
        if not isinstance(usage, dict):
            usage = None
        choices = obj.get("choices")
        k = 0
        if choices and isinstance(choices, list) and isinstance(choices[0], dict):
            choice = choices[0]
            ct = usage.get("completion_tokens") if usage else None
            if ct is not None and record.token_count_source == "usage":
                k = int(ct) - reader.last_ct
                reader.last_ct = int(ct)
            else:
                # no usage on this content chunk (or earlier ones): count the chunk itself; a
                # usage here is the final total (below), not this chunk's share
                k = chunk_tokens_of(choice)
                if k:
                    record.token_count_source = "chunks"
            if k > 0:
                chunk_ns.append(t_ns)
                chunk_tokens.append(k)
            else:
                k = 0
            if choice.get("finish_reason"):
                record.finish_reason = choice["finish_reason"]
        if usage:
            if usage.get("completion_tokens") is not None:
                record.output_tokens = int(usage["completion_tokens"])
            if usage.get("prompt_tokens") is not None:
                record.prompt_tokens = int(usage["prompt_tokens"])
        return k

    deferred: list[tuple[bytes, int]] = []  # reads waiting for the pacer, in arrival order

    def general(data: bytes, t_ns: int) -> bool:
        """Everything the reader's fast path does not take. With a pacer, a read that ends
        like a whole chunked response (and every read after it) is parsed when the pacer has
        room: False keeps the reader sending reads here meanwhile."""
        if pacer is not None and (deferred or (data.endswith(_CHUNKED_END) and parser.status)):
            deferred.append((data, t_ns))
            if len(deferred) == 1:
                pacer.run(parse_deferred)
            return False
        return parse(data, t_ns)

    def parse_deferred() -> None:
        fast = False
        while deferred and not done.done():  # done: ended meanwhile (timeout, cancelled)
            data, t_ns = deferred.pop(0)
            fast = parse(data, t_ns)
        deferred.clear()
        reader.fast = fast

    def parse(data: bytes, t_ns: int) -> bool:
        """Parse one read (headers, first and last events, several events in one read, end of
        stream); return whether the parser is at a chunk boundary (so the next read may take
        the fast path)."""
        nonlocal got_bytes
        if not data:
            try:
                for payload, t in parser.feed_eof(t_ns):
                    handle_event(payload, t)
            except HttpProtocolError as exc:
                fail("protocol_error", str(exc))
                return False
            if not parser.complete:
                fail("connection_closed", "server closed the connection mid-response")
                return False
        else:
            got_bytes = True
            tokens = 0
            try:
                for payload, t in parser.feed(data, t_ns):
                    tokens += handle_event(payload, t)
            except HttpProtocolError as exc:
                fail("protocol_error", str(exc))
                return False
            if tokens and on_token is not None and not parser.complete:
                on_token(tokens)  # progress for servers whose chunks miss the fast path
                reader.reported += tokens
        if parser.complete and not done.done():
            record.done_ns = t_ns
            done.set_result(None)
        # a stream counted per chunk stays so: the fast path counts by cumulative usage
        return parser.at_chunk_boundary and record.token_count_source == "usage"

    def failed(errno: int) -> None:
        reason = os.strerror(errno) if errno else "receive failed"
        fail("connection_error", f"{reason} (errno {errno})")

    lags = stats.read_lag_ns if stats is not None else []
    decrypt = None
    if conn.session is not None:  # https: the reader decrypts, the request goes out encrypted
        decrypt = conn.session.decrypter(fail)
        request = conn.session.encrypt(request)
    reader = make_reader(
        sock, chunk_ns, chunk_tokens, lags, general, failed, on_token, decrypt=decrypt
    )
    loop.add_reader(fd, reader)
    timer = loop.call_later(
        timeout_s, fail, "timeout", f"no complete response within {timeout_s:g} s"
    )
    try:
        record.send_ns = time.perf_counter_ns()
        try:
            sent = sock.send(request)
            if sent < len(request):
                await loop.sock_sendall(sock, request[sent:])
        except OSError as exc:
            raise _Failure(
                "connection_error", f"send failed: {exc}", before_response=True
            ) from None
        await done
    finally:
        timer.cancel()
        loop.remove_reader(fd)
        reader.close()
        if record.output_tokens is None and reader.last_ct:
            record.output_tokens = reader.last_ct  # cut off mid-stream: the last usage seen
        if on_token is not None:
            total = sum(chunk_tokens)
            if total > reader.reported:
                on_token(total - reader.reported)
    conn.uses += 1
    if parser.status != 200:
        body = bytes(parser.body).decode("utf-8", "replace").strip().replace("\n", " ")
        record.error = f"http_{parser.status}"
        record.error_detail = body[:300] or parser.reason
        if not parser.keep_alive:
            conn.close()
        return
    if record.output_tokens is None and record.chunk_tokens:
        record.output_tokens = sum(record.chunk_tokens)
        record.token_count_source = "chunks"
    elif record.token_count_source == "chunks" and record.output_tokens is not None:
        record.token_count_source = "usage_total"  # total from usage, per-chunk split counted
    if not parser.keep_alive:
        conn.close()
