"""Run IDs: UUIDv7 (RFC 9562) made with the standard library, unique and time-ordered."""

from __future__ import annotations

import subprocess
import sys
import uuid

from infer_prof.results.run_ids import is_run_uuid, new_run_id, run_name_of, uuid7_time_ms


def test_a_run_id_is_a_uuid7_carrying_its_time():
    rid = new_run_id(now_ms=1_763_958_000_123)
    u = uuid.UUID(rid)
    assert u.version == 7 and u.variant == uuid.RFC_4122
    assert is_run_uuid(rid) and str(u) == rid
    assert uuid7_time_ms(rid) == 1_763_958_000_123


def test_ids_of_one_process_are_unique_and_strictly_increasing_within_a_millisecond():
    ids = [new_run_id(now_ms=1_763_958_000_000) for _ in range(5000)]  # past 4096 in one ms
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert all(is_run_uuid(i) for i in ids)


def test_ids_of_processes_started_together_differ():
    code = "from infer_prof.results.run_ids import new_run_id; print(new_run_id())"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    ids = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert len(set(ids)) == 4 and all(is_run_uuid(i) for i in ids)


def test_an_old_result_s_readable_run_id_is_its_name():
    old = "20261101-000000-tiny-llama-c4"
    assert run_name_of({"run_id": old}) == old
    assert run_name_of({"run_id": new_run_id(), "run_name": "x-c2"}) == "x-c2"
    assert not is_run_uuid("20261101-000000-tiny-llama-c4")
