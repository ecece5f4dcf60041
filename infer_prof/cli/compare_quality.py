"""``compare --rank-by-cost`` / ``--min-quality``: the runs against a quality floor, ranked by
$/1M output tokens among those meeting it, the others listed apart and marked
(:mod:`infer_prof.core.analysis.quality_ranking`)."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infer_prof.core.analysis.quality_ranking import COST_KEY, Placed, Ranking, rank_by_cost

#: (header, row key, decimals) of the ranked table, after rank and run.
_CELLS: tuple[tuple[str, str, int], ...] = (
    ("label", "label", 0),
    ("GPU", "gpu", 0),
    ("precision", "precision", 0),
    ("$/1M out tok", COST_KEY, 4),
    ("out tok/s", "output_throughput", 1),
    ("accuracy", "accuracy", 3),
    ("perplexity", "perplexity", 3),
    ("KL nats/tok", "kl", 4),
)


def _fmt(value: Any, digits: int) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def standing(p: Placed, floor: float | None) -> str:
    """``meets 0.99`` (or ``meets`` without a floor given), or why the row is apart."""
    if p.apart is not None:
        return p.apart
    return f"meets {floor:g}" if floor is not None else "meets its recorded floor"


def _share_text(p: Placed) -> str:
    return "n/a" if p.share is None else f"{p.share:.3f} ({p.share_of})"


def ranked_lines(rows: Sequence[Mapping[str, Any]], ranking: Ranking,
                 placed: Sequence[Placed]) -> list[list[str]]:
    """One list of cells per placed row: rank, run, :data:`_CELLS`, share, standing."""
    out = []
    for p in placed:
        row = rows[p.row]
        out.append([str(p.rank) if p.rank is not None else "-", str(row.get("run_id", "")),
                    *(_fmt(row.get(k), d) for _, k, d in _CELLS), _share_text(p),
                    standing(p, ranking.min_quality)])
    return out


HEADERS = ["#", "run", *(h for h, _, _ in _CELLS), "quality share (of)", "quality floor"]


def print_ranked(output_format: str, rows: list[dict[str, Any]], paths: list[str],
                 min_quality: float | None, rank: bool) -> None:
    """The rows against ``min_quality`` in ``output_format`` on stdout: ranked by $/1M output
    tokens among those meeting it when ``rank`` (the others after them, apart), else in the
    order given, each marked."""
    ranking = rank_by_cost(rows, min_quality)
    placed = ranking.ranked + ranking.apart
    if not rank:  # marks only: the order the runs were named in, no rank numbers
        placed = sorted((Placed(p.row, None, p.share, p.share_of, p.apart, p.meets)
                         for p in placed),
                        key=lambda p: p.row)
    if output_format == "json":
        typer.echo(json.dumps(_payload(rows, paths, ranking, placed), indent=2, default=str))
        return
    lines = ranked_lines(rows, ranking, placed)
    if output_format == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow([*HEADERS, "path"])
        for p, cells in zip(placed, lines, strict=True):
            w.writerow([*cells, paths[p.row]])
        sys.stdout.write(buf.getvalue())
    elif output_format == "markdown":
        md = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        md += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in lines]
        sys.stdout.write("\n".join([_title(ranking, rank), "", *md]) + "\n")
    else:
        _print_table(ranking, placed, lines, rank)


def _title(ranking: Ranking, rank: bool) -> str:
    floor = (f"the floor {ranking.min_quality:g} of the reference's accuracy"
             if ranking.min_quality is not None else "each run's recorded quality floor")
    if rank:
        return (f"ranked by $/1M output tokens among the runs meeting {floor} "
                f"({len(ranking.ranked)} of {len(ranking.ranked) + len(ranking.apart)}); "
                "the others apart, unranked")
    return f"against {floor}"


def _print_table(ranking: Ranking, placed: Sequence[Placed], lines: list[list[str]],
                 rank: bool) -> None:
    console = Console()
    if not console.is_terminal:
        console = Console(width=400)
    t = Table(box=box.SIMPLE_HEAVY, title=_title(ranking, rank), title_justify="left")
    for h in HEADERS:
        t.add_column(h, no_wrap=True)
    first_apart = len(ranking.ranked) if rank else None
    for i, (p, cells) in enumerate(zip(placed, lines, strict=True)):
        if i == first_apart and i > 0:
            t.add_section()
        texts = [escape(c) for c in cells]
        if p.apart is not None:
            texts[-1] = f"[bold red]{texts[-1]}[/bold red]"
        t.add_row(*texts)
    console.print(t)


def _payload(rows: Sequence[Mapping[str, Any]], paths: Sequence[str], ranking: Ranking,
             placed: Sequence[Placed]) -> dict[str, Any]:
    """``compare --format json`` with a floor: the rows in order, each with its rank, share and
    standing (``meets`` true/false, ``why`` when apart)."""
    return {
        "rank_by": COST_KEY,
        "min_quality": ranking.min_quality,
        "rows": [{**rows[p.row], "path": paths[p.row], "rank": p.rank,
                  "quality_share_used": p.share, "quality_share_of": p.share_of,
                  "meets_quality_floor": p.meets, "apart": p.apart}
                 for p in placed],
    }
