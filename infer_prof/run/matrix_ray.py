"""The matrix on a Ray cluster: each cell a Ray task on a node of its GPU type.

Placement is Ray's own: the task asks for ``{"accelerator_type:<TYPE>": 0.001}`` (the node
resource Ray gives each GPU node; :mod:`infer_prof.catalog.ray_accelerators` maps the catalog's
names to it) and the GPUs its plan needs (``num_gpus``), so one engine holds a GPU at a time and
cells of different types run at once. The task runs the cell as ``run`` runs it, on that node
(:func:`infer_prof.run.matrix_cell.run_cell_here`), and returns the result documents and
per-request records; the driver writes them home as they finish.

Before anything starts: every GPU type is looked up in ``ray.cluster_resources()``, and every
node of a needed type is asked its infer-prof version (a node whose version differs from the
driver's is refused, both named: a result must say which infer-prof measured it, and a package
shipped through Ray's runtime environment would run beside the node's own vLLM and compiled
reader without being the install the node was set up with).

Faults: a task whose node or worker dies is recorded incomplete with the reason and submitted
once more (Ray places it on another node of its type when one is alive). Ctrl-C or SIGTERM
cancels every cell with ``ray.cancel(force=True)``: the worker is killed, and its ``run`` child
(parent-death signal) stops its engine.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from infer_prof import __version__
from infer_prof.catalog.ray_accelerators import RESOURCE_PREFIX, choose_ray_type, ray_types
from infer_prof.core.planning.matrix import CPU, Cell, Matrix
from infer_prof.results.matrix_sections import Placement
from infer_prof.results.matrix_summary import CellStatus
from infer_prof.run.config import ConfigError
from infer_prof.run.matrix_cell import CellRun, node_facts, run_cell_here, supports_frontier
from infer_prof.run.matrix_plan import CellPlan
from infer_prof.run.matrix_record import CellOutcome, LostAttempt, save_cell, save_lost_cell

INTERRUPTED = "interrupted: the matrix driver was stopped (Ctrl-C or SIGTERM); cell cancelled"


def import_ray() -> Any:
    """Ray, or a ConfigError naming the install (it is an optional extra)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray: pip install 'infer-prof[ray]'") from None
    return ray


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """ConfigError (one line) when a ``HOST:PORT`` head address does not accept a TCP
    connection within ``timeout_s`` (``ray.init`` would retry for minutes); "auto" and
    ``ray://`` addresses are left to Ray."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray {address}: give the head node as HOST:PORT (e.g. "
                          "10.0.0.1:6379) or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ConfigError(f"--ray {address}: cannot connect to the Ray cluster's head ({why}); "
                          "start it with `ray start --head` or give its ADDRESS:6379") from None


def probe_node() -> dict[str, Any]:
    """Run on a node (a Ray task): its id, IP, infer-prof version and whether its ``run`` has
    ``--frontier``."""
    import ray

    ctx = ray.get_runtime_context()
    return {**node_facts(), "node_id": ctx.get_node_id(),
            "ip": ray.util.get_node_ip_address(), "frontier": supports_frontier()}


def cell_task(cell: Cell, pipeline: int, accelerator_type: str, events: Any) -> CellRun:
    """A cell as a Ray task: say where it started (on ``events``, a ``ray.util.queue.Queue``),
    then run it here."""
    import ray

    ctx = ray.get_runtime_context()
    where = {"node_id": ctx.get_node_id(), "ip": ray.util.get_node_ip_address(),
             "accelerator_type": accelerator_type}
    _say_started(events, {"cell": cell.index, "event": "started", "at": time.time(), **where})
    return run_cell_here(cell, pipeline=pipeline, capture=True, require_gpu=False, node=where)


def _say_started(events: Any, event: dict[str, Any], tries: int = 5) -> None:
    """Put the start event on the driver's queue; the event is progress only, so a queue that
    stays unreachable (``ActorUnavailableError`` while Ray reconnects after a lost node) is
    given up after ``tries`` attempts 0.2 s apart and the cell runs regardless (its result
    names its node itself)."""
    from ray.exceptions import RayError
    from ray.util.queue import Full

    for attempt in range(tries):
        try:
            events.put(event, timeout=5)
            return
        except Full:  # not drained within 5 s: the driver is busy, the event is not needed
            return
        except RayError:
            if attempt + 1 < tries:
                time.sleep(0.2)


@dataclass
class _Pending:
    cell: Cell
    attempt: int
    accelerator_type: str
    submitted_at: float
    started: dict[str, Any] | None = None


def _alive_nodes(ray: Any, resource: str) -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get(resource, 0) > 0]


def check_cluster(ray: Any, matrix: Matrix, plans: dict[int, CellPlan]) -> dict[str, str]:
    """Each GPU type's Ray accelerator type on this cluster; ConfigError (one line) for a type
    the cluster lacks, a cell needing more GPUs than its nodes have, or a node whose infer-prof
    version differs from this one."""
    resources = ray.cluster_resources()
    have = sorted(k[len(RESOURCE_PREFIX):] for k in resources if k.startswith(RESOURCE_PREFIX))
    types: dict[str, str] = {}
    for gpu in dict.fromkeys(c.gpu for c in matrix.cells):
        if gpu == CPU:
            raise ConfigError(f"{matrix.source}: gpus: 'cpu' means this machine; under --ray "
                              "name the GPU type each cell runs on")
        t = choose_ray_type(gpu, resources)
        if t is None:
            wanted = ", ".join(RESOURCE_PREFIX + x for x in ray_types(gpu)) or "(no Ray type)"
            raise ConfigError(f"the Ray cluster has no {gpu} node ({wanted}); its accelerator "
                              f"types: {', '.join(have) or 'none'}")
        types[gpu] = t
    for cell in matrix.cells:
        nodes = _alive_nodes(ray, RESOURCE_PREFIX + types[cell.gpu])
        plan = plans[cell.index]
        if plan.pipeline > 1:
            raise ConfigError(f"cell {cell.cell_id} needs pipeline parallel over "
                              f"{plan.pipeline} nodes: planned (see --dry-run) but not launched "
                              "by matrix --ray (vLLM adopts a placement group only when its "
                              "server runs inside a Ray actor)")
        most = max(n["Resources"].get("GPU", 0) for n in nodes)
        if most < plan.gpus:
            raise ConfigError(f"cell {cell.cell_id} needs {plan.gpus} GPUs on one node; the "
                              f"cluster's {types[cell.gpu]} nodes have at most {most:g}")
    _check_versions(ray, types, matrix)
    return types


def _check_versions(ray: Any, types: dict[str, str], matrix: Matrix) -> None:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = {n["NodeID"]: n for t in set(types.values())
             for n in _alive_nodes(ray, RESOURCE_PREFIX + t)}
    probe = ray.remote(probe_node)
    refs = [probe.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
        node_id, soft=False)).remote() for node_id in nodes]
    from ray.exceptions import GetTimeoutError, RayError

    for node_id, ref in zip(nodes, refs, strict=True):
        try:
            facts = ray.get(ref, timeout=120)
        except (RayError, GetTimeoutError) as exc:
            if not any(n["NodeID"] == node_id for n in ray.nodes() if n.get("Alive")):
                continue  # a node gone since it was listed: no cell goes there
            raise ConfigError(  # alive but unverified: a cell could run another version there
                f"node {nodes[node_id].get('NodeManagerAddress')} ({node_id[:12]}) did not "
                f"answer the version check ({type(exc).__name__}); check its infer-prof "
                "install or remove it from the cluster") from None
        if facts["infer_prof_version"] != __version__:
            raise ConfigError(
                f"node {facts['ip']} ({facts['node_id'][:12]}) has infer-prof "
                f"{facts['infer_prof_version']}, this driver {__version__}: install the same "
                "version on every node")
        if matrix.frontier and not facts["frontier"]:
            raise ConfigError(f"frontier = true needs infer-prof run --frontier, which node "
                              f"{facts['ip']}'s infer-prof {facts['infer_prof_version']} lacks")


def run_on_ray(ray: Any, matrix: Matrix, plans: dict[int, CellPlan], types: dict[str, str],
               results_dir: Path, history: str | Path | None, say: Callable[[str], None]
               ) -> list[CellOutcome]:
    """Submit every cell, write each home as it finishes, retry a lost cell once; on
    KeyboardInterrupt cancel every cell still running (force) and record it cancelled."""
    from ray.exceptions import RayError
    from ray.util.queue import Queue
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    # the start events' queue lives on the driver's own node: a worker node lost must not take
    # it along
    here = ray.get_runtime_context().get_node_id()
    events = Queue(actor_options={"num_cpus": 0, "scheduling_strategy":
                                  NodeAffinitySchedulingStrategy(here, soft=True)})
    task = ray.remote(cell_task)
    pending: dict[Any, _Pending] = {}
    by_index: dict[int, _Pending] = {}
    outcomes: list[CellOutcome] = []
    n = len(matrix.cells)

    def submit(cell: Cell, attempt: int) -> None:
        accel = types[cell.gpu]
        ref = task.options(
            num_cpus=0, num_gpus=plans[cell.index].gpus, max_retries=0,
            resources={RESOURCE_PREFIX + accel: 0.001},
        ).remote(cell, plans[cell.index].pipeline, accel, events)
        p = _Pending(cell, attempt, accel, time.time())
        pending[ref] = by_index[cell.index] = p
        say(f"[{cell.index}/{n}] {cell.cell_id}: submitted (attempt {attempt}, needs "
            f"{plans[cell.index].gpus} x {RESOURCE_PREFIX}{accel})")

    def drain() -> None:
        try:
            batch = events.get_nowait_batch(events.qsize()) if events.qsize() else []
        except RayError:  # the queue's node is gone: progress lines only, the cells go on
            batch = []
        for ev in batch:
            p = by_index.get(ev["cell"])
            if p is not None:
                p.started = ev
                say(f"[{p.cell.index}/{n}] {p.cell.cell_id}: started on node {ev['ip']} "
                    f"({ev['node_id'][:12]}, {ev['accelerator_type']}) "
                    f"{ev['at'] - p.submitted_at:.2f} s after submit")

    for cell in matrix.cells:
        submit(cell, 1)
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            drain()
            for ref in ready:
                p = pending.pop(ref)
                outcome = _finish(ray, ref, p, matrix, results_dir, history)
                outcomes.append(outcome)
                say(f"[{p.cell.index}/{n}] {p.cell.cell_id}: {outcome.status}"
                    + (f": {outcome.reason}" if outcome.reason else ""))
                if outcome.status == "incomplete" and outcome.reason and "lost" in outcome.reason:
                    others = [x for x in _alive_nodes(ray, RESOURCE_PREFIX + p.accelerator_type)
                              if x["NodeID"] != outcome.placement.node_id]
                    if p.attempt == 1 and others:
                        submit(p.cell, 2)
                    else:
                        say(f"[{p.cell.index}/{n}] {p.cell.cell_id}: not retried ("
                            + ("retried once already" if p.attempt > 1 else
                               f"no other {p.accelerator_type} node alive") + ")")
    except KeyboardInterrupt:
        drain()
        for ref in pending:
            ray.cancel(ref, force=True)
        deadline = time.monotonic() + 60
        while pending and time.monotonic() < deadline:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=1)
            for ref in ready:
                p = pending.pop(ref)
                outcomes.append(_lost(p, matrix, results_dir, history, INTERRUPTED, "cancelled"))
        for p in pending.values():
            outcomes.append(_lost(p, matrix, results_dir, history, INTERRUPTED, "cancelled"))
        say(f"interrupted: {len(outcomes)} cell attempt(s) recorded; every running cell "
            "cancelled")
        raise
    return outcomes


def _placement(p: _Pending) -> Placement:
    """Where the driver saw the cell start (None before it did)."""
    s = p.started or {}
    return Placement(ray_node_id=s.get("node_id"), node_id=s.get("node_id"), ip=s.get("ip"),
                     accelerator_type=p.accelerator_type)


def _lost(p: _Pending, matrix: Matrix, results_dir: Path, history: str | Path | None,
          reason: str, status: CellStatus) -> CellOutcome:
    return save_lost_cell(p.cell, matrix, results_dir, history, LostAttempt(
        p.attempt, _placement(p), reason, status, p.submitted_at,
        p.started["at"] if p.started else None))


def _finish(ray: Any, ref: Any, p: _Pending, matrix: Matrix, results_dir: Path,
            history: str | Path | None) -> CellOutcome:
    from ray.exceptions import RayError, RayTaskError, TaskCancelledError

    try:
        run: CellRun = ray.get(ref)
    except TaskCancelledError:
        return _lost(p, matrix, results_dir, history, INTERRUPTED, "cancelled")
    except RayTaskError as exc:  # the cell's own code raised: a bug, said as it is
        return _lost(p, matrix, results_dir, history,
                     f"cell failed on its node: {str(exc).splitlines()[-1]}", "failed")
    except RayError as exc:  # the worker or its node died under the cell
        where = (f"node {p.started['ip']} ({p.started['node_id'][:12]})" if p.started
                 else "its node")
        reason = (f"{where} lost mid-cell ({type(exc).__name__}): "
                  f"{str(exc).strip().splitlines()[0][:200]}")
        return _lost(p, matrix, results_dir, history, reason, "incomplete")
    placement = msgspec.structs.replace(  # where the cell itself says it ran
        _placement(p), node_id=run.node.get("node_id"), ip=run.node.get("ip"),
        ray_node_id=run.node.get("node_id"))
    return save_cell(run, matrix, results_dir, history, p.attempt, placement, p.submitted_at)
