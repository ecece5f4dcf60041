"""Cores for the engine and cores for the client, when vLLM-CPU and infer-prof share a machine.

vLLM-CPU's threads spin on every core they are given, and the client reads token times on the
same cores: on a 2-core machine the default run measured its own client's lateness (read lag
p99 16.6 ms against an ITL p50 of ~30 ms) and was rightly marked invalid. The split gives the
engine (every vLLM process, and its OpenMP threads through ``VLLM_CPU_OMP_THREADS_BIND``) all
allowed cores but the last, and the client (this process and its worker processes) the last
one. The engine loses a core; the client's timing stays the client's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CpuSplit:
    """Which logical CPUs the engine and the client run on."""

    engine: tuple[int, ...]
    client: tuple[int, ...]

    def omp_bind(self) -> str:
        """``VLLM_CPU_OMP_THREADS_BIND`` for the engine's cores (``"0,1,2"``)."""
        return ",".join(str(c) for c in self.engine)

    def describe(self) -> str:
        """One console line saying what was done and why."""
        return (f"CPU split: vLLM on core(s) {_ids(self.engine)}, the client on core(s) "
                f"{_ids(self.client)} (so the engine's threads cannot delay the client's reads; "
                "set VLLM_CPU_OMP_THREADS_BIND yourself to choose otherwise)")

    def to_dict(self) -> dict[str, list[int]]:
        return {"engine_cpus": list(self.engine), "client_cpus": list(self.client)}


def _ids(cpus: Sequence[int]) -> str:
    return ",".join(str(c) for c in cpus)


def plan_cpu_split(allowed: Sequence[int], env: Mapping[str, str]) -> tuple[CpuSplit | None, str]:
    """The split for a CPU-only machine whose allowed CPUs are ``allowed``, or None and why.

    No split when fewer than 2 CPUs are allowed (nothing to split) or when the user has bound
    vLLM's threads (``VLLM_CPU_OMP_THREADS_BIND`` set): their choice stands.
    """
    cpus = sorted(set(allowed))
    if "VLLM_CPU_OMP_THREADS_BIND" in env:
        return None, ("VLLM_CPU_OMP_THREADS_BIND is set: vLLM's threads go where it says, the "
                      "client shares the machine")
    if len(cpus) < 2:
        return None, "one CPU: the engine and the client share it"
    return CpuSplit(tuple(cpus[:-1]), (cpus[-1],)), ""


def allowed_cpus() -> list[int]:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))  # pragma: no cover (not Linux)


def pin_this_process(cpus: Sequence[int]) -> None:
    """Restrict this process (and the processes it starts later) to ``cpus``."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(cpus))
