"""A server kind added from outside the package, through the seam alone: the built-in synthetic
server started with delays of its own, spelling the engine settings its own way. Run as
``python seam_server.py run ...``: registers ``--server fixed-delay``, then runs the CLI.

Nothing in ``infer_prof`` knows this class: what it takes to add a server is this module and
one :func:`register_server` call (the registry line, for a server shipped in the package).
"""

from __future__ import annotations

import sys
from typing import Any

from infer_prof.core.planning.plan_result import EngineSettings
from infer_prof.servers.base import LaunchSpec
from infer_prof.servers.registry import register_server
from infer_prof.servers.synthetic_process import SyntheticProcessServer

TTFT_MS = 30.0
ITL_MS = 4.0


class FixedDelayServer(SyntheticProcessServer):
    """The synthetic server at a fixed TTFT and inter-token gap, under its own name."""

    kind = "fixed-delay"
    label = "fixed-delay server"

    @classmethod
    def from_launch(cls, spec: LaunchSpec) -> FixedDelayServer:
        return cls(log_path=spec.log_path,
                   options=("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS),
                            *spec.extra_args))

    def describe(self, startup_s: float | None) -> dict[str, Any]:
        return {**super().describe(startup_s), "engine": "fixed-delay"}

    def plan_arguments(self, settings: EngineSettings) -> dict[str, Any]:
        """Its own spelling of the planned settings."""
        return {"tp": settings.tensor_parallel, "weights": settings.precision}


def main() -> None:
    register_server(FixedDelayServer.kind, FixedDelayServer.from_launch)
    from infer_prof.cli import main as cli_main

    sys.argv = ["infer-prof", *sys.argv[1:]]
    cli_main()


if __name__ == "__main__":
    main()
