"""How fast infer-prof gets going: `--help`, and the first request of an `--endpoint` run.

    python benchmarks/startup.py [--repeat 5] [--model PATH_OR_ALIAS] [--help-only]

The first-request time is measured as an outsider would see it: from just before the command is
spawned to the kernel's receive timestamp of the first request at a server (the built-in
synthetic server stamps each request's arrival with SO_TIMESTAMPNS on the same perf_counter clock,
so the two times are directly comparable). The model defaults to the generated tiny-llama folder,
whose tokenizer is then loaded from the local cache as a user's would be. Targets (issue 14, on
the 2-core development machine): first request within 1.5 s; `--help` within 0.3 s (issue 34:
the command modules load only when their command runs).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

from infer_prof.run.calibrate import start_synthetic
from infer_prof.servers.http_get import get_json


def help_seconds() -> float:
    """Wall seconds for `python -m infer_prof --help` (the console script does the same)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "infer_prof", "--help"], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def first_request_seconds(model: str) -> float:
    """Seconds from spawning `run --endpoint` to the first request reaching the server."""
    server = start_synthetic(5.0, 1.0, 4)
    try:
        get_json(f"{server.url}/truth/reset")
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter_ns()
            subprocess.run(
                [sys.executable, "-m", "infer_prof", "run", "--endpoint", server.url,
                 "--model", model, "-c", "1", "-n", "2", "--warmup-requests", "0",
                 "--input-len", "16", "--output-len", "4", "--no-progress", "--results-dir", out],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        truth = get_json(f"{server.url}/truth")["requests"]
        return (min(r["arrival_ns"] for r in truth) - t0) / 1e9
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", default=None, help="model folder or alias (default: tiny-llama)")
    ap.add_argument("--help-only", action="store_true", help="time `--help` alone")
    args = ap.parse_args()
    helps = [help_seconds() for _ in range(args.repeat)]
    print(f"infer-prof --help          median {statistics.median(helps):.3f} s  "
          f"(min {min(helps):.3f}, max {max(helps):.3f}; target 0.3 s)")
    if args.help_only:
        return
    model = args.model
    if model is None:
        from infer_prof.catalog.models import resolve_model

        model = resolve_model("tiny-llama").path
    firsts = [first_request_seconds(model) for _ in range(args.repeat)]
    print(f"first request (--endpoint) median {statistics.median(firsts):.3f} s  "
          f"(min {min(firsts):.3f}, max {max(firsts):.3f}; target 1.5 s)")


if __name__ == "__main__":
    main()
