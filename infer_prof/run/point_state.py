"""What driving one load point decides beside its request records, and what the driving hands
to the point's result (:func:`infer_prof.run.load.drive_point` ->
:func:`infer_prof.run.point_document.build_result`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.loadgen.sessions import SessionRun
from infer_prof.results.frontier_sections import PrecisionStop

#: Why a point stopped before its end: the run was stopped (Ctrl-C, SIGTERM, SIGHUP), the
#: server died, every warm-up request failed (the load was not sent), or a client process
#: failed.
IncompleteReason = Literal["interrupted", "server_died", "warmup_failed", "client_worker_failed"]


@dataclass
class PointState:
    """The point's state while it is driven, set by the driver as things happen:
    ``incomplete_reason`` (None while the point runs to its end), the multi-turn sessions' run
    (``session_run``, None without ``--turns``), the warm-up's figures (``warmup``: the gate's
    ``to_dict``, the result's ``warmup`` extras) and the precision stop's section
    (``precision``: None when the point ran fixed counts)."""

    incomplete_reason: IncompleteReason | None = None
    session_run: SessionRun | None = None
    warmup: dict[str, Any] | None = None
    precision: PrecisionStop | None = None


@dataclass
class DrivenPoint:
    """One point driven: its request records (warm-up and cool-down marked), its state, the
    result's ``client`` section (the client's health) and ``telemetry`` section (``gpu``,
    ``server_metrics``)."""

    records: list[RequestRecord]
    state: PointState
    client: dict[str, Any] = field(default_factory=dict)
    telemetry: dict[str, Any] = field(default_factory=dict)
