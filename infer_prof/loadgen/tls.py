"""TLS for timed streams: an ``ssl.SSLObject`` over two ``MemoryBIO``s on the client's own socket.

The stream reader keeps reading the raw socket with ``recvmsg`` and so keeps the kernel's receive
timestamp of each TCP segment; the ciphertext it read goes into the incoming BIO, and the
plaintext that comes out is handled exactly like plain HTTP's bytes (the token-chunk fast path,
else the general parser). A token's time is therefore the kernel's receive time of the TCP segment
that *completed* the TLS record carrying it: a record spread over several segments is decrypted
(and timed) when its last segment arrives, as a plain-HTTP chunk spread over segments would be
parsed when its last one arrives. Requests are encrypted into the outgoing BIO and sent on the
same socket. The handshake is made asynchronously on the socket before the first request (SNI and
host-name check = the endpoint's host); the TLS connection is then kept alive like a plain one.

Certificates are verified by default against the system store (certifi's bundle where the system
store is empty), ``ca_bundle`` for a private CA, ``insecure`` to skip verification.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# One TLS record's plaintext at most (2**14 bytes): read() allocates this much before shrinking
# the result, and a 256 KiB allocation goes through mmap/munmap (~tens of us per read).
_READ_MAX = 16 * 1024
HANDSHAKE_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class TlsSettings:
    """How an https endpoint's certificate is checked: ``ca_bundle`` (a PEM file of trusted CAs,
    instead of the system store) and ``insecure`` (no verification at all)."""

    ca_bundle: str | None = None
    insecure: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"ca_bundle": self.ca_bundle, "insecure": self.insecure}


class TlsError(Exception):
    """A TLS failure, its message one line naming the host and the reason (and the fix)."""


@functools.lru_cache(maxsize=16)
def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """The client ``SSLContext`` for ``settings`` (one per process and settings: loading the
    system store costs milliseconds). HTTP/1.1 is offered by ALPN."""
    if settings.insecure:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif settings.ca_bundle:
        ctx = ssl.create_default_context(cafile=settings.ca_bundle)
    else:
        ctx = ssl.create_default_context()
        if not ctx.cert_store_stats().get("x509_ca"):
            with contextlib.suppress(ImportError, OSError):  # no system store: certifi's bundle
                import certifi

                ctx.load_verify_locations(cafile=certifi.where())
    with contextlib.suppress(NotImplementedError):
        ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def describe(exc: BaseException, host: str, port: int) -> str:
    """One line for a TLS failure with ``host:port``: what went wrong and what to do."""
    if isinstance(exc, TlsError):
        return str(exc)
    if isinstance(exc, ssl.SSLCertVerificationError):
        reason = exc.verify_message or exc.reason or str(exc)
        if "hostname mismatch" in reason.lower() or "ip address mismatch" in reason.lower():
            return (
                f"TLS certificate of {host} is not valid for that name: {reason}; connect by a "
                "name the certificate lists, or give --insecure"
            )
        if "expired" in reason or "not yet valid" in reason:
            fix = "renew it on the server, or give --insecure"
        else:
            fix = "give --ca-bundle FILE (the CA that signed it) or --insecure"
        return f"TLS certificate of {host} not trusted: {reason}; {fix}"
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or str(exc)
        if reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG",
                      "HTTP_REQUEST", "UNKNOWN_PROTOCOL"):
            return (
                f"{host}:{port} did not answer TLS ({reason}): it may speak plain HTTP; "
                f"try http://{host}:{port}"
            )
        return f"TLS with {host}:{port} failed: {reason}"
    return f"TLS with {host}:{port} failed: {type(exc).__name__}: {exc}"


class TlsSession:
    """One TLS connection over a raw non-blocking socket (client side)."""

    __slots__ = ("obj", "incoming", "outgoing", "sock", "host", "port", "close_notify")

    def __init__(
        self, ctx: ssl.SSLContext, sock: socket.socket, host: str, port: int
    ) -> None:
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname=host)
        self.sock = sock
        self.host = host
        self.port = port
        #: The peer's close_notify arrived: a connection close after it is the peer's own end,
        #: not a cut (a TCP close without it cannot be told from a truncation).
        self.close_notify = False

    async def handshake(self, timeout_s: float = HANDSHAKE_TIMEOUT_S) -> None:
        """Do the handshake on the socket; raises :class:`TlsError` (one line) on failure."""
        try:
            await asyncio.wait_for(self._handshake(), timeout_s)
        except TimeoutError:
            raise TlsError(
                f"no TLS handshake answer from {self.host}:{self.port} within {timeout_s:g} s "
                f"(does it speak plain HTTP? try http://{self.host}:{self.port})"
            ) from None
        except (ssl.SSLError, OSError) as exc:
            raise TlsError(describe(exc, self.host, self.port)) from None

    async def _handshake(self) -> None:
        loop = asyncio.get_running_loop()
        first = True
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            if self.outgoing.pending:
                await loop.sock_sendall(self.sock, self.outgoing.read())
            data = await loop.sock_recv(self.sock, 65536)
            if first and data.startswith(b"HTTP/"):
                raise TlsError(
                    f"{self.host}:{self.port} answered plain HTTP, not TLS; "
                    f"use http://{self.host}:{self.port}"
                )
            first = False
            if not data:
                raise TlsError(
                    f"{self.host}:{self.port} closed the connection during the TLS handshake "
                    f"(does it speak TLS? try http://{self.host}:{self.port})"
                )
            self.incoming.write(data)
        if self.outgoing.pending:
            await loop.sock_sendall(self.sock, self.outgoing.read())

    def closed_cleanly(self) -> bool:
        """At the connection's end: whether the peer sent close_notify. Records OpenSSL read
        ahead but did not yet process (a close_notify in the same segment as the last data)
        are processed here first."""
        if not self.close_notify:
            try:
                if self.obj.read(1) == b"":  # read() gives b"" only after close_notify
                    self.close_notify = True
            except ssl.SSLZeroReturnError:
                self.close_notify = True
            except ssl.SSLError:  # no more records (SSLWantReadError) or a broken one
                pass
        return self.close_notify

    def encrypt(self, plaintext: bytes) -> bytes:
        """The TLS records carrying ``plaintext``, to be sent on the socket."""
        self.obj.write(plaintext)
        return self.outgoing.read()

    def decrypter(self, fail: Callable[[str, str], None]) -> Callable[[bytes], bytes]:
        """A function for the stream reader: ciphertext just read -> the plaintext it completes
        (``b""`` while a record is incomplete, or for a record without application data such as
        a TLS 1.3 session ticket). A TLS error calls ``fail("tls_error", detail)`` and gives
        ``b""``; the peer's close_notify gives what was decrypted before it (the TCP end of
        stream follows) and sets :attr:`close_notify`."""
        incoming, outgoing = self.incoming, self.outgoing
        # the C object under ssl.SSLObject: its read() and pending() skip a Python-level
        # wrapper call per read (about 1 us each on these machines)
        obj = getattr(self.obj, "_sslobj", self.obj)
        read, write, sock = obj.read, incoming.write, self.sock
        want_read = ssl.SSLWantReadError

        def decrypt(data: bytes) -> bytes:
            write(data)
            try:
                plain = read(_READ_MAX)
                if not plain:  # read() gives b"" (not SSLWantReadError) after close_notify
                    self.close_notify = True
                    return b""
            except want_read:
                plain = b""
            except ssl.SSLZeroReturnError:
                self.close_notify = True
                return b""
            except ssl.SSLError as exc:
                fail("tls_error", describe(exc, self.host, self.port))
                return b""
            if incoming.pending or obj.pending():  # several records in one read
                parts = [plain]
                while incoming.pending or obj.pending():
                    try:
                        more = read(_READ_MAX)
                    except want_read:
                        break
                    except ssl.SSLZeroReturnError:
                        self.close_notify = True
                        break
                    except ssl.SSLError as exc:
                        fail("tls_error", describe(exc, self.host, self.port))
                        return b""
                    if not more:  # close_notify: nothing more will come (bytes after it,
                        self.close_notify = True  # still pending, must not loop here)
                        break
                    parts.append(more)
                plain = b"".join(parts)
            if outgoing.pending:  # e.g. a key update the peer asked for: best effort
                with contextlib.suppress(OSError):
                    sock.send(outgoing.read())
            return plain

        return decrypt


def preflight(host: str, port: int, settings: TlsSettings,
              timeout_s: float = HANDSHAKE_TIMEOUT_S) -> dict[str, Any]:
    """Connect to ``host:port`` and make one TLS handshake the way streams will, before any
    load: raises :class:`TlsError` (one line: host, reason, fix) when TLS fails, ConnectionError
    when the host cannot be resolved or reached at all. Returns what was
    negotiated: ``{"version", "cipher", "alpn", "verified", "ca_bundle", "insecure"}``."""

    async def go() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ConnectionError(f"cannot resolve {host}: {exc}") from None
        family, _, _, _, addr = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            try:
                await asyncio.wait_for(loop.sock_connect(sock, addr), timeout_s)
            except (OSError, TimeoutError) as exc:
                raise ConnectionError(
                    f"cannot connect to {host}:{port}: {exc or 'timed out'}"
                ) from None
            session = TlsSession(client_context(settings), sock, host, port)
            await session.handshake(timeout_s)
            cipher = session.obj.cipher()
            return {
                "version": session.obj.version(),
                "cipher": cipher[0] if cipher else None,
                "alpn": session.obj.selected_alpn_protocol(),
                "verified": not settings.insecure,
                **settings.to_dict(),
            }
        finally:
            sock.close()

    return asyncio.run(go())


def check_ca_bundle(path: str | None) -> None:
    """Raise ValueError (one line) if ``--ca-bundle`` names no readable file."""
    if path is not None and not os.path.isfile(path):
        raise ValueError(f"--ca-bundle {path}: no such file; give a PEM file of CA certificates")
