"""The console view of a ``run --frontier``: one row per point (Pareto points marked), why it
stopped, and the answer at the target interactivity or SLO."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from infer_prof.report.fit import print_fitted
from infer_prof.results.frontier_sections import Frontier
from infer_prof.results.sweep_document import Sweep


def _f(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def frontier_lines(frontier: Frontier) -> list[str]:
    """The lines under the table: why it stopped, and the answer (or why there is none)."""
    lines = [f"stopped: {frontier.stopped_because}"]
    a = frontier.at_target
    target = frontier.target
    if a:
        how = ("interpolated between {:g} and {:g}".format(*sorted(a.between))
               if a.interpolated and a.between else "measured")
        cost = ("no price given" if a.usd_per_million_output_tokens is None else
                f"${a.usd_per_million_output_tokens:.4g}/1M output, "
                f"${a.usd_per_million_total_tokens:.4g}/1M total")
        lines.append(
            f"at {a.interactivity:.1f} tok/s/user: {_f(a.total_tok_s_per_gpu)} total and "
            f"{_f(a.output_tok_s_per_gpu)} output tok/s/GPU, {cost} ({how})"
        )
    elif target is not None and target.interactivity is not None:
        lo, hi = target.front_interactivity or [None, None]
        lines.append(f"target {target.interactivity:g} tok/s/user not on the measured front "
                     f"({_f(lo)}-{_f(hi)} tok/s/user): not extrapolated")
    s = frontier.at_slo
    if s and a != s:
        slo = target.slo if target else None
        lines.append(f"best point meeting {slo}: {s.interactivity:.1f} "
                     f"tok/s/user, {_f(s.total_tok_s_per_gpu)} total tok/s/GPU (measured)")
    return lines


def print_frontier(frontier: Frontier, console: Console | None = None) -> None:
    """The frontier table and its lines (:func:`frontier_lines`)."""
    console = console or Console(stderr=True)
    unit = "streams" if (frontier.loop or "closed") == "closed" else "req/s"
    gpus = frontier.gpus if frontier.gpus is not None else 1
    t = Table(title=f"frontier: tokens/s per GPU ({gpus} GPU) against "
              "tokens/s per user; * on the Pareto front", title_justify="left")
    for col in (unit, "user", "user p90", "out/GPU", "total/GPU", "$/1M out", "$/1M all",
                "reqs", "±out", "±TPOT", "*"):
        t.add_column(col, justify="right")
    for p in frontier.points:
        prec = p.precision
        out_ci = prec.output_throughput if prec else None
        tpot_ci = prec.tpot_p50_ms if prec else None
        tp = out_ci.rel_half_width if out_ci else None
        tq = tpot_ci.rel_half_width if tpot_ci else None
        t.add_row(
            f"{p.concurrency:g}",
            _f(p.interactivity),
            _f(p.interactivity_p90),
            _f(p.output_tok_s_per_gpu, 0),
            _f(p.total_tok_s_per_gpu, 0),
            _g(p.usd_per_million_output_tokens),
            _g(p.usd_per_million_total_tokens),
            str(p.requests or "-"),
            "-" if tp is None else f"{tp * 100:.1f}%",
            "-" if tq is None else f"{tq * 100:.1f}%",
            "*" if p.pareto else "",
        )
    print_fitted(console, t, ("±TPOT", "±out", "reqs", "$/1M all", "user p90"), more="the "
                 "sweep file")
    for line in frontier_lines(frontier):
        console.print(line)


def print_frontiers(sweep: Sweep, console: Console | None = None) -> None:
    """A sweep summary's frontier (``run --frontier``), or each configuration's frontier and
    the upper envelope (``--engine-sweep``); nothing for a plain sweep."""
    console = console or Console(stderr=True)
    if sweep.frontier:
        print_frontier(sweep.frontier, console)
    for f in sweep.frontiers or []:  # --suite: one per member
        console.print(f"[bold]workload {f.workload} ({f.loop} loop)[/]")
        print_frontier(f, console)
    es = sweep.engine_sweep
    if not es:
        return
    for c in es.configs:
        console.print(f"[bold]engine configuration {c.name}[/]")
        if c.frontier:
            print_frontier(c.frontier, console)
    t = Table(title="upper envelope over the configurations (which wins where)",
              title_justify="left")
    for col in ("configuration", "load", "user", "out/GPU", "total/GPU", "$/1M all"):
        t.add_column(col, justify="right")
    for r in es.envelope:
        if r.envelope:
            t.add_row(r.config, f"{r.concurrency:g}", _f(r.interactivity),
                      _f(r.output_tok_s_per_gpu, 0), _f(r.total_tok_s_per_gpu, 0),
                      _g(r.usd_per_million_total_tokens))
    print_fitted(console, t)


def frontier_problems(sweep: Sweep | None) -> list[str]:
    """What a frontier could not answer (a target no point reaches, an SLO no point meets),
    one plain sentence each; empty when it answered or none was asked."""
    if not sweep:
        return []
    return list((sweep.frontier.problems if sweep.frontier else [])
                + [p for f in sweep.frontiers or [] for p in f.problems]
                + (sweep.engine_sweep.problems if sweep.engine_sweep else []))
