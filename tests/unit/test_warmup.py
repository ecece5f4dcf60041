"""Warm-up: the steady-state gate, the workload field, --warmup parsing, the first-wave report."""

import time

import pytest
import typer

from infer_prof.cli.common import parse_warmup
from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.measurement.warmup import first_wave, staggered_output_len, warmup_block
from infer_prof.core.measurement.warmup_record import MeanP50, PhaseStagger, WaveTtft
from infer_prof.core.workload.distributions import Fixed
from infer_prof.core.workload.workload_fields import WorkloadError
from infer_prof.core.workload.workloads import Arrival, Workload, warmup_seconds
from infer_prof.loadgen.closed_loop import WarmupGate
from infer_prof.loadgen.prompts import TokenPool
from infer_prof.run.load_points import SpecOptions, build_specs
from infer_prof.run.warmup import continuous_warmup, warmup_pool_size

MS = 1_000_000


def rec(index: int, send_ms: int, ttft_ms: int | None, warmup: bool = False) -> RequestRecord:
    r = RequestRecord(index=index, input_len=8, max_tokens=4, warmup=warmup)
    r.send_ns = send_ms * MS
    if ttft_ms is not None:
        r.chunk_ns = [(send_ms + ttft_ms) * MS, (send_ms + ttft_ms + 10) * MS]
        r.chunk_tokens = [1, 1]
        r.done_ns = r.chunk_ns[-1]
        r.output_tokens = 2
    return r


def test_first_wave_against_the_rest():
    # 2 streams; warm-up ignored; first two measured sends (by time, not index) are the wave
    records = [
        rec(-1, 0, 900, warmup=True),
        rec(1, 101, 1000),  # second send
        rec(0, 100, 1100),  # first send
        rec(2, 300, 500),
        rec(3, 310, 520),
        rec(4, 500, None),  # no token: left out of TTFT, counted in share
    ]
    fw = first_wave(records, 2)
    assert fw is not None
    assert fw is not None and fw.requests == 2 and fw.share == 0.4
    assert fw.ttft_ms == WaveTtft(first_wave=MeanP50(mean=1050.0, p50=1050.0),
                                  rest=MeanP50(mean=510.0, p50=510.0))
    assert fw.ratio_mean == round(1050 / 510, 3)
    assert first_wave([rec(-1, 0, 5, warmup=True)], 2) is None


def test_warmup_block_counted_and_continuous():
    records = [rec(-1, 0, 40, True), rec(-2, 5, 40, True), rec(0, 100, 40), rec(1, 101, 40)]
    counted = warmup_block("requests", 2, records, None, 2)
    assert counted.requests == 2 and counted.ended_by == "requests"
    assert counted.seconds == 0.055  # first warm-up send (0) to last warm-up end (55 ms)
    assert counted.judged is not None and "pause" in counted.judged
    steady = warmup_block("steady", 0, records, {"ended_by": "steady", "seconds": 0.09}, 2)
    assert steady.ended_by == "steady" and steady.seconds == 0.09
    assert steady.judged is not None and "every stream" in steady.judged
    assert warmup_block("requests", 0, records[2:], None, 2).mode == "none"


def test_gate_opens_when_every_stream_has_warmed():
    g = WarmupGate(3)
    fired = []
    g.on_open(lambda: fired.append(1))
    g.sending()
    g.warmed(0)
    g.warmed(0)  # the same stream twice is still one stream
    g.warmed(1)
    assert not g.is_open() and not fired
    g.warmed(2)
    assert g.is_open() and fired == [1]
    assert g.is_open() and fired == [1]  # callbacks fire once
    assert g.to_dict()["ended_by"] == "steady"


def test_gate_duration_and_exhaustion():
    g = WarmupGate(2, seconds=0.05)
    g.sending()
    g.warmed(0)
    g.warmed(1)  # with a duration, warmed streams do not open it
    assert not g.is_open()
    time.sleep(0.06)
    assert g.is_open() and g.to_dict()["ended_by"] == "duration"
    assert g.to_dict()["seconds"] >= 0.05
    e = WarmupGate(2)
    e.open("pool_exhausted")
    assert e.is_open() and e.reason == "pool_exhausted"


def wl(**kw):
    base = dict(name="w", input_len=Fixed(8), output_len=Fixed(4), num_requests=10,
                arrival=Arrival.closed(4))
    base.update(kw)
    return Workload(**base)


def test_workload_warmup_field():
    assert wl().warmup == "steady"
    d = wl().to_dict()
    d.pop("warmup")
    assert Workload.from_dict(d).warmup == "requests"  # a file naming only a count keeps it
    d.pop("warmup_requests")
    assert Workload.from_dict(d).warmup == "steady"
    assert Workload.from_dict({**d, "warmup": "30s"}).warmup == "30s"
    assert warmup_seconds("2.5s") == 2.5 and warmup_seconds("steady") is None
    with pytest.raises(WorkloadError, match="warmup"):
        Workload.from_dict({**d, "warmup": "soon"})
    over = wl().with_overrides(warmup_requests=3)
    assert over.warmup == "requests" and over.warmup_requests == 3


def test_specs_for_each_warmup_mode():
    pool = TokenPool.from_vocab_size(1000)
    steady = wl()
    assert continuous_warmup(steady) and warmup_pool_size(steady) == 16
    warm, measured, n = build_specs(steady, pool)
    assert not isinstance(warm, list)  # lazy: the streams draw as they need
    assert len(list(warm)) == 16 and n == 10 and len(list(measured)) == 10
    counted = wl(warmup="requests", warmup_requests=3)
    warm, _, _ = build_specs(counted, pool)
    assert isinstance(warm, list) and len(warm) == 3 and all(s.warmup for s in warm)
    opened = wl(arrival=Arrival.open(2.0))
    assert not continuous_warmup(opened) and warmup_pool_size(opened) == 8


def test_staggered_output_lengths_spread_one_request_over_the_streams():
    # 4 streams, 128 tokens: the first 4 warm-ups end a quarter of the decode steps apart
    assert [staggered_output_len(128, k, 4) for k in range(6)] == [32, 64, 96, 128, 128, 128]
    # more streams than tokens: every length from 1 up, never 0
    lens = [staggered_output_len(8, k, 16) for k in range(16)]
    assert lens == sorted(lens) and lens[0] == 1 and lens[-1] == 8 and set(lens) == set(range(1, 9))
    assert staggered_output_len(1, 0, 4) == 1 and staggered_output_len(64, 0, 1) == 64
    assert staggered_output_len(64, 3, 0) == 64  # no stagger asked


def test_warm_up_under_the_load_staggers_the_first_request_of_each_stream():
    pool = TokenPool.from_vocab_size(1000)
    steady = wl(output_len=Fixed(12))  # 4 streams, 8 in / 12 out
    warm = list(build_specs(steady, pool)[0])
    assert [s.max_tokens for s in warm] == [3, 6, 9, 12] + [12] * 12
    assert [s.max_tokens for s in build_specs(steady, pool)[1]] == [12] * 10  # measured: as asked
    # sessions (stagger off) and a counted warm-up (it drains before measuring) ask as drawn
    unstaggered = build_specs(steady, pool, options=SpecOptions(stagger=False))
    assert {s.max_tokens for s in unstaggered[0]} == {12}
    counted = wl(output_len=Fixed(12), warmup="requests", warmup_requests=6)
    assert {s.max_tokens for s in build_specs(counted, pool)[0]} == {12}
    # what the result says it did
    records = [RequestRecord(index=s.index, input_len=8, max_tokens=s.max_tokens, warmup=True)
               for s in warm[:5]]
    block = warmup_block("steady", 0, records, {"ended_by": "steady", "seconds": 1.0}, 4)
    assert block.phase_stagger == PhaseStagger(requests=4, output_len_min=3, output_len_max=12)
    assert warmup_block("requests", 5, records, None, 4).phase_stagger is None


@pytest.mark.parametrize("text,expected", [
    ("auto", ("steady", None)), ("none", ("requests", 0)), ("0", ("requests", 0)),
    ("16", ("requests", 16)), ("30s", ("30s", None)), ("2.5s", ("2.5s", None)),
])
def test_parse_warmup(text, expected):
    assert parse_warmup(text) == expected


def test_parse_warmup_rejects_nonsense():
    with pytest.raises(typer.Exit):
        parse_warmup("soon")


def test_in_flight_mean_over_the_measured_window():
    from infer_prof.core.measurement.metrics import in_flight_mean

    # window: first measured send (100 ms) to last measured end (1000 ms) = 900 ms
    a = rec(0, 100, 50)  # 100..160 ms (two chunks: +50, +60)
    a.done_ns = 1000 * MS  # in flight the whole window: 900 ms
    b = rec(1, 550, 50)
    b.done_ns = 1000 * MS  # the second half: 450 ms
    warm = rec(-1, 0, 50, warmup=True)
    warm.done_ns = 190 * MS  # a warm-up still running when measuring starts: 90 ms counted
    lost = RequestRecord(index=2, input_len=8, max_tokens=4)
    lost.send_ns = 200 * MS  # never ended: not counted
    assert in_flight_mean([a, b, warm, lost]) == pytest.approx((900 + 450 + 90) / 900)
    assert in_flight_mean([warm]) is None


def test_progress_counts_measured_requests_apart_from_the_warm_up():
    import io

    from infer_prof.loadgen.closed_loop import LiveCounters, account
    from infer_prof.report.progress import ProgressLine

    c = LiveCounters()
    refused = rec(-2, 0, None, warmup=True)
    refused.error = "connect_failed"
    for r in (rec(-1, 0, 5, warmup=True), refused, rec(0, 10, 5), rec(1, 10, None)):
        account(r, c)
    assert (c.warmup_done, c.completed, c.failed) == (2, 1, 1)
    assert c.failures == {"connect_failed": 1, "no_tokens": 1}  # the watchdog sees both
    out = io.StringIO()
    line = ProgressLine(total=4, enabled=True, stream=out, plain_every_s=0.0)
    c.phase = "warm-up"
    line.update(c)
    c.phase = "measuring"
    line.update(c)
    shown = out.getvalue()
    assert "[warm-up] 2 requests" in shown and "[measuring] 2/4 requests" in shown
