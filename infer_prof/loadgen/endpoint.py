"""Where requests go and the connections that carry them: :class:`Endpoint` (URL, auth, TLS),
:func:`resolve`, and :class:`StreamConnection` (a kept-alive TCP socket with kernel receive
timestamps, no BBR pacing, TLS on the raw socket for ``https://``).

Connections are kept alive and reused by the stream that opened them (one connection per stream,
as a real client pool does); a request that fails on a reused connection before any response byte
arrives is retried once on a fresh one.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from infer_prof.loadgen.stamped_reader import SO_TIMESTAMPNS
from infer_prof.loadgen.tls import (
    TlsError,
    TlsSession,
    TlsSettings,
    check_ca_bundle,
    client_context,
)

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



class Failure(Exception):
    """A request that failed: ``kind`` (the record's ``error``), ``detail``, and whether it
    failed ``before_response`` (before any response byte: retried once on a fresh connection)."""

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
            raise Failure("connect_failed", f"{type(exc).__name__}: {exc}") from None
        ep = self.endpoint
        if ep is not None and ep.tls is not None:
            session = TlsSession(client_context(ep.tls), sock, ep.host, ep.port)
            try:
                await session.handshake()
            except TlsError as exc:
                sock.close()
                raise Failure("tls_error", str(exc)) from None
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
