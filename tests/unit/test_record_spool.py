"""RecordSpool: records in memory only while in flight, on disk once ended, read back complete
and in the order appended; a spool that cannot be written keeps them in memory."""

import errno
import os
from pathlib import Path

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.run import record_spool
from infer_prof.run.record_spool import RecordSpool


def _rec(i: int, *, warmup: bool = False, ok: bool = True) -> RequestRecord:
    r = RequestRecord(i, 8, 4, warmup=warmup, worker=i % 3, scheduled_ns=10 + i, send_ns=20 + i)
    if ok:
        r.chunk_ns = [100 + i, 110 + i, 125 + i]
        r.chunk_tokens = [1, 2, 1]
        r.done_ns, r.output_tokens, r.prompt_tokens = 130 + i, 4, 8
        r.finish_reason = "length"
    else:
        r.error, r.error_detail = "http_500", "boom"
    return r


def test_ended_records_leave_memory_and_come_back_in_order(tmp_path):
    spool = RecordSpool(tmp_path)
    recs = [_rec(i, ok=i % 4 != 3) for i in range(10)]
    for r in recs:
        spool.append(r)
    assert spool.held == 10 and len(spool) == 10
    for r in reversed(recs[:8]):  # they end out of order
        spool.ended(r)
    spool.ended(recs[0])  # twice: ignored
    assert spool.held == 2 and spool.spooled == 8
    assert spool.path is not None and spool.path.parent == tmp_path
    back = spool.read_back()
    assert [r.to_dict() for r in back] == [r.to_dict() for r in recs]
    assert back[9] is recs[9]  # in flight at the end: as it is
    assert list(tmp_path.iterdir()) == []  # the spool file is gone


def test_listeners_see_each_record_appended_and_ended(tmp_path):
    spool = RecordSpool(tmp_path)
    seen: list[tuple[str, int]] = []
    spool.subscribe(on_append=lambda r: seen.append(("sent", r.index)),
                    on_end=lambda r: seen.append(("ended", r.index)))
    a, b = _rec(1), _rec(2)
    spool.append(a)
    spool.append(b)
    spool.ended(b)
    assert seen == [("sent", 1), ("sent", 2), ("ended", 2)]
    spool.discard()


def test_warmup_all_failed_counts_the_spooled_warmups(tmp_path):
    spool = RecordSpool(tmp_path)
    assert not spool.warmup_all_failed()  # nothing sent
    bad = _rec(0, warmup=True, ok=False)
    spool.append(bad)
    assert spool.warmup_all_failed()  # in flight, not completed
    spool.ended(bad)
    assert spool.warmup_all_failed()
    good = _rec(1, warmup=True)
    spool.append(good)
    assert not spool.warmup_all_failed()  # completed, still in memory
    spool.ended(good)
    assert spool.held == 0 and not spool.warmup_all_failed()  # completed, on disk
    spool.discard()


def test_a_full_disk_keeps_the_records_in_memory(tmp_path, monkeypatch):
    spool = RecordSpool(tmp_path)
    recs = [_rec(i) for i in range(4)]
    for r in recs:
        spool.append(r)
    spool.ended(recs[0])
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        real_write(fd, data[: len(data) // 2])  # a short write, then no space
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(record_spool.os, "write", half_then_full)
    spool.ended(recs[2])
    monkeypatch.setattr(record_spool.os, "write", real_write)
    spool.ended(recs[1])
    assert spool.error is not None and "No space left" in spool.error
    assert spool.spooled == 1 and spool.held == 3
    back = spool.read_back()  # the half line was cut off the file
    assert [r.to_dict() for r in back] == [r.to_dict() for r in recs]


def test_no_folder_keeps_them_in_memory():
    spool = RecordSpool(None)
    r = _rec(0)
    spool.append(r)
    spool.ended(r)
    assert spool.path is None and spool.held == 1
    assert spool.read_back() == [r]
    bad = RecordSpool(Path("/proc/no-such-folder"))
    assert bad.error is not None and bad.path is None
