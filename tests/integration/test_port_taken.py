"""A launched server's port is chosen free (bind to port 0, close) a few seconds before the
server binds it; another process can take it in between. The launch that dies of it is
launched again on another port; a port the user gave is never changed."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from infer_prof.servers import child_server
from infer_prof.servers.base import ServerStartError
from infer_prof.servers.process import free_port
from infer_prof.servers.synthetic_process import SyntheticProcessServer

pytestmark = pytest.mark.integration


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another process (this test) holds: bound and listening."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


def test_a_chosen_port_taken_before_the_server_binds_it_is_chosen_again(
        taken: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    offers = iter([taken])  # the first "free" port is taken by the time the server binds it
    monkeypatch.setattr(child_server, "free_port",
                        lambda host="127.0.0.1": next(offers, None) or free_port(host))
    server = SyntheticProcessServer(log_path=tmp_path / "server.log")
    server.start()
    try:
        startup_s = server.wait_healthy(60)
        assert server.port != taken
        assert server.port_retries == 1
        assert server.poll() is None and startup_s < 60
        log = (tmp_path / "server.log").read_text()
        assert f"port {taken} was taken by another process" in log
        assert log.count("$ ") == 2  # both launches' command lines are in the log
    finally:
        server.stop()


def test_a_port_the_user_gave_is_never_changed(taken: int, tmp_path: Path) -> None:
    server = SyntheticProcessServer(log_path=tmp_path / "server.log", port=taken)
    server.start()
    try:
        with pytest.raises(ServerStartError, match="exited with code"):
            server.wait_healthy(60)
        assert server.port == taken and server.port_retries == 0
    finally:
        server.stop()


def test_a_launch_dying_of_something_else_is_not_retried(tmp_path: Path) -> None:
    server = SyntheticProcessServer(log_path=tmp_path / "server.log",
                                    options=("--no-such-option",))
    server.start()
    try:
        with pytest.raises(ServerStartError, match="exited with code"):
            server.wait_healthy(60)
        assert server.port_retries == 0
    finally:
        server.stop()
