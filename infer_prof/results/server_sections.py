"""The result's section about the server that answered (part of
:class:`infer_prof.results.document.Result`): ``server``, written by ``run.startup`` (what was
launched or attached to: :meth:`infer_prof.servers.base.Server.describe`, the TLS handshake of
an https endpoint, the CPU split) and ``run.record.server_section`` (after the server died:
:meth:`~infer_prof.servers.base.Server.diagnosis`).

Every field has a default: an attached endpoint records no command, a launched server no model
list, and an older result lacks what was added later (None: not recorded).
"""

from __future__ import annotations

from infer_prof.results.document_base import Section


class ServerTls(Section):
    """What one TLS handshake with an https endpoint negotiated before any load
    (``loadgen.tls.preflight``): protocol version, cipher, ALPN protocol, whether the
    certificate was verified, and the settings it was checked with."""

    version: str | None = None
    cipher: str | None = None
    alpn: str | None = None
    verified: bool | None = None
    ca_bundle: str | None = None
    insecure: bool | None = None


class StartupPhase(Section):
    """One phase of the server's start-up (``servers.vllm_startup``): seconds from the launch to
    its start, and its duration (None when the start-up did not finish)."""

    name: str | None = None
    start_s: float | None = None
    duration_s: float | None = None


class ServerStartup(Section):
    """The server's start-up: total seconds to healthy, its phases, and how they were timed."""

    total_s: float | None = None
    phases: list[StartupPhase] = []
    source: str | None = None


class CpuSplit(Section):
    """The CPUs the engine and the client were pinned to (``servers.cpu_split.CpuSplit``)."""

    engine_cpus: list[int] = []
    client_cpus: list[int] = []


class Server(Section):
    """The server that answered: its ``kind`` (``vllm``, ``synthetic``, ``endpoint`` or one
    registered from outside), URL and the model name asked for; for an attached endpoint the
    models it listed and its TLS handshake; for a launched one its command, log file, seconds to
    healthy and start-up phases, the engine's name and the CPU split (or why none); after it
    died, its exit code, the end of its log and the root cause read there."""

    kind: str | None = None
    url: str | None = None
    served_model_name: str | None = None
    models_listed: list[str] | None = None
    tls: ServerTls | None = None
    command: list[str] | None = None
    log_file: str | None = None
    startup_s: float | None = None
    startup: ServerStartup | None = None
    engine: str | None = None
    cpu_split: CpuSplit | None = None
    cpu_split_reason: str | None = None
    exit_code: int | None = None
    log_tail: str | None = None
    root_cause: str | None = None
