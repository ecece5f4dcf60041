"""What ``infer-prof calibrate`` reports for one concurrency level, as a type: the client's
errors against the synthetic server's truth (:class:`~infer_prof.core.measurement.accuracy.
AccuracyReport`), then how the level was judged and run. Built by
:func:`infer_prof.run.calibrate.calibrate_point` and :func:`~infer_prof.run.calibrate.
run_calibration`; ``calibrate --json`` writes a list of them."""

from __future__ import annotations

from msgspec import UNSET, Struct, UnsetType

from infer_prof.config.run_groups import Api
from infer_prof.core.measurement.accuracy import AccuracyReport


class ServerCost(Struct, kw_only=True):
    """The synthetic server's CPU over the level: what it was asked to burn per streamed token
    (us), the tokens it streamed, its CPU seconds and CPU per token (us; None where the process
    could not be read)."""

    cost_us_per_token: float
    tokens: int
    cpu_s: float | None
    cpu_us_per_token: float | None


class Nominal(Struct, kw_only=True):
    """The server's configured timing (TTFT and ITL, ms), its output length (tokens) and the CPU
    it burns per token (us)."""

    ttft_ms: float
    itl_ms: float
    output_len: int
    server_cost_us: float


class CalibrationPoint(AccuracyReport, kw_only=True):
    """One level: the accuracy report, the calibration ``mode`` and its ``targets`` (ms; req/s
    in %), the targets it ``misses``, the server's CPU, the level (``concurrency`` streams,
    ``api``, client ``processes``, ``num_requests``), the client's own health (``client``: its
    processes, CPU, event-loop and read lag, as :func:`infer_prof.run.calibrate.drive` reports
    it), the machine's CPU pressure (PSI avg10, %) and hypervisor steal (%) over the level; and,
    once :func:`~infer_prof.run.calibrate.run_calibration` has it, the ``nominal`` server and
    whether it ran over ``tls`` (``UNSET`` before: not written)."""

    mode: str
    targets: dict[str, float]
    misses: list[str]
    server: ServerCost
    concurrency: int
    api: Api
    processes: int
    client: dict[str, object]
    cpu_pressure_pct: float | None
    cpu_steal_pct: float | None
    num_requests: int
    nominal: Nominal | UnsetType = UNSET
    tls: bool | UnsetType = UNSET
