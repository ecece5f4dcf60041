"""``infer-prof calibrate``: measure the load generator against a server whose timing is known.

Starts the synthetic server (:mod:`infer_prof.servers.synthetic`) in its own process, drives it
with the same client and closed-loop driver ``run`` uses, fetches the server's ground truth, and
reports, per concurrency, the client's errors in TTFT, ITL and requests/s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from infer_prof.core.accuracy import compare_to_truth
from infer_prof.core.metrics import RequestRecord
from infer_prof.loadgen.client import Endpoint, build_completion_request
from infer_prof.loadgen.closed_loop import (
    ClosedLoopPlan,
    LiveCounters,
    RequestSpec,
    run_closed_loop,
)
from infer_prof.servers.http_get import get_json, http_get


@dataclass
class SyntheticProcess:
    """The synthetic server running as a child process."""

    proc: subprocess.Popen[str]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_synthetic(
    ttft_ms: float,
    itl_ms: float,
    output_tokens: int = 128,
    timeout_s: float = 30.0,
    extra_args: tuple[str, ...] = (),
) -> SyntheticProcess:
    """Start the synthetic server on a free port and wait until it answers /health."""
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
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("LISTENING"):
        proc.kill()
        raise RuntimeError(f"synthetic server did not start: {line!r}")
    server = SyntheticProcess(proc, int(line.split()[1]))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if http_get(f"{server.url}/health", 1.0)[0] == 200:
                return server
        time.sleep(0.05)
    server.stop()
    raise RuntimeError("synthetic server never became healthy")


def drive(
    url: str,
    concurrency: int,
    num_requests: int,
    input_len: int,
    output_len: int,
    id_prefix: str,
    timeout_s: float = 120.0,
    warmup: int = 0,
) -> list[RequestRecord]:
    """Run the closed-loop driver against ``url`` and return its records."""
    endpoint = Endpoint.from_url(url)

    def specs() -> Iterator[RequestSpec]:
        for i in range(num_requests):
            yield RequestSpec(i, list(range(100, 100 + input_len)), input_len, output_len)

    warm = [
        RequestSpec(-1 - i, [100] * input_len, input_len, 2, warmup=True) for i in range(warmup)
    ]

    def build(spec: RequestSpec) -> bytes:
        return build_completion_request(
            endpoint,
            "synthetic",
            spec.prompt,
            spec.max_tokens,
            request_id=f"{id_prefix}{spec.index}",
        )

    records: list[RequestRecord] = []
    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover
        loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(
            run_closed_loop(
                endpoint,
                build,
                warm,
                specs(),
                ClosedLoopPlan(concurrency, timeout_s),
                LiveCounters(),
                asyncio.Event(),
                records,
            )
        )
    finally:
        loop.close()
    return records


def calibrate_point(
    server: SyntheticProcess, concurrency: int, num_requests: int, input_len: int, output_len: int
) -> dict[str, Any]:
    """One concurrency level: drive, fetch the truth, compare."""
    get_json(f"{server.url}/truth/reset")
    prefix = f"cal-c{concurrency}-"
    records = drive(
        server.url,
        concurrency,
        num_requests,
        input_len,
        output_len,
        prefix,
        warmup=min(concurrency, 64),
    )
    truth = get_json(f"{server.url}/truth", timeout_s=60)["requests"]
    report = compare_to_truth(records, truth, prefix)
    report["concurrency"] = concurrency
    report["num_requests"] = num_requests
    return report


def run_calibration(
    concurrencies: list[int],
    *,
    ttft_ms: float = 50.0,
    itl_ms: float = 15.0,
    output_len: int = 128,
    input_len: int = 32,
    requests_per_stream: int = 4,
    on_point: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Calibrate at each concurrency; ``requests_per_stream`` x concurrency requests each."""
    server = start_synthetic(ttft_ms, itl_ms, output_len)
    reports = []
    try:
        for c in concurrencies:
            rep = calibrate_point(server, c, c * requests_per_stream, input_len, output_len)
            rep["nominal"] = {"ttft_ms": ttft_ms, "itl_ms": itl_ms, "output_len": output_len}
            reports.append(rep)
            if on_point:
                on_point(rep)
    finally:
        server.stop()
    return reports


if __name__ == "__main__":  # pragma: no cover - handy for quick checks
    print(json.dumps(run_calibration([int(x) for x in sys.argv[1:]] or [128]), indent=1))
