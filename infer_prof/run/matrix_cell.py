"""One matrix cell, measured on the machine this code runs on: an ordinary ``infer-prof run``.

The cell runs the CLI as a child process (``python -m infer_prof run ...``), not the run
library in this process, because the child is the unit that must die with its driver: under Ray
a cancelled task's worker is killed with SIGKILL, which no handler sees; the child is started
with Linux's parent-death signal (SIGTERM when its parent dies, whatever killed it), and ``run``
answers SIGTERM as it answers Ctrl-C: it records the point interrupted and stops the vLLM it
started (which itself carries the same parent-death signal). The child also keeps ``run``'s
own progress, signal and exit-code handling exactly as a user sees them, and writes its files
to a private folder with ``--no-history``; its result documents and per-request records come
back as data (:class:`CellRun`) and the driver writes them home
(:mod:`infer_prof.run.matrix_record`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infer_prof import __version__
from infer_prof.catalog.gpus import detect_gpus
from infer_prof.core.planning.matrix import CPU, Cell, cell_run_args
from infer_prof.run.config import GROUP_OF
from infer_prof.servers.process import die_with_parent

FRONTIER_FIELD = "frontier"
"""The :class:`RunConfig` field that ``run --frontier`` brings; a cell with ``frontier = true``
is refused where the installed infer-prof lacks it."""


def supports_frontier() -> bool:
    """Whether this infer-prof's ``run`` has ``--frontier`` (a RunConfig option of that name)."""
    return FRONTIER_FIELD in GROUP_OF


@dataclass
class CellRun:
    """What one cell's run produced on its node, sent home to the driver.

    ``results``: (file name, result document, per-request records as JSONL bytes) per load
    point; ``started_at`` / ``finished_at``: wall-clock seconds (time.time) on the node;
    ``refused``: why the cell did not run here (nothing started); ``node``: where it ran."""

    cell: Cell
    returncode: int | None
    results: list[tuple[str, dict[str, Any], bytes | None]] = field(default_factory=list)
    sweep: dict[str, Any] | None = None
    stderr_tail: str = ""
    node: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0
    finished_at: float = 0.0
    refused: str | None = None
    interrupted: bool = False  # Ctrl-C here: the run was stopped; what it wrote is kept


def node_facts() -> dict[str, Any]:
    """This machine as a cell records it: host name, infer-prof version, the GPUs NVML sees."""
    gpus = detect_gpus()
    return {"hostname": socket.gethostname(), "infer_prof_version": __version__,
            "gpus": [g.nvml_name for g in gpus],
            "gpu_keys": sorted({g.spec.key for g in gpus if g.spec is not None})}


def gpu_mismatch(cell: Cell, facts: dict[str, Any], require_gpu: bool) -> str | None:
    """Why this machine is not the cell's GPU type (None when it is, or cannot be told and
    ``require_gpu`` is False: a Ray node without NVML, e.g. a test cluster)."""
    if cell.gpu == CPU:
        return None
    if not facts["gpus"]:
        return (f"cell wants {cell.gpu} but this machine has no GPU (NVML found none); "
                "use gpus = [\"cpu\"] to run on this machine as it is" if require_gpu else None)
    if cell.gpu not in facts["gpu_keys"]:
        return f"cell wants {cell.gpu} but this machine has {', '.join(facts['gpus'])}"
    return None


def _collect(folder: Path) -> tuple[list[tuple[str, dict[str, Any], bytes | None]],
                                    dict[str, Any] | None]:
    results, sweep = [], None
    for p in sorted(folder.glob("*.json")):
        doc = json.loads(p.read_text())
        if p.name.endswith(".sweep.json"):
            sweep = doc
            continue
        req = p.with_name(p.name[: -len(".json")] + ".requests.jsonl")
        results.append((p.name, doc, req.read_bytes() if req.is_file() else None))
    return results, sweep


def run_cell_here(cell: Cell, *, pipeline: int = 1, capture: bool = True,
                  require_gpu: bool = True, node: dict[str, Any] | None = None) -> CellRun:
    """Measure ``cell`` on this machine with ``python -m infer_prof run`` (see the module's
    docstring) and return its results. ``capture``: keep the child's stderr (under Ray) rather
    than showing it live. Refuses (``CellRun.refused``, nothing started) when this machine is
    not the cell's GPU type or the cell asks for a frontier this ``run`` lacks."""
    facts = {**node_facts(), **(node or {})}
    out = CellRun(cell, None, node=facts, started_at=time.time())
    if cell.frontier and not supports_frontier():
        out.refused = (f"frontier = true needs infer-prof run --frontier, which infer-prof "
                       f"{__version__} on {facts['hostname']} does not have")
    else:
        out.refused = gpu_mismatch(cell, facts, require_gpu)
    if out.refused:
        out.finished_at = time.time()
        return out
    with tempfile.TemporaryDirectory(prefix="infer-prof-cell-") as tmp:
        argv = [sys.executable, "-m", "infer_prof", "run",
                *cell_run_args(cell, tmp, pipeline), "--no-progress"]
        log = Path(tmp) / "stderr.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                    stderr=err if capture else None,
                                    preexec_fn=die_with_parent, env=_child_env())
            try:
                out.returncode = proc.wait()
            except KeyboardInterrupt:  # Ctrl-C / SIGTERM: stop the run, keep what it wrote
                _stop(proc)
                out.returncode, out.interrupted = proc.returncode, True
            except BaseException:
                _stop(proc)
                raise
            finally:
                out.finished_at = time.time()
        out.stderr_tail = log.read_text(errors="replace")[-4000:] if capture else ""
        out.results, out.sweep = _collect(Path(tmp))
    return out


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # this infer-prof, whichever folder it was imported from (an editable checkout too)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the run (it records the point interrupted and stops its server), SIGKILL it
    after 60 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
