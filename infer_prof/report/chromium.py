"""PNG rendering of the report's SVG charts with headless Chromium.

:func:`render_pngs` renders each SVG in one headless Chromium (Debian package ``chromium``)
driven over the DevTools protocol (:class:`DevTools`, standard library only), so the PNG is the
same drawing as the report's, at 2x pixel density.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from infer_prof.report.svg import Plot, safe_name
from infer_prof.servers.process_group import stop_group


class PngError(RuntimeError):
    """PNG rendering failed (no Chromium, or Chromium failed)."""


CHROMIUM_INSTALL_HINT = "install Debian's Chromium: apt-get update && apt-get install -y chromium"
CHROMIUM_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def find_chromium() -> str | None:
    """Path of a Chromium binary: /usr/bin/chromium, else chromium/chromium-browser on PATH."""
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


class DevTools:
    """A minimal Chrome DevTools protocol client: one WebSocket (RFC 6455), JSON commands.

    Standard library only. Events that arrive while waiting for a reply are kept in
    ``events``, in order.
    """

    _GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    def __init__(self, ws_url: str, timeout_s: float = 60.0) -> None:
        u = urlparse(ws_url)
        if u.hostname is None or u.port is None:
            raise PngError(f"bad DevTools URL {ws_url!r}")
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout_s)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise PngError("DevTools closed the connection during the handshake")
            head += chunk
        head, self._buf = head.split(b"\r\n\r\n", 1)
        accept = base64.b64encode(hashlib.sha1((key + self._GUID).encode()).digest())
        if b" 101 " not in head.split(b"\r\n")[0] or accept not in head:
            raise PngError(f"DevTools refused the WebSocket: {head[:200]!r}")
        self.events: list[dict[str, Any]] = []
        self._id = 0

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise PngError("DevTools closed the connection")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _send(self, payload: bytes, opcode: int = 0x1) -> None:
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        mask = os.urandom(4)
        # client frames are masked: XOR with the 4-byte key repeated (done as one big integer)
        key = (mask * (n // 4 + 1))[:n]
        body = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
        self.sock.sendall(head + mask + body)

    def receive(self) -> dict[str, Any]:
        """The next message (a reply or an event), answering pings on the way."""
        data = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._read(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._read(8))
            payload = self._read(n)
            opcode = b0 & 0x0F
            if opcode == 0x9:
                self._send(payload, 0xA)
                continue
            if opcode == 0x8:
                raise PngError("DevTools closed the WebSocket")
            data += payload
            if b0 & 0x80:
                message: dict[str, Any] = json.loads(data)
                return message

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send a command and return its result (events meanwhile go to ``events``)."""
        self._id += 1
        self._send(json.dumps({"id": self._id, "method": method, "params": params}).encode())
        while True:
            msg = self.receive()
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise PngError(f"DevTools {method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result
            self.events.append(msg)

    def wait_for(self, method: str) -> dict[str, Any]:
        """The first event named ``method`` (already received, or the next to arrive)."""
        for e in self.events:
            if e.get("method") == method:
                return e
        while True:
            msg = self.receive()
            self.events.append(msg)
            if msg.get("method") == method:
                return msg

    def close(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def chromium_devtools(
    chromium: str | None = None,
    extra_flags: Sequence[str] = (),
    timeout_s: float = 60.0,
    stop_grace_s: float = 10.0,
) -> Iterator[int]:
    """Run headless Chromium (:data:`CHROMIUM_FLAGS`, a throw-away profile) with remote
    debugging on a free local port; yields the port.

    On exit Chromium's whole process group (browser, renderers, GPU and crash helpers) gets
    SIGTERM (SIGKILL after ``stop_grace_s`` seconds), and the profile folder is removed only
    once every one of them has exited: a helper still writing into the profile would make the
    removal fail ("Directory not empty")."""
    binary = chromium or find_chromium()
    if binary is None:
        raise PngError(f"Chromium was not found; {CHROMIUM_INSTALL_HINT}")
    tmp = Path(tempfile.mkdtemp(prefix="infer-prof-chromium-"))
    try:
        profile = tmp / "profile"
        try:
            proc = subprocess.Popen(
                [
                    binary,
                    *CHROMIUM_FLAGS,
                    *extra_flags,
                    f"--user-data-dir={profile}",
                    "--remote-debugging-port=0",
                    "about:blank",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise PngError(
                f"cannot start Chromium {binary}: {exc}; {CHROMIUM_INSTALL_HINT}"
            ) from None
        try:
            yield _devtools_port(proc, profile / "DevToolsActivePort", timeout_s)
        finally:
            stop_group(proc, grace_s=stop_grace_s)
            if proc.stderr:
                proc.stderr.close()
    finally:
        remove_tree(tmp)


def _devtools_port(proc: subprocess.Popen[bytes], port_file: Path, timeout_s: float) -> int:
    """The port Chromium writes into ``port_file`` once DevTools listens."""
    deadline = time.monotonic() + timeout_s
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            tail = "\n".join(err.strip().splitlines()[-5:])
            raise PngError(f"Chromium exited with {proc.returncode}: {tail}")
        if time.monotonic() > deadline:
            raise PngError(f"Chromium opened no DevTools port in {timeout_s:.0f} s")
        time.sleep(0.05)
    return int(port_file.read_text().split()[0])


def remove_tree(path: Path, attempts: int = 5, pause_s: float = 0.2) -> bool:
    """Remove a throw-away folder, trying again (``attempts`` times, ``pause_s`` apart) while
    something still adds files to it; True when it is gone. A folder that cannot be removed is
    left in place rather than failing the work already done (it lies in the temp folder)."""
    for i in range(attempts):
        try:
            shutil.rmtree(path)
            return True
        except OSError:
            if not path.exists():
                return True
            if i + 1 < attempts:
                time.sleep(pause_s)
    return not path.exists()


def open_page(port: int, timeout_s: float = 60.0) -> DevTools:
    """A DevTools connection to a new blank tab of the Chromium on ``port``."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        target = json.loads(resp.read())
    return DevTools(target["webSocketDebuggerUrl"], timeout_s)


def render_pngs(
    plots: Sequence[Plot],
    out_dir: str | Path,
    *,
    chromium: str | None = None,
    scale: int = 2,
    timeout_s: float = 60.0,
) -> list[Path]:
    """Write ``<out_dir>/<plot.name>.png`` for each plot, rendered by one headless Chromium at
    ``scale`` x pixel density (a 720 x 330 chart becomes 1440 x 660 pixels); returns the paths.

    Each SVG is put alone in a blank page whose viewport is the chart's size, and the page is
    captured (DevTools ``Page.captureScreenshot``): the PNG is the report's drawing exactly.
    Raises :class:`PngError` when no Chromium is found (with the install command) or it fails.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    with chromium_devtools(chromium, timeout_s=timeout_s) as port:
        page = open_page(port, timeout_s)
        try:
            page.call(
                "Runtime.evaluate",
                expression="document.documentElement.style.background='#fff';"
                "document.body.style.margin='0';",
            )
            for plot in plots:
                page.call(
                    "Emulation.setDeviceMetricsOverride",
                    width=plot.width,
                    height=plot.height,
                    deviceScaleFactor=scale,
                    mobile=False,
                )
                page.call(
                    "Runtime.evaluate",
                    expression=f"document.body.innerHTML = {json.dumps(plot.svg)};",
                )
                shot = page.call("Page.captureScreenshot", format="png")
                path = out / f"{safe_name(plot.name)}.png"
                path.write_bytes(base64.b64decode(shot["data"]))
                paths.append(path)
        finally:
            page.close()
    return paths
