"""A streaming OpenAI client (completions and chat) whose timestamps come from the kernel.

Each read is timed by the kernel and handled by a reader (:mod:`infer_prof.loadgen.stamped_reader`)
whose fast path counts vLLM's steady token chunks; everything else comes here, to the general
parser of :func:`stream_request`. Connections and endpoints: :mod:`infer_prof.loadgen.endpoint`;
request bytes: :mod:`infer_prof.loadgen.openai_requests`.

Connections are kept alive and reused by the stream that opened them (one connection per stream,
as a real client pool does); a request that fails on a reused connection before any response byte
arrives is retried once on a fresh one.

``https://`` endpoints: TLS is done on the same raw socket (:mod:`infer_prof.loadgen.tls`); the
reader still takes each segment's kernel time and decrypts before the HTTP handling, so a token's
time is that of the TCP segment completing the TLS record that carries it.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.loadgen.client_health import ReadStats
from infer_prof.loadgen.endpoint import Failure, StreamConnection
from infer_prof.loadgen.http_stream import (
    MAX_BODY,
    HttpProtocolError,
    SseResponseParser,
    retry_after_s,
)
from infer_prof.loadgen.pacing import SendPacer
from infer_prof.loadgen.stamped_reader import (
    KIND_ANSWER,
    KIND_NEITHER,
    KIND_REASONING,
    ReadSinks,
    make_reader,
    read_ready,
    unwatch,
    watch,
)

_CHUNKED_END = b"\r\n0\r\n\r\n"  # how a chunked HTTP response ends


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


def chunk_kind_of(choice: Mapping[str, object]) -> int:
    """What a parsed chunk's choice carries, by the fast path's rule
    (:func:`infer_prof.loadgen.stamped_reader.chunk_kind_py`): the answer (non-empty
    ``content`` or ``tool_calls``; a completion's ``text``), else reasoning (a ``reasoning`` or
    ``reasoning_content`` string), else the answer (an empty ``content`` string), else neither."""
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return KIND_ANSWER
    content = delta.get("content")
    if (isinstance(content, str) and content) or delta.get("tool_calls"):
        return KIND_ANSWER
    if isinstance(delta.get("reasoning"), str) or isinstance(delta.get("reasoning_content"), str):
        return KIND_REASONING
    return KIND_ANSWER if isinstance(content, str) else KIND_NEITHER


def unfinished_close(saw_done: bool, finish_reason: str | None, tls: bool,
                     close_notify: bool) -> str | None:
    """Why a close-delimited 200 stream (no Content-Length, not chunked: the body ends when
    the server closes) is ``truncated``, or None when it ended: its ``[DONE]`` arrived, or a
    finish reason did and the close itself is trusted (plain TCP, or TLS with the peer's
    close_notify). Over TLS a close without close_notify may be an attacker's cut, so only
    the stream's own end counts there."""
    if saw_done:
        return None
    if tls and not close_notify:
        return ("TLS connection closed without close_notify before the stream's [DONE]: "
                "the end of a close-delimited body cannot be told from a cut")
    if finish_reason is None:
        return ("the server closed the connection before the stream ended (no [DONE], no "
                "finish reason) and the body had no length to check it against")
    return None


def undecodable(payload: bytes) -> str:
    """The failure kind of an SSE data payload the JSON parser refused: ``invalid_utf8``
    when its bytes are not UTF-8, else ``bad_event``."""
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        return "invalid_utf8"
    return "bad_event"


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
        except Failure as f:
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
    """One request and its response on ``conn``'s open socket: watch the socket with a
    kernel-timestamped reader, send, wait for the end (or ``timeout_s`` seconds), then settle
    the record (:func:`_settle`). A failure raises :class:`Failure`."""
    loop = asyncio.get_running_loop()
    sock = conn.sock
    assert sock is not None
    fd = sock.fileno()
    record.timestamp_source = conn.timestamps
    ex = _Exchange(loop.create_future(), record, on_token, pacer, conn.session)
    lags = stats.read_lag_ns if stats is not None else []
    decrypt = None
    if conn.session is not None:  # https: the reader decrypts, the request goes out encrypted
        decrypt = conn.session.decrypter(ex.fail)
        request = conn.session.encrypt(request)
    reader = ex.reader = make_reader(
        sock,
        ReadSinks(record.chunk_ns, record.chunk_tokens, lags, ex.general, ex.failed, on_token),
        decrypt=decrypt,
    )
    watch(loop, fd, reader)
    timer = loop.call_later(
        timeout_s, ex.fail, "timeout", f"no complete response within {timeout_s:g} s"
    )
    try:
        read_ready(loop)  # reads first: other streams' tokens must not wait for this send
        record.send_ns = time.perf_counter_ns()
        try:
            sent = sock.send(request)
            if sent < len(request):
                await loop.sock_sendall(sock, request[sent:])
        except OSError as exc:
            raise Failure(
                "connection_error", f"send failed: {exc}", before_response=True
            ) from None
        await ex.done
    finally:
        timer.cancel()
        unwatch(loop, fd, reader)
        reader.close()
        if stats is not None:
            stats.settle()  # bounded: the pending read lags go into the summary
        if record.output_tokens is None and reader.last_ct:
            record.output_tokens = reader.last_ct  # cut off mid-stream: the last usage seen
        record.reasoning_chunk_tokens = reader.reasoning_ct
        record.first_answer_chunk = reader.first_answer if reader.first_answer >= 0 else None
        if on_token is not None:
            total = sum(record.chunk_tokens)
            if total > reader.reported:
                on_token(total - reader.reported)
    conn.uses += 1
    _settle(ex.parser, record)
    if not ex.parser.keep_alive:
        conn.close()


class _Exchange:
    """The general path of one response: what the reader's fast path does not take (headers,
    first and last events, errors, other servers' layouts), parsed here, and how the response
    ends (``done``: its result when complete, a :class:`Failure` when not).

    Its bound methods are the reader's callbacks (:meth:`general`, :meth:`failed`; the TLS
    decrypter and the timeout call :meth:`fail`). They run once per read that misses the fast
    path, so they read their state from slots into locals, as the closures they replace did
    from cells. The reader refers back to them until ``reader.close()`` breaks the cycle."""

    __slots__ = ("done", "record", "on_token", "pacer", "session", "parser", "reader",
                 "deferred", "got_bytes", "saw_done")

    def __init__(self, done: asyncio.Future[None], record: RequestRecord,
                 on_token: Callable[[int], None] | None, pacer: SendPacer | None,
                 session: Any) -> None:
        self.done = done
        self.record = record
        self.on_token = on_token
        self.pacer = pacer
        self.session = session  # the TLS session (https), else None
        self.parser = SseResponseParser()
        self.reader: Any = None  # set once made (the reader is given these methods)
        self.deferred: list[tuple[bytes, int]] = []  # reads waiting for the pacer, in order
        self.got_bytes = False
        self.saw_done = False

    def fail(self, kind: str, detail: str) -> None:
        """End the response as failed (``kind``), unless it has already ended."""
        if not self.done.done():
            self.done.set_exception(Failure(kind, detail, before_response=not self.got_bytes))

    def failed(self, errno: int) -> None:
        """The reader's receive failed with ``errno`` (0: unknown)."""
        reason = os.strerror(errno) if errno else "receive failed"
        self.fail("connection_error", f"{reason} (errno {errno})")

    def general(self, data: bytes, t_ns: int) -> bool:
        """Everything the reader's fast path does not take. With a pacer, a read that ends
        like a whole chunked response (and every read after it) is parsed when the pacer has
        room: False keeps the reader sending reads here meanwhile."""
        pacer = self.pacer
        if pacer is not None:
            deferred = self.deferred
            if deferred or (data.endswith(_CHUNKED_END) and self.parser.status):
                deferred.append((data, t_ns))
                if len(deferred) == 1:
                    pacer.run(self.parse_deferred)
                return False
        return self.parse(data, t_ns)

    def parse_deferred(self) -> None:
        """Parse the reads the pacer held back, in arrival order (with their arrival times)."""
        deferred, done = self.deferred, self.done
        fast = False
        while deferred and not done.done():  # done: ended meanwhile (timeout, cancelled)
            data, t_ns = deferred.pop(0)
            fast = self.parse(data, t_ns)
        deferred.clear()
        self.reader.fast = fast

    def parse(self, data: bytes, t_ns: int) -> bool:
        """Parse one read (headers, first and last events, several events in one read, end of
        stream); return whether the parser is at a chunk boundary (so the next read may take
        the fast path)."""
        parser, record = self.parser, self.record
        if not data:
            parser.feed_eof(t_ns)
            if not parser.complete:
                self.fail("connection_closed", "server closed the connection mid-response")
                return False
            if parser.close_delimited and parser.status == 200 and not parser.not_sse:
                session = self.session
                cut = unfinished_close(self.saw_done, record.finish_reason, session is not None,
                                       session is not None and session.closed_cleanly())
                if cut:
                    self.fail("truncated", cut)
                    return False
        else:
            self.got_bytes = True
            tokens = 0
            handle_event = self.handle_event
            try:
                for payload, t in parser.feed(data, t_ns):
                    tokens += handle_event(payload, t)
            except HttpProtocolError as exc:
                self.fail(exc.kind, str(exc))
                return False
            if parser.not_sse and len(parser.body) >= MAX_BODY and not parser.complete:
                self.fail("not_sse", not_sse_detail(parser))  # enough of the page to say what
                return False
            on_token = self.on_token
            if tokens and on_token is not None and not parser.complete:
                on_token(tokens)  # progress for servers whose chunks miss the fast path
                self.reader.reported += tokens
        done = self.done
        if parser.complete and not done.done():
            record.done_ns = t_ns
            done.set_result(None)
        # a stream counted per chunk stays so: the fast path counts by cumulative usage
        return parser.at_chunk_boundary and record.token_count_source == "usage"

    def handle_event(self, payload: bytes, t_ns: int) -> int:
        """Account one SSE data payload (the general path); return the tokens it carried.

        Tokens come from the server's per-chunk usage (``completion_tokens``, cumulative) when
        its content chunks carry it; else each chunk is counted on its own (:func:`chunk_tokens`)
        and a final usage, if any, gives the total. A chunk with no generated text (a role-only
        first chunk, an empty ``choices`` list) carries no token and cannot be the first."""
        if payload == b"[DONE]":
            self.saw_done = True
            return 0
        try:
            obj = orjson.loads(payload)
        except ValueError:
            kind = undecodable(payload)
            what = "not UTF-8" if kind == "invalid_utf8" else "unparseable"
            self.fail(kind, f"{what} SSE data: {payload[:120]!r}")
            return 0
        if not isinstance(obj, dict):
            return 0
        if "error" in obj and not obj.get("choices"):
            self.fail("server_error", error_message(obj["error"])[:300])
            return 0
        record = self.record
        usage = obj.get("usage")
        if not isinstance(usage, dict):
            usage = None
        choices = obj.get("choices")
        k = 0
        if choices and isinstance(choices, list) and isinstance(choices[0], dict):
            choice = choices[0]
            ct = usage.get("completion_tokens") if usage else None
            if ct is not None and record.token_count_source == "usage":
                reader = self.reader
                k = int(ct) - reader.last_ct
                reader.last_ct = int(ct)
            else:
                # no usage on this content chunk (or earlier ones): count the chunk itself; a
                # usage here is the final total (below), not this chunk's share
                k = chunk_tokens_of(choice)
                if k:
                    record.token_count_source = "chunks"
            if k > 0:
                reader = self.reader
                if reader.first_answer < 0 or reader.reasoning_ct > 0:  # as the fast path
                    carries = chunk_kind_of(choice)
                    if carries == KIND_REASONING:
                        reader.reasoning_ct += k
                    elif carries == KIND_ANSWER and reader.first_answer < 0:
                        reader.first_answer = len(record.chunk_ns)
                record.chunk_ns.append(t_ns)
                record.chunk_tokens.append(k)
            else:
                k = 0
            if choice.get("finish_reason"):
                record.finish_reason = choice["finish_reason"]
        if usage:
            if usage.get("completion_tokens") is not None:
                record.output_tokens = int(usage["completion_tokens"])
            if usage.get("prompt_tokens") is not None:
                record.prompt_tokens = int(usage["prompt_tokens"])
            details = usage.get("completion_tokens_details")
            if isinstance(details, dict) and details.get("reasoning_tokens") is not None:
                record.reasoning_tokens_usage = int(details["reasoning_tokens"])
            read_cached_tokens(usage, record)
        if "metrics" in obj:
            read_spec_decoding(obj["metrics"], record)
        return k


def read_cached_tokens(usage: Mapping[str, object], record: RequestRecord) -> None:
    """The prompt tokens the server found in its prefix cache, where its usage says it:
    ``usage.prompt_tokens_details.cached_tokens`` (OpenAI's field; vLLM sends it when started
    with ``--enable-prompt-tokens-details``)."""
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        record.cached_tokens = details["cached_tokens"]


def read_spec_decoding(metrics: Any, record: RequestRecord) -> None:
    """A request's speculative decoding as the server reports it in the response's
    ``metrics.speculative_decoding`` (vLLM 0.32 with ``--per-request-spec-decode-metrics``, on
    the stream's final usage chunk: ``vllm/entrypoints/generate/base/protocol.py``,
    ``SpeculativeDecodingMetrics``): verify steps, draft tokens proposed and accepted."""
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if not isinstance(spec, dict):
        return
    fields = (("num_spec_steps", "spec_steps"), ("num_draft_tokens", "spec_draft_tokens"),
              ("num_accepted_draft_tokens", "spec_accepted_tokens"))
    for key, attr in fields:
        value = spec.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            setattr(record, attr, value)


def _settle(parser: SseResponseParser, record: RequestRecord) -> None:
    """Fill in what the ended response says as a whole: an error status (``http_<status>``,
    ``rate_limited`` with its ``Retry-After`` in seconds) or a 200 that is no event stream
    (``not_sse``), each with the start of its body; else the output token total and where it
    came from (per-chunk usage, chunks counted, or a final usage total)."""
    if parser.status != 200 or parser.not_sse:
        body = body_text(parser)
        if parser.status == 429:
            after = parser.headers.get("retry-after")
            record.error = "rate_limited"
            record.retry_after_s = retry_after_s(after, time.time())
            record.error_detail = (f"429 {parser.reason}; Retry-After: {after}; {body}"[:300]
                                   if after is not None else body[:300] or f"429 {parser.reason}")
        elif parser.status != 200:
            record.error = f"http_{parser.status}"
            record.error_detail = body[:300] or parser.reason
        else:
            record.error, record.error_detail = "not_sse", not_sse_detail(parser)
        return
    if record.output_tokens is None and record.chunk_tokens:
        record.output_tokens = sum(record.chunk_tokens)
        record.token_count_source = "chunks"
    elif record.token_count_source == "chunks" and record.output_tokens is not None:
        record.token_count_source = "usage_total"  # total from usage, per-chunk split counted


def body_text(parser: SseResponseParser) -> str:
    """The kept start of a non-SSE body as one line of text."""
    return bytes(parser.body).decode("utf-8", "replace").strip().replace("\n", " ")


def not_sse_detail(parser: SseResponseParser) -> str:
    """A 200 that is no event stream: its Content-Type and the start of its body."""
    ctype = parser.headers.get("content-type", "")
    return f"200 with Content-Type {ctype!r}, not an event stream: {body_text(parser)}"[:300]
