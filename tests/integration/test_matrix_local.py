"""`infer-prof matrix FILE` without --ray: the cells here, one after another, against a real
local (synthetic) server; a cell naming a GPU type this machine lacks is skipped with the
reason; Ctrl-C stops the running cell, keeps what it measured and starts no other."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from .conftest import cli, cli_background

pytestmark = pytest.mark.integration


def _file(tmp_path: Path, url: str, n: int) -> Path:
    f = tmp_path / "m.toml"
    f.write_text(f'name = "here"\nmodels = ["llama-2-7b"]\ngpus = ["cpu", "H100-SXM"]\n'
                 f'concurrency = [2, 4]\ninput_len = 8\noutput_len = 16\nnum_requests = {n}\n'
                 f'endpoint = "{url}"\nrun_args = ["--warmup", "none", "--min-duration", '
                 '"0.1"]\n')
    return f


def test_cells_run_here_in_turn_and_a_foreign_gpu_is_skipped(synthetic, tmp_path):
    server = synthetic(ttft_ms=5.0, itl_ms=5.0, tokens=16)
    res = tmp_path / "r"
    p = cli("matrix", str(_file(tmp_path, server.url, 12)), "--results-dir", str(res))
    assert p.returncode == 0, p.stderr
    results = [json.loads(x.read_text()) for x in res.glob("*.json")
               if not x.name.endswith(".matrix.json")]
    assert sorted(r["config"]["concurrency"] for r in results) == [2, 4]
    assert all(r["complete"] and r["matrix"]["cell"]["gpu"] == "cpu" for r in results)
    assert all((res / r["requests_file"]).is_file() for r in results)
    assert "H100-SXM/default/default: skipped: cell wants H100-SXM but this machine" in p.stderr
    summary = json.loads(next(res.glob("*.matrix.json")).read_text())
    assert [c["status"] for c in summary["cells"]] == ["done", "skipped"]
    with sqlite3.connect(res / "history.sqlite") as db:
        assert db.execute("select count(*) from runs").fetchone()[0] == 2
    # compare's table (at the captured 80 columns its header may wrap to "out" / "tok/s")
    assert "tok/s" in p.stdout


def test_ctrl_c_stops_the_running_cell_and_keeps_what_it_measured(synthetic, tmp_path):
    server = synthetic(ttft_ms=5.0, itl_ms=20.0, tokens=16)
    res = tmp_path / "r"
    p = cli_background("matrix", str(_file(tmp_path, server.url, 400)), "--results-dir", str(res))
    time.sleep(6)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    results = [json.loads(x.read_text()) for x in res.glob("*.json")
               if not x.name.endswith(".matrix.json")]
    assert len(results) == 1 and results[0]["complete"] is False
    assert "interrupted" in results[0]["incomplete_reason"]
    assert "H100-SXM" not in err.split("interrupted")[-1]  # no cell started after it
