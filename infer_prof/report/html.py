"""The HTML report page: one self-contained file (inline CSS and SVG, no script, no network)
that puts the sections of :mod:`infer_prof.report.sections` under a header with the runs'
models and hardware.

:func:`build_report` is pure (dicts and records in, text out);
:func:`infer_prof.report.run_data.load_run` reads files.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

from infer_prof.core.analysis.frontier_compare import Curve
from infer_prof.report.frontier_section import frontier_section
from infer_prof.report.html_fragments import esc
from infer_prof.report.lora_section import lora_section
from infer_prof.report.quality_section import quality_section
from infer_prof.report.run_data import RunData, gpu_label, model_label, run_names
from infer_prof.report.sections import (
    cost_section,
    footer,
    latency_section,
    summary_section,
    sweep_section,
    telemetry_section,
)
from infer_prof.report.serving_state import serving_section
from infer_prof.report.svg import Plot


@dataclass(frozen=True)
class Report:
    """The report's HTML text and its plots (for PNG output)."""

    html: str
    plots: list[Plot] = field(default_factory=list)


_CSS = """
:root{--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--bg2:#f6f8fa;--accent:#4e79a7}
*{box-sizing:border-box}
body{margin:0;font-family:system-ui,-apple-system,"Segoe UI","DejaVu Sans",Helvetica,Arial,
 sans-serif;color:var(--fg);background:#fff;font-size:14px;line-height:1.45}
header{padding:20px 32px 12px;border-bottom:1px solid var(--line);background:var(--bg2)}
header h1{margin:0 0 4px;font-size:22px}
header p{margin:2px 0;color:var(--muted)}
nav{margin-top:8px}
nav a{margin-right:14px;color:var(--accent);text-decoration:none;font-weight:600}
main{padding:8px 32px 32px;max-width:1560px}
h2{margin:28px 0 6px;font-size:18px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{margin:18px 0 6px;font-size:15px}
p.note{color:var(--muted);margin:4px 0 10px;max-width:1100px}
.table-wrap{overflow-x:auto;border:1px solid var(--line);border-radius:6px}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{padding:5px 9px;border-bottom:1px solid #eaeef2;white-space:nowrap}
th{background:var(--bg2);text-align:center;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tbody tr:nth-child(even){background:#fbfcfd}
.nm{color:#8c959f;font-style:italic;font-size:12px}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:11px;
 background:#fff1e5;color:#9a4d00;border:1px solid #f0c08a;margin-left:4px}
.badge.invalid{background:#ffebe9;color:#a40e26;border-color:#ff8182}
.labels{color:var(--muted);font-size:11px}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:14px;
 align-items:start}
figure{margin:0;border:1px solid var(--line);border-radius:6px;padding:4px;background:#fff;
 min-width:0}
figure svg{display:block;width:100%;height:auto}
td.wrap{white-space:normal;min-width:110px;max-width:230px}
code{background:var(--bg2);padding:0 3px;border-radius:3px}
footer{padding:16px 32px;color:var(--muted);border-top:1px solid var(--line);font-size:12px}
footer li{margin:2px 0}
"""


def build_report(
    runs: Sequence[RunData],
    *,
    title: str = "infer-prof report",
    generated_at: str | None = None,
    target_interactivity: float | None = None,
    predicted: Sequence[Curve] = (),
) -> Report:
    """The report over ``runs`` (in the order given): one HTML document and its plots;
    ``target_interactivity`` (tokens/s per user) is marked on the frontier charts, and
    ``predicted`` frontiers (``infer-prof estimate``'s) drawn on them dashed."""
    if not runs:
        raise ValueError("a report needs at least one run")
    when = generated_at or dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    names = run_names(runs)
    plots: list[Plot] = []
    body = [
        summary_section(runs, names),
        serving_section(runs, names),  # empty when no run recorded the server's state
        latency_section(runs, names, plots),
        lora_section(runs, names),  # empty when no run spread its requests over LoRA adapters
        sweep_section(runs, plots),
        frontier_section(runs, plots, target_interactivity, predicted),
        cost_section(runs, plots),
        quality := quality_section(runs, plots),  # empty when no run measured quality
        telemetry_section(runs, names, plots),
    ]
    models = sorted({model_label(r.result) for r in runs})
    gpus = sorted({gpu_label(r.result) for r in runs})
    doc = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{esc(title)}</h1>"
        f"<p>{len(runs)} run{'s' if len(runs) != 1 else ''} · models: {esc(', '.join(models))} · "
        f"hardware: {esc(', '.join(gpus))} · generated {esc(when)}</p>"
        '<nav><a href="#summary">Summary</a><a href="#latency">Latency</a>'
        '<a href="#sweeps">Sweeps</a><a href="#frontier">Frontier</a><a href="#cost">Cost</a>'
        + ('<a href="#quality">Quality</a>' if quality else "")
        + '<a href="#telemetry">Telemetry</a></nav></header>'
        f"<main>{''.join(body)}</main>{footer(runs)}</body></html>\n"
    )
    return Report(doc, plots)
