"""How sure each row is, and the ranking that follows from it.

Each row carries the validated error interval of its kind of configuration (GPU architecture
family, weight precision, tensor-parallel size, interconnect:
:meth:`infer_prof.estimate.expected_error.ExpectedError.interval_for`), or none: *unvalidated*.
The interval ``[low, high]`` (%) is the spread of ``predicted / measured - 1`` of output tokens/s
per GPU held out by source, so the slow end of a prediction ``x`` is ``x / (1 + high / 100)``
and its cost ``usd x (1 + high / 100)``: the *pessimistic* cost.

Ranking (``--rank-by``):

- ``pessimistic`` (default): validated rows first, by their pessimistic cost; then unvalidated
  rows, by their central cost (none has a slow end to rank by): the least-known option is never
  first on a guess.
- ``point``: every row by its central cost (the prediction itself).

Rows without a read at the target or without a price follow, highest best interactivity first.
Costs are $ per 1M output tokens at the read.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from infer_prof.core.estimate.factors import family_of
from infer_prof.estimate.configs import Config
from infer_prof.estimate.document import ErrorBand, RankBy, Row
from infer_prof.estimate.expected_error import ErrorInterval, ExpectedError


def interconnect_of(config: Config) -> str:
    """The interval table's ``interconnect`` of a configuration: ``none`` on one GPU, else its
    link's kind (``nvlink``, ``infinity-fabric``, ``pcie``)."""
    return config.link.kind if config.link is not None and config.gpu_count > 1 else "none"


def band(interval: ErrorInterval) -> ErrorBand:
    """The document's :class:`ErrorBand` of an interval."""
    kind = f"{interval.family} / {interval.precision} / TP{interval.tp} / {interval.interconnect}"
    return ErrorBand(low_pct=interval.low_pct, high_pct=interval.high_pct, n=interval.n,
                     held_out=interval.held_out, kind=kind)


def pessimistic_usd(usd: float | None, interval: ErrorInterval | None) -> float | None:
    """The cost at the interval's slow end, ``usd x (1 + high_pct / 100)`` (module docstring);
    None without a cost or an interval."""
    if usd is None or interval is None:
        return None
    return usd * max(0.0, 1.0 + interval.high_pct / 100.0)


def with_interval(row: Row, config: Config, expected: ExpectedError) -> Row:
    """``row`` with its kind's interval, ``validated`` and the pessimistic cost."""
    interval = expected.interval_for(family_of(config.gpu), config.precision,
                                     config.gpu_count, interconnect_of(config))
    return msgspec.structs.replace(
        row, expected_error=band(interval) if interval is not None else None,
        validated=interval is not None,
        usd_per_million_output_tokens_pessimistic=pessimistic_usd(
            row.usd_per_million_output_tokens, interval))


def rank_key(row: Row, rank_by: RankBy) -> tuple[int, float, float]:
    """The sort key of :func:`rank` (module docstring)."""
    usd = row.usd_per_million_output_tokens
    if usd is None:
        return (2, -row.best_interactivity, 0.0)
    if rank_by == "point":
        return (0, usd, -row.best_interactivity)
    pess = row.usd_per_million_output_tokens_pessimistic
    if row.validated and pess is not None:
        return (0, pess, -row.best_interactivity)
    return (1, usd, -row.best_interactivity)


def rank(rows: Sequence[Row], rank_by: RankBy = "pessimistic") -> list[Row]:
    """The rows in rank order (module docstring)."""
    return sorted(rows, key=lambda r: rank_key(r, rank_by))


def best_per_gpu(rows: Sequence[Row]) -> list[Row]:
    """The first (best ranked) row of each GPU, in rank order."""
    seen: set[str] = set()
    out = []
    for r in rows:
        if r.gpu not in seen:
            seen.add(r.gpu)
            out.append(r)
    return out
