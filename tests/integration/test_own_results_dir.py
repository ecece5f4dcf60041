"""Tests write nothing into the checkout's results/ (the user's own results and history):
``INFER_PROF_RESULTS_DIR`` moves the default results folder, and with it the default history,
and conftest gives every test its own. tests/conftest.py also fails the whole session when the
checkout's results/ changed (tests/checkout_guard.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests import checkout_guard

from .conftest import REPO, cli


def test_run_without_results_dir_writes_into_infer_prof_results_dir_not_the_checkout(
    synthetic, own_results_dir: Path
) -> None:
    assert os.environ["INFER_PROF_RESULTS_DIR"] == str(own_results_dir)
    assert "INFER_PROF_HISTORY" not in os.environ
    before = checkout_guard.snapshot(REPO)
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=4)
    p = cli(
        "run", "--model", "llama-2-7b", "--no-progress", "--endpoint", server.url, "-c", "2",
        "-n", "4", "--input-len", "8", "--output-len", "4", "--warmup-requests", "0", "--json",
    )  # fmt: skip: no --results-dir, no --output, no --history: every default, cwd = checkout
    assert p.returncode == 0, p.stderr
    results = sorted(own_results_dir.glob("*.json"))
    assert len(results) == 1, list(own_results_dir.iterdir())
    assert (own_results_dir / "history.sqlite").is_file()
    assert checkout_guard.changes(before, checkout_guard.snapshot(REPO)) == []

    # the history commands read the same default
    h = cli("history", "--json")
    assert h.returncode == 0, h.stderr
    run_id = json.loads(results[0].read_text())["run_id"]
    assert run_id in {r["run_id"] for r in json.loads(h.stdout)}


def test_the_guard_sees_results_files_and_untracked_files(tmp_path: Path) -> None:
    repo = tmp_path / "checkout"
    (repo / "results").mkdir(parents=True)
    (repo / "results" / "README.md").write_text("mine")
    before = checkout_guard.snapshot(repo)
    assert checkout_guard.changes(before, checkout_guard.snapshot(repo)) == []
    (repo / "results" / "history.sqlite").write_bytes(b"x")
    (repo / "results" / "README.md").write_text("changed by a test")
    (repo / "report.html").write_text("<html>")  # untracked outside results/ (git repo below)
    os.system(f"git -C {repo} init -q")
    after = checkout_guard.snapshot(repo)
    found = checkout_guard.changes(before, after)
    assert "added results/history.sqlite" in found
    assert "changed results/README.md" in found
    assert "added report.html" in found
