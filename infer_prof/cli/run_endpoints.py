"""``infer-prof run`` with several endpoints (repeated ``--endpoint`` or ``--endpoints FILE``):
the options paired into endpoints, the runs, the closing table and the exit code.

Exit code: 0 when at least one endpoint gave a complete run; 1 when every endpoint failed
(none reached, or each died mid-run); 3 when Ctrl-C stopped the runs; 2 for bad input, before
anything is sent.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infer_prof.cli.common import fail
from infer_prof.core.measurement.metric_table import columns_at
from infer_prof.report.console import fmt_value
from infer_prof.report.repeat_table import print_repeats
from infer_prof.run.config import ConfigError, RunConfig
from infer_prof.run.multi_endpoint import (
    EndpointTarget,
    check_targets,
    load_endpoints_file,
    pair_targets,
    run_endpoints,
)


def endpoint_targets(
    endpoints: list[str] | None,
    gpus: list[str] | None,
    counts: list[int] | None,
    prices: list[float] | None,
    labels: list[str] | None,
    endpoints_file: str | None,
) -> list[EndpointTarget] | None:
    """The endpoints of a several-endpoint run, or None for an ordinary run (one endpoint or
    none, no file). Bad pairing or a bad file: one-line error, exit 2."""
    endpoints, gpus, counts = endpoints or [], gpus or [], counts or []
    prices, labels = prices or [], labels or []
    try:
        if endpoints_file:
            given = [f for f, v in (("--endpoint", endpoints), ("--gpu", gpus), ("--gpus", counts),
                                    ("--price-per-hour", prices), ("--endpoint-label", labels))
                     if v]
            if given:
                raise ConfigError(
                    f"--endpoints {endpoints_file} lists the endpoints with their GPU and price; "
                    f"drop {given[0]} (or put it in the file)"
                )
            return load_endpoints_file(endpoints_file)
        if len(endpoints) > 1:
            return pair_targets(endpoints, gpus, counts, prices, labels)
    except ConfigError as exc:
        fail(str(exc))
    if labels:
        fail("--endpoint-label names each of several --endpoint; with one, use --label KEY=VALUE")
    for flag, values in (("--gpu", gpus), ("--gpus", counts), ("--price-per-hour", prices)):
        if len(values) > 1:
            fail(f"{flag} is given {len(values)} times for one endpoint; give it once per "
                 "--endpoint")
    return None


def run_many(cfg: RunConfig, targets: list[EndpointTarget], json_output: bool) -> None:
    """Profile each endpoint in turn and print the table (JSON on stdout with ``--json``)."""
    try:
        check_targets(cfg, targets)
    except ConfigError as exc:
        fail(str(exc))
    err = Console(stderr=True)

    def announce(i: int, t: EndpointTarget) -> None:
        gpu = f" ({t.gpu_count or 1} x {t.gpu})" if t.gpu else ""
        err.print(f"[bold]endpoint {i + 1}/{len(targets)}: {escape(str(t.label))}[/] "
                  f"{escape(t.url)}{escape(gpu)}")

    try:
        outcome = run_endpoints(cfg, targets, announce)
    except ConfigError as exc:
        fail(str(exc))
    if json_output:
        doc: dict[str, Any] = json.loads(outcome.json_path.read_text())
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        out = Console(stderr=False)
        if not out.is_terminal:
            out = Console(width=400)  # a pipe or file: never squeeze or wrap the columns
        out.print(endpoints_table(outcome.rows))
        print_repeats([r for run in outcome.runs for r, _ in run.results], out)  # --repeat N
    for run in outcome.runs:
        for _, path in run.results:
            err.print(f"result: {path}", soft_wrap=True)
    for sweep in outcome.sweep_paths or []:
        err.print(f"sweep: {sweep}", soft_wrap=True)
    err.print(f"table: {outcome.json_path} {outcome.csv_path}", soft_wrap=True)
    for e in outcome.history_errors or []:
        err.print(f"warning: not recorded in the history: {e}")
    if outcome.interrupted:
        err.print("[bold red]interrupted: the endpoints after it were not run[/]")
        raise typer.Exit(3)
    if outcome.succeeded == 0:
        err.print("[bold red]every endpoint failed (see the status column)[/]")
        raise typer.Exit(1)
    failed = len(outcome.runs) - outcome.succeeded
    if failed:
        err.print(f"[yellow]{failed} of {len(outcome.runs)} endpoints failed (see the status "
                  "column)[/]")


#: (row key, header, decimals; None for text): the metric columns are the metric table's
#: ``endpoints`` place.
HEADERS: tuple[tuple[str, str, int | None], ...] = (
    ("endpoint", "endpoint", None),
    ("gpu", "GPU", None),
    ("workload", "workload", None),
    ("load", "load", None),
    ("status", "status", None),
    *((c.key, c.label, c.digits) for c in columns_at("endpoints")),
    ("price_source", "price from", None),
)


def endpoints_table(rows: list[dict[str, Any]]) -> Table:
    """The closing table: latencies in ms, cheapest $/1M marked with ``*``."""
    t = Table(box=box.SIMPLE_HEAVY, caption="latencies in ms; * cheapest per 1M tokens; "
              "n/a: not measured or no price", caption_justify="left")
    named = any(r.get("workload") not in (None, "custom") for r in rows)  # a suite, a file
    headers = [h for h in HEADERS if named or h[0] != "workload"]
    for _key, header, digits in headers:
        t.add_column(header, justify="left" if digits is None else "right", no_wrap=True)
    for row in rows:
        cells = []
        for key, _, digits in headers:
            v = row.get(key)
            if key == "gpu" and v and (row.get("gpu_count") or 1) > 1:
                v = f"{row['gpu_count']} x {v}"
            text = escape(fmt_value(v, digits) if digits is not None else str(v or "n/a"))
            if key == "price_source" and v is None:
                text = ""
            if key == "status" and v != "ok":
                text = f"[bold red]{escape(short_status(str(v)))}[/bold red]"
            if (key == "usd_per_1m_output" and row.get("cheapest_output")) or (
                key == "usd_per_1m_total" and row.get("cheapest_total")
            ):
                text = f"[bold green]{text} *[/bold green]"
            cells.append(text)
        t.add_row(*cells)
    notes = [f"{r['endpoint']} {r['load'] or ''}: {r['status']}".replace(" :", ":")
             for r in rows if r["status"] != "ok"]
    notes += [f"no price for {r['endpoint']}: {r['cost_reason']}"
              for r in rows if r["status"] == "ok" and r.get("cost_reason")]
    if notes:
        t.caption = str(t.caption) + "".join(f"\n{escape(n)}" for n in notes)
    return t


def short_status(status: str) -> str:
    """The status for the table's column: ``failed``, ``incomplete: <why>`` or ``invalid:
    <rule names>`` (the whole text is in the caption, the JSON and the CSV)."""
    kind, _, rest = status.partition(": ")
    if kind in ("failed", "not run"):
        return kind
    if kind == "invalid":
        names = [part.split(":")[0].strip() for part in rest.split("; ")]
        return f"invalid: {', '.join(names)}"
    return status if len(status) <= 40 else status[:39] + "~"
