"""Stopping a browser (or server) leaves nothing behind: every process of its group has exited
before its throw-away folder is removed, and the removal does not fail.

Chromium forks helpers (renderers, GPU, crashpad) into its process group; on SIGTERM the
browser process can exit before they do, and a helper still writing into the profile made
``chromium_devtools`` fail with "OSError: [Errno 39] Directory not empty: 'Default'" (and left
the helper running). The stand-in browser here does exactly that, with real processes: its
helper writes a file into ``<profile>/Default`` every millisecond until well after the browser
process has gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from infer_prof.report import chromium
from infer_prof.servers.process_group import group_members, group_running, stop_group

#: A stand-in for Chromium: writes DevToolsActivePort into --user-data-dir, forks a helper into
#: its process group that keeps writing into the profile for HELPER_S seconds after a SIGTERM
#: or after the browser process died (or ignores SIGTERM with IGNORE=1), and exits at once
#: itself on SIGTERM.
FAKE_BROWSER = textwrap.dedent(
    """\
    #!{python}
    import os, signal, sys, time
    from pathlib import Path
    profile = Path(next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--user-data-dir=")))
    (profile / "Default").mkdir(parents=True)
    helper_s = float(os.environ.get("HELPER_S", "1.0"))
    pid = os.fork()
    if pid == 0:  # the helper
        stop = []
        if os.environ.get("IGNORE") == "1":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:
            signal.signal(signal.SIGTERM, lambda *a: stop.append(time.monotonic()))
        Path(os.environ["HELPER_PID_FILE"]).write_text(str(os.getpid()))
        parent, i = os.getppid(), 0
        while not stop or time.monotonic() - stop[0] < helper_s:
            if not stop and os.getppid() != parent:  # the browser is gone: shut down too
                stop.append(time.monotonic())
            i += 1
            try:
                (profile / "Default" / f"f{{i}}").write_text("x")
            except FileNotFoundError:  # as Chromium does, make the folder again
                (profile / "Default").mkdir(parents=True, exist_ok=True)
            time.sleep(0.001)
        os._exit(0)
    while not Path(os.environ["HELPER_PID_FILE"]).exists():
        time.sleep(0.01)
    (profile / "DevToolsActivePort").write_text("45678\\n/devtools/browser/x\\n")
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    while True:
        time.sleep(1)
    """
)


@pytest.fixture
def fake_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in browser as an executable; temp folders go under tmp_path/tmp."""
    exe = tmp_path / "fake-chromium"
    exe.write_text(FAKE_BROWSER.format(python=sys.executable))
    exe.chmod(0o755)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    monkeypatch.setenv("HELPER_PID_FILE", str(tmp_path / "helper.pid"))
    return exe


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def test_profile_is_removed_only_after_every_browser_process_exited(
    fake_browser: Path, tmp_path: Path
) -> None:
    with chromium.chromium_devtools(str(fake_browser)) as port:
        assert port == 45678
        helper = int((tmp_path / "helper.pid").read_text())
        assert _running(helper)
        profile_root = next((tmp_path / "tmp").glob("infer-prof-chromium-*"))
        assert (profile_root / "profile" / "Default").is_dir()
    assert not _running(helper), "the browser's helper outlived chromium_devtools"
    assert list((tmp_path / "tmp").iterdir()) == [], "the throw-away profile was left behind"


def test_a_helper_that_ignores_sigterm_is_killed_and_the_profile_removed(
    fake_browser: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IGNORE", "1")
    t0 = time.monotonic()
    with chromium.chromium_devtools(str(fake_browser), stop_grace_s=0.5):
        helper = int((tmp_path / "helper.pid").read_text())
    assert time.monotonic() - t0 < 8.0
    assert not _running(helper)
    assert list((tmp_path / "tmp").iterdir()) == []


def test_remove_tree_retries_while_files_appear(tmp_path: Path) -> None:
    """A folder another process is still writing into is removed once the writer stops."""
    folder = tmp_path / "busy"
    (folder / "Default").mkdir(parents=True)
    code = (
        "import sys, time\nfrom pathlib import Path\nend = time.monotonic() + 0.5\ni = 0\n"
        "while time.monotonic() < end:\n    i += 1\n"
        "    try:\n        Path(sys.argv[1], f'f{i}').write_text('x')\n"
        "    except FileNotFoundError:\n        break\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", code, str(folder / "Default")])
    try:
        time.sleep(0.2)
        assert chromium.remove_tree(folder, attempts=20, pause_s=0.1)
    finally:
        writer.wait(timeout=10)
    assert not folder.exists()


def test_zombies_do_not_count_as_running() -> None:
    """A group whose only other member is a zombie (an exited child nobody reaped, as orphans
    stay where PID 1 does not reap them) is the leader alone; once the leader is stopped the
    group is gone, without waiting out the grace period."""
    leader = subprocess.Popen(
        [sys.executable, "-c",
         "import os, time\npid = os.fork()\nif pid == 0:\n    os._exit(0)\n"
         "print(pid, flush=True)\ntime.sleep(60)"],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    deadline = time.monotonic() + 10
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert Path(f"/proc/{child}/stat").exists() and not _running(child)  # a zombie
    assert group_members(leader.pid) == [leader.pid]
    assert group_running(leader.pid)
    t0 = time.monotonic()
    assert stop_group(leader, grace_s=5.0)
    assert time.monotonic() - t0 < 2.0
    assert leader.returncode == -signal.SIGTERM
    assert not group_running(leader.pid)
    leader.stdout.close()


def test_real_chromium_leaves_no_process_and_no_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = chromium.find_chromium()
    if binary is None:
        pytest.skip(f"no Chromium; {chromium.CHROMIUM_INSTALL_HINT}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with chromium.chromium_devtools(binary) as port:
        page = chromium.open_page(port)
        page.call("Runtime.evaluate", expression="1 + 1")
        page.close()
        pgid = _browser_pgid(tmp_path)
        seen = group_members(pgid) or []
    assert len(seen) >= 2, "Chromium runs helpers in its group; the check saw none"
    assert [p for p in seen if _running(p)] == []
    assert not group_running(pgid)
    assert list(tmp_path.iterdir()) == []


def _browser_pgid(tmp_path: Path) -> int:
    """The process group of the Chromium whose profile lies under tmp_path."""
    profile = str(next(tmp_path.glob("infer-prof-chromium-*")) / "profile")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"--user-data-dir={profile}".encode() in cmd and b"--type" not in b" ".join(cmd):
            return os.getpgid(int(pid))
    raise AssertionError("Chromium's browser process was not found")
