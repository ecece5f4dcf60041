"""``infer-prof calibrate``: how accurate is this machine's client, up to which load?"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
from rich.console import Console
from rich.table import Table

from infer_prof.cli.common import fail
from infer_prof.cli.declared import declared_command
from infer_prof.config.options import Opt
from infer_prof.core.measurement.accuracy import TARGETS_BY_MODE, calibration_mode, trusted_up_to

if TYPE_CHECKING:
    from infer_prof.results.calibration_report import CalibrationPoint


def _parse_levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"--concurrency {text!r} is not a comma-separated list of integers, e.g. 1,32,128")
    if not levels or any(c < 1 for c in levels):
        fail(f"--concurrency {text!r}: every level must be a positive integer")
    return levels


def _f(v: Any, digits: int = 3) -> str:
    return "n/a" if v is None else f"{v:+.{digits}f}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class CalibrateOptions:
    """The options of ``infer-prof calibrate``, each declared once
    (:mod:`infer_prof.cli.declared`)."""

    concurrency: Annotated[str, Opt(
        ("--concurrency", "-c"),
        ("Comma-separated concurrency levels to check (the highest one within the "
        "targets is reported)."))] = "1,32,128,512,1024"
    ttft_ms: Annotated[float, Opt(
        ("--ttft-ms",),
        "Server's time to first token.")] = 50.0
    itl_ms: Annotated[float, Opt(
        ("--itl-ms",),
        "Server's gap between tokens.")] = 15.0
    output_len: Annotated[int, Opt(
        ("--output-len",),
        "Tokens per response.")] = 128
    requests_per_stream: Annotated[int, Opt(
        ("--requests-per-stream",),
        "Requests = this x concurrency.")] = 4
    processes: Annotated[str, Opt(
        ("--processes",),
        "Client worker processes per level: a number, or auto (by expected events/s).")] = "auto"
    tls: Annotated[bool, Opt(
        ("--tls",),
        ("Over HTTPS: the server gets a throwaway certificate made now, the client "
        "verifies it; TLS is done on the client's own sockets, so timing stays the "
        "kernel's."))] = False
    server_cost_us: Annotated[float, Opt(
        ("--server-cost-us",),
        ("CPU time (us) the built-in server burns per streamed token, as a real API "
        "server on this host would (15 at 1024 streams is about one core); judged "
        "against the server-cost targets."))] = 0.0
    api: Annotated[Literal["completions", "chat"], Opt(
        ("--api",),
        ("The API the client speaks: completions, or chat (chat requests, streamed back "
         "as chat chunks)."))] = "completions"
    json_output: Annotated[bool, Opt(
        ("--json",),
        "Print the full report as JSON.")] = False


def calibrate(o: CalibrateOptions) -> None:
    """Check the load generator against a built-in server with known timing; print its errors
    (client minus truth) in TTFT, ITL and requests/s per concurrency."""
    levels = _parse_levels(o.concurrency)
    if o.ttft_ms <= 0 or o.itl_ms <= 0 or o.output_len < 2 or o.requests_per_stream < 1:
        fail(
            "--ttft-ms and --itl-ms must be positive, --output-len at least 2, "
            "--requests-per-stream at least 1"
        )
    if not o.server_cost_us >= 0:
        fail(f"--server-cost-us {o.server_cost_us:g}: give 0 or more microseconds per token")
    procs = _parse_processes(o.processes)
    err = Console(stderr=True)

    # imported here, not at the top: `infer-prof --help` must not pay for the engine side
    from infer_prof.run.calibrate import CalibrationSettings, run_calibration

    reports = run_calibration(
        levels,
        CalibrationSettings(ttft_ms=o.ttft_ms, itl_ms=o.itl_ms, output_len=o.output_len,
                            requests_per_stream=o.requests_per_stream, processes=procs,
                            tls=o.tls, server_cost_us=o.server_cost_us, api=o.api),
        on_point=lambda rep: err.print(_progress_line(rep)),
    )
    if o.json_output:
        sys.stdout.write(json.dumps(msgspec.to_builtins(reports), indent=2) + "\n")
        return
    server = (f"server: TTFT {o.ttft_ms:g} ms, ITL {o.itl_ms:g} ms, "
              f"{o.output_len} tokens{', HTTPS' if o.tls else ''}"
              + (", chat API" if o.api == "chat" else "")
              + (f", {o.server_cost_us:g} us CPU per token" if o.server_cost_us > 0 else ""))
    out = Console(width=max(120, Console().width))
    out.print(_error_table(reports, server))
    out.print(_targets_line(reports, o.server_cost_us))


calibrate_command = declared_command(CalibrateOptions, calibrate)


def _parse_processes(processes: str) -> int | None:
    """``--processes``: a whole number >= 1, or None for auto."""
    if processes.strip().lower() == "auto":
        return None
    try:
        procs = int(processes)
    except ValueError:
        fail(f"--processes {processes!r}: give a whole number >= 1 or auto")
    if procs < 1:
        fail(f"--processes {processes!r}: give a whole number >= 1 or auto")
    return procs


def _progress_line(rep: CalibrationPoint) -> str:
    """One line on stderr when a level is done: matched requests, the client's processes,
    reader, CPU and read lag, the machine's CPU pressure and steal, the server's CPU."""
    cl = rep.client
    read_lag = cl.get("read_lag_ms")
    lag = read_lag.get("p99") if isinstance(read_lag, dict) else None
    steal = rep.cpu_steal_pct
    srv = rep.server
    srv_cpu = srv.cpu_us_per_token
    return (
        f"concurrency {rep.concurrency}: {rep.matched_requests} requests matched; "
        f"client: {rep.processes} process(es), {cl.get('reader', '?')} reader, "
        f"CPU {cl.get('cpu_s', 0):.1f} s, "
        f"read lag p99 {'n/a' if lag is None else f'{lag:.2f} ms'}; CPU pressure from "
        f"all work on the machine (PSI avg10) {rep.cpu_pressure_pct}%"
        + (f"; CPU stolen by the hypervisor {steal:.1f}%" if steal is not None else "")
        + (
            f"; server CPU {srv.cpu_s:.1f} s ({srv_cpu:.1f} us/token, "
            f"asked {srv.cost_us_per_token:g})"
            if srv_cpu is not None
            else ""
        )
    )


def _error_table(reports: list[CalibrationPoint], server: str) -> Table:
    """Client minus truth per level (ms; requests/s in %), the truth, failures, and whether the
    level is within the targets (else which it misses); ``server`` describes the server."""
    t = Table(title=f"client error vs truth (ms; {server})", title_justify="left")
    for col in (
        "streams",
        "procs",
        "TTFT p50",
        "TTFT p99",
        "ITL p50",
        "ITL p99",
        "req/s err %",
        "true TTFT p50",
        "true ITL p99",
        "failed",
        "within targets",
    ):
        t.add_column(col, justify="right")
    for r in reports:
        t.add_row(
            str(r.concurrency),
            str(r.processes),
            _f(r.ttft.p50_error_ms),
            _f(r.ttft.p99_error_ms),
            _f(r.itl.p50_error_ms),
            _f(r.itl.p99_error_ms),
            _f(r.request_throughput.error_pct),
            _f(r.ttft.p50_truth_ms, 2),
            _f(r.itl.p99_truth_ms, 2),
            str(r.failed),
            "yes" if not r.misses else "no: " + ", ".join(r.misses),
        )
    return t


def _targets_line(reports: list[CalibrationPoint], server_cost_us: float) -> str:
    """The targets of the calibration mode and the highest level within them."""
    top = trusted_up_to([(r.concurrency, r.misses) for r in reports])
    mode = calibration_mode(server_cost_us)
    targets = TARGETS_BY_MODE[mode]
    return (
        ("targets" if mode == "lean" else f"targets (server costing {server_cost_us:g} us/token)")
        + f": |error| <= {targets['ttft_p50_ms']:g} / "
        f"{targets['ttft_p99_ms']:g} ms TTFT "
        f"p50/p99, {targets['itl_p50_ms']:g} / {targets['itl_p99_ms']:g} ms ITL, "
        f"{targets['request_throughput_pct']:g}% requests/s. "
        + (
            f"On this machine the client is within them up to {top} streams."
            if top is not None
            else "Not within them even at the lowest level checked."
        )
    )
