"""``infer-prof calibrate``: measure the load generator against a server whose timing is known.

Starts the synthetic server (:mod:`infer_prof.servers.synthetic`) in its own process, drives it
with the same client and closed-loop driver ``run`` uses, fetches the server's ground truth, and
reports, per concurrency, the client's errors in TTFT, ITL and requests/s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from infer_prof.config.run_groups import Api
from infer_prof.core.measurement.accuracy import (
    TARGETS_BY_MODE,
    calibration_mode,
    compare_to_truth,
    misses,
)
from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.loadgen.client_loop import client_loop
from infer_prof.loadgen.closed_loop import (
    ClosedLoopPlan,
    DriverIO,
    LiveCounters,
    RequestSpec,
    run_closed_loop,
)
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.loadgen.openai_requests import (
    build_chat_request,
    build_completion_request,
    chat_messages,
)
from infer_prof.loadgen.prepared import prepare
from infer_prof.loadgen.stamped_reader import reader_in_use
from infer_prof.loadgen.worker_shared import WorkerJob
from infer_prof.loadgen.workers import choose_processes, merge_health, run_in_workers
from infer_prof.results.calibration_report import CalibrationPoint, Nominal, ServerCost
from infer_prof.servers.http_get import get_json, http_get
from infer_prof.servers.vllm_server import die_with_parent


@dataclass
class SyntheticProcess:
    """The synthetic server running as a child process."""

    proc: subprocess.Popen[str]
    port: int
    ca_bundle: str | None = None  # HTTPS: the CA that signed its certificate

    @property
    def url(self) -> str:
        scheme = "https" if self.ca_bundle else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def context(self) -> ssl.SSLContext | None:
        """The TLS context that trusts its certificate (None over plain HTTP)."""
        return ssl.create_default_context(cafile=self.ca_bundle) if self.ca_bundle else None

    def stop(self) -> None:
        """Stop the server and reap it (SIGKILL after 5 s); closes its stdout pipe."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start_synthetic(
    ttft_ms: float,
    itl_ms: float,
    output_tokens: int = 128,
    timeout_s: float = 30.0,
    extra_args: tuple[str, ...] = (),
    tls: Any = None,
) -> SyntheticProcess:
    """Start the synthetic server on a free port and wait until it answers /health.
    ``tls`` (:class:`infer_prof.servers.certs.CertFiles`): serve HTTPS with that certificate."""
    if tls is not None:
        extra_args = (*extra_args, "--tls-cert", str(tls.cert), "--tls-key", str(tls.key))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "infer_prof.servers.synthetic",
            "--port",
            "0",
            "--ttft-ms",
            str(ttft_ms),
            "--itl-ms",
            str(itl_ms),
            "--output-tokens",
            str(output_tokens),
            *extra_args,
        ],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=die_with_parent,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("LISTENING"):
        proc.kill()
        proc.wait()
        proc.stdout.close()
        raise RuntimeError(f"synthetic server did not start: {line!r}")
    server = SyntheticProcess(proc, int(line.split()[1]), str(tls.ca) if tls else None)
    deadline = time.monotonic() + timeout_s
    context = None
    if tls is not None:  # is it up? (whatever its certificate: tests give it bad ones on purpose)
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if http_get(f"{server.url}/health", 1.0, None, context)[0] == 200:
                return server
        time.sleep(0.05)
    server.stop()
    raise RuntimeError("synthetic server never became healthy")


@dataclass(frozen=True)
class CalibrationLoad:
    """One calibration point's load: ``concurrency`` closed-loop streams sending
    ``num_requests`` requests of ``input_len`` prompt and ``output_len`` output tokens, after
    ``warmup`` warm-up requests, from ``processes`` client processes, each request given up
    after ``timeout_s`` seconds, over ``api``: ``completions`` (token-ID prompts) or ``chat``
    (one user message of ``input_len`` words, streamed back as chat chunks)."""

    concurrency: int
    num_requests: int
    input_len: int
    output_len: int
    warmup: int = 0
    processes: int = 1
    timeout_s: float = 120.0
    api: Api = "completions"


def drive(
    url: str,
    load: CalibrationLoad,
    id_prefix: str,
    health: dict[str, Any] | None = None,
    ca_bundle: str | None = None,
) -> list[RequestRecord]:
    """Run the closed-loop driver against ``url`` with ``load`` and return its records (request
    IDs ``id_prefix`` + index). Every request's bytes are built before the load, as ``run``
    builds them (:mod:`infer_prof.loadgen.prepared`).

    ``load.processes > 1`` spreads the streams over that many worker processes
    (:mod:`infer_prof.loadgen.workers`); ``health``, when given, receives the client's own
    health (processes, CPU, event-loop lag, read lag). ``ca_bundle``: the CA to trust for an
    https ``url``.
    """
    concurrency, num_requests, timeout_s = load.concurrency, load.num_requests, load.timeout_s
    input_len, output_len, warmup, processes = (load.input_len, load.output_len, load.warmup,
                                                load.processes)
    endpoint = Endpoint.from_url(url, ca_bundle=ca_bundle)

    chat = load.api == "chat"
    text = " ".join(["word"] * input_len)  # chat: the synthetic server counts its words

    def specs() -> Iterator[RequestSpec]:
        for i in range(num_requests):
            p = text if chat else list(range(100, 100 + input_len))
            yield RequestSpec(i, p, input_len, output_len)

    warm_specs = [
        RequestSpec(-1 - i, text if chat else [100] * input_len, input_len, 2, warmup=True)
        for i in range(warmup)
    ]

    def build(spec: RequestSpec) -> bytes:
        rid = f"{id_prefix}{spec.index}"
        if chat:
            return build_chat_request(endpoint, "synthetic", chat_messages(spec.prompt),
                                      spec.max_tokens, request_id=rid)
        return build_completion_request(endpoint, "synthetic", spec.prompt, spec.max_tokens,
                                        request_id=rid)

    warm = list(prepare(warm_specs, build))
    measured = list(prepare(specs(), build))

    if processes > 1:
        job = WorkerJob(
            "closed", endpoint, build, timeout_s, warm, concurrency, None, measured
        )
        merged, worker_health = run_in_workers(processes, job)
        if health is not None:
            health.update(merge_health(worker_health), reader=reader_in_use())
        return merged
    records: list[RequestRecord] = []
    counters = LiveCounters()
    t0 = time.process_time()
    w0 = time.perf_counter()
    with client_loop() as measuring:
        measuring.measure(
            run_closed_loop(
                DriverIO(endpoint, build, counters, asyncio.Event(), records),
                warm,
                iter(measured),
                ClosedLoopPlan(concurrency, timeout_s),
            )
        )
    wakeups = measuring.reader_wakeups
    if health is not None:
        lag = counters.reads.summary_ms()
        health.update(
            {
                "processes": 1,
                "reader": reader_in_use(),
                "cpu_s": time.process_time() - t0,
                "wall_s": time.perf_counter() - w0,
                "reads": counters.reads.reads,
                "reader_wakeups": wakeups,
                "read_lag_ms": lag,
                "read_lag_exact": counters.reads.exact,
            }
        )
    return records


def cpu_ticks() -> tuple[int, int] | None:
    """(steal, total) CPU time of the machine so far, in clock ticks, from ``/proc/stat``;
    None where it cannot be read. Steal is time the hypervisor ran something else while this
    virtual machine's vCPUs wanted to run."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 8:
        return None
    return fields[7], sum(fields[:8])  # user nice system idle iowait irq softirq steal


def steal_pct(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Percent of all CPU time between two :func:`cpu_ticks` readings that was stolen:
    100 * d(steal) / d(total); None if either reading is missing or no time passed."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return 100.0 * (after[0] - before[0]) / (after[1] - before[1])


def process_cpu_s(pid: int) -> float | None:
    """CPU time (user + system, s) process ``pid`` has used so far, all its threads, from
    ``/proc/<pid>/stat``; None where it cannot be read (gone, not Linux)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    fields = text[text.rfind(")") + 2 :].split()
    try:
        utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    except (IndexError, ValueError):
        return None
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def cpu_pressure() -> float | None:
    """Share of the last 10 s in which some runnable task waited for a CPU (Linux PSI
    ``/proc/pressure/cpu`` "some avg10", percent); None where the kernel does not report it.
    High values mean other work competed with the server and client for the cores."""
    try:
        with open("/proc/pressure/cpu") as f:
            first = f.readline().split()
        return float(dict(x.split("=") for x in first[1:])["avg10"])
    except (OSError, ValueError, KeyError, IndexError):
        return None


def auto_processes(concurrency: int, itl_ms: float) -> int:
    """Client processes for ``concurrency`` streams at one token per ``itl_ms``:
    :func:`~infer_prof.loadgen.workers.choose_processes` on ``concurrency / ITL`` events/s."""
    return choose_processes(concurrency, concurrency / (itl_ms / 1000.0))


def calibrate_point(
    server: SyntheticProcess,
    concurrency: int,
    num_requests: int,
    input_len: int,
    output_len: int,
    processes: int = 1,
    mode: str = "lean",
    api: Api = "completions",
) -> CalibrationPoint:
    """One concurrency level over ``api``: drive, fetch the truth, compare against ``mode``'s
    targets (:data:`~infer_prof.core.measurement.accuracy.TARGETS_BY_MODE`); ``server`` records
    the server process's own CPU over the level (``cpu_s``) and per token it streamed."""
    context = server.context
    get_json(f"{server.url}/truth/reset", context=context)
    prefix = f"cal-c{concurrency}-"
    health: dict[str, Any] = {}
    ticks = cpu_ticks()
    server_cpu0 = process_cpu_s(server.proc.pid)
    load = CalibrationLoad(concurrency, num_requests, input_len, output_len,
                           warmup=min(concurrency, 64), processes=processes, api=api)
    records = drive(server.url, load, prefix, health=health, ca_bundle=server.ca_bundle)
    server_cpu1 = process_cpu_s(server.proc.pid)
    full_truth = get_json(f"{server.url}/truth", timeout_s=60, context=context)
    truth = full_truth["requests"]
    report = compare_to_truth(records, truth, prefix)
    missed = misses(report, TARGETS_BY_MODE[mode])
    tokens = sum(len(t["send_ns"]) for t in truth)
    server_cpu = (
        server_cpu1 - server_cpu0 if server_cpu0 is not None and server_cpu1 is not None else None
    )
    return CalibrationPoint(
        matched_requests=report.matched_requests,
        client_records=report.client_records,
        failed=report.failed,
        ttft=report.ttft,
        itl=report.itl,
        request_throughput=report.request_throughput,
        mode=mode,
        targets=TARGETS_BY_MODE[mode],
        misses=missed,
        server=ServerCost(
            cost_us_per_token=full_truth.get("cost_ns_per_token", 0) / 1000,
            tokens=tokens,
            cpu_s=server_cpu,
            cpu_us_per_token=server_cpu / tokens * 1e6
            if server_cpu is not None and tokens
            else None,
        ),
        concurrency=concurrency,
        api=api,
        processes=processes,
        client=health,
        cpu_pressure_pct=cpu_pressure(),
        cpu_steal_pct=steal_pct(ticks, cpu_ticks()),
        num_requests=num_requests,
    )


@dataclass(frozen=True)
class CalibrationSettings:
    """How to calibrate: the synthetic server's timing (``ttft_ms``, ``itl_ms``, ms), the
    request shape (``output_len``, ``input_len`` tokens), ``requests_per_stream`` x concurrency
    requests per point, client ``processes`` per point (None: chosen per concurrency by
    :func:`auto_processes`), ``tls`` (over HTTPS, with a throwaway CA and server certificate
    made now, :mod:`infer_prof.servers.certs`, verified by the client as a real endpoint's)
    and ``server_cost_us``: CPU the built-in server burns per streamed token (``--cost-us`` of
    :mod:`infer_prof.servers.synthetic`; above 0 the points are judged against the
    ``server_cost`` targets); ``api``: the API the client speaks (``chat``: chat requests
    and chat chunks)."""

    ttft_ms: float = 50.0
    itl_ms: float = 15.0
    output_len: int = 128
    input_len: int = 32
    requests_per_stream: int = 4
    processes: int | None = None
    tls: bool = False
    server_cost_us: float = 0.0
    api: Api = "completions"


def run_calibration(
    concurrencies: list[int],
    settings: CalibrationSettings | None = None,
    on_point: Callable[[CalibrationPoint], None] | None = None,
) -> list[CalibrationPoint]:
    """Calibrate at each concurrency (:class:`CalibrationSettings`; defaults when None);
    ``on_point(report)`` is told each point as it is measured."""
    cs = settings if settings is not None else CalibrationSettings()
    ttft_ms, itl_ms, output_len, input_len = cs.ttft_ms, cs.itl_ms, cs.output_len, cs.input_len
    requests_per_stream, processes, tls, server_cost_us = (
        cs.requests_per_stream, cs.processes, cs.tls, cs.server_cost_us)
    mode = calibration_mode(server_cost_us)
    extra = ("--cost-us", str(server_cost_us)) if server_cost_us > 0 else ()
    certs = None
    tmp = tempfile.TemporaryDirectory(prefix="infer-prof-tls-") if tls else None
    if tmp is not None:
        from infer_prof.servers.certs import make_certs

        certs = make_certs(Path(tmp.name))
    server = start_synthetic(ttft_ms, itl_ms, output_len, extra_args=extra, tls=certs)
    reports = []
    try:
        for c in concurrencies:
            procs = processes or auto_processes(c, itl_ms)
            rep = calibrate_point(
                server, c, c * requests_per_stream, input_len, output_len, procs, mode, cs.api
            )
            rep.nominal = Nominal(ttft_ms=ttft_ms, itl_ms=itl_ms, output_len=output_len,
                                  server_cost_us=server_cost_us)
            rep.tls = tls
            reports.append(rep)
            if on_point:
                on_point(rep)
    finally:
        server.stop()
        if tmp is not None:
            tmp.cleanup()
    return reports


if __name__ == "__main__":  # pragma: no cover - handy for quick checks
    print(json.dumps(msgspec.to_builtins(
        run_calibration([int(x) for x in sys.argv[1:]] or [128])), indent=1))
