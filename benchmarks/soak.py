"""Soak: a long `infer-prof run` at 256 streams against the built-in synthetic server, watched
from outside.

Every ``--sample-s`` seconds it prints the client's resident memory (RSS, the run's process and
its client worker processes together) and its open file descriptors, and the server's RSS. At
the end it checks the accounting: every request the server saw (its ``/truth``) has a record in
the run's per-request file, and the result's summary counts them all.

Verdicts, from the first minute on (start-up, warm-up and the connection pool are done by then):

- RSS grows less than ``--max-rss-growth`` (5 %) from the sample at one minute to the last;
- open file descriptors stay flat (the same number at every sample after the first minute,
  within ``--fd-slack``);
- no request record is lost (server-seen requests == records == completed + failed).

Usage::

    .venv/bin/python benchmarks/soak.py --minutes 60          # the hour
    .venv/bin/python benchmarks/soak.py --minutes 10 --json   # and the figures as JSON

Exit status 0 when every verdict holds, 1 otherwise. :func:`soak` is the same code as a
function (tests/integration/test_soak.py runs it for a few minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from infer_prof.run.calibrate import start_synthetic  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Sample:
    """One look at the processes, ``t_s`` seconds after the run started."""

    t_s: float
    client_rss_mb: float  # the run's process and its children (client workers)
    client_fds: int
    client_processes: int
    server_rss_mb: float


@dataclass
class SoakReport:
    """What a soak measured and its verdicts."""

    minutes: float
    concurrency: int
    samples: list[Sample] = field(default_factory=list)
    exit_code: int | None = None
    server_requests: int = 0  # requests the server saw (its /truth)
    records: int = 0  # lines in the run's per-request file
    completed: int = 0
    failed: int = 0
    rss_growth_pct: float | None = None  # last sample vs the one at one minute
    # what the per-request records kept in memory account for: bytes one record of this run's
    # shape takes (tracemalloc), and the growth left once the records added are taken out
    record_bytes: float | None = None
    rss_growth_net_of_records_pct: float | None = None
    # RSS growth over the bytes the records added in that time take: about 1 when the records
    # are all that grows, well above 1 with a leak per request (a buffer, a socket, a task)
    growth_per_record_ratio: float | None = None
    fd_range: tuple[int, int] | None = None  # min, max after the first minute
    verdicts: dict[str, bool] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.verdicts) and all(self.verdicts.values())


def _children(pid: int) -> list[int]:
    """``pid`` and all its descendants (from /proc/*/stat parent links)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent[int(entry)] = int(stat[stat.rfind(")") + 2 :].split()[1])
    tree, todo = [pid], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        tree += kids
        todo += kids
    return tree


def _rss_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def sample(t_s: float, client_pid: int, server_pid: int) -> Sample:
    """RSS (MB) and open fds of the client process tree, and the server's RSS."""
    tree = [p for p in _children(client_pid) if Path(f"/proc/{p}").exists()]
    return Sample(
        round(t_s, 1),
        round(sum(_rss_bytes(p) for p in tree) / 1e6, 2),
        sum(_fds(p) for p in tree),
        len(tree),
        round(_rss_bytes(server_pid) / 1e6, 2),
    )


def soak(
    minutes: float = 60.0,
    concurrency: int = 256,
    *,
    ttft_ms: float = 50.0,
    itl_ms: float = 15.0,
    output_len: int = 128,
    input_len: int = 32,
    sample_s: float = 10.0,
    max_rss_growth_pct: float = 5.0,
    fd_slack: int = 0,
    client_processes: str = "auto",
    results_dir: Path | None = None,
    on_sample: Any = None,
) -> SoakReport:
    """Run ``infer-prof run --endpoint <synthetic> -c CONCURRENCY --duration MINUTES*60`` and
    watch it (see the module docstring). ``on_sample(sample)`` is called for each sample."""
    report = SoakReport(minutes, concurrency)
    server = start_synthetic(ttft_ms, itl_ms, output_len)
    tmp = None
    if results_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="infer-prof-soak-")
        results_dir = Path(tmp.name)
    out = results_dir / "soak.json"
    cmd = [
        sys.executable, "-m", "infer_prof", "run", "--model", "llama-2-7b", "--endpoint",
        server.url, "-c", str(concurrency), "--duration", str(minutes * 60),
        "--input-len", str(input_len), "--output-len", str(output_len),
        "--warmup-requests", "0", "--no-progress", "--no-history", "--min-duration", "1",
        "--client-processes", client_processes, "--output", str(out), "--yes",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True, cwd=results_dir,
    )  # fmt: skip
    try:
        next_at = t0
        while proc.poll() is None:
            now = time.monotonic()
            if now >= next_at:
                s = sample(now - t0, proc.pid, server.proc.pid)
                report.samples.append(s)
                if on_sample is not None:
                    on_sample(s)
                next_at += sample_s
            time.sleep(min(0.5, max(0.0, next_at - time.monotonic())))
        _, err = proc.communicate()
        report.exit_code = proc.returncode
        if proc.returncode != 0:
            print(err[-3000:], file=sys.stderr)
        with urllib.request.urlopen(f"{server.url}/truth", timeout=60) as r:
            report.server_requests = len(json.load(r)["requests"])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        server.stop()
    if out.exists():
        result = json.loads(out.read_text())
        requests_file = out.with_name(result["requests_file"])
        with requests_file.open() as f:
            report.records = sum(1 for line in f if line.strip())
        report.completed = result["summary"]["requests_completed"]
        report.failed = result["summary"]["requests_failed"]
    if tmp is not None:
        tmp.cleanup()
    _judge(report, max_rss_growth_pct, fd_slack, output_len)
    return report


def record_bytes(output_len: int, n: int = 2000) -> float:
    """Bytes of Python memory the measurements of one completed request would take in the
    client if it kept them until the run ends: its
    :class:`~infer_prof.core.measurement.metrics.RequestRecord` (``output_len`` chunk timestamps and
    token counts) and one read-lag sample per read (about one read per token here); measured with
    tracemalloc. The client spools ended records to disk and keeps read lags in a bounded summary
    (docs/soak.md), so its growth against this figure is near 0; a leak per request shows as a ratio
    well above it."""
    import tracemalloc

    from infer_prof.core.measurement.metrics import RequestRecord

    t = time.perf_counter_ns()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        recs, lags = [], []
        for i in range(n):
            lags.extend(50_000 + i + k for k in range(output_len))
            r = RequestRecord(i, 32, output_len, send_ns=t + i, done_ns=t + 10**9 + i,
                              prompt_tokens=32, output_tokens=output_len)
            r.chunk_ns = [t + i + k * 15_000_000 for k in range(output_len)]
            r.chunk_tokens = [1] * output_len
            recs.append(r)
        return (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()


def _judge(report: SoakReport, max_rss_growth_pct: float, fd_slack: int,
           output_len: int = 128) -> None:
    steady = [s for s in report.samples if s.t_s >= 60.0 and s.client_processes > 0]
    # the last samples can catch the run writing its result: judge the load itself
    steady = [s for s in steady if s.t_s <= report.minutes * 60]
    if len(steady) >= 2:
        first, last = steady[0], steady[-1]
        base = first.client_rss_mb
        report.rss_growth_pct = round((last.client_rss_mb - base) / base * 100, 2)
        fds = [s.client_fds for s in steady]
        report.fd_range = (min(fds), max(fds))
        report.verdicts["rss_growth_below_limit"] = report.rss_growth_pct < max_rss_growth_pct
        report.verdicts["fds_flat"] = max(fds) - min(fds) <= fd_slack
        # requests completed between the two samples, at the run's average rate
        if report.records and report.minutes > 0:
            per_s = report.records / (report.minutes * 60)
            added = per_s * (last.t_s - first.t_s)
            report.record_bytes = round(record_bytes(output_len), 1)
            held_mb = added * report.record_bytes / 1e6
            report.rss_growth_net_of_records_pct = round(
                (last.client_rss_mb - base - held_mb) / base * 100, 2
            )
            if held_mb > 0:
                report.growth_per_record_ratio = round(
                    (last.client_rss_mb - base) / held_mb, 3
                )
    report.verdicts["run_exit_0"] = report.exit_code == 0
    report.verdicts["no_record_lost"] = (
        report.server_requests > 0
        and report.records == report.server_requests
        and report.completed + report.failed == report.records
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--concurrency", "-c", type=int, default=256)
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--itl-ms", type=float, default=15.0)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--sample-s", type=float, default=10.0)
    ap.add_argument("--max-rss-growth", type=float, default=5.0, help="percent")
    ap.add_argument("--fd-slack", type=int, default=0)
    ap.add_argument("--client-processes", default="auto")
    ap.add_argument("--json", action="store_true", help="also print the report as JSON")
    args = ap.parse_args(argv)
    print(f"soak: {args.minutes:g} min at {args.concurrency} streams, synthetic server "
          f"(TTFT {args.ttft_ms:g} ms, ITL {args.itl_ms:g} ms, {args.output_len} tokens)")
    print(f"{'t (s)':>8} {'client RSS MB':>14} {'fds':>5} {'procs':>6} {'server RSS MB':>14}")

    def show(s: Sample) -> None:
        print(f"{s.t_s:8.0f} {s.client_rss_mb:14.1f} {s.client_fds:5d} {s.client_processes:6d} "
              f"{s.server_rss_mb:14.1f}", flush=True)

    rep = soak(args.minutes, args.concurrency, ttft_ms=args.ttft_ms, itl_ms=args.itl_ms,
               output_len=args.output_len, sample_s=args.sample_s,
               max_rss_growth_pct=args.max_rss_growth, fd_slack=args.fd_slack,
               client_processes=args.client_processes, on_sample=show)
    print(f"requests: server saw {rep.server_requests}, records {rep.records}, "
          f"completed {rep.completed}, failed {rep.failed}")
    print(f"client RSS growth after the first minute: {rep.rss_growth_pct} % "
          f"(limit {args.max_rss_growth:g} %); fds after the first minute: {rep.fd_range}")
    print(f"per-request records held in memory: {rep.record_bytes} bytes each; growth net of "
          f"them: {rep.rss_growth_net_of_records_pct} %; growth / their bytes: "
          f"{rep.growth_per_record_ratio}")
    for name, ok in rep.verdicts.items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    if args.json:
        print(json.dumps(asdict(rep), indent=1))
    return 0 if rep.ok else 1


if __name__ == "__main__":
    sys.exit(main())
