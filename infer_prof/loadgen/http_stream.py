"""Incremental parser of one HTTP/1.1 response carrying a Server-Sent-Events stream.

Pure: it is fed bytes with their arrival time and hands back complete SSE ``data:`` payloads,
each stamped with the arrival time of the read that completed it. It understands the status line,
headers, ``Transfer-Encoding: chunked``, ``Content-Length`` and read-until-close bodies.

What it refuses, each as an :class:`HttpProtocolError` whose ``kind`` is the request's failure
kind (docs/error-kinds.md): a chunk whose declared size does not match its data (``bad_chunk``),
a chunk-size line or an SSE event longer than the parser keeps (``line_too_long``), a 200 body in
a ``Content-Encoding`` the client did not ask for (``unexpected_encoding``), anything else that
is not HTTP/1.x (``protocol_error``). A 200 whose ``Content-Type`` is not ``text/event-stream``
(an HTML error page from a proxy) is kept as a body, like an error status's (``not_sse``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

_MAX_HEAD = 64 * 1024
#: The longest chunk-size (or trailer) line kept while waiting for its CRLF, in bytes.
MAX_SIZE_LINE = 4 * 1024
#: The longest SSE event (or unterminated line) kept while waiting for its end, in bytes. A
#: vLLM token event is ~300 bytes, one with 20 logprobs per token a few KB.
MAX_EVENT = 1024 * 1024
#: The most of a non-SSE body (an error status's, an HTML page's) kept for the record, in bytes.
MAX_BODY = 8192
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")


class HttpProtocolError(Exception):
    """The peer sent something that is not a valid HTTP/1.1 SSE response; ``kind`` is the
    request's failure kind (``protocol_error``, ``bad_chunk``, ``line_too_long``,
    ``unexpected_encoding``)."""

    def __init__(self, message: str, kind: str = "protocol_error") -> None:
        super().__init__(message)
        self.kind = kind


def retry_after_s(value: str | None, now_s: float) -> float | None:
    """A ``Retry-After`` header's wait in seconds: delay-seconds as given, an HTTP-date as
    ``date - now_s`` (``now_s``: Unix seconds; never below 0); None when absent or
    unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now_s)


@dataclass
class SseResponseParser:
    """Feed with ``feed(data, t_ns)``; read ``status``, ``headers``, ``complete``, ``body``."""

    status: int | None = None
    reason: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    complete: bool = False
    keep_alive: bool = True
    body: bytearray = field(default_factory=bytearray)  # non-SSE (error) bodies, capped
    #: A 200 whose Content-Type says it is not an event stream: its body goes to ``body``.
    not_sse: bool = False
    #: The body ends when the peer closes (no Content-Length, not chunked).
    close_delimited: bool = False
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
            and not self.not_sse
            and self._chunk_state == "size"
            and not self.complete
            and not self._buf
            and not self._sse
        )
        return events

    def feed_eof(self, t_ns: int) -> list[tuple[bytes, int]]:
        """The peer closed the connection: a read-until-close body ends here. An event cut
        off by the close (no blank line after it) is dropped, as the SSE standard says; whether
        the stream itself ended is the caller's to judge (``[DONE]``, a finish reason)."""
        if self.status is not None and self.close_delimited:
            self.complete = True
            self._sse.clear()
        self.keep_alive = False
        return []

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
            length = self.headers["content-length"]
            if not length.isdigit():
                raise HttpProtocolError(f"bad Content-Length {length[:40]!r}")
            self._remaining = int(length)
            if self._remaining == 0:
                self.complete = True
        conn = self.headers.get("connection", "").lower()
        self.keep_alive = parts[0] == "HTTP/1.1" and conn != "close"
        if not self._chunked and self._remaining is None:
            self.keep_alive = False
            self.close_delimited = True
        if self.status == 200:
            self._check_content_headers()

    def _check_content_headers(self) -> None:
        """A 200 must be an uncompressed event stream: a ``Content-Encoding`` (the client asks
        ``Accept-Encoding: identity``) is refused at once; a ``Content-Type`` other than
        ``text/event-stream`` (an HTML or JSON page) marks the body ``not_sse``."""
        encoding = self.headers.get("content-encoding", "").strip().lower()
        if encoding and encoding != "identity":
            raise HttpProtocolError(
                f"the server sent Content-Encoding: {encoding[:40]} although the request asked "
                "for none (Accept-Encoding: identity); switch compression off for this path "
                "(a proxy's gzip setting)",
                "unexpected_encoding",
            )
        ctype = self.headers.get("content-type")
        if ctype is not None and ctype.split(";", 1)[0].strip().lower() != "text/event-stream":
            self.not_sse = True

    def _take_body(self, data: bytes) -> None:
        if not data:
            return
        if self.status == 200 and not self.not_sse:
            self._sse += data
        elif len(self.body) < MAX_BODY:
            self.body += data[: MAX_BODY - len(self.body)]

    def _feed_simple_chunks(self, data: bytes, out: list[tuple[bytes, int]], t_ns: int) -> bytes:
        """Fast path for the steady state of a stream: whole chunks that each hold exactly one
        single-line SSE event (``data: ...\\n\\n``), which is what vLLM sends per token.
        Appends their payloads to ``out`` and returns the bytes it did not take (from the first
        chunk that is anything else), for the general parser."""
        pos = 0
        n = len(data)
        status_ok = self.status == 200 and not self.not_sse
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
            if size == 0 or size > MAX_EVENT or end + 2 > n or data[end : end + 2] != b"\r\n":
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
                if buf[pos : pos + 2] != b"\r\n":
                    raise HttpProtocolError(
                        f"a chunk's data does not end where its size line said "
                        f"({bytes(buf[pos : pos + 12])!r} instead of CRLF): wrong chunk size",
                        "bad_chunk",
                    )
                pos += 2
                self._chunk_state = "size"
            else:  # "size" or "trailer": both are lines
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if n - pos > MAX_SIZE_LINE:
                        raise HttpProtocolError(
                            f"a chunk-size line longer than {MAX_SIZE_LINE} bytes "
                            f"(starts {bytes(buf[pos : pos + 40])!r})",
                            "line_too_long",
                        )
                    break
                line = bytes(buf[pos:eol])
                pos = eol + 2
                if state == "trailer":
                    if not line:
                        self.complete = True
                    continue
                digits = line.split(b";", 1)[0].strip(b" \t")
                if not _HEX.fullmatch(digits):
                    raise HttpProtocolError(f"bad chunk size line {line[:40]!r}", "bad_chunk")
                size = int(digits, 16)
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
            if end - start > MAX_EVENT:
                self._too_long(sse, start)
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
        if len(sse) > MAX_EVENT:
            self._too_long(sse, 0)

    @staticmethod
    def _too_long(sse: bytearray, start: int) -> None:
        raise HttpProtocolError(
            f"an SSE event or line longer than {MAX_EVENT} bytes "
            f"(starts {bytes(sse[start : start + 40])!r})",
            "line_too_long",
        )


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
