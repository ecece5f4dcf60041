"""Result files: created exclusively and atomically; a full disk or an unwritable folder loses
nothing already on disk and says where the new files went."""

from __future__ import annotations

import errno
import json
import os

import pytest

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.results import store
from infer_prof.results.store import save_run_files, write_new_file
from infer_prof.run import result_files
from infer_prof.run.config import ConfigError, RunConfig


def _records(n: int = 3) -> list[RequestRecord]:
    return [RequestRecord(index=i, input_len=8, max_tokens=8) for i in range(n)]


def _result(tag: str) -> dict:
    return {"kind": "infer-prof.run", "schema_version": 1, "run_id": tag, "config": {},
            "summary": {"requests_completed": 1, "requests_failed": 0}}


def test_a_taken_name_gets_the_next_free_one_never_overwritten(tmp_path):
    base = tmp_path / "20261124-043655-tiny-llama-c2.json"
    written = [save_run_files(base, _result(f"r{i}"), _records()) for i in range(3)]
    names = [(r.name, q.name) for r, q in written]
    assert names == [
        ("20261124-043655-tiny-llama-c2.json", "20261124-043655-tiny-llama-c2.requests.jsonl"),
        ("20261124-043655-tiny-llama-c2-2.json", "20261124-043655-tiny-llama-c2-2.requests.jsonl"),
        ("20261124-043655-tiny-llama-c2-3.json", "20261124-043655-tiny-llama-c2-3.requests.jsonl"),
    ]
    for i, (r, q) in enumerate(written):
        doc = json.loads(r.read_text())
        assert doc["run_id"] == f"r{i}" and doc["requests_file"] == q.name
        assert len(q.read_text().splitlines()) == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_a_stray_requests_file_of_that_name_is_kept_too(tmp_path):
    (tmp_path / "a.requests.jsonl").write_text("someone else's\n")
    r, q = save_run_files(tmp_path / "a.json", _result("mine"), _records())
    assert (r.name, q.name) == ("a-2.json", "a-2.requests.jsonl")
    assert (tmp_path / "a.requests.jsonl").read_text() == "someone else's\n"
    assert not (tmp_path / "a.json").exists()


def test_overwrite_replaces_in_one_step(tmp_path):
    save_run_files(tmp_path / "o.json", _result("old"), _records())
    r, _ = save_run_files(tmp_path / "o.json", _result("new"), _records(), overwrite=True)
    assert r.name == "o.json" and json.loads(r.read_text())["run_id"] == "new"


def test_write_new_file_is_exclusive(tmp_path):
    a = write_new_file(tmp_path / "s.sweep.json", "1")
    b = write_new_file(tmp_path / "s.sweep.json", "2")
    assert (a.name, b.name) == ("s.sweep.json", "s.sweep-2.json")
    assert a.read_text() == "1" and b.read_text() == "2"


def _full_disk(monkeypatch, folder):
    """ENOSPC from every write into ``folder`` (as a full disk gives), nowhere else."""
    real = store._temp_copy

    def copy(where, name, text):
        if os.path.realpath(where) == os.path.realpath(folder):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(where, name, text)

    monkeypatch.setattr(store, "_temp_copy", copy)


def test_a_full_disk_at_the_end_keeps_old_files_and_says_where_the_result_went(
    tmp_path, monkeypatch
):
    results = tmp_path / "results"
    results.mkdir()
    prev = results / "run.json"
    prev.write_text('{"previous": true}\n')
    _full_disk(monkeypatch, results)
    cfg = RunConfig(results_dir=str(results))
    written = result_files.write_point(cfg.results, _result("measured"), _records(), prev)
    assert prev.read_text() == '{"previous": true}\n'  # untouched, not half-written
    assert sorted(p.name for p in results.iterdir()) == ["run.json"]
    assert written.result_path.parent != results
    assert json.loads(written.result_path.read_text())["run_id"] == "measured"
    assert len(written.requests_path.read_text().splitlines()) == 3
    assert written.error and "No space left on device" in written.error
    assert str(written.result_path) in written.error


def test_output_that_exists_is_refused_before_the_run_unless_overwrite(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("{}")
    with pytest.raises(ConfigError, match="exists.*--overwrite"):
        result_files.check_result_location(RunConfig(output=str(out)).results)
    result_files.check_result_location(RunConfig(output=str(out), overwrite=True).results)
    result_files.check_result_location(RunConfig(output=str(tmp_path / "new.json")).results)


def test_a_results_folder_under_a_file_is_refused_before_the_run(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="cannot write result files in .*--results-dir"):
        bad = RunConfig(results_dir=str(tmp_path / "file" / "r"))
        result_files.check_result_location(bad.results)


def test_a_results_folder_without_space_is_refused_before_the_run(tmp_path, monkeypatch):
    class Full:
        f_bavail, f_frsize = 10, 4096

    monkeypatch.setattr(result_files.os, "statvfs", lambda _p: Full())
    with pytest.raises(ConfigError, match="40 KiB free"):
        result_files.check_result_location(RunConfig(results_dir=str(tmp_path)).results)


def test_nowhere_to_write_is_said_not_raised(tmp_path, monkeypatch):
    def full(where, name, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store, "_temp_copy", full)
    written = result_files.write_point(
        RunConfig(results_dir=str(tmp_path)).results, _result("m"), _records(), tmp_path / "r.json"
    )
    assert written.error and written.error.endswith("the result is lost")
    assert not list(tmp_path.iterdir())
