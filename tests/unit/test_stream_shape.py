"""How tokens arrived (core.measurement.stream_shape) and the verdicts drawn from it
(core.measurement.validity): buffered streams, requests whose first token's time cannot be known,
token-count kinds."""

import msgspec

from infer_prof.core.measurement.api_tokens import api_block, describe_token_source
from infer_prof.core.measurement.metrics import RequestRecord, summarize_run, tpot_ns, ttft_ns
from infer_prof.core.measurement.stream_shape import stream_shape
from infer_prof.core.measurement.validity import check_validity

MS = 1_000_000


def rec(i, send, chunks, tokens=None, out=None, source="usage"):
    tokens = tokens or [1] * len(chunks)
    return RequestRecord(index=i, input_len=8, max_tokens=sum(tokens), send_ns=send,
                         chunk_ns=list(chunks), chunk_tokens=tokens, done_ns=chunks[-1],
                         prompt_tokens=8, output_tokens=out if out is not None else sum(tokens),
                         token_count_source=source)


def steady(i, n=64, ttft=9, itl=3.5):
    send = i * 1000 * MS
    return rec(i, send, [send + int((ttft + k * itl) * MS) for k in range(n)])


def buffered(i, n=64, flush1=176, flush2=330, first=32):
    """nginx at its defaults: the first ``first`` events in one flush, the rest in another."""
    send = i * 1000 * MS
    return rec(i, send, [send + flush1 * MS] * first + [send + flush2 * MS] * (n - first))


def test_an_engine_stream_is_not_bunched():
    shape = msgspec.to_builtins(stream_shape([steady(i) for i in range(20)]))  # as written
    assert shape["events_per_request"]["mean"] == 64 and shape["tokens_per_event"] == 1
    assert shape["reference_gap_ms"] == 3.5 and shape["close_gap_share"] == 0
    assert shape["bursts_per_request"] == 0 and not shape["bunched"]
    assert shape["first_token_unknown"] == 0
    assert check_validity(20, 10, read_lag_p99_ms=0.3, itl_p50_ms=3.5, stream=shape).valid


def test_a_buffered_stream_is_its_own_reason_even_with_itl_p50_zero():
    recs = [buffered(i) for i in range(20)]
    s = summarize_run(recs)
    assert s.itl_ms.p50 == 0  # the old check skipped read lag here and called the run valid
    shape = msgspec.to_builtins(stream_shape(recs))  # as written
    assert shape["bunched"] and shape["close_gap_share"] > 0.95
    assert shape["bursts_per_request"] == 2 and shape["tokens_per_burst"] == 32
    assert shape["events_per_burst"] == 32
    v = check_validity(20, 10, read_lag_p99_ms=0.2, itl_p50_ms=s.itl_ms.p50, stream=shape)
    assert not v.valid and not v.client_overloaded and v.stream_problem
    reason = v.stream_reasons[0]
    assert reason.startswith("buffered_stream") and "proxy_buffering off" in reason
    assert "describe the proxy, not the engine" in reason
    assert v.section().reasons[0].startswith("buffered_stream")


def test_a_late_client_is_blamed_not_the_stream():
    """Bunched because the client read late: read_lag, against the steady gap, not the proxy."""
    shape = msgspec.to_builtins(stream_shape([buffered(i) for i in range(20)]))  # as written
    ref = shape["reference_gap_ms"]
    v = check_validity(20, 10, read_lag_p99_ms=31 * ref, itl_p50_ms=0.0, stream=shape)
    assert v.client_overloaded and not v.stream_problem
    # a p99 lag of a few steady gaps cannot have made bursts of 32 events: the stream's doing
    few = check_validity(20, 10, read_lag_p99_ms=3 * ref, itl_p50_ms=0.0, stream=shape)
    assert few.stream_problem and not few.client_overloaded
    assert "span of a burst" in v.client_reasons[0]


def test_read_lag_reason_names_the_itl_p50_the_table_shows():
    v = check_validity(100, 30, read_lag_p99_ms=1.81, itl_p50_ms=3.356)
    r = v.client_reasons[0]
    assert "0.5 x ITL p50 3.356 ms (limit 1.678 ms)" in r and "could not keep up" in r
    assert "held the cores" not in r
    starved = check_validity(100, 30, read_lag_p99_ms=1.81, itl_p50_ms=3.356, cpu_share_max=0.04)
    assert "busy only 4% of the window" in starved.client_reasons[0]
    assert "a gateway) held the cores it needed" in starved.client_reasons[0]


def test_all_tokens_in_one_event_has_no_ttft_and_is_counted():
    timed = [steady(i) for i in range(10)]
    one = [rec(100 + i, i * MS, [i * MS + 290 * MS], tokens=[64]) for i in range(10)]
    assert ttft_ns(one[0]) is None and tpot_ns(one[0]) is None
    single = rec(200, 0, [5 * MS], tokens=[1])  # one token in one event: its TTFT is known
    assert ttft_ns(single) == 5 * MS
    s = summarize_run(timed + one)
    assert s.first_token_unknown == 10 and s.ttft_ms.count == 10 and s.ttft_ms.p50 == 9.0
    assert s.to_dict()["first_token_unknown"] == 10
    assert s.e2e_ms.count == 20  # their end-to-end latency is still measured
    shape = msgspec.to_builtins(stream_shape(timed + one))  # as written
    assert shape["first_token_unknown"] == 10 and shape["first_token_unknown_share"] == 0.5
    v = check_validity(20, 10, stream=shape)
    assert not v.valid and v.stream_reasons[0].startswith("first_token_unknown: 10 of 20")
    # under the share (5 %), counted but not marked
    few = msgspec.to_builtins(stream_shape([steady(i) for i in range(40)] + one[:1]))  # as written
    assert few["first_token_unknown"] == 1 and check_validity(41, 10, stream=few).valid


def test_token_count_kinds_are_counted_never_mixed():
    recs = [steady(i) for i in range(3)]
    recs += [rec(10, 0, [290 * MS], tokens=[64])]  # usage, but one event: not per chunk
    recs += [rec(11, 0, [1 * MS, 2 * MS], source="usage_total")]
    b = api_block("chat", recs)
    assert b.token_count_sources == {"usage": 3, "usage_one_event": 1, "usage_total": 1}
    assert b.token_count_source == "usage+usage_one_event+usage_total"
    line = describe_token_source(b.token_count_source, b.token_count_sources)
    assert "usage per chunk (exact): 3" in line and "all tokens in one event" in line
    assert "usage at the end only" in line and "mixed" not in line
