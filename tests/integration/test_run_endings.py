"""Every way a run can end keeps what was measured (issue 24, part 2): SIGTERM and SIGHUP end it
as Ctrl-C does, a second signal ends it at once; a history that is unreachable, lost mid-run or
refusing the write leaves the result file, one line naming `history import`, and exit 5; a
results folder that cannot be written is refused before the run (exit 2), and one that fills up
during the run leaves the files already there intact and the result in a temporary folder that
is named (exit 6)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from infer_prof.results import history as h
from infer_prof.results import history_database as hdb
from tests import postgres

from .conftest import REPO, cli, long_run

pytestmark = pytest.mark.integration
QUICK = ("-n", "24")  # with long_run's 4 streams of 50 tokens at 10 ms: about 3 s


def _pids_alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        # a reaped zombie's pid may be reused: only a process of ours counts
        try:
            if b"infer_prof" in Path(f"/proc/{pid}/cmdline").read_bytes():
                alive.append(pid)
        except OSError:
            continue
    return alive


def _wait_for_load(server_url: str, seconds: float = 60.0) -> None:
    """Until the synthetic server has seen a request (the run is past its start-up checks)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{server_url}/truth", timeout=5) as r:
            if json.loads(r.read())["requests"]:
                return
        time.sleep(0.1)
    raise AssertionError("the run sent no request")


def _result_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.json") if not p.name.endswith(".sweep.json"))


@pytest.mark.parametrize("processes", ["1", "2"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_end_a_run_as_ctrl_c_does(synthetic, tmp_path, sig, processes):
    server = synthetic(ttft_ms=10.0, itl_ms=10.0, tokens=50)
    proc = long_run(server.url, tmp_path, "--client-processes", processes)
    time.sleep(4.0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert f"run incomplete: interrupted ({sig.name})" in err
    [path] = _result_files(tmp_path)
    result = json.loads(path.read_text())
    assert result["complete"] is False and result["incomplete_reason"] == "interrupted"
    s = result["summary"]
    assert s["requests_completed"] > 0
    assert s["failure_kinds"].get("cancelled", 0) >= 1  # the streams in flight at the signal
    lines = (tmp_path / result["requests_file"]).read_text().splitlines()
    assert len(lines) == s["requests_completed"] + s["requests_failed"]
    workers = [w["pid"] for w in (result["client"].get("workers") or [])]
    assert len(workers) == (2 if processes == "2" else 0)
    assert not _pids_alive(workers)  # no client process left behind
    assert h.count_runs(tmp_path / "history.sqlite") == 1


def test_a_signal_during_a_sweep_ends_it_after_that_point_with_exit_3(synthetic, tmp_path):
    server = synthetic(ttft_ms=10.0, itl_ms=10.0, tokens=50)
    proc = long_run(server.url, tmp_path, "-c", "2,4,8", "-n", "24")
    # the first point takes ~6 s; the signal comes while it runs: it is the last one run
    time.sleep(3.0)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    files = _result_files(tmp_path)
    assert len(files) == 1 and "(SIGHUP)" in err


class _SilentServer:
    """A TCP port that accepts connections (the kernel does) and never says a word: a
    PostgreSQL client waits its whole connect timeout there."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def test_a_second_signal_while_stopping_ends_at_once(synthetic, tmp_path):
    server = synthetic(ttft_ms=10.0, itl_ms=10.0, tokens=50)
    silent = _SilentServer()
    try:
        url = f"postgresql://u:p@127.0.0.1:{silent.port}/db"
        proc = long_run(server.url, tmp_path, "--history", url, "--client-processes", "2")
        # the history check at the start waits out its 10 s connect timeout, then the load
        time.sleep(14.0)
        proc.send_signal(signal.SIGTERM)
        # stopping: the result files are written, the history write hangs for 10 s
        deadline = time.monotonic() + 8
        while not _result_files(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _result_files(tmp_path), "the interrupted point was not written"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        silent.close()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert took < 3.0, took
    assert "SIGTERM while stopping: stopped at once" in err
    result = json.loads(_result_files(tmp_path)[0].read_text())
    assert result["incomplete_reason"] == "interrupted"
    assert not _pids_alive([w["pid"] for w in result["client"]["workers"]])


def _import_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if "history import" in ln]
    assert len(lines) == 1, err
    return lines[0]


def test_history_unreachable_at_start_keeps_the_result_and_exits_5(synthetic, tmp_path):
    server = synthetic(ttft_ms=5.0, itl_ms=5.0, tokens=20)
    closed = postgres.free_port()
    url = f"postgresql://u:p@127.0.0.1:{closed}/db"
    proc = long_run(server.url, tmp_path, *QUICK, "--history", url)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 5, err
    assert "warning:" in err and "the run goes on" in err  # said at the start
    [path] = _result_files(tmp_path)
    assert f"infer-prof history import {path}" in _import_line(err)
    assert json.loads(path.read_text())["complete"] is True


def test_history_refusing_the_write_keeps_the_result_and_exits_5(synthetic, tmp_path):
    server = synthetic(ttft_ms=5.0, itl_ms=5.0, tokens=20)
    db = tmp_path / "h.sqlite"
    hdb.check(db)  # a current history ...
    conn = sqlite3.connect(db)  # ... that refuses new runs
    conn.execute(
        "CREATE TRIGGER no_new_runs BEFORE INSERT ON runs "
        "BEGIN SELECT RAISE(ABORT, 'this history takes no new runs'); END"
    )
    conn.commit()
    conn.close()
    proc = long_run(server.url, tmp_path / "r", *QUICK, "--history", str(db))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 5, err
    assert "this history takes no new runs" in _import_line(err)
    assert len(_result_files(tmp_path / "r")) == 1


def test_postgresql_lost_mid_run_then_back_import_records_it(synthetic, tmp_path):
    """A PostgreSQL server stopped under a running run: the result file is kept, exit 5, and
    the `history import` command named records it once the server is back; a server restarted
    during a run (back before the end) loses nothing either."""
    pg = postgres.start()
    try:
        url = pg.url(pg.new_database())
        server = synthetic(ttft_ms=10.0, itl_ms=10.0, tokens=50)
        proc = long_run(server.url, tmp_path / "a", "-n", "40", "--history", url)
        time.sleep(2.5)  # the history was checked at the start; the load runs
        pg.halt()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 5, err
        line = _import_line(err)
        [path] = _result_files(tmp_path / "a")
        assert json.loads(path.read_text())["complete"] is True
        pg.resume()
        cmd = re.search(r"infer-prof history import (\S+)", line)
        assert cmd and cmd.group(1) == str(path)
        p = cli("history", "import", cmd.group(1), "--history", url)
        assert p.returncode == 0, p.stderr
        assert h.count_runs(url) == 1

        # restarted during the run: back before the end, the run is recorded as usual
        proc = long_run(server.url, tmp_path / "b", "-n", "40", "--history", url)
        time.sleep(2.5)
        pg.halt()
        pg.resume()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert h.count_runs(url) == 2
    finally:
        pg.stop()


def test_results_folder_that_cannot_be_written_is_refused_before_the_run(synthetic, tmp_path):
    """Checked for real: a folder under a file (any user), a read-only bind mount and a full
    tmpfs (where this user may mount: root here)."""
    server = synthetic(ttft_ms=5.0, itl_ms=5.0, tokens=20)
    (tmp_path / "file").write_text("")
    cases = {"under a file": tmp_path / "file" / "results"}
    mounted = []
    ro, full = tmp_path / "ro", tmp_path / "full"
    ro.mkdir()
    full.mkdir()
    if subprocess.run(["mount", "--bind", "-o", "ro", str(ro), str(ro)],
                      capture_output=True).returncode == 0:
        mounted.append(ro)
        cases["read-only"] = ro
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)],
                      capture_output=True).returncode == 0:
        mounted.append(full)
        cases["full"] = full
    print(f"unwritable folders checked: {sorted(cases)}")
    try:
        for what, folder in cases.items():
            t0 = time.monotonic()
            p = cli("run", "--model", "llama-2-7b", "--no-progress", "--endpoint", server.url,
                    "-n", "4", "--results-dir", str(folder))
            assert p.returncode == 2, (what, p.stderr)
            errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
            assert len(errors) == 1 and str(folder) in errors[0], (what, p.stderr)
            assert "--results-dir" in errors[0]
            assert time.monotonic() - t0 < 30
    finally:
        for m in mounted:
            subprocess.run(["umount", str(m)], capture_output=True)


def test_a_disk_that_fills_during_the_run_keeps_old_files_and_names_the_result(
    synthetic, tmp_path
):
    server = synthetic(ttft_ms=10.0, itl_ms=10.0, tokens=50)
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
                      capture_output=True).returncode != 0:
        pytest.skip("mount (tmpfs) is not permitted to this user; "
                    "tests/unit/test_result_files.py injects ENOSPC instead")
    try:
        old = disk / "earlier.json"
        old.write_text('{"earlier": true}\n')
        proc = long_run(server.url, disk, "-n", "40", "--no-history")
        _wait_for_load(server.url)  # checked at the start: there was room; now the disk fills
        subprocess.run(["dd", "if=/dev/zero", f"of={disk / 'filler'}", "bs=64k"],
                       capture_output=True)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 6, err
        assert old.read_text() == '{"earlier": true}\n'
        assert sorted(p.name for p in disk.iterdir()) == ["earlier.json", "filler"]
        m = re.search(r"No space left on device; the result is in (\S+) instead", err)
        assert m, err
        moved = Path(m.group(1))
        result = json.loads(moved.read_text())
        assert result["complete"] is True and result["summary"]["requests_completed"] == 40
        assert (moved.parent / result["requests_file"]).is_file()
        assert f"result: {moved}" in err
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_a_closed_ssh_session_sighup_on_a_dead_terminal_keeps_the_result(synthetic, tmp_path):
    """The run's terminal is a pty whose other end is closed (writes fail with EIO: the live
    progress line, the summary) for a second before SIGHUP arrives, as when an SSH session
    drops: the measured requests are still written and recorded, exit 3."""
    import pty  # noqa: F401 -- os.openpty needs the platform's pty support

    server = synthetic(ttft_ms=10.0, itl_ms=10.0, tokens=50)
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "infer_prof", "run", "--model", "llama-2-7b", "--endpoint",
         server.url, "-c", "4", "-n", "400", "--input-len", "8", "--output-len", "50",
         "--warmup-requests", "0", "--results-dir", str(tmp_path)],
        cwd=REPO, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
    )
    os.close(slave)
    try:
        _wait_for_load(server.url)
        time.sleep(1.0)
        os.close(master)  # the terminal is gone: the progress line now writes into EIO
        master = -1
        time.sleep(1.0)
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(timeout=60) == 3
    finally:
        if master >= 0:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
    [path] = _result_files(tmp_path)
    result = json.loads(path.read_text())
    assert result["incomplete_reason"] == "interrupted"
    assert result["summary"]["requests_completed"] > 0
    assert h.count_runs(tmp_path / "history.sqlite") == 1


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_before_any_load_ends_the_run_with_exit_3(tmp_path, sig):
    """During start-up (here: waiting on an endpoint that accepts and never answers) a stop
    signal unwinds the run: one line, nothing written, exit 3 (SIGHUP used to kill it: 129)."""
    silent = _SilentServer()
    try:
        proc = long_run(f"http://127.0.0.1:{silent.port}", tmp_path)
        time.sleep(4.0)
        assert proc.poll() is None
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        silent.close()
    assert proc.returncode == 3, err
    assert f"interrupted by {sig.name} before any load was sent" in err
    assert not _result_files(tmp_path)
