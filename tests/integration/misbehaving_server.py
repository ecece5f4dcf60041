"""A real misbehaving HTTP(S) server for the stream client's tests.

Listens on 127.0.0.1 (TLS with a certificate from :func:`infer_prof.servers.certs.make_certs`
when given one) and answers each streaming ``POST`` with a scripted :class:`Reply`: its writes
sent byte for byte, each as its own TCP segment (TCP_NODELAY, a short gap between them; over TLS
each write is one TLS record), then the connection kept for the next request, closed (over TLS
without close_notify), closed after a close_notify, or held open with nothing more said. It
counts the streaming requests it read (``requests``), so a test can check that every request
the server saw is in the client's per-request record. ``GET /v1/models`` and ``/health`` get
a plain answer (for ``infer-prof run --endpoint``), ``POST /reset_prefix_cache`` a 404 (a
server without vLLM's dev route); they are not counted.

Blocking sockets, one thread per connection, every wait bounded, so a test cannot hang on it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from infer_prof.servers.certs import CertFiles

#: How each scripted reply ends: keep the connection for the next request; close it (over TLS
#: without close_notify: a truncation as an attacker or a crashed proxy leaves it); send
#: close_notify, then close; or keep it open and say nothing more (the client's timeout ends it).
ENDS = ("keep", "close", "close_notify", "hang")


@dataclass
class Reply:
    """One scripted response: ``writes`` sent in order (``gap_s`` apart), then ``end``."""

    writes: list[bytes]
    end: str = "keep"
    gap_s: float = 0.002

    def __post_init__(self) -> None:
        assert self.end in ENDS, self.end


@dataclass
class _Conn:
    """One accepted connection, plain or TLS (an SSLObject over memory BIOs on the blocking
    socket, so that each write is one record in one segment and the close is ours to shape)."""

    sock: socket.socket
    tls: ssl.SSLObject | None = None
    inc: ssl.MemoryBIO = field(default_factory=ssl.MemoryBIO)
    out: ssl.MemoryBIO = field(default_factory=ssl.MemoryBIO)

    def handshake(self, ctx: ssl.SSLContext, stop: threading.Event) -> bool:
        self.tls = ctx.wrap_bio(self.inc, self.out, server_side=True)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    if stop.is_set() or time.monotonic() > deadline:
                        return False
                    continue
                if not data:
                    return False
                self.inc.write(data)
            except ssl.SSLError:
                return False
        self._flush()
        return True

    def _flush(self) -> None:
        if self.out.pending:
            self.sock.sendall(self.out.read())

    def recv(self) -> bytes:
        """Bytes of the request stream (b"" at its end)."""
        if self.tls is None:
            return self.sock.recv(65536)
        while True:
            try:
                return self.tls.read(65536)
            except ssl.SSLWantReadError:
                data = self.sock.recv(65536)
                if not data:
                    return b""
                self.inc.write(data)
            except (ssl.SSLZeroReturnError, ssl.SSLError):
                return b""

    def send(self, data: bytes) -> None:
        if self.tls is None:
            self.sock.sendall(data)
            return
        self.tls.write(data)
        self._flush()

    def close(self, notify: bool) -> None:
        if notify and self.tls is not None:
            with contextlib.suppress(ssl.SSLWantReadError):  # the peer's is not waited for
                self.tls.unwrap()
            self._flush()
        self.sock.close()


class MisbehavingServer:
    """Serves ``reply`` (a :class:`Reply`, or a function of the request's number, counted from
    0, and its head, giving one) to every streaming request; ``requests`` counts them."""

    def __init__(self, reply: Reply | Callable[[int, bytes], Reply],
                 tls: CertFiles | None = None, model: str = "m") -> None:
        self.reply = reply
        self.model = model
        self.requests = 0
        self.heads: list[bytes] = []
        self._lock = threading.Lock()
        self._ctx: ssl.SSLContext | None = None
        if tls is not None:
            self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._ctx.load_cert_chain(tls.cert, tls.key)
        self._lsock = socket.socket()
        self._lsock.bind(("127.0.0.1", 0))
        self._lsock.listen(64)
        self._lsock.settimeout(0.05)
        self.port = self._lsock.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept, daemon=True)
        self._accepter.start()

    def __enter__(self) -> MisbehavingServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting, end every connection's thread (each wait is bounded), close."""
        self._stop.set()
        self._accepter.join(5)
        for t in list(self._threads):
            t.join(5)
        self._lsock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._lsock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(0.05)  # each recv wakes to look at the stop flag
        conn = _Conn(sock)
        try:
            if self._ctx is not None and not conn.handshake(self._ctx, self._stop):
                sock.close()
                return
            buf = b""
            while not self._stop.is_set():
                got = self._read_request(conn, buf)
                if got is None:
                    break
                head, buf = got
                if not self._answer(conn, head):
                    return
        except OSError:
            pass
        sock.close()

    def _read_request(self, conn: _Conn, buf: bytes) -> tuple[bytes, bytes] | None:
        """One whole request (head and Content-Length body): (head, bytes after it); None
        when the client closed or the server stops."""
        deadline = time.monotonic() + 30
        while b"\r\n\r\n" not in buf or len(buf) < _request_length(buf):
            if self._stop.is_set() or time.monotonic() > deadline:
                return None
            try:
                data = conn.recv()
            except TimeoutError:
                continue
            if not data:
                return None
            buf += data
        n = _request_length(buf)
        return buf[:n], buf[n:]

    def _answer(self, conn: _Conn, request: bytes) -> bool:
        """Send the reply to one request; False when the connection is done with."""
        head = request.split(b"\r\n\r\n", 1)[0]
        if head.startswith(b"GET ") or head.startswith(b"POST /reset_prefix_cache "):
            conn.send(self._control(head))
            return True
        with self._lock:
            number = self.requests
            self.requests += 1
            self.heads.append(head)
        reply = self.reply(number, head) if callable(self.reply) else self.reply
        for i, w in enumerate(reply.writes):
            if i:
                time.sleep(reply.gap_s)
            conn.send(w)
        if reply.end == "keep":
            return True
        if reply.end == "hang":  # until the client gives up and closes, or the test ends
            while not self._stop.is_set():
                try:
                    if not conn.sock.recv(65536):
                        break
                except TimeoutError:
                    continue
        conn.close(notify=reply.end == "close_notify")
        return False

    def _control(self, head: bytes) -> bytes:
        path = head.split(b" ", 2)[1]
        if path.endswith(b"/v1/models"):
            body = json.dumps({"object": "list", "data": [{"id": self.model, "object": "model"}]})
            status = "200 OK"
        elif path.endswith(b"/health"):
            body, status = "", "200 OK"
        else:
            body, status = "not found", "404 Not Found"
        data = body.encode()
        return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(data)}\r\n\r\n").encode() + data


def _request_length(buf: bytes) -> int:
    """Bytes of the first request in ``buf`` (head + Content-Length body), once its head is
    complete."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return len(buf) + 1
    length = 0
    for line in buf[:end].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return end + 4 + length
