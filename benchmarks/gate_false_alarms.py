"""Does the nightly gate cry wolf, and does it see a planted 10 % slowdown?

    .venv/bin/python benchmarks/gate_false_alarms.py collect --k 8 --dir results/gate-bench
    .venv/bin/python benchmarks/gate_false_alarms.py judge --dir results/gate-bench
    .venv/bin/python benchmarks/gate_false_alarms.py synthetic --k 8 --dir results/gate-synth

``collect`` runs the same ``infer-prof run`` K times (default: tiny-llama on vLLM-CPU, 16
streams, 128 in / 64 out, 400 measured requests, seed 1), each run launching its own engine,
into DIR (one result file and requests file a run, and DIR/history.sqlite). ``judge`` gates each
run against the history of the other K - 1 (``regress --baseline history:K-1``) and each run
against each other single run (``--baseline FILE``), with today's defaults and with the
previous gate (``--legacy``), and prints the false-alarm rate of each. ``synthetic`` does the
same against the built-in synthetic server (its speed set exactly), adding a copy of each run
served 10 % slower, and prints the detection rate.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from infer_prof.core.analysis.regression import MetricComparison  # noqa: E402
from infer_prof.results.gate import (  # noqa: E402
    LaunchSpread,
    RunData,
    evaluate,
    evaluate_within_run,
    run_from_result,
)
from infer_prof.results.schema import load_result  # noqa: E402

PY = sys.executable
RUN_ARGS = ["--model", "tiny-llama", "-c", "16", "-n", "400", "--input-len", "128",
            "--output-len", "64", "--seed", "1", "--no-progress"]


def infer_prof(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """``python -m infer_prof ARGS`` from this checkout."""
    return subprocess.run([PY, "-m", "infer_prof", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def collect(k: int, out: Path, run_args: list[str]) -> None:
    """K runs of ``infer-prof run RUN_ARGS``, each a fresh launch, recorded in
    out/history.sqlite."""
    out.mkdir(parents=True, exist_ok=True)
    have = len(list(out.glob("run-*.json")))
    for i in range(have, k):
        t0 = time.monotonic()
        proc = infer_prof("run", *run_args, "--output", str(out / f"run-{i:02d}.json"),
                          "--history-db", str(out / "history.sqlite"))
        took = time.monotonic() - t0
        if proc.returncode != 0:
            print(proc.stdout[-2000:], proc.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"run {i} failed (exit {proc.returncode})")
        print(f"run {i}: {took:.0f} s", flush=True)
    (out / "collect.json").write_text(json.dumps({"run_args": run_args, "k": k}, indent=2))


SYNTH_ARGS = ["--model", "llama-2-7b", "-c", "4", "-n", "120", "--input-len", "32",
              "--output-len", "16", "--no-progress", "--no-history"]
#: metrics shown in the spread table (the gate judges more: its whole list)
SHOWN = ["output_throughput", "ttft_ms.p50", "ttft_ms.p99", "tpot_ms.p50", "tpot_ms.p99",
         "itl_ms.p50", "itl_ms.p99", "e2e_ms.p50", "e2e_ms.p99"]

Gate = Callable[[list[RunData], list[RunData]], list[MetricComparison]]


def new_gate(base: list[RunData], cur: list[RunData]) -> list[MetricComparison]:
    """The gate over runs at its defaults (alpha 1 %, threshold 5 %, assumed spreads)."""
    return evaluate(base, cur)


def old_gate(base: list[RunData], cur: list[RunData]) -> list[MetricComparison]:
    """main's gate before issue 36 at its defaults (alpha 5 %, rule ci, B = 2000)."""
    return evaluate_within_run(base, cur)


def load_runs(folder: Path, pattern: str = "run-*.json") -> list[RunData]:
    """The runs of a folder, in name order, with their per-request samples."""
    paths = sorted(p for p in folder.glob(pattern) if not p.name.endswith(".sweep.json"))
    return [run_from_result(p, load_result(p)) for p in paths]


def cv_pct(values: Sequence[float]) -> float:
    """Sample stdev / mean, in %."""
    return statistics.stdev(values) / statistics.fmean(values) * 100.0


def spread_table(runs: list[RunData]) -> list[str]:
    """Per metric: min, max, CV between runs, and what the gate against the other K - 1 could
    see (median over the K leave-one-out gates)."""
    lines = ["| metric | min | max | CV between runs | gate vs K-1 others can see |",
             "|---|---:|---:|---:|---:|"]
    seen: dict[str, list[float]] = {}
    for i in range(len(runs)):
        for c in new_gate(runs[:i] + runs[i + 1:], [runs[i]]):
            if c.detectable_pct is not None:
                seen.setdefault(c.name, []).append(max(c.detectable_pct, c.threshold_pct))
    for name in SHOWN:
        vals = [r.values[name] for r in runs if name in r.values]
        if len(vals) < 2:
            continue
        lines.append(f"| {name} | {min(vals):.4g} | {max(vals):.4g} | {cv_pct(vals):.1f} % | "
                     f"{statistics.median(seen.get(name, [math.nan])):.0f} % |")
    return lines


def leave_one_out(runs: list[RunData], gate: Gate) -> list[list[str]]:
    """Each run gated against the history of the others: the metrics flagged, per run."""
    return [[c.name for c in gate(runs[:i] + runs[i + 1:], [runs[i]]) if c.regression]
            for i in range(len(runs))]


def adjacent_pairs(runs: list[RunData], gate: Gate) -> list[list[str]]:
    """Run i gated against run i + 1 and run i + 1 against run i (one baseline file)."""
    out = []
    for i in range(len(runs) - 1):
        for b, c in ((i, i + 1), (i + 1, i)):
            out.append([x.name for x in gate([runs[b]], [runs[c]]) if x.regression])
    return out


def measured_pairs(runs: list[RunData]) -> list[list[str]]:
    """As :func:`adjacent_pairs` with the new gate, given the launch spread of each metric
    measured on the other K - 2 runs (what ``calibrate`` stores in the history)."""
    out = []
    for i in range(len(runs) - 1):
        others = [r for k, r in enumerate(runs) if k not in (i, i + 1)]
        spread = {}
        for name in runs[i].values:
            vals = [r.values[name] for r in others if r.values.get(name, 0) > 0]
            if len(vals) >= 2:
                spread[name] = (statistics.stdev(vals) / statistics.fmean(vals), len(vals))
        for b, c in ((i, i + 1), (i + 1, i)):
            cmp = evaluate([runs[b]], [runs[c]], launch_spread=LaunchSpread(spread))
            out.append([x.name for x in cmp if x.regression])
    return out


def rate(flags: list[list[str]]) -> str:
    """``n of K`` gates that failed, and the metrics that failed them most."""
    failed = sum(1 for f in flags if f)
    names: dict[str, int] = {}
    for f in flags:
        for n in f:
            names[n] = names.get(n, 0) + 1
    top = ", ".join(f"{n} {k}" for n, k in sorted(names.items(), key=lambda x: -x[1])[:3])
    return f"{failed} of {len(flags)}" + (f" ({top})" if top else "")


def judge(folder: Path) -> None:
    """The false-alarm tables of identical runs in ``folder``."""
    runs = load_runs(folder)
    k = len(runs)
    print(f"{k} identical runs in {folder}\n")
    print("\n".join(spread_table(runs)))
    print("\n| gate | against | failed (identical runs) |\n|---|---|---|")
    print(f"| over runs (new default) | history of the other {k - 1} | "
          f"{rate(leave_one_out(runs, new_gate))} |")
    print(f"| within run (earlier) | history of the other {k - 1} | "
          f"{rate(leave_one_out(runs, old_gate))} |")
    print(f"| over runs (new default, assumed spread) | one other run (adjacent pairs) | "
          f"{rate(adjacent_pairs(runs, new_gate))} |")
    print(f"| over runs, launch spread measured on the other {k - 2} | one other run | "
          f"{rate(measured_pairs(runs))} |")
    print(f"| within run (earlier) | one other run (adjacent pairs) | "
          f"{rate(adjacent_pairs(runs, old_gate))} |")


def synthetic(k: int, out: Path, itl_ms: float = 20.0, slowdown: float = 1.10) -> None:
    """K runs against the synthetic server at ITL ``itl_ms`` and K at ``itl_ms * slowdown``
    (TTFT 20 ms both), then: false alarms among the first K, detection of the slow ones."""
    from infer_prof.run.calibrate import start_synthetic

    out.mkdir(parents=True, exist_ok=True)
    for tag, itl in (("base", itl_ms), ("slow", itl_ms * slowdown)):
        if len(list(out.glob(f"{tag}-*.json"))) >= k:
            continue
        server = start_synthetic(20.0, itl, 16)
        try:
            for i in range(k):
                proc = infer_prof("run", "--endpoint", server.url, *SYNTH_ARGS,
                                  "--output", str(out / f"{tag}-{i:02d}.json"), timeout=600)
                if proc.returncode != 0:
                    raise SystemExit(f"synthetic run failed: {proc.stderr[-2000:]}")
        finally:
            server.stop()
    base, slow = load_runs(out, "base-*.json"), load_runs(out, "slow-*.json")
    print(f"synthetic server, TTFT 20 ms, ITL {itl_ms} ms vs {itl_ms * slowdown:.1f} ms; "
          f"{k} runs each; {' '.join(SYNTH_ARGS)}\n")
    print("\n".join(spread_table(base)))
    print("\n| gate | against | identical runs failed | 10 % slower runs failed |")
    print("|---|---|---|---|")
    for label, gate in (("over runs (new default)", new_gate),
                        ("within run (earlier)", old_gate)):
        fa = leave_one_out(base, gate)
        det = [[c.name for c in gate(base, [s]) if c.regression] for s in slow]
        print(f"| {label} | history of {k - 1} (identical) / {k} (slow) runs | {rate(fa)} | "
              f"{rate(det)} |")
    for label, gate in (("over runs (new default, assumed spread)", new_gate),
                        ("within run (earlier)", old_gate)):
        fa = adjacent_pairs(base, gate)
        det = [[c.name for c in gate([b], [s]) if c.regression] for b, s in zip(base, slow,
                                                                                  strict=True)]
        print(f"| {label} | one run | {rate(fa)} | {rate(det)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="K identical runs, each a fresh vLLM-CPU launch")
    c.add_argument("--k", type=int, default=8)
    c.add_argument("--dir", type=Path, default=REPO / "results" / "gate-bench")
    c.add_argument("run_args", nargs="*", default=RUN_ARGS)
    j = sub.add_parser("judge", help="gate each collected run against the others")
    j.add_argument("--dir", type=Path, default=REPO / "results" / "gate-bench")
    s = sub.add_parser("synthetic", help="false alarms and a planted 10 %% slowdown, synthetic")
    s.add_argument("--k", type=int, default=8)
    s.add_argument("--dir", type=Path, default=REPO / "results" / "gate-synth")
    a = ap.parse_args()
    if a.cmd == "collect":
        collect(a.k, a.dir, a.run_args)
    elif a.cmd == "judge":
        judge(a.dir)
    else:
        synthetic(a.k, a.dir)


if __name__ == "__main__":
    main()
