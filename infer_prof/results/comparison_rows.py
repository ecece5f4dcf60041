"""The comparison table's rows, read from typed results: one row per run, the best of each column.

The columns and what "best" means are :mod:`infer_prof.core.analysis.comparison` (pure: rows of
plain values in, marks out); this module reads each :class:`infer_prof.results.document.Result` by
attribute, so a misspelt field is a type error, and a metric column's dotted path (the metric
table's, :mod:`infer_prof.core.measurement.metric_table`) is walked through the declared fields by
:func:`value_at`, which refuses a path the result type does not declare.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from infer_prof.core.analysis.comparison import (
    METRIC_COLUMNS,
    best_rows,
    finite_number,
    labels_text,
)
from infer_prof.core.analysis.repeats import metric_name
from infer_prof.results.document import Result
from infer_prof.results.identity import model_name, precision_of


class UndeclaredPath(AttributeError):
    """A dotted path names a field the result type does not declare (a bug in the path)."""


def value_at(result: Result, path: str) -> Any:
    """The value at a dotted ``path`` (``summary.ttft_ms.p99``) of ``result``, or None when a
    section on the way is missing (not recorded). ``path`` may list alternatives separated by
    ``|`` (older spellings): the first that is not None wins. Below a declared field, a
    JSON-object section (``config``, ``workload``) is read by key.

    Raises :class:`UndeclaredPath` when a step names a field its section's type does not declare.
    """
    for alt in path.split("|"):
        cur: Any = result
        for part in alt.split("."):
            if cur is None:
                break
            if isinstance(cur, msgspec.Struct):
                if part not in cur.__struct_fields__:
                    raise UndeclaredPath(f"{alt}: {type(cur).__name__} has no field {part!r}")
                cur = getattr(cur, part)
            elif isinstance(cur, Mapping):
                cur = cur.get(part)
            else:
                cur = None
        if cur is not None:
            return cur
    return None


def run_status(result: Result) -> str:
    """``ok``, or what is wrong with the run's numbers: ``INCOMPLETE: <incomplete_reason>``
    and/or ``INVALID: <validity reasons joined by "; ">``, joined by `` | ``."""
    parts = []
    if not result.complete:
        parts.append(f"INCOMPLETE: {result.incomplete_reason or 'reason not recorded'}")
    if result.validity is not None and not result.validity.valid:
        reasons = result.validity.reasons
        why = "; ".join(str(r) for r in reasons) if reasons else "reason not recorded"
        parts.append(f"INVALID: {why}")
    return " | ".join(parts) or "ok"


def gpu_text(result: Result) -> str:
    """``environment.gpu_name`` (``<count>x <name>`` for more than one), else the GPU named
    with ``--gpu`` (``gpu.key``, e.g. an endpoint elsewhere), else ``cpu``."""
    env, declared = result.environment, result.gpu
    name, count = (env.gpu_name, env.gpu_count) if env is not None else (None, None)
    if not name and declared is not None:
        name, count = declared.key, declared.count
    if not name:
        return "cpu"
    return f"{count}x {name}" if count is not None and count > 1 else name


def row_for(result: Result) -> dict[str, Any]:
    """One table row (keys of :data:`infer_prof.core.analysis.comparison.COLUMNS`) for one
    result."""
    cfg = result.config
    labels = result.labels or cfg.labels
    row: dict[str, Any] = {
        "gpu": gpu_text(result),
        "label": labels_text(labels if isinstance(labels, Mapping) else {}),
        "model": model_name(result),
        "precision": precision_of(result),
        "concurrency": cfg.concurrency,
        "status": run_status(result),
    }
    for col in METRIC_COLUMNS:
        row[col.key] = finite_number(value_at(result, col.path))
    _repeat_cells(result, row)
    _quality_cells(result, row)
    return row


def _quality_cells(result: Result, row: dict[str, Any]) -> None:
    """What ranking at equal quality needs (:mod:`infer_prof.core.analysis.quality_ranking`):
    ``quality_tasks`` (the task file's SHA-256), ``quality_share`` (accuracy / the recorded
    reference's), ``quality_below_floor`` (as the run recorded it), ``quality_kl`` (mean KL
    against that reference, nats/token)."""
    q = result.quality
    if q is None or q.status == "not_measured":
        return
    ref = q.reference
    row["quality_tasks"] = q.tasks_sha256
    row["quality_share"] = finite_number(ref.quality_share) if ref is not None else None
    row["quality_below_floor"] = q.below_floor


def _repeat_cells(result: Result, row: dict[str, Any]) -> None:
    """A result closing a ``run --repeat`` group: each metric's mean across the repeats in its
    column, with ``<key>_sd``, ``_cv``, ``_low``, ``_high`` and ``repeats``
    (:mod:`infer_prof.core.analysis.comparison`)."""
    rep = result.repeats
    if rep is None or not rep.metrics:
        return
    row["repeats"] = len(rep.run_ids)
    row["repeats_relaunch"] = rep.relaunch
    for col in METRIC_COLUMNS:
        m = rep.metrics.get(metric_name(col.path))
        if m is None or m.mean is None:
            continue
        row[col.key] = m.mean
        row.update({f"{col.key}_sd": m.sd, f"{col.key}_cv": m.cv, f"{col.key}_low": m.low,
                    f"{col.key}_high": m.high})


def comparison_table(
    results: Sequence[Result],
) -> tuple[list[dict[str, Any]], dict[str, set[int]]]:
    """Rows (:func:`row_for`) for ``results`` in order, and
    :func:`infer_prof.core.analysis.comparison.best_rows` of them."""
    rows = [row_for(r) for r in results]
    return rows, best_rows(rows)
