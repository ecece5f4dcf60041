"""Fixtures shared by every test folder: a real PostgreSQL server for the history tests; each
test's own results folder, and a session check that the checkout's results/ stays untouched."""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infer_prof.results import history_database
from infer_prof.results.store import RESULTS_DIR_ENV_VAR
from tests import checkout_guard, postgres

_CHECKOUT_BEFORE = pytest.StashKey[checkout_guard.Snapshot]()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[postgres.PgServer]:
    """One PostgreSQL server for the session (see tests/postgres.py); skipped, with the reason,
    only where no PostgreSQL binary is installed."""
    if postgres.find_bindir() is None:
        pytest.skip(
            "no PostgreSQL binary (initdb/pg_ctl) on PATH or in /usr/lib/postgresql/*/bin; "
            "install it with: bash scripts/install_postgres.sh"
        )
    t0 = time.monotonic()
    server = postgres.start()
    print(f"\nPostgreSQL started on 127.0.0.1:{server.port} in {time.monotonic() - t0:.1f} s")
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server: postgres.PgServer) -> str:
    """The URL (with password) of a fresh empty database on the session's server."""
    return pg_server.url(pg_server.new_database())


# --- the checkout stays clean: each test has its own results folder and history --------------

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def _own_results_parent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the tests' own results folders are made in, one per session."""
    return tmp_path_factory.mktemp("own-results")


_OWN_RESULTS_NUMBERS = itertools.count()


@pytest.fixture(autouse=True)
def own_results_dir(_own_results_parent: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test (and every ``infer-prof`` it starts) writes results and history into a folder
    of its own: ``INFER_PROF_RESULTS_DIR`` set to it, ``INFER_PROF_HISTORY`` unset (so neither
    the checkout's ``results/`` nor a history the user's environment names is touched).

    The folders are numbered in one parent folder of the session: ``tmp_path_factory.mktemp``
    per test lists the whole base folder to find the next number, and with a folder per test
    there that came to ~2 ms a test (~4 s of ``make unit``) on the 2-core VM."""
    folder = _own_results_parent / str(next(_OWN_RESULTS_NUMBERS))
    folder.mkdir()
    monkeypatch.setenv(RESULTS_DIR_ENV_VAR, str(folder))
    monkeypatch.delenv(history_database.ENV_VAR, raising=False)
    return folder


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_CHECKOUT_BEFORE] = checkout_guard.snapshot(REPO)
    # every result a test makes (in this process or an `infer-prof` it starts) is held to its
    # declared type: a key written but not declared, or a value of the wrong type, fails
    os.environ["INFER_PROF_STRICT_SCHEMA"] = "1"
    # A shell without job control starts a background command (`make test &`, nohup) with
    # SIGINT ignored, and every process it starts inherits that: the tests that press Ctrl-C on
    # an `infer-prof` they start would see it ignored. The tests press it; they get it.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session when the tests left anything in the checkout's results/ or new
    untracked files in it."""
    before = session.config.stash.get(_CHECKOUT_BEFORE, None)
    if before is None:
        return
    found = checkout_guard.changes(before, checkout_guard.snapshot(REPO))
    if found:
        shown = "\n  ".join(found[:20]) + ("\n  ..." if len(found) > 20 else "")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        text = (
            f"the tests changed the checkout {REPO} (its results/ is the user's own; a test "
            f"must write under its own folder, see tests/checkout_guard.py):\n  {shown}"
        )
        if reporter is not None:
            reporter.write_sep("=", "checkout not clean", red=True)
            reporter.write_line(text)
        else:
            print(text)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
