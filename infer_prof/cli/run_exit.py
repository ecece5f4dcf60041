"""How ``infer-prof run`` ends: where its files are, one line for each thing that went wrong,
and the exit code (README "Exit codes"; docs/results-and-history.md):

====  =====================================================================================
0     every point measured, written and recorded
1     the server could not start (its log tail is printed)
2     bad input, found before anything started (also: ``--output`` exists, results folder
      not writable or full)
3     the run ended early (server died, Ctrl-C, SIGTERM, SIGHUP): what was measured is
      written, marked incomplete
4     not one measured request of a point completed (every one failed), or every warm-up
      request failed, so the load was not sent
5     the result files are written but the history write failed: record them later with
      ``infer-prof history import``
6     the result files could not be written where asked (full disk, no permission): they are
      in the temporary folder named, or lost when even that failed
====  =====================================================================================

A ``--frontier`` whose ``--target-interactivity`` or ``--slo`` no point reaches exits 2 after
every point is written (the answer is the bad input). When several hold, the first in this
order wins: 6, 5, 3, 4, 2 (each still gets its line).
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

import msgspec
import typer
from rich.console import Console
from rich.markup import escape

from infer_prof.quality.check import quality_line
from infer_prof.report.console import print_summary, print_sweep
from infer_prof.report.frontier_table import frontier_problems, print_frontiers
from infer_prof.report.repeat_table import print_repeats
from infer_prof.results.failed_run import every_request_failed, warmup_failed
from infer_prof.results.schema import public_result
from infer_prof.run.record import SweepOutcome

EXIT_BAD_INPUT = 2
EXIT_INCOMPLETE = 3
EXIT_ALL_FAILED = 4
EXIT_HISTORY_FAILED = 5
EXIT_NOT_WRITTEN = 6


def print_outcome(outcome: SweepOutcome, json_output: bool, out: Console) -> None:
    """The run's numbers on stdout: each point's summary table, the sweep and the frontier
    (or, with ``--json``, one point's public result, else ``{"points": [...], "sweep": ...}``).
    A terminal that is gone (SIGHUP) changes nothing: the files are written."""
    try:
        if json_output:
            summaries = [public_result(p.document) for p in outcome.points]
            doc: Any = (
                summaries[0]
                if len(summaries) == 1 and not outcome.sweep
                else {"points": summaries, "sweep": msgspec.to_builtins(outcome.sweep)}
            )
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            for p in outcome.points:
                print_summary(p.document, out)
            print_repeats([p.document for p in outcome.points], out)  # run --repeat N
            quality = outcome.points[-1].document.quality if outcome.points else None
            if quality is not None:  # one check per run, on the last point's server
                out.print(escape(quality_line(quality)), soft_wrap=True, highlight=False)
            if outcome.sweep:
                print_sweep(outcome.sweep, out)
                print_frontiers(outcome.sweep, out)
    except OSError:
        pass


def finish_run(outcome: SweepOutcome, err: Console) -> None:
    """Print where the files are and each problem on stderr, then exit with the code above
    (return normally for 0). A terminal that is gone (SIGHUP after an SSH session closed:
    writes fail with EIO) changes nothing but the printing."""

    def say(text: str) -> None:
        with contextlib.suppress(OSError):
            err.print(text, soft_wrap=True, highlight=False)

    for p in outcome.points:
        say(f"result: {p.result_path}")
    if outcome.sweep_path:
        say(f"sweep: {outcome.sweep_path}")
    codes: list[int] = []

    def line(message: str, code: int) -> None:
        say(f"error: {escape(message)}")
        codes.append(code)

    for message in outcome.write_errors:
        line(message, EXIT_NOT_WRITTEN)
    if outcome.history_errors:
        paths = " ".join(str(p.result_path) for p in outcome.points if p.history_error)
        line(
            f"{outcome.history_errors[0]} -- the result files are kept; record them later "
            f"with: infer-prof history import {paths} --history URL",
            EXIT_HISTORY_FAILED,
        )
    warmup_failures: dict[int, str] = {}
    for i, p in enumerate(outcome.points):
        warm = warmup_failed(p.document, p.requests_path)
        if warm:
            warmup_failures[i] = warm
            line(f"{warm} (result written: {p.result_path})", EXIT_ALL_FAILED)
    reasons = [
        str(p.document.incomplete_reason)
        for i, p in enumerate(outcome.points)
        if not p.document.complete and i not in warmup_failures
    ]
    if reasons or outcome.stopped_by:
        reason = reasons[0] if reasons else "interrupted before the next load point"
        by = f" ({outcome.stopped_by})" if outcome.stopped_by else ""
        say(f"[bold red]run incomplete: {escape(reason)}{by}[/]")
        codes.append(EXIT_INCOMPLETE)
    for i, p in enumerate(outcome.points):
        if i in warmup_failures:
            continue
        failed = every_request_failed(p.document, p.requests_path)
        if failed:
            line(f"{failed} (result written: {p.result_path})", EXIT_ALL_FAILED)
    problems = frontier_problems(outcome.sweep)
    if problems:
        line("; ".join(problems), EXIT_BAD_INPUT)
    order = (EXIT_NOT_WRITTEN, EXIT_HISTORY_FAILED, EXIT_INCOMPLETE, EXIT_ALL_FAILED,
             EXIT_BAD_INPUT)
    for code in order:
        if code in codes:
            raise typer.Exit(code)
