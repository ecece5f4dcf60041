"""Cost at equal quality: compare rows ranked by $ per 1M output tokens among the runs that meet
a quality floor, the others listed apart with the reason.

Pure: compare rows (plain values, :mod:`infer_prof.results.comparison_rows`) in, a ranking out.
A row's **quality share** is its accuracy as a share of a reference's accuracy:

- the share its own run recorded against ``--quality-reference`` (``quality_share`` in the
  row, from the result's ``quality.reference.quality_share``) when it has one;
- otherwise ``accuracy / best accuracy`` among the compared rows of the same model and task
  file (``quality_tasks``: the task file's SHA-256), the most accurate of them (normally the
  highest precision) taken as the reference.

A row **meets** the floor when its share is at least ``min_quality`` (MLPerf's rule: 0.99 of
the reference's accuracy, judged on the point estimate). Without ``min_quality``, a row meets it
unless its run recorded ``below_floor`` against its own ``--min-quality``. A row without a
measured accuracy, or without a cost per 1M output tokens, cannot be placed and is listed apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The row key ranked on: $ per 1M output tokens (``usd_per_million_output_tokens``).
COST_KEY = "usd_per_1m_output"


@dataclass(frozen=True)
class Placed:
    """One row in the ranking: its index among the rows, its rank (1 = cheapest; None when it
    is listed apart), its quality share (None when not known), what the share is of
    (``recorded reference`` or ``best compared``), why it is apart (None when ranked), and
    whether it meets the quality floor (None when its quality was not measured or its share is
    not known; a row apart for want of a price still meets it)."""

    row: int
    rank: int | None
    share: float | None
    share_of: str | None
    apart: str | None = None
    meets: bool | None = True


@dataclass(frozen=True)
class Ranking:
    """``ranked``: rows meeting the floor, cheapest first; ``apart``: the rest, each with why."""

    min_quality: float | None
    ranked: list[Placed]
    apart: list[Placed]

    def order(self) -> list[int]:
        """Row indices: the ranked rows, cheapest first, then those apart in their order."""
        return [p.row for p in self.ranked + self.apart]


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def quality_shares(rows: Sequence[Mapping[str, Any]]) -> list[tuple[float | None, str | None]]:
    """Each row's quality share and what it is of (see the module): the recorded share, else
    accuracy / the best accuracy of the rows with the same ``model`` and ``quality_tasks``
    (None when the row has no accuracy or that best is 0)."""
    best: dict[tuple[Any, Any], float] = {}
    for r in rows:
        acc = _number(r.get("accuracy"))
        if acc is not None:
            key = (r.get("model"), r.get("quality_tasks"))
            best[key] = max(best.get(key, acc), acc)
    out: list[tuple[float | None, str | None]] = []
    for r in rows:
        recorded, acc = _number(r.get("quality_share")), _number(r.get("accuracy"))
        if recorded is not None:
            out.append((recorded, "recorded reference"))
        elif acc is not None and best[(r.get("model"), r.get("quality_tasks"))] > 0:
            out.append((acc / best[(r.get("model"), r.get("quality_tasks"))], "best compared"))
        else:
            out.append((None, None))
    return out


def _why_apart(row: Mapping[str, Any], share: float | None,
               min_quality: float | None) -> str | None:
    """Why ``row`` cannot be ranked (None when it can)."""
    if _number(row.get("accuracy")) is None:
        return "quality not measured"
    if min_quality is not None:
        if share is None:
            return "no quality share (reference accuracy 0)"
        if share < min_quality:
            return f"BELOW the floor: {share:.3f} of the reference's accuracy < {min_quality:g}"
    elif row.get("quality_below_floor") is True:
        return "BELOW the floor its run recorded"
    if _number(row.get(COST_KEY)) is None:
        return "no $/1M output tokens (no price)"
    return None


def rank_by_cost(rows: Sequence[Mapping[str, Any]], min_quality: float | None) -> Ranking:
    """Rank ``rows`` by $ per 1M output tokens (lowest first; ties keep the rows' order) among
    those meeting ``min_quality`` (see the module); the others apart, in the rows' order."""
    shares = quality_shares(rows)
    placed, apart = [], []
    for i, (row, (share, of)) in enumerate(zip(rows, shares, strict=True)):
        why = _why_apart(row, share, min_quality)
        if why is None:
            placed.append((float(row[COST_KEY]), i, share, of))
        else:
            meets = (None if why.startswith(("quality not", "no quality")) else
                     not why.startswith("BELOW"))
            apart.append(Placed(i, None, share, of, why, meets))
    placed.sort(key=lambda p: (p[0], p[1]))
    ranked = [Placed(i, n, share, of) for n, (_, i, share, of) in enumerate(placed, start=1)]
    return Ranking(min_quality, ranked, apart)
