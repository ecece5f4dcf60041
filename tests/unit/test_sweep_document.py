"""The sweep summary's declared type (results/sweep_document.py): what the writers build
(record_sweep with a frontier, a suite's frontiers and find-max; execute_engine_sweep) is
declared key for key, is read back as attributes, and a misspelt key is refused by its path
before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from msgspec import UNSET
from rich.console import Console

from infer_prof.core.analysis.sweep import SearchResult
from infer_prof.report.console import print_sweep
from infer_prof.report.frontier_table import frontier_problems, print_frontiers
from infer_prof.results.schema import SCHEMA_VERSION
from infer_prof.results.store import ResultTypeError, check_result_type
from infer_prof.results.sweep_document import (
    FindMax,
    Sweep,
    check_sweep,
    decode_sweep,
    sweep_schema_path,
    sweep_schema_text,
)
from infer_prof.run.config import RunConfig
from infer_prof.run.engine_sweep import execute_engine_sweep
from infer_prof.run.frontier_run import answer, run_frontier, suite_frontiers
from infer_prof.run.record import SweepOutcome, record_sweep, sweep_summary
from infer_prof.run.runner import search_answer
from tests.unit.test_frontier_run import _driver, _points, _result, _spec


def _frontier_run(tmp_path: Path, **kw):
    """A --frontier run's pieces as the runner has them: its outcomes and frontier document."""
    table = {1: _result(1, 10, 100, 0, price=2.0), 2: _result(2, 20, 180, 0, price=2.0),
             4: _result(4, 40, 200, 0, price=2.0)}
    outcomes: list = []
    doc = run_frontier(_points([1, 2, 4]), _spec([1, 2, 4]), _driver(table)[0], outcomes, **kw)
    doc.problems = answer(doc, 75.0, None)
    return outcomes, doc


def test_a_frontier_sweep_is_declared_written_and_read_as_attributes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcomes, frontier = _frontier_run(tmp_path)
    cfg = RunConfig(frontier=True, results_dir=str(tmp_path))
    done = record_sweep(cfg, "tiny-llama", "20260101-000000", outcomes, None, frontier)
    assert isinstance(done.sweep, Sweep) and done.sweep_path is not None
    written = json.loads(done.sweep_path.read_text())
    assert check_sweep(written) == []  # every key the writer wrote is declared
    sweep = done.sweep
    assert sweep.kind == "infer-prof.sweep" and len(sweep.points) == 3
    assert [r.result_file for r in sweep.points] == ["c1.json", "c2.json", "c4.json"]
    assert sweep.frontier is not None and sweep.frontier.at_target is not None
    assert sweep.frontier.at_target.interpolated is True
    assert sweep.frontier.points[0].precision is not None
    assert frontier_problems(sweep) == []
    console = Console(width=300, force_terminal=False)
    with console.capture() as cap:
        print_sweep(sweep, console)
    assert "sweep" in cap.get() and "tot tok/s/GPU" in cap.get()
    print_frontiers(sweep, console)  # (a wide console of its own: not a terminal)
    out = capsys.readouterr().out
    assert "frontier: tokens/s per GPU (2 GPU)" in out and "interpolated between 1 and 2" in out


def test_find_max_and_a_suite_are_declared(tmp_path: Path) -> None:
    found = SearchResult(best=4, first_fail=8, probes=[(1, True), (4, True), (8, False)],
                         reason="bracketed")
    a = _points([1, 2])
    b = [w.with_overrides(name="other") for w in _points([1, 2])]
    table = {1: _result(1, 10, 100, 0), 2: _result(2, 12, 200, 0)}
    outcomes: list = []
    cfg, spec = RunConfig(frontier=True, results_dir=str(tmp_path)), _spec([1, 2])
    docs = suite_frontiers([*a, *b], spec, _driver(table)[0], outcomes, None)
    done = record_sweep(cfg, "m", "20260101-000000", outcomes,
                        FindMax(load="concurrency", result=search_answer(found), reason=UNSET),
                        frontiers=docs)
    assert done.sweep is not None and done.sweep_path is not None
    assert check_sweep(json.loads(done.sweep_path.read_text())) == []
    fm = done.sweep.find_max
    assert fm is not None and fm.result is not None
    assert (fm.load, fm.result.best, fm.result.first_fail) == ("concurrency", 4, 8)
    assert isinstance(fm.result.best, int)  # streams stay whole numbers
    assert [p.passed for p in fm.result.probes] == [True, True, False]
    assert [f.workload for f in done.sweep.frontiers or []] == ["w", "other"]
    stopped = FindMax(load=None, result=None, reason="stopped: a point did not complete")
    written = msgspec.to_builtins(sweep_summary(outcomes, stopped))
    assert check_sweep(written) == [] and written["find_max"]["reason"] == stopped.reason
    assert "frontier" not in written and "engine_sweep" not in written  # not made: left out


def test_an_engine_sweep_is_declared_with_its_envelope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def execute(one: RunConfig) -> SweepOutcome:
        outcomes, frontier = _frontier_run(tmp_path)
        return record_sweep(one, "m", f"s-{one.results.run_tag}", outcomes, None, frontier)

    cfg = RunConfig(frontier=True, engine_sweep="max-num-seqs=4,8", results_dir=str(tmp_path))
    done = execute_engine_sweep(cfg, execute)
    assert done.sweep is not None and done.sweep.kind == "infer-prof.engine-sweep"
    assert done.sweep_path is not None
    assert check_sweep(json.loads(done.sweep_path.read_text())) == []
    es = done.sweep.engine_sweep
    assert es is not None and [c.name for c in es.configs] == ["max-num-seqs=4",
                                                                "max-num-seqs=8"]
    assert es.configs[0].settings == {"max-num-seqs": 4}
    assert es.configs[0].frontier is not None and es.configs[0].sweep_file
    assert {r.config for r in es.envelope} == {"max-num-seqs=4", "max-num-seqs=8"}
    assert any(r.envelope for r in es.envelope)
    print_frontiers(done.sweep, Console(force_terminal=False))
    out = capsys.readouterr().out
    assert "upper envelope" in out and "engine configuration max-num-seqs=8" in out


def test_a_misspelt_key_is_named_by_its_path_and_refused_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes, frontier = _frontier_run(tmp_path)
    sweep = msgspec.to_builtins(sweep_summary(outcomes, None))
    sweep["frontier"] = msgspec.to_builtins(frontier)  # as record_sweep writes it
    sweep["points"][1]["tpot_p5O_ms"] = 1.0
    sweep["frontier"]["points"][0]["paretoo"] = True
    assert sorted(check_sweep(sweep)) == ["undeclared key $.frontier.points[0].paretoo",
                                          "undeclared key $.points[1].tpot_p5O_ms"]
    monkeypatch.setenv("INFER_PROF_STRICT_SCHEMA", "1")
    with pytest.raises(ResultTypeError, match=r"\$\.points\[1\]\.tpot_p5O_ms"):
        check_result_type(sweep)
    bad = {**msgspec.to_builtins(sweep_summary(outcomes, None)), "knees": [{"row": "two"}]}
    assert any("knees" in p for p in check_sweep(bad))
    assert decode_sweep({"schema_version": 1, "kind": "infer-prof.sweep"}).points == []


def test_the_shipped_sweep_schema_is_the_declaration(tmp_path: Path) -> None:
    import jsonschema

    assert sweep_schema_path(SCHEMA_VERSION).read_text() == sweep_schema_text(), (
        "run: python scripts/write_result_schema.py")
    schema = json.loads(sweep_schema_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    outcomes, frontier = _frontier_run(tmp_path)
    cfg = RunConfig(frontier=True, results_dir=str(tmp_path))
    done = record_sweep(cfg, "m", "20260101-000000", outcomes, None, frontier)
    assert done.sweep_path is not None
    # the schema was checked just above: validate without checking it again
    jsonschema.Draft202012Validator(schema).validate(json.loads(done.sweep_path.read_text()))
