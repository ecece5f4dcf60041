"""The issue's matrix on a three-node Ray cluster against the same cells one after another, and
the seconds Ray adds per cell (submit -> the cell starting on its node).

Run as root; it puts itself in a network and PID namespace of its own (only 127.0.0.1; every Ray
process dies with it):

    PYTHONPATH=$PWD .venv/bin/python benchmarks/matrix_ray.py --requests 32 --repeat 2

Nodes: accelerator_type A100 (head), H100, H100 (``--num-cpus 1 --num-gpus 1``, 100 MB
object store).
Cells: the issue's minimal matrix (2 GPU types, concurrency 2 and 8, 64 in / 32 out, 32
requests) against the built-in synthetic server (``endpoint``): the engine is not what is
measured here, the driving is. Sequential: each cell's own ``infer-prof run`` command, one after
another, on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from infer_prof.core.planning.matrix import cell_run_args
from infer_prof.run.calibrate import start_synthetic
from infer_prof.run.matrix_file import read_matrix

PY = sys.executable
RAY = str(Path(PY).with_name("ray"))
ADDRESS = "127.0.0.1:6392"
NODE = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--num-gpus", "1",
        "--object-store-memory", "100000000", "--disable-usage-stats"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    if os.environ.get("_MATRIX_BENCH_INSIDE") != "1":
        env = {**os.environ, "_MATRIX_BENCH_INSIDE": "1", "RAY_USAGE_STATS_ENABLED": "0"}
        sys.exit(subprocess.run(["unshare", "--net", "--pid", "--fork", "--mount-proc", PY,
                                 *sys.argv], env=env).returncode)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    server = start_synthetic(20.0, 15.0, 32)
    work = Path(tempfile.mkdtemp(prefix="matrix-bench-"))
    f = work / "m.toml"
    f.write_text(f'models = ["llama-2-7b"]\ngpus = ["H100-SXM", "A100-80GB-SXM"]\n'
                 f'concurrency = [2, 8]\ninput_len = 64\noutput_len = 32\n'
                 f'num_requests = {args.requests}\nendpoint = "{server.url}"\n'
                 'run_args = ["--warmup", "none", "--min-duration", "0.1"]\n')
    try:
        for i, accel in enumerate(("A100", "H100", "H100")):
            where = (["--head", "--port", ADDRESS.split(":")[1], "--include-dashboard", "false"]
                     if i == 0 else ["--address", ADDRESS])
            subprocess.run([RAY, "start", *where, *NODE, "--resources",
                            json.dumps({f"accelerator_type:{accel}": 1})],
                           check=True, capture_output=True)
        for rep in range(args.repeat):
            t0 = time.monotonic()
            p = subprocess.run([PY, "-m", "infer_prof", "matrix", str(f), "--ray", ADDRESS,
                                "--results-dir", str(work / f"ray{rep}"), "--no-history"],
                               capture_output=True, text=True)
            ray_wall = time.monotonic() - t0
            assert p.returncode == 0, p.stderr[-2000:]
            summary = json.loads(next((work / f"ray{rep}").glob("*.matrix.json")).read_text())
            delays = [c["submit_to_start_s"] for c in summary["cells"]]
            durations = [c["duration_s"] for c in summary["cells"]]
            t0 = time.monotonic()
            for cell in read_matrix(f).cells:
                q = subprocess.run([PY, "-m", "infer_prof", "run",
                                    *cell_run_args(cell, str(work / f"seq{rep}")),
                                    "--no-progress"], capture_output=True, text=True)
                assert q.returncode == 0, q.stderr[-2000:]
            seq_wall = time.monotonic() - t0
            print(json.dumps({
                "repeat": rep + 1, "ray_wall_s": round(ray_wall, 2),
                "sequential_wall_s": round(seq_wall, 2),
                "ray_submit_to_start_s": delays, "ray_cell_durations_s": durations,
                "ray_mean_submit_to_start_s": round(statistics.fmean(delays), 3)}), flush=True)
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True)
        server.stop()


if __name__ == "__main__":
    main()
