"""Scenarios of ``infer-prof matrix --ray`` on a real three-raylet Ray cluster, run by
``test_matrix_ray.py`` INSIDE a network and PID namespace of its own (``unshare --net --pid
--fork --mount-proc``): the only address is 127.0.0.1, and every process started here dies with
the namespace. Writes what it saw as JSON to ``argv[1]``; the test asserts on it.

Nodes: head ``accelerator_type:A100`` (the driver's), two ``H100`` workers (one is killed, the
other takes the retry), each
``--num-cpus 1 --num-gpus 1`` and a 100 MB object store. Cells measure the built-in synthetic
server (``run --endpoint``): the engine is beside the point here, placement and faults are not.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from infer_prof.run.calibrate import start_synthetic

PY = sys.executable
RAY = str(Path(PY).with_name("ray"))
PORT = "6391"
ADDRESS = f"127.0.0.1:{PORT}"
COMMON = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--num-gpus", "1",
          "--object-store-memory", "100000000", "--disable-usage-stats"]


def ray_start(accel: str, head: bool, env: dict[str, str] | None = None) -> None:
    extra = (["--head", "--port", PORT, "--include-dashboard", "false"] if head
             else ["--address", ADDRESS])
    subprocess.run([RAY, "start", *extra, *COMMON, "--resources",
                    json.dumps({f"accelerator_type:{accel}": 1})], check=True,
                   capture_output=True, env=env)


def wait_alive(accel: str, timeout: float = 90.0) -> float | None:
    """Seconds until the cluster lists an alive node of ``accel`` (``ray start`` returns
    before its raylet has registered), None if none did within ``timeout``."""
    code = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
            "print(sum(1 for n in ray.nodes() if n['Alive'] and "
            "n['Resources'].get(sys.argv[2], 0) > 0))")
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        p = subprocess.run([PY, "-c", code, ADDRESS, f"accelerator_type:{accel}"],
                           capture_output=True, text=True)
        if p.returncode == 0 and p.stdout.strip().splitlines()[-1:] != ["0"]:
            return time.monotonic() - t0
        time.sleep(1)
    return None


def matrix_file(folder: Path, name: str, url: str, gpus: list[str], n: int) -> Path:
    p = folder / f"{name}.toml"
    p.write_text(f'name = "{name}"\nmodels = ["llama-2-7b"]\ngpus = {json.dumps(gpus)}\n'
                 f'concurrency = [2]\ninput_len = 8\noutput_len = 32\nnum_requests = {n}\n'
                 f'endpoint = "{url}"\nrun_args = ["--warmup", "none", "--min-duration", '
                 '"0.1"]\n')
    return p


def matrix(path: Path, results: Path, *extra: str) -> subprocess.Popen[str]:
    # from the scenario's own folder: Ray puts the driver's working directory first on every
    # worker's sys.path, so a driver started in the checkout would make each node import the
    # checkout's infer-prof instead of its own
    return subprocess.Popen([PY, "-m", "infer_prof", "matrix", str(path), "--ray", ADDRESS,
                             "--results-dir", str(results), *extra], cwd=results.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_started(proc: subprocess.Popen[str], count: int, seen: list[str]) -> list[str]:
    """Read the driver's stderr until ``count`` 'started on node' lines; their node ids."""
    assert proc.stderr is not None
    nodes = []
    while len(nodes) < count:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(r"started on node \S+ \((\w+)", line)
        if m:
            nodes.append(m.group(1))
    return nodes


def pids_matching(*needles: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if all(n in cmd for n in needles):
                out.append(int(d.name))
    return out


def node_processes(node_id: str) -> list[int]:
    """The raylet of ``node_id`` (a prefix) and every process under it (its workers, and the
    cells' ``run`` children under them): the whole node. (Ray workers rename themselves
    ``ray::...``, so they are found by parentage, not by name.)"""
    raylets = pids_matching("raylet/raylet", f"--node_id={node_id}")
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found = set(raylets)
    grew = True
    while grew:
        more = {p for p, pp in parent.items() if pp in found} - found
        found |= more
        grew = bool(more)
    return sorted(found)


def results_of(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))
            if not p.name.endswith((".matrix.json", ".sweep.json"))]


def main() -> None:
    out: dict = {}
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    work = Path(tempfile.mkdtemp(prefix="matrix-ray-"))
    server = start_synthetic(5.0, 10.0, 32)
    url = server.url
    try:
        # the driver attaches to the head's raylet: the H100 nodes (one killed below) are workers
        ray_start("A100", head=True)
        ray_start("H100", head=False)
        ray_start("H100", head=False)

        # 1. placement, results, history: one cell per type, both at once
        t0 = time.monotonic()
        p = matrix(matrix_file(work, "place", url, ["H100-SXM", "A100-80GB-SXM"], 16),
                   work / "r1")
        stdout, stderr = p.communicate(timeout=300)
        out["place"] = {"rc": p.returncode, "stderr": stderr[-3000:], "stdout": stdout[-3000:],
                        "wall_s": time.monotonic() - t0, "results": results_of(work / "r1")}
        import sqlite3

        db = sqlite3.connect(work / "r1" / "history.sqlite")
        out["place"]["history_rows"] = db.execute("select count(*) from runs").fetchone()[0]
        db.close()

        # 2. a type the cluster lacks: said before anything starts
        p = matrix(matrix_file(work, "lacks", url, ["H200"], 8), work / "r2")
        _, stderr = p.communicate(timeout=120)
        out["lacks"] = {"rc": p.returncode, "stderr": stderr,
                        "files": sorted(x.name for x in (work / "r2").glob("*"))
                        if (work / "r2").exists() else []}

        # 3. a raylet killed mid-cell: incomplete, then retried on the other H100 node
        p = matrix(matrix_file(work, "lost", url, ["H100-SXM"], 80), work / "r3")
        seen: list[str] = []
        node = wait_started(p, 1, seen)
        time.sleep(3)
        victims = node_processes(node[0]) if node else []
        for pid in victims:  # the machine gone: its raylet, workers and agents at once
            os.kill(pid, signal.SIGKILL)
        stdout, stderr = p.communicate(timeout=300)
        out["lost"] = {"rc": p.returncode, "stderr": "".join(seen) + stderr, "killed": victims,
                       "node": node, "results": results_of(work / "r3")}

        # 4. Ctrl-C of the driver: every cell cancelled, no run left on any node
        p = matrix(matrix_file(work, "stop", url, ["H100-SXM", "A100-80GB-SXM"], 400),
                   work / "r4")
        seen = []
        wait_started(p, 2, seen)
        time.sleep(2)
        running_before = len(pids_matching("infer_prof run", "matrix_cell="))
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=120)
        time.sleep(3)
        out["stop"] = {"rc": p.returncode, "stderr": "".join(seen) + stderr,
                       "running_before": running_before,
                       "running_after": len(pids_matching("infer_prof run", "matrix_cell=")),
                       "results": results_of(work / "r4")}

        # 5. a node whose infer-prof differs: refused, both versions named
        copy = work / "other"
        shutil.copytree(Path(__file__).resolve().parents[2] / "infer_prof",
                        copy / "infer_prof", ignore=shutil.ignore_patterns("__pycache__"))
        init = copy / "infer_prof" / "__init__.py"
        init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9.9.'))
        ray_start("L40S", head=False, env={**os.environ, "PYTHONPATH": str(copy)})
        out["l40s_alive_after_s"] = wait_alive("L40S")
        p = matrix(matrix_file(work, "version", url, ["L40S"], 8), work / "r5")
        _, stderr = p.communicate(timeout=180)
        out["version"] = {"rc": p.returncode, "stderr": stderr}
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True)
        server.stop()
        Path(sys.argv[1]).write_text(json.dumps(out, default=str))
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
