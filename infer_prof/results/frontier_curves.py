"""Frontier curves from result files or the history, for ``compare --target-interactivity``.

Results are grouped into one :class:`infer_prof.core.analysis.frontier_compare.Curve` per GPU,
instance (labels) and configuration: everything :func:`infer_prof.results.identity.settings_fields`
looks at except the load (concurrency, request rate) and the host. Within a group:

- a result with a ``frontier`` section (``run --frontier``; see docs/frontier.md) gives the
  points as that run placed them (the newest such result when there are several);
- otherwise each load point's own result gives one point (its summary's axes, recorded or
  derived for older files: :mod:`infer_prof.core.analysis.frontier_axes`); the newest result wins
  when a load was run twice. A plain ``--concurrency 1,2,4,8`` sweep is a frontier this way.

SLOs are checked on each point's summary (:func:`infer_prof.core.workload.slo.check_summary`); a
frontier point without its own result cannot be checked and counts as not meeting them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from infer_prof.core.analysis.comparison import labels_text
from infer_prof.core.analysis.frontier import FrontierPoint
from infer_prof.core.analysis.frontier_compare import Curve
from infer_prof.core.workload.slo import Slo, check_summary
from infer_prof.results import history, history_database
from infer_prof.results.comparison_rows import run_status
from infer_prof.results.document import Result
from infer_prof.results.frontier_sections import FrontierRow
from infer_prof.results.identity import device_name, gpu_count, settings_fields
from infer_prof.results.loading import history_result

#: Fields that vary along one frontier, or say where it ran rather than what: not grouped on.
_ALONG_THE_CURVE = ("concurrency", "request_rate", "max_concurrency", "burstiness", "host")
#: Fields shown in the GPU and instance columns rather than the configuration column.
_PLACEMENT = ("gpu", "gpu_count", "labels")
#: Fields that must agree for a comparison at one target to mean anything.
WORKLOAD_FIELDS = ("model", "workload", "input_len", "output_len", "api", "dataset_sha256",
                   "trace_sha256", "sessions", "served_model")


def group_fields(result: Result) -> dict[str, Any]:
    """What makes two results points of one frontier: :func:`settings_fields` without the load
    and the host."""
    return {k: v for k, v in settings_fields(result).items() if k not in _ALONG_THE_CURVE}


def load_of(result: Result) -> float | None:
    """The point's load: the closed loop's streams, the open loop's rate (requests/s)."""
    load = result.load
    value: Any = None
    if load is not None:
        value = load.rate if load.mode == "open" else load.concurrency
    if value is None:
        value = result.config.concurrency
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def _when(result: Result) -> str:
    return result.finished_at or result.started_at or ""


def run_price(result: Result) -> float | None:
    """The per-GPU hourly price the point ran with (``cost.usd_per_gpu_hour`` of an available
    cost block), None without one."""
    cost = result.cost
    if cost is None or not cost.available:
        return None
    return cost.usd_per_gpu_hour


def point_of(result: Result, concurrency: float) -> FrontierPoint | None:
    """A :class:`FrontierPoint` at ``concurrency`` from one run point's summary axes (recorded,
    or derived on load for older files: :func:`infer_prof.results.schema.typed_document`);
    None when the point has no throughput (nothing to place)."""
    s = result.summary
    out, inp, tot = s.output_tok_s_per_gpu, s.input_tok_s_per_gpu, s.total_tok_s_per_gpu
    if out is None or inp is None or tot is None:
        return None
    return FrontierPoint(
        concurrency=concurrency,
        interactivity=s.interactivity_tok_s_user,
        interactivity_p90=s.interactivity_p90_tok_s_user,
        output_tok_s_per_gpu=out,
        input_tok_s_per_gpu=inp,
        total_tok_s_per_gpu=tot,
        usd_per_million_output_tokens=s.usd_per_million_output_tokens,
        usd_per_million_input_tokens=s.usd_per_million_input_tokens,
        usd_per_million_total_tokens=s.usd_per_million_total_tokens,
    )


def _point_of_row(row: FrontierRow) -> FrontierPoint | None:
    """A point of a ``frontier.points[]`` entry (None when a throughput is missing)."""
    total, out = row.total_tok_s_per_gpu, row.output_tok_s_per_gpu
    if row.concurrency is None or total is None or out is None:
        return None
    inp = row.input_tok_s_per_gpu
    return FrontierPoint(
        concurrency=row.concurrency,
        interactivity=row.interactivity,
        interactivity_p90=row.interactivity_p90,
        output_tok_s_per_gpu=out,
        input_tok_s_per_gpu=inp if inp is not None else total - out,
        total_tok_s_per_gpu=total,
        usd_per_million_output_tokens=row.usd_per_million_output_tokens,
        usd_per_million_input_tokens=row.usd_per_million_input_tokens,
        usd_per_million_total_tokens=row.usd_per_million_total_tokens,
        pareto=bool(row.pareto),
    )


def _gpu_text(result: Result) -> str:
    name, count = device_name(result), gpu_count(result)
    return f"{count}x {name}" if count > 1 else name


def _configuration(fields: Mapping[str, Any], varying: Sequence[str]) -> str:
    parts = [str(fields.get("precision") or "auto")]
    for key in varying:
        if key == "precision":
            continue
        value = fields.get(key)
        if value not in (None, [], {}, ""):
            text = " ".join(str(v) for v in value) if isinstance(value, list) else str(value)
            parts.append(f"{key}={text}")
    return ", ".join(parts)


def _curve(
    group: Sequence[tuple[str, Result]], configuration: str, slos: Sequence[Slo] | None,
) -> Curve | None:
    newest = max(group, key=lambda pr: _when(pr[1]))[1]
    by_load: dict[float, tuple[str, Result]] = {}
    for name, r in sorted(group, key=lambda pr: _when(pr[1])):
        c = load_of(r)
        if c is not None:
            by_load[c] = (name, r)  # the newest run of a load wins
    framed = [(r, r.frontier) for _, r in group if r.frontier is not None and r.frontier.points]
    price = run_price(newest)
    if framed:
        run, fr = max(framed, key=lambda rf: _when(rf[0]))
        pts = [p for row in fr.points if (p := _point_of_row(row)) is not None]
        source = "frontier"
        price = fr.usd_per_gpu_hour if fr.usd_per_gpu_hour is not None else run_price(run)
    else:
        pts = [p for c, (_, r) in sorted(by_load.items())
               if (p := point_of(r, c)) is not None]
        source = "sweep"
    if not pts:
        return None
    passes: tuple[bool, ...] = ()
    if slos:
        def ok(p: FrontierPoint) -> bool:
            hit = by_load.get(p.concurrency)
            if hit is None:
                return False
            summary = msgspec.to_builtins(hit[1].summary)  # core/workload/slo reads plain JSON
            return all(c.passed for c in check_summary(summary, slos))
        passes = tuple(ok(p) for p in pts)
    used = [by_load[p.concurrency] for p in pts if p.concurrency in by_load]
    problems = tuple(f"{name}: {status}" for name, r in used
                     if (status := run_status(r)) != "ok")
    labels = newest.labels or newest.config.labels
    return Curve(
        gpu=_gpu_text(newest),
        instance=labels_text(labels),
        configuration=configuration,
        points=tuple(pts),
        usd_per_gpu_hour=price,
        source=source,
        passes=passes,
        files=tuple(name for name, _ in group),
        problems=problems,
    )


def curves_from_results(
    loaded: Sequence[tuple[str, Result]], slos: Sequence[Slo] | None = None,
) -> list[Curve]:
    """One curve per GPU, instance and configuration among ``(name, result)`` pairs, in the
    order each first appears (module docstring). The configuration column names the precision
    and every setting that differs between the curves."""
    groups: dict[str, list[tuple[str, Result]]] = {}
    fields: dict[str, dict[str, Any]] = {}
    for name, r in loaded:
        f = group_fields(r)
        key = json.dumps(f, sort_keys=True, default=str)
        groups.setdefault(key, []).append((name, r))
        fields.setdefault(key, f)
    reps = list(fields.values())
    varying = sorted(k for k in set().union(*(f.keys() for f in reps)) if k not in _PLACEMENT
                     and len({json.dumps(f.get(k), sort_keys=True, default=str)
                              for f in reps}) > 1) if reps else []
    out = []
    for key, group in groups.items():
        curve = _curve(group, _configuration(fields[key], varying), slos)
        if curve is not None:
            out.append(curve)
    return out


def differing_workloads(loaded: Sequence[tuple[str, Result]]) -> dict[str, list[Any]]:
    """The :data:`WORKLOAD_FIELDS` whose values differ among the results (what makes a
    comparison at one target meaningless: another model, another workload), value per result."""
    values = [settings_fields(r) for _, r in loaded]
    out: dict[str, list[Any]] = {}
    for k in WORKLOAD_FIELDS:
        column = [v.get(k) for v in values]
        if len({json.dumps(c, sort_keys=True, default=str) for c in column}) > 1:
            out[k] = column
    return out


def results_from_history(
    db: str | Path | history_database.Location, model: str | None = None,
) -> tuple[list[tuple[str, Result]], int]:
    """Every run the history keeps a result document for (``history:<run id>``, result), and
    how many runs it holds without one (recorded before the history kept result files)."""
    loaded: list[tuple[str, Result]] = []
    missing = 0
    for rec in history.list_runs(db, model=model, limit=0):
        kept = history_result(db, rec.run_id)
        if kept is None:
            missing += 1
            continue
        loaded.append((f"history:{rec.run_id}", kept[0]))
    return loaded, missing
