"""The servers a run can start, by name (``infer-prof run --server NAME``), and the attached
endpoint (``--endpoint URL``). The one place ``run/`` gets a server from.

Adding an engine: its module in ``servers/`` (a class with the
:class:`infer_prof.servers.base.Server` methods and a ``from_launch(spec)`` that spells the
:class:`infer_prof.servers.base.LaunchSpec` in its own flags) and its line in :data:`SERVERS`.
``--server`` takes every name here; nothing in ``run/`` or ``cli/`` changes.
"""

from __future__ import annotations

from collections.abc import Callable

from infer_prof.servers.attached import AttachedEndpoint
from infer_prof.servers.base import LaunchSpec, Server
from infer_prof.servers.synthetic_process import SyntheticProcessServer
from infer_prof.servers.vllm_server import VllmServer

ServerFactory = Callable[[LaunchSpec], Server]

#: Server name -> how to make one (not started) from what the run asks for.
SERVERS: dict[str, ServerFactory] = {
    "vllm": VllmServer.from_launch,
    "synthetic": SyntheticProcessServer.from_launch,
}
DEFAULT_SERVER = "vllm"


def register_server(name: str, factory: ServerFactory) -> None:
    """Make ``--server name`` start the server ``factory`` builds (a plug-in, or a test)."""
    SERVERS[name] = factory


def server_names() -> tuple[str, ...]:
    """The names ``--server`` takes, in the order registered."""
    return tuple(SERVERS)


def check_server_name(name: str) -> str | None:
    """None when ``name`` is a registered server, else one line naming the choices."""
    if name in SERVERS:
        return None
    return f"--server {name!r}: unknown server; choose one of {', '.join(SERVERS)}"


def make_server(name: str, spec: LaunchSpec) -> Server:
    """The server ``name`` for ``spec``, not started. Raises KeyError for an unknown name
    (checked earlier by :func:`check_server_name`)."""
    return SERVERS[name](spec)


def attach(base_url: str, api_key: str | None = None) -> Server:
    """The server behind ``--endpoint``: nothing to start or stop."""
    return AttachedEndpoint(base_url, api_key)
