"""The precision stop over worker processes, its two sides without processes: a worker's tally
(token arrivals binned at 1 ms, TPOTs of measured requests) and the parent's check, which never
runs ahead of the slowest worker's tallies."""

import queue
from types import SimpleNamespace

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.measurement.precision import PrecisionRule
from infer_prof.loadgen.worker_tally import BIN_NS, WorkerTally
from infer_prof.run.pool_precision import PoolPrecision

MS = 1_000_000
T0 = 1_000_000 * MS  # an arbitrary start on the monotonic clock


def _record(send_ns: int, tokens: int, gap_ms: float = 10.0, warmup: bool = False):
    rec = RequestRecord(index=0, input_len=8, max_tokens=tokens, warmup=warmup, send_ns=send_ns)
    rec.chunk_ns = [send_ns + int(20 * MS + i * gap_ms * MS) for i in range(tokens)]
    rec.chunk_tokens = [1] * tokens
    rec.output_tokens = tokens
    rec.done_ns = rec.chunk_ns[-1]
    return rec


def test_a_worker_tallies_arrivals_by_time_and_tpots_of_measured_requests():
    q: queue.Queue = queue.Queue()
    tally = WorkerTally(3, q)
    records: list[RequestRecord] = []
    sink = tally.sink(records)
    warm, meas = _record(T0, 4, warmup=True), _record(T0 + 5 * MS, 4, gap_ms=12.0)
    for rec in (warm, meas):
        sink.append(rec)
    assert records == [warm, meas]
    tally.publish()
    w, through, bins, tpots, final = q.get_nowait()
    assert (w, final, tpots) == (3, False, [])  # nothing has ended yet
    got = {b * BIN_NS: n for b, n in bins}
    want: dict[int, int] = {}
    for ns in warm.chunk_ns + meas.chunk_ns:
        start = ns // BIN_NS * BIN_NS
        want[start] = want.get(start, 0) + 1
    assert got == want and sum(got.values()) == 8
    meas.chunk_ns.append(meas.chunk_ns[-1] + 12 * MS)  # one more token, then the end
    meas.chunk_tokens.append(1)
    meas.output_tokens = 5
    tally.ended(warm)
    tally.ended(meas)
    tally.publish(final=True)
    _, _, bins, tpots, final = q.get_nowait()
    assert final and sum(n for _, n in bins) == 1  # only the token not sent before
    assert tpots == [12.0]  # the measured request's TPOT (ms); the warm-up one is not counted
    tally.publish()
    assert q.empty()  # nothing new: no message


def _pool(n: int) -> SimpleNamespace:
    shared = SimpleNamespace(tally=queue.Queue(), start_ns=SimpleNamespace(value=T0),
                             warm_open_ns=SimpleNamespace(value=0),
                             precise=SimpleNamespace(value=0))
    pool = SimpleNamespace(n=n, shared=shared, job=SimpleNamespace(continuous_warmup=False))
    pool.measured_enough = lambda: setattr(shared.precise, "value", 1)
    return pool


def _steady(q: queue.Queue, w: int, upto_s: float, tpots: int) -> None:
    """Worker ``w``'s tallies of a steady stream: 1 token per ms up to ``upto_s``."""
    bins = [((T0 + i * MS) // BIN_NS, 1) for i in range(int(upto_s * 1000))]
    q.put((w, T0 + int(upto_s * 1e9), bins, [10.0] * tpots, False))


def test_the_parent_checks_as_of_the_slowest_worker_then_tells_them_all():
    pool = _pool(2)
    prec = PoolPrecision(PrecisionRule(), pool)  # type: ignore[arg-type]
    _steady(pool.shared.tally, 0, 6.0, 40)
    assert prec.poll() is False  # worker 1 has said nothing: no check yet
    assert prec.tracker.t0_ns == T0
    _steady(pool.shared.tally, 1, 2.0, 0)
    assert prec.poll() is False  # every token is in only up to 2 s, below the 5 s floor
    assert pool.shared.precise.value == 0
    more = [((T0 + i * MS) // BIN_NS, 1) for i in range(2000, 6000)]
    pool.shared.tally.put((1, T0 + 6 * 10**9, more, [], False))
    assert prec.poll() is True and pool.shared.precise.value == 1
    for w in (0, 1):  # their last tallies: the requests in flight at the stop
        pool.shared.tally.put((w, T0 + 7 * 10**9, [], [10.0, 10.0], True))
    block = prec.finish()  # the result's precision_stop section
    assert block.stopped_by == "precision" and block.requests == 44
    assert block.seconds == 6.0
    assert block.output_throughput is not None and block.tpot_p50_ms is not None
    assert abs((block.output_throughput.estimate or 0) - 2000.0) < 1.0  # 2 workers x 1000/s
    assert block.tpot_p50_ms.estimate == 10.0


def test_tokens_before_the_start_are_held_back_then_left_out():
    pool = _pool(1)
    pool.shared.start_ns.value = 0  # the workers have not reached the start gate yet
    prec = PoolPrecision(PrecisionRule(), pool)  # type: ignore[arg-type]
    early = [((T0 - 500 * MS + i * MS) // BIN_NS, 1) for i in range(1000)]  # -0.5 s .. +0.5 s
    pool.shared.tally.put((0, T0 + 500 * MS, early, [], True))
    assert prec.poll() is False and prec.tracker.t0_ns is None
    pool.shared.start_ns.value = T0
    prec.poll()
    assert prec.tracker.t0_ns == T0
    assert sum(prec.tracker._bins.values()) == 500  # only those at or after t0
