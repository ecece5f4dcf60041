"""A result's ``workload`` section is the workload file mapping declared once
(core/workload/workload_record.py): ``Workload.to_dict`` writes it unchanged, a result reads it
as attributes, a misspelt or mistyped key is caught before a result is written, and a
hand-written partial section still loads."""

import json
import math

import msgspec
import pytest

from infer_prof.core.workload.distributions import Empirical, LogNormal, Normal, Uniform
from infer_prof.core.workload.workload_record import (
    ClosedArrivalRecord,
    EmpiricalLength,
    OpenArrivalRecord,
    WorkloadRecord,
)
from infer_prof.core.workload.workloads import Arrival, SharedPrefix, Workload
from infer_prof.results.document import check_document, decode_result
from tests.unit.typed_results import validate_result

OPEN = Workload("rag", Uniform(10, 20), Empirical(((1, 5, 1.0), (6, 9, 2))), num_requests=4,
                arrival=Arrival.open(2.0, burstiness=2.0, max_concurrency=4),
                shared_prefix=SharedPrefix(0.5, 4, 2), slo={"ttft_p99": 100.0}, min_requests=3,
                min_duration_s=1.0, dataset="x.jsonl", api="chat", warmup="30s", seed=7)
CLOSED = Workload("chat", LogNormal(50.0, 0.5, 1, 200), Normal(100, 10, 1, 300), duration_s=3.5,
                  arrival=Arrival.closed(8))

# what to_dict wrote before the mapping was declared (key order and int/float kept)
OPEN_TEXT = (
    '{"kind": "workload", "name": "rag", "description": "", "input_len": {"kind": "uniform", '
    '"min": 10, "max": 20}, "output_len": {"kind": "empirical", "bins": [[1, 5, 1.0], '
    '[6, 9, 2]]}, "num_requests": 4, "warmup": "30s", "warmup_requests": 0, "arrival": '
    '{"mode": "open", "rate": 2.0, "burstiness": 2.0, "process": "gamma", "max_concurrency": 4}, '
    '"shared_prefix": {"fraction": 0.5, "length": 4, "groups": 2}, "seed": 7, "slo": '
    '{"ttft_p99": 100.0}, "min_requests": 3, "min_duration_s": 1.0, "dataset": "x.jsonl", '
    '"api": "chat"}')
CLOSED_TEXT = (
    '{"kind": "workload", "name": "chat", "description": "", "input_len": {"kind": "lognormal", '
    '"median": 50.0, "sigma": 0.5, "min": 1, "max": 200}, "output_len": {"kind": "normal", '
    '"mean": 100, "std": 10, "min": 1, "max": 300}, "duration_s": 3.5, "warmup": "steady", '
    '"warmup_requests": 0, "arrival": {"mode": "closed", "concurrency": 8}, "shared_prefix": '
    '{"fraction": 0.0, "length": 0, "groups": 1}, "seed": 0}')


def _doc(workload):
    return {"kind": "infer-prof.run", "schema_version": 1, "run_id": "r1", "config": {},
            "summary": {}, "workload": workload}


@pytest.mark.parametrize("w, text", [(OPEN, OPEN_TEXT), (CLOSED, CLOSED_TEXT)])
def test_to_dict_writes_the_declared_record_as_before(w, text):
    assert json.dumps(w.to_dict()) == text
    assert w.to_dict() == msgspec.to_builtins(w.record())
    assert Workload.from_dict(w.to_dict()) == w


def test_a_result_reads_its_workload_as_attributes():
    r = decode_result(_doc(OPEN.to_dict()))
    wl = r.workload
    assert isinstance(wl, WorkloadRecord) and wl.name == "rag" and wl.num_requests == 4
    assert isinstance(wl.arrival, OpenArrivalRecord) and wl.arrival.max_concurrency == 4
    assert isinstance(wl.output_len, EmpiricalLength) and wl.output_len.bins[1] == [6, 9, 2]
    assert wl.duration_s is msgspec.UNSET  # left out of the file, not None
    assert Workload.from_dict(msgspec.to_builtins(wl)) == OPEN  # read back: the same workload
    closed = decode_result(_doc(CLOSED.to_dict())).workload
    assert closed is not None and closed.arrival == ClosedArrivalRecord(concurrency=8)
    assert check_document(_doc(OPEN.to_dict())) == []
    validate_result(_doc(CLOSED.to_dict()))


def test_an_infinite_rate_stays_infinite():
    w = Workload("burst", Uniform(1, 2), Uniform(1, 2), num_requests=3,
                 arrival=Arrival.open(math.inf))
    wl = decode_result(_doc(w.to_dict())).workload
    assert wl is not None and isinstance(wl.arrival, OpenArrivalRecord)
    assert wl.arrival.rate == math.inf


def test_a_misspelt_workload_key_is_caught_before_writing():
    d = CLOSED.to_dict()
    d["num_request"] = 5
    d["arrival"]["concurency"] = 2
    assert set(check_document(_doc(d))) == {"undeclared key $.workload.num_request",
                                           "undeclared key $.workload.arrival.concurency"}


@pytest.mark.parametrize("key, value, where", [
    ("arrival", {"mode": "sideways", "concurrency": 1}, "$.workload.arrival"),
    ("input_len", {"kind": "fixed", "value": "many"}, "$.workload.input_len.value"),
    ("seed", "zero", "$.workload.seed"),
])
def test_a_mistyped_workload_value_is_named_by_its_path(key, value, where):
    d = CLOSED.to_dict()
    d[key] = value
    problems = check_document(_doc(d))
    assert len(problems) == 1 and where in problems[0]


def test_a_hand_written_partial_workload_still_loads():
    wl = decode_result(_doc({"name": "chat"})).workload
    assert wl is not None and wl.name == "chat" and wl.input_len is msgspec.UNSET
