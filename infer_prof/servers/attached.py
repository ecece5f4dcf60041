"""An endpoint someone else runs (``infer-prof run --endpoint URL``) as a
:class:`infer_prof.servers.base.Server`: nothing to start, stop or wait for; its death shows
as refused connections (the run's watchdog), not as an exit code. Its TLS and the models it
lists are checked by the run before any load (:mod:`infer_prof.run.startup`).
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infer_prof.core.planning.plan_result import EngineSettings
from infer_prof.servers.base import PhaseChange
from infer_prof.servers.cpu_split import CpuSplit
from infer_prof.servers.http_get import http_get


@dataclass
class AttachedEndpoint:
    """A running OpenAI-compatible server at ``base_url``."""

    kind = "endpoint"
    label = "endpoint"
    launched = False

    base_url: str
    api_key: str | None = None
    context: ssl.SSLContext | None = None  # https: the endpoint's TLS context
    exit_code: int | None = None

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/")

    def command(self) -> list[str]:
        """[]: it is not launched here."""
        return []

    def start(self) -> None:
        """Nothing: it runs already."""

    def use_cpus(self, split: CpuSplit) -> None:
        """Nothing: its cores are not this machine's to give."""

    def wait_healthy(
        self,
        timeout_s: float,
        on_wait: Callable[[float, str, float], None] | None = None,
        on_phase: Callable[[PhaseChange], None] | None = None,
    ) -> float:
        """0.0 at once: the run checks its TLS and models list instead of waiting."""
        return 0.0

    def poll(self) -> int | None:
        """None: an exit code of someone else's server is never seen."""
        return None

    def metrics(self) -> str:
        """One scrape of its ``/metrics`` ('' when it has none or refuses)."""
        with contextlib.suppress(OSError):
            status, body = http_get(f"{self.url}/metrics", 5.0, self.api_key, self.context)
            if status == 200:
                return body.decode("utf-8", "replace")
        return ""

    def stop(self, grace_s: float = 10.0) -> int | None:
        """Nothing: it is not this run's to stop."""
        return None

    def kill(self) -> None:
        """Nothing: it is not this run's to kill."""

    def describe(self, startup_s: float | None) -> dict[str, Any]:
        """{}: the run records the URL, the TLS session and the models listed."""
        return {}

    def diagnosis(self) -> dict[str, Any]:
        """{}: no log of it is at hand."""
        return {}

    def plan_arguments(self, settings: EngineSettings) -> dict[str, Any]:
        """{}: its own settings apply."""
        return {}
