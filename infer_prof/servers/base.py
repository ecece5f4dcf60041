"""The seam between a run and the server it measures: the :class:`Server` protocol, what a run
asks a launched server for (:class:`LaunchSpec`), and the error a failed start raises.

Three kinds stand behind it (:mod:`infer_prof.servers.registry` names them): vLLM, started here
(:mod:`infer_prof.servers.vllm_server`); the built-in synthetic server, started here
(:mod:`infer_prof.servers.synthetic_process`); and an endpoint someone else runs
(:mod:`infer_prof.servers.attached`), with nothing to start or stop. ``run/`` knows only this
module and the registry: an engine's flags, log format and start-up phases stay in its module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from infer_prof.catalog.lora_adapters import LoraAdapter
from infer_prof.core.planning.plan_result import EngineSettings

if TYPE_CHECKING:
    from infer_prof.servers.cpu_split import CpuSplit


class ServerStartError(RuntimeError):
    """The server exited or never became healthy; the message carries the root cause found in
    its log and the log's tail."""


@dataclass(frozen=True)
class PhaseChange:
    """The start-up entered ``phase`` at ``at_s`` seconds after launch."""

    phase: str
    at_s: float


@dataclass(frozen=True)
class LaunchSpec:
    """What a run asks of a server it starts, in no engine's spelling: what to load and serve
    under which name (and which LoRA adapters beside it), the engine settings (the plan's,
    with the user's explicit choices over them, :class:`EngineSettings`), where the log goes,
    and arguments passed verbatim (``--engine-arg``)."""

    model: str  # what the engine loads: a folder or a hub id
    served_model_name: str
    log_path: Path
    settings: EngineSettings = field(default_factory=EngineSettings)
    extra_args: tuple[str, ...] = ()
    on_gpu: bool = False
    tokenizer: bool = True  # False: the model has none; prompts go as token IDs
    enforce_eager: bool = False
    engine_version: tuple[int, ...] | None = None  # the engine build the plan was checked for
    # speculative decoding: the engine's JSON settings (``--speculative-config``), None: off
    speculative_config: str | None = None
    reasoning_parser: str | None = None  # the engine's parser of thinking (vLLM's name), if any
    lora_adapters: tuple[LoraAdapter, ...] = ()  # LoRA adapters to serve beside the model


class Server(Protocol):
    """A server a run measures. ``launched`` servers are started and stopped by the run (their
    death is an exit code); an attached one is neither (its death is refused connections)."""

    kind: str  # the registry's name for it, the result's ``server.kind``
    label: str  # how progress lines name it ("vLLM")
    launched: bool
    exit_code: int | None

    @property
    def url(self) -> str:
        """Base URL of its OpenAI-compatible API (``http://host:port``)."""
        ...

    def command(self) -> list[str]:
        """The command line that starts it ([] when it is not launched here)."""
        ...

    def start(self) -> None:
        """Launch it (nothing for an attached endpoint); returns at once."""
        ...

    def use_cpus(self, split: CpuSplit) -> None:
        """Before :meth:`start` on a CPU run: serve on ``split.engine``'s cores only."""
        ...

    def wait_healthy(
        self,
        timeout_s: float,
        on_wait: Callable[[float, str, float], None] | None = None,
        on_phase: Callable[[PhaseChange], None] | None = None,
    ) -> float:
        """Seconds since launch until it answered ``/health``; raises :class:`ServerStartError`
        when it died or ``timeout_s`` passed. ``on_phase`` gets each start-up phase change,
        ``on_wait(elapsed_s, phase, phase_since_s)`` each poll."""
        ...

    def poll(self) -> int | None:
        """Its exit code if it has died, else None (always None when not launched here)."""
        ...

    def metrics(self) -> str:
        """One scrape of its Prometheus ``/metrics`` text ('' when it has none)."""
        ...

    def stop(self, grace_s: float = 10.0) -> int | None:
        """Stop it and everything it started (idempotent); its exit code."""
        ...

    def kill(self) -> None:
        """SIGKILL it at once, without waiting (a second stop signal)."""
        ...

    def describe(self, startup_s: float | None) -> dict[str, Any]:
        """Its part of the result's ``server`` section: command, log file, start-up phases,
        engine name (for a launched server)."""
        ...

    def diagnosis(self) -> dict[str, Any]:
        """After it died: ``exit_code``, ``log_tail`` and the ``root_cause`` read in its log."""
        ...

    def plan_arguments(self, settings: EngineSettings) -> dict[str, Any]:
        """The planned settings as this engine's own options (the result's
        ``plan.engine_args``)."""
        ...
