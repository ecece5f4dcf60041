"""How sure each row is, and the ranking that follows from it.

Each row carries the held-out error of its kind of configuration (GPU architecture family,
weight precision, tensor-parallel size, interconnect:
:meth:`infer_prof.estimate.expected_error.ExpectedError.interval`): the median and 90th
percentile of |predicted / measured - 1| of output tokens/s per GPU over points each predicted
with its source held out of the fit; *unvalidated* when its family, precision, TP size or
interconnect has no held-out point (fp8 run weight-only, W8A16 through Marlin, is a precision
of its own: :func:`~infer_prof.estimate.expected_error.interval_precision`). A prediction ``x``
may be that 90th percentile too fast, so its slow end is ``x / (1 + p90 / 100)`` and its cost
``usd x (1 + p90 / 100)``: the *pessimistic* cost.

Ranking (``--rank-by``):

- ``pessimistic`` (default): validated rows first, by their pessimistic cost; then unvalidated
  rows, by their central cost (their interval is the overall one, not theirs): the least-known
  option is never first on a guess.
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
from infer_prof.estimate.expected_error import ErrorInterval, ExpectedError, interval_precision


def interconnect_of(config: Config) -> str:
    """The interval table's ``interconnect`` of a configuration: ``none`` on one GPU, else its
    link's kind (``nvlink``, ``infinity-fabric``, ``pcie``)."""
    return config.link.kind if config.link is not None and config.gpu_count > 1 else "none"


def band(interval: ErrorInterval) -> ErrorBand:
    """The document's :class:`ErrorBand` of an interval."""
    return ErrorBand(median_abs_pct=interval.median_pct, p90_abs_pct=interval.p90_pct,
                     n=interval.n, validated=interval.validated, basis=interval.basis,
                     missing=list(interval.missing))


def pessimistic_usd(usd: float | None, interval: ErrorInterval | None) -> float | None:
    """The cost at the slow end, ``usd x (1 + p90 / 100)`` (module docstring); None without a
    cost or a 90th percentile."""
    if usd is None or interval is None or interval.p90_pct is None:
        return None
    return usd * (1.0 + interval.p90_pct / 100.0)


def with_interval(row: Row, config: Config, expected: ExpectedError,
                  hybrid: bool = False) -> Row:
    """``row`` with its kind's interval (None when no validation is shipped; a ``hybrid``
    model's held to the hybrid models' held-out figures: :meth:`ExpectedError.interval`),
    ``validated`` and the pessimistic cost (None when unvalidated)."""
    weight_only = config.support is not None and config.support.weight_only
    interval = expected.interval(family_of(config.gpu),
                                 interval_precision(config.precision, weight_only),
                                 config.gpu_count, interconnect_of(config), hybrid=hybrid)
    shipped = expected.held_out is not None
    validated = shipped and interval.validated
    return msgspec.structs.replace(
        row, expected_error=band(interval) if shipped else None, validated=validated,
        usd_per_million_output_tokens_pessimistic=(
            pessimistic_usd(row.usd_per_million_output_tokens, interval) if validated
            else None))


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
