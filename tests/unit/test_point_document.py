"""A load point's result is built as the typed Result (run/point_document.py): its sections are
Structs, the client section is declared (a misspelt key is refused before writing), and the file
is the Struct's encoding with every declared key."""

from __future__ import annotations

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.workload.distributions import Fixed
from infer_prof.core.workload.workloads import Arrival, Workload
from infer_prof.loadgen.traces import Trace
from infer_prof.results.config_record import ConfigRecord
from infer_prof.results.document import (
    Client,
    Load,
    Result,
    Summary,
    TraceReplay,
    check_document,
    decode_result,
    undeclared_keys,
)
from infer_prof.run.point_document import document_json, load_section, trace_replay

MS = 1_000_000


def _rec(i: int, scheduled_ms: float, send_ms: float) -> RequestRecord:
    return RequestRecord(index=i, input_len=8, max_tokens=4, warmup=False,
                         scheduled_ns=int(scheduled_ms * MS), send_ns=int(send_ms * MS),
                         chunk_ns=[int((send_ms + 5) * MS)], chunk_tokens=[1],
                         done_ns=int((send_ms + 5) * MS), prompt_tokens=8, output_tokens=1)


def test_a_trace_replay_is_its_struct_with_the_achieved_rate_and_signed_send_lag() -> None:
    trace = Trace(offsets=[0.0, 0.5, 1.0], input_lens=[8] * 3, output_lens=[4] * 3,
                  path="t.jsonl", sha256="x", format="jsonl", window=(None, None), time_scale=1.0)
    # sends at 0, 500, 1250 ms against 0, 500, 1000: 2 gaps over 1.25 s = 1.6 req/s vs 2.0
    records = [_rec(0, 0, 0), _rec(1, 500, 500), _rec(2, 1000, 1250)]
    tr = trace_replay(trace, records)
    assert isinstance(tr, TraceReplay)
    assert (tr.scheduled_requests, tr.sent_requests) == (3, 3)
    assert tr.scheduled_rate == 2.0 and tr.achieved_rate == 1.6
    assert tr.rate_error_pct == -20.0
    assert tr.send_lag_ms is not None and tr.send_lag_ms.max == 250.0


def test_the_load_section_is_a_struct_of_the_loop_it_ran() -> None:
    wl = Workload(name="w", input_len=Fixed(8), output_len=Fixed(8), num_requests=3,
                  duration_s=None, arrival=Arrival.closed(4), seed=0, source="test")
    load = load_section(wl, [_rec(0, 0, 0), _rec(1, 0, 0)])
    assert isinstance(load, Load)
    assert (load.mode, load.concurrency, load.rate) == ("closed", 4, None)


def test_the_client_section_is_declared_and_a_misspelt_key_is_refused() -> None:
    client = {"timestamp_source": "monotonic_ns", "processes": 2, "reader": "c",
              "read_lag_ms": {"count": 3, "p99": 0.4}, "cpu_share": 0.3,
              "workers": [{"pid": 1, "requests": 4}]}
    typed = decode_result({"schema_version": 1, "kind": "infer-prof.run", "run_id": "r",
                           "summary": {}, "config": {}, "client": client})
    assert isinstance(typed.client, Client)
    assert typed.client.read_lag_ms is not None and typed.client.read_lag_ms.p99 == 0.4
    assert undeclared_keys({"client": {**client, "read_lag_p99": 0.4}}) == [
        "$.client.read_lag_p99"]


def test_the_written_document_holds_every_declared_key_and_checks() -> None:
    result = Result(schema_version=1, kind="infer-prof.run", run_id="r", summary=Summary(),
                    config=ConfigRecord(), client=Client(processes=1))
    doc = document_json(result)
    assert set(doc) == set(Result.__struct_fields__)
    assert doc["client"]["processes"] == 1 and doc["client"]["workers"] is None
    assert check_document(doc) == []
    assert decode_result(doc) == result


def test_the_warmup_waves_are_typed_as_core_warmup_writes_them() -> None:
    import msgspec

    from infer_prof.core.measurement.warmup import warmup_block
    from infer_prof.results.load_sections import FirstWave, PhaseStagger, Warmup

    records = [_rec(i, 10 * i, 10 * i) for i in range(6)]
    block = msgspec.to_builtins(warmup_block("steady", 0, records, None, 2))  # as written
    warm = decode_result({"schema_version": 1, "kind": "infer-prof.run", "run_id": "r",
                          "summary": {}, "config": {}, "warmup": block}).warmup
    assert isinstance(warm, Warmup) and isinstance(warm.first_wave, FirstWave)
    assert warm.first_wave.requests == 2 and warm.first_wave.ttft_ms is not None
    assert warm.first_wave.ttft_ms.first_wave is not None
    assert warm.first_wave.ttft_ms.first_wave.mean == 5.0
    assert undeclared_keys({"warmup": {**block, "phase_stagger": {"requests": 2, "min": 1}}}) == [
        "$.warmup.phase_stagger.min"]
    assert PhaseStagger(requests=2).output_len_max is None
