"""One connection of the synthetic server: reads HTTP/1.1 requests with the kernel's arrival
time of their first byte (``SO_TIMESTAMPNS``), speaks TLS over ``ssl.MemoryBIO`` on the same raw
socket when the server has a certificate, and writes responses, queueing what the socket cannot
take yet. The requests themselves are answered by
:class:`infer_prof.servers.synthetic.SyntheticServer`.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from typing import TYPE_CHECKING, Any

from infer_prof.loadgen.stamped_reader import _CMSG_SPACE, kernel_arrival_ns

if TYPE_CHECKING:  # annotations only: the server module imports this one
    from infer_prof.servers.synthetic import Stream, SyntheticServer


class Conn:
    """One client connection: reads requests (with kernel arrival times), writes responses."""

    def __init__(self, server: SyntheticServer, sock: socket.socket) -> None:
        self.server = server
        self.sock = sock
        self.buf = bytearray()
        self.arrival_ns: int | None = None
        self.active: Stream | None = None
        self.pending = bytearray()
        self.http10 = False  # the current request is HTTP/1.0: its body ends at close
        self.close_when_sent = False
        self.tls: ssl.SSLObject | None = None
        self.handshaken = False
        if server.ssl_context is not None:
            self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            self.tls = server.ssl_context.wrap_bio(self.incoming, self.outgoing, server_side=True)
            # the C object's write(): no Python-level wrapper call per token sent
            self._tls_write = getattr(self.tls, "_sslobj", self.tls).write
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
        if self.tls is not None:
            data = self._decrypt(data)
            if not data:
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
        self.http10 = head[0].endswith("HTTP/1.0")
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

    def _decrypt(self, data: bytes) -> bytes:
        """TLS: feed ciphertext, advance the handshake, return the plaintext it completes."""
        assert self.tls is not None
        self.incoming.write(data)
        if not self.handshaken:
            try:
                self.tls.do_handshake()
                self.handshaken = True
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLError, OSError):  # not TLS, or the client refused our certificate
                self._send_wire(self.outgoing.read())
                self.close()
                return b""
            if self.outgoing.pending:
                self._send_wire(self.outgoing.read())
            if not self.handshaken:
                return b""
        parts = []
        while True:
            try:
                parts.append(self.tls.read(65536))
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                break
            except ssl.SSLError:
                self.close()
                return b""
            if not self.incoming.pending and not self.tls.pending():
                break
        return b"".join(parts)

    def request_done(self) -> None:
        if self.buf:
            self._try_parse()

    def send_raw(self, data: bytes) -> bool:
        """Send now (encrypted first over TLS); what the socket cannot take yet is queued and
        flushed when writable."""
        if self.tls is not None:
            if self.sock.fileno() < 0:
                return False
            self._tls_write(data)
            data = self.outgoing.read()
        return self._send_wire(data)

    def _send_wire(self, data: bytes) -> bool:
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
            self.queue(data[sent:])
        return True

    def queue(self, rest: bytes) -> None:
        """Keep what the socket could not take; it is sent when the socket is writable."""
        self.pending += rest
        self.server.loop.add_writer(self.sock.fileno(), self._flush)

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
            if self.close_when_sent:
                self.close()

    def end_unframed(self) -> None:
        """End an HTTP/1.0 response (no chunked framing: the close marks its end) once all of
        it has been sent."""
        if self.pending:
            self.close_when_sent = True
        else:
            self.close()

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
        if self.active is not None:
            self.active.cancelled = True
            if self.active.handle is not None:
                self.active.handle.cancel()
            self.server.finish(self.active, aborted=True)
        self.sock.close()
        self.server.conns.discard(self)
