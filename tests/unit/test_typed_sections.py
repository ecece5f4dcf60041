"""The result's ``plan``, ``duration_estimate``, ``roofline``, ``sessions``, ``frontier`` and
``precision_stop``, ``server`` and ``telemetry`` sections are declared Structs
(results/engine_sections.py, results/load_sections.py, results/frontier_sections.py,
results/server_sections.py): each key their
writers write is declared, a misspelt key is refused before writing, and the console reads
them as attributes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from infer_prof.catalog.gpus import catalog, find_gpu
from infer_prof.catalog.models import registry, resolve_model
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.measurement.precision import PrecisionRule, PrecisionTracker
from infer_prof.core.planning.duration import DeviceSpeed, PointLoad, estimate_run
from infer_prof.core.planning.planner import PlanRequest, plan
from infer_prof.core.workload.sessions import SessionSettings, by_turn, prefix_cache
from infer_prof.loadgen.tls import TlsSettings
from infer_prof.report.console import _derived_rows, _session_rows
from infer_prof.report.run_data import gpu_label
from infer_prof.results.document import (
    Summary,
    check_document,
    decode_result,
    undeclared_keys,
)
from infer_prof.results.document_base import Distribution
from infer_prof.results.engine_sections import DurationEstimate, Plan, Roofline
from infer_prof.results.frontier_sections import Frontier, PrecisionStop
from infer_prof.results.load_sections import Sessions
from infer_prof.results.server_sections import Server, ServerMetricsSummary, Telemetry
from infer_prof.run.economics import DecodeLoad, roofline_block
from infer_prof.run.frontier_run import answer, run_frontier
from infer_prof.run.point_document import document_json
from infer_prof.servers.base import PhaseChange
from infer_prof.servers.cpu_split import CpuSplit
from infer_prof.servers.synthetic_process import SyntheticProcessServer
from infer_prof.servers.vllm_startup import startup_dict
from infer_prof.telemetry.prometheus import FLAG_GATED, NOT_EXPOSED, mark_not_counted
from tests.unit.test_nvml_sampler import run_scripted
from tests.unit.test_prometheus import scripted  # noqa: F401 (a fixture)


def _doc(**sections: Any) -> dict[str, Any]:
    return {"schema_version": 1, "kind": "infer-prof.run", "run_id": "r", "summary": {},
            "config": {}, **sections}


def _llama7b() -> ModelSpec:
    return ModelSpec.from_config(registry()["llama-2-7b"]["config"], name="llama-2-7b")


def _plan() -> dict[str, Any]:
    spec = resolve_model("llama-2-70b").spec
    assert spec is not None
    p = plan(PlanRequest(spec, find_gpu("H200"), concurrency=128))
    return p.to_dict({"tensor_parallel_size": 1, "kv_cache_memory_bytes": 1 << 30})


def test_the_plan_the_planner_writes_is_declared_and_typed() -> None:
    doc = _doc(plan=_plan())
    assert undeclared_keys(doc) == []  # every key of Plan.to_dict, candidates' memory too
    typed = decode_result(doc)
    assert isinstance(typed.plan, Plan)
    assert typed.plan.precision == doc["plan"]["precision"]
    assert typed.plan.memory is not None and typed.plan.memory.kv_tokens == (
        doc["plan"]["memory"]["kv_tokens"])
    assert [c.precision for c in typed.plan.candidates] == [
        c["precision"] for c in doc["plan"]["candidates"]]
    assert typed.plan.engine_args == {"tensor_parallel_size": 1, "kv_cache_memory_bytes": 1 << 30}
    # written back: the same keys and values (its tuples as JSON lists)
    assert document_json(typed)["plan"] == json.loads(json.dumps(doc["plan"]))
    misspelt = _doc(plan={**doc["plan"], "precison": "fp8"})
    assert check_document(misspelt) == ["undeclared key $.plan.precison"]


def test_the_duration_estimate_is_declared_and_typed() -> None:
    device = DeviceSpeed("toy", 1e12, 1e14, 0.0, 10.0, 1.0, "made up")
    est = estimate_run(_llama7b(), 13_476_831_232, 524_288, device,
                       [PointLoad(10, 128, 128, concurrency=4)]).to_dict()
    doc = _doc(duration_estimate=est)
    assert check_document(doc) == []
    typed = decode_result(doc).duration_estimate
    assert isinstance(typed, DurationEstimate)
    assert typed.total_s == est["total_s"] and typed.batches == [4]
    assert typed.device is not None and typed.device.basis == "made up"
    bad = _doc(duration_estimate={**est, "total": 1.0})
    assert check_document(bad) == ["undeclared key $.duration_estimate.total"]


def test_the_roofline_is_declared_available_or_not() -> None:
    summary = Summary(output_throughput=4258.0, duration_s=30.0, total_prompt_tokens=511_000,
                      itl_ms=Distribution(p50=19.4), tpot_ms=Distribution(p50=25.7))
    rep = roofline_block(_llama7b(), catalog()["H100-SXM"], 1, "bf16", summary,
                         DecodeLoad(114.3, 512, 128, "server_running_busy_mean"))
    assert isinstance(rep, Roofline) and rep.available and rep.reason is None
    written = msgspec.to_builtins(rep)  # as the result file holds it: every declared key
    assert list(written) == list(Roofline.__struct_fields__)
    doc = _doc(roofline=written)
    assert check_document(doc) == []
    roof = decode_result(doc).roofline
    assert roof == rep and roof.decode_step_time_source == "itl_p50"
    assert document_json(decode_result(doc))["roofline"] == written
    rows = dict(_derived_rows(decode_result(doc)))
    assert rows["prefill MFU (%)"] == f"{rep.mfu_pct:.1f}"
    off = roofline_block(None, None, 1, None, summary, DecodeLoad(None, 1, 1))
    typed_off = decode_result(_doc(roofline=msgspec.to_builtins(off))).roofline
    assert typed_off is not None and not typed_off.available and typed_off.reason == off.reason
    assert check_document(_doc(roofline={**written, "mbu_percent": 1.0})) == [
        "undeclared key $.roofline.mbu_percent"]


def _rec(i: int, ttft_ms: float, inp: int) -> RequestRecord:
    r = RequestRecord(index=i, input_len=inp, max_tokens=4, warmup=False, send_ns=0,
                      prompt_tokens=inp, output_tokens=4)
    r.chunk_ns = [int(ttft_ms * 1e6), int(ttft_ms * 1e6) + 5]
    r.chunk_tokens = [1, 3]
    r.done_ns = r.chunk_ns[-1]
    return r


def test_the_sessions_section_is_declared_and_the_console_reads_it() -> None:
    recs = [_rec(0, 10, 8), _rec(1, 4, 20), _rec(2, 12, 8), _rec(3, 6, 20)]
    section = {
        **SessionSettings(turns=2, think_time_s=0.5, sessions=2).to_dict(),
        "sessions_started": 2,
        "sessions_completed": 2,
        "by_turn": by_turn(recs, {0: 1, 1: 2, 2: 1, 3: 2}),
        "prefix_cache": prefix_cache({"available": True, "summary": {
            "prefix_cache_hits": 300.0, "prefix_cache_queries": 1000.0,
            "prefix_cache_hit_rate": 0.3}}),
    }
    doc = _doc(sessions=section)
    assert check_document(doc) == []
    typed = decode_result(doc)
    assert isinstance(typed.sessions, Sessions)
    assert [t.turn for t in typed.sessions.by_turn] == [1, 2]
    assert document_json(typed)["sessions"] == section  # the same keys as by_turn writes
    # turn 1: TTFT 10 and 12 ms: p50 11.0, p99 10 + 0.99 x 2 = 11.98
    rows = _session_rows(typed)
    assert rows[0] == ("sessions", "2 of 2 completed, 2 turns, think time 0.5 s (synthetic)")
    assert rows[1] == ("turn 1: TTFT p50 / p99 (ms)", "11.0 / 12.0, input 8 tokens, 2 req")
    assert rows[-1] == ("prefix-cache hits (server)", "30.0% (300 of 1,000 tokens)")
    bad = {**section, "by_turn": [{**section["by_turn"][0], "ttft": 1.0}]}
    assert check_document(_doc(sessions=bad)) == ["undeclared key $.sessions.by_turn[0].ttft"]


def test_the_frontier_a_frontier_run_writes_is_declared_and_typed() -> None:
    from tests.unit.test_frontier_run import _driver, _points, _result, _spec

    tracker = PrecisionTracker(PrecisionRule(min_requests=1, min_seconds=1.0))
    tracker.start(0)
    tracker.check(2_000_000_000)
    table = {c: {**_result(c, 10 * c, 100 * c, 0, slo_passed=True, price=2.0),
                 "precision_stop": tracker.to_dict()} for c in (1, 2, 4)}
    doc = run_frontier(_points([1, 2, 4]), _spec([1, 2, 4]), _driver(table)[0], [])
    doc.problems = answer(doc, 75.0, "tpot_p99<=50ms")
    written = msgspec.to_builtins(doc)  # as the file holds it
    assert check_document(_doc(frontier=written)) == []
    fr = decode_result(_doc(frontier=written)).frontier
    assert isinstance(fr, Frontier)
    assert [p.concurrency for p in fr.points] == [1.0, 2.0, 4.0]
    assert fr.points[0].precision is not None and fr.points[0].precision.floor is not None
    assert fr.points[0].precision.floor.seconds == 1.0 and fr.points[0].slo_passed is True
    assert fr.target is not None and (fr.target.interactivity, fr.target.slo) == (
        75.0, "tpot_p99<=50ms")
    assert fr.at_target is not None and sorted(fr.at_target.between or []) == [1.0, 2.0]
    assert fr.usd_per_gpu_hour == 2.0 and fr.gpus == 2
    bad = {**written, "points": [{**written["points"][0], "pareto_front": True}]}
    assert check_document(_doc(frontier=bad)) == [
        "undeclared key $.frontier.points[0].pareto_front"]


def test_a_precision_stop_is_declared_and_typed() -> None:
    tracker = PrecisionTracker(PrecisionRule(min_requests=1, min_seconds=1.0, max_seconds=2.0))
    tracker.start(0)
    tracker.check(3_000_000_000)  # past the 2 s ceiling
    block = tracker.to_dict()
    assert check_document(_doc(precision_stop=block)) == []
    stop = decode_result(_doc(precision_stop=block)).precision_stop
    assert isinstance(stop, PrecisionStop)
    assert stop.stopped_by == "max_seconds" and stop.reached is False
    assert stop.ceiling is not None and stop.ceiling.seconds == 2.0
    assert stop.output_throughput is not None and stop.output_throughput.estimate == (
        block["output_throughput"]["estimate"])
    assert check_document(_doc(precision_stop={**block, "stoped_by": "x"})) == [
        "undeclared key $.precision_stop.stoped_by"]


def test_the_server_section_is_declared_launched_or_attached(tmp_path: Path) -> None:
    server = SyntheticProcessServer(log_path=tmp_path / "s.log", options=["--ttft-ms", "5"])
    launched = {"kind": server.kind, "url": "http://127.0.0.1:9", "served_model_name": "m",
                **server.describe(1.234),
                "cpu_split": CpuSplit((0,), (1,)).to_dict(), "cpu_split_reason": None,
                **server.diagnosis()}  # after it died: exit code, log tail, root cause
    launched["startup"] = startup_dict([PhaseChange("starting", 0.0), PhaseChange("ready", 1.2)],
                                       1.234)
    assert check_document(_doc(server=launched)) == []
    typed = decode_result(_doc(server=launched)).server
    assert isinstance(typed, Server) and typed.kind == "synthetic"
    assert typed.command == server.command() and typed.cpu_split is not None
    assert typed.startup is not None and typed.startup.phases[0].duration_s == 1.23
    attached = {"kind": "endpoint", "url": "https://gw.example", "served_model_name": "m",
                "models_listed": ["m"], "tls": {"version": "TLSv1.3", "cipher": "X", "alpn": None,
                                                "verified": True, **TlsSettings().to_dict()}}
    assert check_document(_doc(server=attached)) == []
    result = decode_result(_doc(server=attached))
    assert gpu_label(result) == "hardware unknown (endpoint; no --gpu)"
    assert check_document(_doc(server={**attached, "served_model": "m"})) == [
        "undeclared key $.server.served_model"]


def test_the_telemetry_section_is_declared_as_nvml_and_the_scraper_write_it(
    scripted: tuple[dict, Any],  # noqa: F811 (the fixture imported above)
) -> None:
    gpu, _ = run_scripted()  # two fake GPUs, five samples, the window marked
    scraped, _ = scripted  # a real HTTP /metrics page scraped six times, one failing
    scraped["summary"] = mark_not_counted(scraped["summary"], ["vllm", "serve"], 100)
    telemetry = json.loads(json.dumps({"gpu": gpu, "server_metrics": scraped}))
    assert check_document(_doc(telemetry=telemetry)) == []
    typed = decode_result(_doc(telemetry=telemetry)).telemetry
    assert isinstance(typed, Telemetry) and typed.gpu is not None and typed.server_metrics
    g0 = typed.gpu.gpus[0]
    assert g0.summary is not None and g0.summary.energy_j == gpu["gpus"][0]["summary"]["energy_j"]
    assert g0.series["t_s"] == gpu["gpus"][0]["series"]["t_s"]
    sm = typed.server_metrics
    assert sm.summary is not None and sm.summary.running_max == scraped["summary"]["running_max"]
    assert sm.window is not None and sm.window.marked is True
    written = document_json(decode_result(_doc(telemetry=telemetry)))["telemetry"]
    assert written["gpu"] == telemetry["gpu"]  # every key NVML writes, as it wrote it
    assert {k: written["server_metrics"]["summary"][k] for k in scraped["summary"]} == (
        telemetry["server_metrics"]["summary"])
    bad = json.loads(json.dumps(telemetry))
    bad["gpu"]["gpus"][1]["summary"]["energy"] = 1.0
    assert check_document(_doc(telemetry=bad)) == [
        "undeclared key $.telemetry.gpu.gpus[1].summary.energy"]


def test_every_reason_the_scraper_may_add_is_declared() -> None:
    fields = ServerMetricsSummary.__struct_fields__
    keys = [k for kind in NOT_EXPOSED.values() for k in kind] + list(FLAG_GATED)
    assert [k for k in keys if k not in fields or f"{k}_reason" not in fields] == []
