"""The console view of a ``run --frontier``: one row per point (Pareto points marked), why it
stopped, and the answer at the target interactivity or SLO."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _f(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def frontier_lines(frontier: dict[str, Any]) -> list[str]:
    """The lines under the table: why it stopped, and the answer (or why there is none)."""
    lines = [f"stopped: {frontier.get('stopped_because')}"]
    a = frontier.get("at_target")
    target = frontier.get("target") or {}
    if a:
        how = ("interpolated between {:g} and {:g}".format(*sorted(a["between"]))
               if a.get("interpolated") and a.get("between") else "measured")
        cost = ("no price given" if a.get("usd_per_million_output_tokens") is None else
                f"${a['usd_per_million_output_tokens']:.4g}/1M output, "
                f"${a['usd_per_million_total_tokens']:.4g}/1M total")
        lines.append(
            f"at {a['interactivity']:.1f} tok/s/user: {_f(a['total_tok_s_per_gpu'])} total and "
            f"{_f(a['output_tok_s_per_gpu'])} output tok/s/GPU, {cost} ({how})"
        )
    elif target.get("interactivity") is not None:
        lo, hi = target.get("front_interactivity") or [None, None]
        lines.append(f"target {target['interactivity']:g} tok/s/user not on the measured front "
                     f"({_f(lo)}-{_f(hi)} tok/s/user): not extrapolated")
    s = frontier.get("at_slo")
    if s and a != s:
        lines.append(f"best point meeting {target.get('slo')}: {s['interactivity']:.1f} "
                     f"tok/s/user, {_f(s['total_tok_s_per_gpu'])} total tok/s/GPU (measured)")
    return lines


def print_frontier(frontier: dict[str, Any], console: Console | None = None) -> None:
    """The frontier table and its lines (:func:`frontier_lines`)."""
    console = console or Console(stderr=True)
    unit = "streams" if frontier.get("loop", "closed") == "closed" else "req/s"
    t = Table(title=f"frontier: tokens/s per GPU ({frontier.get('gpus', 1)} GPU) against "
              "tokens/s per user; * on the Pareto front", title_justify="left")
    for col in (unit, "user", "user p90", "out/GPU", "total/GPU", "$/1M out", "$/1M all",
                "reqs", "±out", "±TPOT", "*"):
        t.add_column(col, justify="right")
    for p in frontier.get("points") or []:
        prec = p.get("precision") or {}
        tp = (prec.get("output_throughput") or {}).get("rel_half_width")
        tq = (prec.get("tpot_p50_ms") or {}).get("rel_half_width")
        t.add_row(
            f"{p['concurrency']:g}",
            _f(p.get("interactivity")),
            _f(p.get("interactivity_p90")),
            _f(p.get("output_tok_s_per_gpu"), 0),
            _f(p.get("total_tok_s_per_gpu"), 0),
            _g(p.get("usd_per_million_output_tokens")),
            _g(p.get("usd_per_million_total_tokens")),
            str(p.get("requests") or "-"),
            "-" if tp is None else f"{tp * 100:.1f}%",
            "-" if tq is None else f"{tq * 100:.1f}%",
            "*" if p.get("pareto") else "",
        )
    console.print(t)
    for line in frontier_lines(frontier):
        console.print(line)


def print_frontiers(sweep: dict[str, Any], console: Console | None = None) -> None:
    """A sweep summary's frontier (``run --frontier``), or each configuration's frontier and
    the upper envelope (``--engine-sweep``); nothing for a plain sweep."""
    console = console or Console(stderr=True)
    if not console.is_terminal:  # a pipe or file: never squeeze or wrap the columns
        console = Console(width=200, stderr=console.stderr)
    if sweep.get("frontier"):
        print_frontier(sweep["frontier"], console)
    for f in sweep.get("frontiers") or []:  # --suite: one per member
        console.print(f"[bold]workload {f.get('workload')} ({f.get('loop')} loop)[/]")
        print_frontier(f, console)
    es = sweep.get("engine_sweep")
    if not es:
        return
    for c in es.get("configs") or []:
        console.print(f"[bold]engine configuration {c['name']}[/]")
        if c.get("frontier"):
            print_frontier(c["frontier"], console)
    t = Table(title="upper envelope over the configurations (which wins where)",
              title_justify="left")
    for col in ("configuration", "load", "user", "out/GPU", "total/GPU", "$/1M all"):
        t.add_column(col, justify="right")
    for r in es.get("envelope") or []:
        if r.get("envelope"):
            t.add_row(r["config"], f"{r['concurrency']:g}", _f(r.get("interactivity")),
                      _f(r.get("output_tok_s_per_gpu"), 0), _f(r.get("total_tok_s_per_gpu"), 0),
                      _g(r.get("usd_per_million_total_tokens")))
    console.print(t)


def frontier_problems(sweep: dict[str, Any] | None) -> list[str]:
    """What a frontier could not answer (a target no point reaches, an SLO no point meets),
    one plain sentence each; empty when it answered or none was asked."""
    if not sweep:
        return []
    return list(((sweep.get("frontier") or {}).get("problems") or [])
                + [p for f in sweep.get("frontiers") or [] for p in f.get("problems") or []]
                + ((sweep.get("engine_sweep") or {}).get("problems") or []))
