"""The streaming client against real servers that misbehave, with both readers (C and Python).

Each case is served byte for byte by :class:`MisbehavingServer` (a real socket server on
127.0.0.1, TLS where the case needs it) and must end by itself, well inside the request timeout,
with its own failure kind (docs/error-kinds.md); every request the server read must be in the
client's records (completed + failed = the server's count).
"""

from __future__ import annotations

import asyncio
import gzip
import time

import pytest

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.loadgen import stamped_reader
from infer_prof.loadgen.client import stream_request
from infer_prof.loadgen.endpoint import Endpoint, StreamConnection, resolve
from infer_prof.loadgen.http_stream import MAX_EVENT
from infer_prof.loadgen.openai_requests import build_completion_request
from infer_prof.servers.certs import CertFiles, make_certs

from .misbehaving_server import MisbehavingServer, Reply
from .test_stream_client import HEAD, chunk, full_stream, token_event

pytestmark = pytest.mark.integration

TIMEOUT_S = 4.0  # per request; every case here must end well before it


@pytest.fixture(autouse=True, params=["c", "python"])
def reader(request, monkeypatch):
    if request.param == "c":
        assert stamped_reader.READER == "c", (
            "the C reader was not built (infer_prof/loadgen/_stamped.c)")
    monkeypatch.setenv("INFER_PROF_READER", request.param)
    return request.param


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("misbehaving-tls"))


async def _ask(url: str, n: int, ca: str | None) -> list[RequestRecord]:
    endpoint = Endpoint.from_url(url, ca_bundle=ca)
    family, addr = await resolve(endpoint)
    conn = StreamConnection(addr, family, endpoint)
    request = build_completion_request(endpoint, "m", [1] * 7, 8)
    records = []
    try:
        for i in range(n):  # one stream: requests one after another, the connection reused
            record = RequestRecord(index=i, input_len=7, max_tokens=8)
            await stream_request(conn, request, record, TIMEOUT_S)
            records.append(record)
    finally:
        conn.close()
    return records


def ask(reply: Reply, n: int = 3, certs: CertFiles | None = None) -> list[RequestRecord]:
    """``n`` requests on one stream against a server answering each with ``reply``; checks
    that they ended by themselves and that the records account for every request served."""
    with MisbehavingServer(reply, tls=certs) as server:
        t0 = time.monotonic()
        records = asyncio.run(_ask(server.url, n, str(certs.ca) if certs else None))
        took = time.monotonic() - t0
        assert took < n * TIMEOUT_S * 0.5, f"{took:.1f} s: a case waited for its timeout"
        assert server.requests == len(records) == n
        for head in server.heads:
            assert b"\r\nAccept-Encoding: identity\r\n" in head
    return records


def kinds(records: list[RequestRecord]) -> list[str | None]:
    return [r.error for r in records]


# --- wrong chunk sizes ---------------------------------------------------------------------------


@pytest.mark.parametrize("off", [-10, -1, 1, 12])
def test_a_chunk_size_that_does_not_match_its_data_is_bad_chunk(off):
    writes = full_stream(6, compact=True)
    data = token_event(3)
    writes[3] = b"%x\r\n%s\r\n" % (len(data) + off, data)  # the size line lies by ``off``
    records = ask(Reply(writes))
    assert kinds(records) == ["bad_chunk"] * 3, [r.error_detail for r in records]
    # the tokens of the reads before it are kept; a size too long may have delivered the whole
    # event before the next read showed the lie (unless both writes arrived in one read); a read
    # that carries the lie fails whole, so when the token before it came in that same read (the
    # server's writes delayed together on a loaded machine) one token is kept, not two
    expected = ([1], [1, 1], [1, 1, 1]) if off > 0 else ([1], [1, 1])
    assert all(r.chunk_tokens in expected for r in records), [r.chunk_tokens for r in records]
    assert "wrong chunk size" in (records[0].error_detail or "")


def test_a_chunk_size_line_that_is_not_hex_is_bad_chunk():
    writes = full_stream(4, compact=True)
    writes[2] = b"0x5e\r\n" + writes[2].split(b"\r\n", 1)[1]
    assert kinds(ask(Reply(writes), n=2)) == ["bad_chunk"] * 2


# --- lines longer than the client keeps ---------------------------------------------------------


def test_an_sse_line_longer_than_the_buffer_is_line_too_long():
    huge = b"data: " + b"x" * (MAX_EVENT + 64 * 1024)  # no end of line, then a proper end
    writes = [HEAD, chunk(token_event(1)), chunk(huge), chunk(b"\n\n") + b"0\r\n\r\n"]
    records = ask(Reply(writes), n=2)
    assert kinds(records) == ["line_too_long"] * 2
    assert records[0].chunk_tokens == [1]


def test_a_chunk_size_line_without_end_is_line_too_long():
    writes = [HEAD, chunk(token_event(1)), b"1" * 9000]  # then nothing: the server waits
    records = ask(Reply(writes, end="hang"), n=2)
    assert kinds(records) == ["line_too_long"] * 2


# --- invalid UTF-8 -------------------------------------------------------------------------------


@pytest.mark.parametrize("which", [1, 3])  # the first event (general parser), a steady one
def test_invalid_utf8_in_an_event_is_invalid_utf8(which):
    writes = full_stream(5, compact=True)
    bad = token_event(which).replace(b'"text":" t"', b'"text":"\xff\xfe t"')
    writes[which] = chunk(bad)
    records = ask(Reply(writes))
    assert kinds(records) == ["invalid_utf8"] * 3, [r.error_detail for r in records]
    assert records[0].chunk_tokens == [1] * (which - 1)


def test_valid_multibyte_utf8_still_takes_the_fast_path():
    writes = full_stream(5, compact=True)
    for i in (2, 3):
        writes[i] = chunk(token_event(i).replace(b'"text":" t"', "\"text\":\" 漢😀é\"".encode()))
    records = ask(Reply(writes), n=1)
    assert records[0].ok and records[0].chunk_tokens == [1] * 5


# --- compression the client did not ask for ------------------------------------------------------


def test_gzip_it_did_not_ask_for_is_unexpected_encoding():
    body = b"".join(token_event(i) for i in range(1, 5)) + b"data: [DONE]\n\n"
    head = HEAD.replace(b"\r\n\r\n", b"\r\ncontent-encoding: gzip\r\n\r\n")
    records = ask(Reply([head, chunk(gzip.compress(body)), b"0\r\n\r\n"]))
    assert kinds(records) == ["unexpected_encoding"] * 3
    assert "gzip" in (records[0].error_detail or "")


# --- HTTP/1.0: the body ends when the server closes ---------------------------------------------

HEAD_10 = b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"


def events(n: int, done: bool = True) -> list[bytes]:
    out = [token_event(i) for i in range(1, n)] + [token_event(n, finish="length")]
    return out + [b"data: [DONE]\n\n"] if done else out


def test_close_delimited_stream_that_ends_is_complete():
    records = ask(Reply([HEAD_10, *events(5)], end="close"))
    assert all(r.ok for r in records), [r.error_detail for r in records]
    assert [r.chunk_tokens for r in records] == [[1] * 5] * 3
    assert [r.output_tokens for r in records] == [5] * 3


@pytest.mark.parametrize("cut", ["between", "mid-event"])
def test_close_delimited_stream_cut_off_is_truncated(cut):
    writes = [HEAD_10, *[token_event(i) for i in range(1, 4)]]
    if cut == "mid-event":
        writes.append(token_event(4)[:40])
    records = ask(Reply(writes, end="close"))
    assert kinds(records) == ["truncated"] * 3, [r.error_detail for r in records]
    assert records[0].chunk_tokens == [1, 1, 1] and records[0].output_tokens == 3


# --- rate limits and pages that are no event stream ----------------------------------------------

RATE_LIMITED = (b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"
                b"retry-after: 7\r\ncontent-length: 52\r\n\r\n"
                b'{"error":{"message":"Rate limit reached","code":429}')
HTML = (b"<html><head><title>502 Bad Gateway</title></head>"
        b"<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>")


def test_429_with_retry_after_is_rate_limited_with_its_wait():
    records = ask(Reply([RATE_LIMITED]))  # kept alive: three answers on one connection
    assert kinds(records) == ["rate_limited"] * 3
    assert [r.retry_after_s for r in records] == [7.0] * 3
    assert "Retry-After: 7" in (records[0].error_detail or "")
    assert "Rate limit reached" in (records[0].error_detail or "")


def test_a_200_html_page_is_not_sse():
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n"
            b"content-length: %d\r\n\r\n" % len(HTML))
    records = ask(Reply([head, HTML]))
    assert kinds(records) == ["not_sse"] * 3
    assert "text/html" in (records[0].error_detail or "")
    assert "502 Bad Gateway" in (records[0].error_detail or "")


def test_a_200_html_page_that_never_ends_is_not_sse_without_waiting():
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ntransfer-encoding: chunked\r\n\r\n"
    records = ask(Reply([head, chunk(HTML * 100)], end="hang"), n=2)
    assert kinds(records) == ["not_sse"] * 2


# --- TLS: a close without close_notify -----------------------------------------------------------

HEAD_CLOSE = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")


def test_tls_close_without_close_notify_before_done_is_truncated(certs):
    reply = Reply([HEAD_CLOSE, *events(4, done=False)], end="close")
    records = ask(reply, certs=certs)
    assert kinds(records) == ["truncated"] * 3, [r.error_detail for r in records]
    assert "close_notify" in (records[0].error_detail or "")
    assert records[0].chunk_tokens == [1] * 4


def test_tls_close_notify_after_the_finish_is_complete(certs):
    records = ask(Reply([HEAD_CLOSE, *events(4, done=False)], end="close_notify"), certs=certs)
    assert all(r.ok for r in records), [r.error_detail for r in records]


def test_tls_close_after_done_is_complete_without_close_notify(certs):
    records = ask(Reply([HEAD_CLOSE, *events(4)], end="close"), certs=certs)
    assert all(r.ok for r in records), [r.error_detail for r in records]


def test_tls_chunked_stream_cut_without_its_last_chunk_fails(certs):
    records = ask(Reply(full_stream(6, compact=True)[:4], end="close"), certs=certs)
    assert kinds(records) == ["connection_closed"] * 3
    assert records[0].chunk_tokens == [1] * 3
