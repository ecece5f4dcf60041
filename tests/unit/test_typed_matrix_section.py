"""A matrix cell's ``matrix`` section is declared once (results/matrix_sections.py, the cell's
record in core/planning/matrix.py): the driver writes it as before (a cell run here placed
``{"where": "here"}``, a lost Ray cell's unknown node as nulls), a result reads it as
attributes, and a misspelt key is caught before a result is written."""

import json

import msgspec

from infer_prof.core.planning.matrix import MatrixCellRecord, parse_matrix
from infer_prof.results.document import check_document, decode_result
from infer_prof.results.matrix_sections import MatrixSection, NodeFacts, Placement
from infer_prof.run.matrix_cell import CellRun
from infer_prof.run.matrix_record import LostAttempt, save_cell, save_lost_cell

MATRIX = parse_matrix({"models": ["tiny-llama"], "gpus": ["cpu", "H100-SXM"],
                       "concurrency": [2, 8], "input_len": 64, "output_len": 32,
                       "num_requests": 32}, "m.toml")
DOC = {"kind": "infer-prof.run", "schema_version": 1, "run_id": "RID", "config": {},
       "summary": {}, "complete": True}
NODE = {"hostname": "h", "infer_prof_version": "1", "gpus": [], "gpu_keys": [], "where": "here"}
CELL_TEXT = ('{"index": 1, "id": "tiny-llama/cpu/default/default", "model": "tiny-llama", '
             '"gpu": "cpu", "engine": "default", "workload": "default", "concurrency": [2, 8], '
             '"endpoint": null, "frontier": false}')


def test_a_cell_run_here_is_written_as_before_and_read_as_attributes(tmp_path):
    run = CellRun(MATRIX.cells[0], 0, node=dict(NODE), started_at=1.0, finished_at=2.0)
    run.results = [("p", dict(DOC), None)]
    outcome = save_cell(run, MATRIX, tmp_path, None, 1, Placement(where="here"), 0.5)
    written = json.loads(outcome.result_paths[0].read_text())
    assert json.dumps(written["matrix"]) == (
        '{"name": "matrix", "file": "m.toml", "cell": ' + CELL_TEXT + ', "attempt": 1, '
        '"placement": {"where": "here", "node": {"hostname": "h", "infer_prof_version": "1", '
        '"gpus": [], "gpu_keys": [], "where": "here"}}}')
    assert outcome.to_dict()["placement"] == written["matrix"]["placement"]
    m = decode_result(written).matrix
    assert isinstance(m, MatrixSection) and isinstance(m.cell, MatrixCellRecord)
    assert m.cell.gpu == "cpu" and m.cell.concurrency == [2, 8] and m.attempt == 1
    assert m.placement.where == "here" and m.placement.node_id is msgspec.UNSET
    assert m.placement.node == NodeFacts(hostname="h", infer_prof_version="1", where="here")


def test_a_lost_ray_cell_keeps_its_unknown_node_as_nulls(tmp_path):
    placement = Placement(ray_node_id=None, node_id=None, ip=None, accelerator_type="H100")
    outcome = save_lost_cell(MATRIX.cells[1], MATRIX, tmp_path, None,
                             LostAttempt(2, placement, "node lost", "incomplete", 0.5, None))
    written = json.loads(outcome.result_paths[0].read_text())
    assert written["matrix"]["placement"] == {"ray_node_id": None, "node_id": None, "ip": None,
                                              "accelerator_type": "H100"}
    assert written["matrix"]["attempt"] == 2 and written["complete"] is False
    m = decode_result(written).matrix
    assert m is not None and m.placement.accelerator_type == "H100"
    assert m.placement.node_id is None and m.placement.where is msgspec.UNSET


def test_a_misspelt_matrix_key_is_caught_before_writing():
    section = msgspec.to_builtins(MatrixSection(
        name="m", file="m.toml", cell=MATRIX.cells[0].record(),
        placement=Placement(where="here")))
    section["placement"]["nodeid"] = "x"
    section["cell"]["gpus"] = "cpu"
    assert set(check_document({**DOC, "matrix": section})) == {
        "undeclared key $.matrix.placement.nodeid", "undeclared key $.matrix.cell.gpus"}
    section = msgspec.to_builtins(MatrixSection(name="m", file="m.toml",
                                                cell=MATRIX.cells[0].record()))
    section["placement"] = {"where": "there"}
    problems = check_document({**DOC, "matrix": section})
    assert len(problems) == 1 and "$.matrix.placement.where" in problems[0]


def test_the_matrix_summary_is_written_to_its_declared_type(tmp_path, monkeypatch):
    """The ``*.matrix.json`` summary is a MatrixSummary: its shipped schema is the declaration,
    every attempt is a CellAttempt, and a misspelt key or an unknown status is refused."""
    import pytest

    from infer_prof.results.matrix_summary import (
        check_matrix_summary,
        matrix_schema_path,
        matrix_schema_text,
    )
    from infer_prof.results.schema import SCHEMA_VERSION
    from infer_prof.results.store import ResultTypeError, write_result
    from infer_prof.run.matrix_record import CellOutcome, write_summary

    assert matrix_schema_path(SCHEMA_VERSION).read_text() == matrix_schema_text()
    outcomes = [CellOutcome(MATRIX.cells[0], "done", placement=Placement(where="here"),
                            submitted_at=1.0, started_at=1.5, finished_at=3.0),
                CellOutcome(MATRIX.cells[1], "skipped", "needs 2 nodes")]
    path = write_summary(MATRIX, outcomes, tmp_path, "S", 4.0, "here")
    written = json.loads(path.read_text())
    assert check_matrix_summary(written) == []
    assert [c["status"] for c in written["cells"]] == ["done", "skipped"]
    assert written["cells"][0]["submit_to_start_s"] == 0.5
    assert written["cells"][0]["placement"] == {"where": "here"}
    bad = {**written, "cells": [{**written["cells"][0], "statsu": "done"}]}
    assert check_matrix_summary(bad) == ["undeclared key $.cells[0].statsu"]
    lost = {**written, "cells": [{**written["cells"][0], "status": "lost"}]}
    assert check_matrix_summary(lost) and "status" in check_matrix_summary(lost)[0]
    monkeypatch.setenv("INFER_PROF_STRICT_SCHEMA", "1")
    with pytest.raises(ResultTypeError):
        write_result(tmp_path / "bad.matrix.json", bad)
