import pytest

from infer_prof.loadgen.http_stream import (
    MAX_EVENT,
    MAX_SIZE_LINE,
    HttpProtocolError,
    SseResponseParser,
    retry_after_s,
)

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


BODY = (
    chunk(b'data: {"a":1}\n\n')
    + chunk(b'data: {"a":2}\n\ndata: {"a":3}\n\n')
    + chunk(b"data: [DONE]\n\n")
    + b"0\r\n\r\n"
)


def test_whole_response_in_one_read():
    p = SseResponseParser()
    events = p.feed(HEAD + BODY, 7)
    assert [e for e, _ in events] == [b'{"a":1}', b'{"a":2}', b'{"a":3}', b"[DONE]"]
    assert all(t == 7 for _, t in events)
    assert p.status == 200 and p.complete and p.keep_alive


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 11, 64])
def test_any_split_of_the_bytes_gives_the_same_events_with_their_read_times(step):
    data = HEAD + BODY
    p = SseResponseParser()
    got = []
    for i in range(0, len(data), step):
        got += p.feed(data[i : i + step], i)
    assert [e for e, _ in got] == [b'{"a":1}', b'{"a":2}', b'{"a":3}', b"[DONE]"]
    # each event is stamped with the read that completed it
    for _payload, t in got:
        assert t <= len(data)
    assert p.complete


def test_event_split_across_chunks_is_joined():
    body = chunk(b'data: {"x":') + chunk(b"42}\n\n") + b"0\r\n\r\n"
    p = SseResponseParser()
    assert p.feed(HEAD + body, 1) == [(b'{"x":42}', 1)]


def test_error_status_keeps_body_and_no_events():
    resp = (
        b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
        b"content-length: 27\r\n\r\n" + b'{"error":"max_tokens bad"}\n'
    )
    p = SseResponseParser()
    assert p.feed(resp, 1) == []
    assert p.status == 400 and p.complete
    assert b"max_tokens bad" in bytes(p.body)


def test_read_until_close_body():
    p = SseResponseParser()
    p.feed(b"HTTP/1.0 200 OK\r\n\r\ndata: 1\n\n", 1)
    assert not p.complete
    p.feed_eof(2)
    assert p.complete and not p.keep_alive


def test_crlf_event_separators():
    body = chunk(b"data: a\r\n\r\n") + b"0\r\n\r\n"
    assert SseResponseParser().feed(HEAD + body, 3) == [(b"a", 3)]


def test_garbage_status_line_raises():
    with pytest.raises(HttpProtocolError):
        SseResponseParser().feed(b"SSH-2.0-OpenSSH\r\n\r\n", 0)


def test_bad_chunk_size_raises():
    with pytest.raises(HttpProtocolError):
        SseResponseParser().feed(HEAD + b"zz\r\n", 0)


def test_chunk_boundary_flag_marks_where_a_new_chunk_starts():
    p = SseResponseParser()
    assert not p.at_chunk_boundary  # no head yet
    p.feed(HEAD, 1)
    assert p.at_chunk_boundary
    one = chunk(b'data: {"a":1}\n\n')
    p.feed(one[:5], 2)  # half a chunk: not at a boundary
    assert not p.at_chunk_boundary
    assert p.feed(one[5:], 3) == [(b'{"a":1}', 3)]
    assert p.at_chunk_boundary
    p.feed(b"0\r\n\r\n", 4)
    assert p.complete and not p.at_chunk_boundary


def test_error_response_is_never_at_a_chunk_boundary():
    p = SseResponseParser()
    p.feed(b"HTTP/1.1 500 Oops\r\ntransfer-encoding: chunked\r\n\r\n", 1)
    assert not p.at_chunk_boundary


def test_several_single_event_chunks_in_one_read_keep_their_order_and_time():
    p = SseResponseParser()
    p.feed(HEAD, 0)
    data = b"".join(chunk(b'data: {"n":%d}\n\n' % i) for i in range(5)) + chunk(b"data: x")
    got = p.feed(data, 9)
    assert got == [(b'{"n":%d}' % i, 9) for i in range(5)]
    # the unfinished event waits for the rest of it, stamped with the read that completes it
    assert p.feed(chunk(b"\n\n"), 10) == [(b"x", 10)]


def kind_of(data: bytes) -> str:
    with pytest.raises(HttpProtocolError) as exc:
        SseResponseParser().feed(data, 0)
    return exc.value.kind


def test_each_refusal_carries_its_failure_kind():
    ok = chunk(b'data: {"a":1}\n\n')
    assert kind_of(HEAD + b"zz\r\n") == "bad_chunk"
    assert kind_of(HEAD + b"-5\r\n") == "bad_chunk"  # int(.., 16) would take it
    assert kind_of(HEAD + ok[:-2] + b"XY") == "bad_chunk"  # the data does not end with CRLF
    assert kind_of(HEAD + b"1" * (MAX_SIZE_LINE + 1)) == "line_too_long"
    assert kind_of(HEAD + chunk(b"data: " + b"x" * MAX_EVENT)) == "line_too_long"
    assert kind_of(HEAD + chunk(b"data: " + b"x" * MAX_EVENT + b"\n\n")) == "line_too_long"
    gz = HEAD.replace(b"\r\n\r\n", b"\r\ncontent-encoding: gzip\r\n\r\n")
    assert kind_of(gz) == "unexpected_encoding"
    assert kind_of(b"HTTP/1.1 200 OK\r\ncontent-length: 1x\r\n\r\n") == "protocol_error"
    assert kind_of(b"SSH-2.0-OpenSSH\r\n\r\n") == "protocol_error"


def test_compressed_error_status_is_not_refused_and_identity_is_plain():
    p = SseResponseParser()
    p.feed(b"HTTP/1.1 500 Oops\r\ncontent-encoding: gzip\r\ncontent-length: 0\r\n\r\n", 0)
    assert p.status == 500 and p.complete
    ident = HEAD.replace(b"\r\n\r\n", b"\r\ncontent-encoding: identity\r\n\r\n")
    assert SseResponseParser().feed(ident + BODY, 1)[0] == (b'{"a":1}', 1)


def test_a_200_that_is_not_an_event_stream_keeps_its_page_as_body():
    page = b"<html>502 Bad Gateway</html>"
    p = SseResponseParser()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: %d\r\n\r\n"
    assert p.feed(head % len(page) + page, 1) == []
    assert p.not_sse and p.complete and bytes(p.body) == page
    sse = SseResponseParser()
    sse.feed(b"HTTP/1.1 200 OK\r\ncontent-type: Text/Event-Stream; charset=utf-8\r\n\r\n", 1)
    assert not sse.not_sse and sse.close_delimited


def test_an_event_cut_off_by_the_close_is_dropped():
    p = SseResponseParser()
    assert p.feed(b"HTTP/1.0 200 OK\r\n\r\ndata: 1\n\ndata: {\"x", 1) == [(b"1", 1)]
    assert p.feed_eof(2) == []
    assert p.complete


def test_retry_after_in_seconds_or_as_a_date():
    assert retry_after_s("7", 0.0) == 7.0
    assert retry_after_s(" 120 ", 0.0) == 120.0
    now = 1_763_900_000.0  # 2025-11-23 12:13:20 UTC
    assert retry_after_s("Sun, 23 Nov 2025 12:14:00 GMT", now) == 40.0
    assert retry_after_s("Sun, 23 Nov 2025 12:00:00 GMT", now) == 0.0  # already past
    assert retry_after_s(None, now) is None
    assert retry_after_s("soon", now) is None
