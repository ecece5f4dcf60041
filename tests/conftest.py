"""Fixtures shared by every test folder: a real PostgreSQL server for the history tests."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests import postgres


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
