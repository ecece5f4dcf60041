"""The sweep summary as types: what ``run`` writes beside the points' result files when it ran
more than one point, ``--find-max`` or ``--frontier`` (``<stamp>-<model>[-<tag>].sweep.json``,
``kind`` ``infer-prof.sweep``), and what ``run --engine-sweep`` writes over its configurations
(``<stamp>-<model>.engine-sweep.json``, ``kind`` ``infer-prof.engine-sweep``).

One row a point (:class:`SweepRow`), the knees of each workload's curve, the find-max answer,
and the frontier (one, or one a suite member); an engine sweep adds each configuration's
frontier and the upper envelope over them. Built by :func:`infer_prof.run.record.sweep_summary`
and :func:`infer_prof.run.engine_sweep.execute_engine_sweep`; held to these types before it is
written (:func:`infer_prof.results.store.write_result`) and read as them
(:func:`decode_sweep`); its JSON Schema is shipped beside the result's
(``results/schemas/sweep-v<N>.schema.json``, :func:`sweep_schema_text`). Latencies are in ms,
throughputs per second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import msgspec

from infer_prof.results.document import schema_text_of, shipped_schema_path, type_problems
from infer_prof.results.document_base import Section
from infer_prof.results.frontier_sections import Frontier, FrontierRow
from infer_prof.results.load_sections import LoadMode

SweepKind = Literal["infer-prof.sweep", "infer-prof.engine-sweep"]
SWEEP_KINDS: tuple[str, ...] = ("infer-prof.sweep", "infer-prof.engine-sweep")


class SweepRow(Section):
    """One load point of the sweep: its result file, workload and load (streams of a closed
    loop, requests/s of an open one; None for rate inf, which is no point on the curve), its
    rates, latency percentiles, the frontier's axes, goodput and verdicts."""

    result_file: str
    workload: str | None = None
    mode: LoadMode | None = None
    load: int | float | None = None
    request_throughput: float | None = None
    output_throughput: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p99_ms: float | None = None
    interactivity_tok_s_user: float | None = None
    total_tok_s_per_gpu: float | None = None
    usd_per_million_output_tokens: float | None = None
    e2e_p50_ms: float | None = None
    goodput: float | None = None
    slo_passed: bool | None = None
    valid: bool | None = None
    complete: bool | None = None


class Knee(Section):
    """Where a workload's curve bends (``core.analysis.sweep.Knee``): the first point whose
    TPOT p50 exceeds ``threshold_ms`` (1.5 x ``baseline_ms``, the lowest load's); ``row`` its
    index in ``points``."""

    index: int
    load: int | float
    tpot_p50_ms: float
    baseline_ms: float
    threshold_ms: float
    row: int
    workload: str | None = None
    mode: LoadMode | None = None


class Probe(Section):
    """One load find-max tried, and whether it met the SLOs."""

    load: int | float
    passed: bool


class SearchAnswer(Section):
    """The search's answer (``core.analysis.sweep.SearchResult``): the highest load that met
    the SLOs (None when even the start failed), the lowest that did not (None when the ceiling
    passed), every probe in run order, and why it ended."""

    best: int | float | None = None
    first_fail: int | float | None = None
    probes: list[Probe] = []
    reason: str | None = None


class FindMax(Section):
    """``--find-max``: what was searched (``concurrency`` or ``rate``) and the answer; both None
    with a ``reason`` when a point did not complete."""

    load: str | None = None
    result: SearchAnswer | None = None
    reason: str | None = None


class MemberFrontier(Frontier):
    """One suite member's frontier (``--frontier --suite``): a :class:`Frontier` with its
    ``workload`` (first), as read back from the sweep file."""


class EngineConfigFrontier(Section):
    """One configuration of an engine sweep: its name and settings, its frontier (as ``run
    --frontier`` writes it; None when it measured nothing) and its own sweep file."""

    name: str
    settings: dict[str, Any] = {}
    frontier: Frontier | None = None
    sweep_file: str | None = None


class EnvelopeRow(FrontierRow):
    """A frontier point of one configuration (``config``), and whether it is on the upper
    envelope over all of them (``core.analysis.engine_sweep.envelope``)."""

    config: str | None = None
    envelope: bool | None = None


class EngineSweep(Section):
    """The configurations' frontiers, the envelope over them (which wins where) and what no
    configuration could answer."""

    configs: list[EngineConfigFrontier] = []
    envelope: list[EnvelopeRow] = []
    problems: list[str] = []


class Sweep(Section):
    """A sweep summary (see the module docstring)."""

    schema_version: int
    kind: SweepKind
    points: list[SweepRow] = []
    knees: list[Knee] = []
    knee_rule: str | None = None
    find_max: FindMax | None = None
    frontier: Frontier | None = None
    frontiers: list[MemberFrontier] | None = None
    engine_sweep: EngineSweep | None = None


def decode_sweep(data: Any) -> Sweep:
    """A sweep summary (parsed JSON) as :class:`Sweep`; keys it does not declare are ignored,
    keys it lacks take their defaults. Raises ``msgspec.ValidationError`` naming the first value
    of a wrong type by its path."""
    return msgspec.convert(data, Sweep, strict=False)


def check_sweep(data: Any) -> list[str]:
    """What is wrong with a sweep summary built for writing, in words (empty when it matches
    :class:`Sweep`): each undeclared key by its path, or the first value of a wrong type."""
    return type_problems(data, Sweep)


def sweep_schema_text() -> str:
    """The JSON Schema (2020-12) of :class:`Sweep` as the shipped file's text
    (``results/schemas/sweep-v<N>.schema.json``; sorted keys, 2-space indent)."""
    return schema_text_of(Sweep, "infer-prof sweep summary")


def sweep_schema_path(version: int) -> Path:
    """Where the sweep summary's JSON Schema of ``schema_version`` ``version`` is shipped."""
    return shipped_schema_path("sweep", version)
