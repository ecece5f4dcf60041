"""Incremental parser of one HTTP/1.1 response carrying a Server-Sent-Events stream.

Pure: it is fed bytes with their arrival time and hands back complete SSE ``data:`` payloads,
each stamped with the arrival time of the read that completed it. It understands the status line,
headers, ``Transfer-Encoding: chunked``, ``Content-Length`` and read-until-close bodies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

_MAX_HEAD = 64 * 1024


class HttpProtocolError(Exception):
    """The peer sent something that is not a valid HTTP/1.1 response."""


@dataclass
class SseResponseParser:
    """Feed with ``feed(data, t_ns)``; read ``status``, ``headers``, ``complete``, ``body``."""

    status: int | None = None
    reason: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    complete: bool = False
    keep_alive: bool = True
    body: bytearray = field(default_factory=bytearray)  # non-SSE (error) bodies, capped
    _buf: bytearray = field(default_factory=bytearray)
    _chunked: bool = False
    _remaining: int | None = None  # Content-Length bytes still to come
    _chunk_left: int = 0  # bytes left in the current chunk (chunked encoding)
    _chunk_state: str = "size"  # "size" | "data" | "crlf" | "trailer"
    _sse: bytearray = field(default_factory=bytearray)
    #: True between whole chunks of a 200 chunked body with nothing buffered: the next bytes
    #: start a new chunk (lets a caller take whole single-event chunks on a fast path).
    at_chunk_boundary: bool = False

    def feed(self, data: bytes, t_ns: int) -> list[tuple[bytes, int]]:
        """Consume received bytes; return the SSE data payloads completed by them, with ``t_ns``."""
        events: list[tuple[bytes, int]] = []
        if self.status is None:
            self._buf += data
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > _MAX_HEAD:
                    raise HttpProtocolError("response head larger than 64 KiB")
                return events
            self._parse_head(bytes(self._buf[:end]))
            data = bytes(self._buf[end + 4 :])
            self._buf.clear()
        if self._chunked:
            if self._chunk_state == "size" and not self._buf and not self._sse:
                data = self._feed_simple_chunks(data, events, t_ns)
            if data:
                self._feed_chunked(data)
        else:
            if self._remaining is not None:
                data = data[: self._remaining]
                self._remaining -= len(data)
                if self._remaining <= 0:
                    self.complete = True
            self._take_body(data)
        self._split_events(events, t_ns)
        self.at_chunk_boundary = (
            self._chunked
            and self.status == 200
            and self._chunk_state == "size"
            and not self.complete
            and not self._buf
            and not self._sse
        )
        return events

    def feed_eof(self, t_ns: int) -> list[tuple[bytes, int]]:
        """The peer closed the connection: a read-until-close body ends here."""
        events: list[tuple[bytes, int]] = []
        if self.status is not None and not self._chunked and self._remaining is None:
            self.complete = True
            self._sse += b"\n\n"
            self._split_events(events, t_ns)
        self.keep_alive = False
        return events

    def _parse_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise HttpProtocolError(f"bad status line {lines[0][:80]!r}")
        try:
            self.status = int(parts[1])
        except ValueError:
            raise HttpProtocolError(f"bad status code in {lines[0][:80]!r}") from None
        self.reason = parts[2] if len(parts) > 2 else ""
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                self.headers[name.strip().lower()] = value.strip()
        self._chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        if not self._chunked and "content-length" in self.headers:
            self._remaining = int(self.headers["content-length"])
            if self._remaining == 0:
                self.complete = True
        conn = self.headers.get("connection", "").lower()
        self.keep_alive = parts[0] == "HTTP/1.1" and conn != "close"
        if not self._chunked and self._remaining is None:
            self.keep_alive = False

    def _take_body(self, data: bytes) -> None:
        if not data:
            return
        if self.status == 200:
            self._sse += data
        elif len(self.body) < 8192:
            self.body += data[: 8192 - len(self.body)]

    def _feed_simple_chunks(self, data: bytes, out: list[tuple[bytes, int]], t_ns: int) -> bytes:
        """Fast path for the steady state of a stream: whole chunks that each hold exactly one
        single-line SSE event (``data: ...\\n\\n``), which is what vLLM sends per token.
        Appends their payloads to ``out`` and returns the bytes it did not take (from the first
        chunk that is anything else), for the general parser."""
        pos = 0
        n = len(data)
        status_ok = self.status == 200
        while pos < n:
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                break
            try:
                size = int(data[pos:eol], 16)
            except ValueError:
                break  # chunk extensions or garbage: the general parser decides
            start = eol + 2
            end = start + size
            if size == 0 or end + 2 > n or data[end : end + 2] != b"\r\n":
                break
            if not status_ok or data.find(b"\n", start, end) != end - 2:
                break  # an error body, or several lines/events in one chunk
            if not (data.startswith(b"data: ", start) and data[end - 2 : end] == b"\n\n"):
                break
            out.append((data[start + 6 : end - 2], t_ns))
            pos = end + 2
        return data[pos:] if pos else data

    def _feed_chunked(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos = 0
        n = len(buf)
        while pos < n and not self.complete:
            state = self._chunk_state
            if state == "data":
                take = min(self._chunk_left, n - pos)
                self._take_body(bytes(buf[pos : pos + take]))
                pos += take
                self._chunk_left -= take
                if self._chunk_left == 0:
                    self._chunk_state = "crlf"
            elif state == "crlf":
                if n - pos < 2:
                    break
                pos += 2
                self._chunk_state = "size"
            else:  # "size" or "trailer": both are lines
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                line = bytes(buf[pos:eol])
                pos = eol + 2
                if state == "trailer":
                    if not line:
                        self.complete = True
                    continue
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise HttpProtocolError(f"bad chunk size line {line[:40]!r}") from None
                if size == 0:
                    self._chunk_state = "trailer"
                else:
                    self._chunk_left = size
                    self._chunk_state = "data"
        del buf[:pos]

    def _split_events(self, out: list[tuple[bytes, int]], t_ns: int) -> None:
        """Cut whole SSE events (blank-line separated; CRLF or LF line ends) off the body.
        Comment lines (``: keep-alive``) and fields other than ``data`` are skipped; ``data:``
        may be followed by a space or not. An event that reports an error without a JSON
        ``error`` object (llama.cpp's ``error: {...}`` field, an ``event: error`` with text
        data) is handed back as ``{"error": <its data>}`` so the caller sees the failure."""
        sse = self._sse
        if not sse:
            return
        if b"\r" in sse:
            sse[:] = sse.replace(b"\r\n", b"\n")
        start = 0
        while True:
            end = sse.find(b"\n\n", start)
            if end < 0:
                break
            block = bytes(sse[start:end])
            start = end + 2
            data_lines = []
            error_lines = []
            is_error = False
            for line in block.split(b"\n"):
                if line.startswith(b"data:"):
                    data_lines.append(_field_value(line, 5))
                elif line.startswith(b"error:"):
                    error_lines.append(_field_value(line, 6))
                elif line.startswith(b"event:") and _field_value(line, 6).strip() == b"error":
                    is_error = True
            if error_lines or (is_error and data_lines):
                out.append((_as_error(b"\n".join(error_lines or data_lines)), t_ns))
            elif data_lines:
                out.append((b"\n".join(data_lines), t_ns))
        del sse[:start]


def _field_value(line: bytes, skip: int) -> bytes:
    """An SSE field's value: after the colon, less one leading space (if there is one)."""
    value = line[skip:]
    return value[1:] if value.startswith(b" ") else value


def _as_error(value: bytes) -> bytes:
    """An error event's payload as a JSON object with an ``error`` key."""
    text = value.strip()
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and "error" in obj:
        return text
    return json.dumps({"error": obj if obj is not None else text.decode("utf-8", "replace")},
                      separators=(",", ":")).encode()
