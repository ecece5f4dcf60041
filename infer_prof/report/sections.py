"""The report's sections, each an HTML string from what the results hold and "not measured"
where they hold nothing:

1. Summary: a row per run: model, GPU, load (concurrency or request rate), requests/s, output
   tokens/s, TTFT/TPOT/ITL/E2E p50 and p99 (ms), $ per 1M output tokens (``result["cost"]``),
   joules per output token (``result["energy"]``). Numbers come from the result's summary as
   written by the run; nothing is recomputed.
2. Latency distributions: the empirical CDF of TTFT, TPOT, ITL and E2E per run, from the
   per-request records beside each result (measured, completed requests; warm-up excluded).
3. Sweeps: runs of one configuration (:func:`infer_prof.results.identity.config_fields` less
   concurrency and request rate) at two or more load levels: throughput and latency against load.
4. Cost per 1M output tokens by GPU: a bar per run.
5. Telemetry over time, per run: NVML series per GPU, and the server's /metrics gauges, on a
   time axis starting at the measured window's start (which is shaded).
6. Footer: definitions and the result files read.

The chart sections append their plots to the ``plots`` list they are given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infer_prof import __version__
from infer_prof.core.measurement.metric_table import metric_by_column, metrics_at
from infer_prof.report.html_fragments import cell, esc, figure, not_measured
from infer_prof.report.plots import bar_chart, cdf_points, line_chart
from infer_prof.report.run_data import (
    NOT_MEASURED,
    SAMPLES,
    RunData,
    cost_per_million,
    dist,
    gpu_label,
    joules_per_token,
    load_of,
    load_text,
    model_label,
    num,
    samples_ms,
    sweep_groups,
)
from infer_prof.report.svg import PALETTE, Axis, Marks, Plot, Series, fmt_number, safe_name
from infer_prof.results.document import Result
from infer_prof.results.identity import readable_name
from infer_prof.results.server_sections import (
    GpuTelemetry,
    ServerMetrics,
    Telemetry,
    TelemetryWindow,
)

GIB = 2**30


def _count(n: int | None) -> str:
    return "?" if n is None else str(n)


def _status_badges(r: Result) -> str:
    """Badges for a run whose numbers do not hold: "incomplete" and "invalid", each with its
    reason beside it and in full on hover (title)."""
    out = []
    if not r.complete:
        why = str(r.incomplete_reason or "reason not recorded")
        out.append(
            f'<span class="badge incomplete" title="incomplete: {esc(why)}">'
            f"incomplete: {esc(why)}</span>"
        )
    validity = r.validity
    if validity is not None and not validity.valid:
        why = "; ".join(str(x) for x in validity.reasons) or "reason not recorded"
        out.append(
            f'<span class="badge invalid" title="invalid: {esc(why)}">invalid: {esc(why)}</span>'
        )
    return "".join(out)


def summary_section(runs: Sequence[RunData], names: Sequence[str]) -> str:
    """Section 1: the summary table, a row per run named by ``names``."""
    lat = metrics_at("report", "latency")  # the metric table's report place
    head1 = (
        '<tr><th rowspan="2">run</th><th rowspan="2">model</th><th rowspan="2">GPU</th>'
        '<th rowspan="2">load</th><th rowspan="2">requests<br>ok / failed</th>'
        '<th rowspan="2">requests/s</th><th rowspan="2">output<br>tokens/s</th>'
        + "".join(f'<th colspan="{len(m.shows["report"].stats)}">{m.name} ({m.unit})</th>'
                  for m in lat)
        + '<th rowspan="2">$ per 1M<br>output tokens</th>'
        '<th rowspan="2">J per<br>output token</th></tr>'
    )
    head2 = "<tr>" + "".join(f"<th>{st}</th>" for m in lat for st in m.shows["report"].stats)
    head2 += "</tr>"
    rows = []
    for run, name in zip(runs, names, strict=True):
        r = run.result
        s = r.summary
        labels = r.labels
        badge = _status_badges(r)
        lab = (
            '<div class="labels">'
            + esc(", ".join(f"{k}={v}" for k, v in labels.items()))
            + "</div>"
            if labels
            else ""
        )
        cells = [
            f'<td class="wrap" title="{esc(run.source)}">{esc(readable_name(r) or name)}{badge}'
            f"{lab}</td>",
            f"<td>{esc(model_label(r))}</td>",
            f'<td class="wrap">{esc(gpu_label(r))}</td>',
            f"<td>{esc(load_text(r))}</td>",
            f'<td class="num">{esc(_count(s.requests_completed))} / '
            f"{esc(_count(s.requests_failed))}</td>",
            cell(num(s.request_throughput)),
            cell(num(s.output_throughput)),
        ]
        for m in lat:
            cells.extend(cell(dist(r, m.key, st)) for st in m.shows["report"].stats)
        cells.append(cell(cost_per_million(r), str((r.cost and r.cost.reason) or "")))
        cells.append(cell(joules_per_token(r), str((r.energy and r.energy.reason) or "")))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    method = next(
        (run.result.summary.percentile_method for run in runs
         if run.result.summary.percentile_method),
        None,
    )
    note = (
        "Latencies over measured, completed requests (warm-up excluded); throughputs over the "
        "measured window (a closed loop's: over its streams' mean span). Percentiles: "
        + esc(method or "as the run recorded them") + ". "
        "Hover a $ or J cell that reads “not measured” for the reason."
    )
    return (
        '<section id="summary"><h2>Summary</h2>'
        f'<p class="note">{note}</p>'
        f'<div class="table-wrap"><table><thead>{head1}{head2}</thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def latency_section(runs: Sequence[RunData], names: Sequence[str], plots: list[Plot]) -> str:
    """Section 2: the latency CDFs (TTFT, TPOT, ITL, E2E) over the runs' records."""
    parts = ['<section id="latency"><h2>Latency distributions</h2>']
    parts.append(
        '<p class="note">Empirical CDFs from the per-request records: the share of samples '
        "(measured, completed requests) at or below each latency. ITL pools the gaps between "
        "token-carrying chunks of every request.</p>"
    )
    missing = [(n, r.records_note) for r, n in zip(runs, names, strict=True) if r.records is None]
    for n, note in missing:
        parts.append(not_measured(f"latency distributions of {n}", note))
    have = [(r, n) for r, n in zip(runs, names, strict=True) if r.records is not None]
    figs = []
    if have:
        for key, title, _ in SAMPLES:
            series = []
            all_vals: list[float] = []
            for run, name in have:
                assert run.records is not None
                vals = samples_ms(run.records, key)
                all_vals.extend(vals)
                xs, ys = cdf_points(vals)
                series.append(Series(name, xs, ys))
            positive = [v for v in all_vals if v > 0]
            log = (
                bool(positive)
                and len(positive) == len(all_vals)
                and (max(positive) / min(positive) > 100)
            )
            empty = [s.name for s in series if not s.x]
            note = f"no samples: {', '.join(empty)}" if empty and len(empty) < len(series) else None
            plot = line_chart(
                f"cdf_{key}",
                f"{title} CDF",
                series,
                Axis(f"{title} (ms)", log=log),
                Axis(f"{metric_by_column(key).sample_noun} at or below (%)", lo=0, hi=100),
                marks=Marks(hlines=((50.0, "p50"), (99.0, "p99")), note=note),
            )
            plots.append(plot)
            figs.append(figure(plot))
    parts.append(f'<div class="plots">{"".join(figs)}</div></section>')
    return "".join(parts)


def sweep_section(runs: Sequence[RunData], plots: list[Plot]) -> str:
    """Section 3: throughput and latency against load, per sweep."""
    parts = ['<section id="sweeps"><h2>Throughput and latency against load</h2>']
    groups = sweep_groups(runs)
    if not groups:
        parts.append(
            not_measured(
                "no sweep among these results",
                "a sweep is two or more runs of one configuration (model, GPU, precision, "
                "workload, lengths) at different concurrency levels or request rates",
            )
        )
        return "".join(parts) + "</section>"
    for kind in ("concurrency", "rate"):
        kg = [g for g in groups if g[1] == kind]
        if not kg:
            continue
        x_label = (
            "concurrency (requests in flight)"
            if kind == "concurrency"
            else "request rate offered (requests/s)"
        )
        loads = [load_of(m.result)[1] or 0.0 for _, _, ms in kg for m in ms]
        xlog = min(loads) > 0 and max(loads) / min(loads) >= 8
        what = "concurrency" if kind == "concurrency" else "request rate"
        figs = []
        charts: list[tuple[str, str, str, list[tuple[str, str]]]] = [
            (
                "throughput",
                f"Output throughput vs {what}",
                "output throughput (tokens/s)",
                [("output_throughput", "")],
            ),
            (
                "req_throughput",
                f"Request throughput vs {what}",
                "completed requests/s",
                [("request_throughput", "")],
            ),
        ]
        charts += [  # the metric table's sweep place
            (m.column, f"{m.title or m.name} vs {what}", f"{m.title or m.name} ({m.unit})",
             [(f"{m.key}.{st}", st) for st in m.shows["sweep"].stats])
            for m in metrics_at("sweep", "latency")
        ]
        for cname, title, ylabel, metrics in charts:
            series = []
            for gi, (glabel, _, members) in enumerate(kg):
                color = PALETTE[gi % len(PALETTE)]
                xs = [load_of(m.result)[1] for m in members]
                for mi, (path, stat) in enumerate(metrics):
                    if "." in path:
                        metric, st = path.split(".")
                        ys = [dist(m.result, metric, st) for m in members]
                    else:
                        ys = [num(getattr(m.result.summary, path)) for m in members]
                    name = glabel + (f" {stat}" if stat else "")
                    series.append(Series(name, xs, ys, color=color, dashed=mi > 0, markers=True))
            plot = line_chart(
                f"sweep_{kind}_{cname}",
                title,
                series,
                Axis(x_label, log=xlog, ticks=tuple(sorted(set(loads)))),
                Axis(ylabel, zero=True),
            )
            plots.append(plot)
            figs.append(figure(plot))
        parts.append(f'<div class="plots">{"".join(figs)}</div>')
    return "".join(parts) + "</section>"


def cost_section(runs: Sequence[RunData], plots: list[Plot]) -> str:
    """Section 4: cost per 1M output tokens, a bar per run coloured by GPU."""
    parts = ['<section id="cost"><h2>Cost per 1M output tokens by GPU</h2>']
    if not any(r.result.cost is not None for r in runs):
        parts.append(not_measured("no result has a cost block", "no price applied to the runs"))
        return "".join(parts) + "</section>"
    if all(cost_per_million(r.result) is None for r in runs):
        reasons = sorted(
            {str((r.result.cost and r.result.cost.reason) or "") for r in runs} - {""}
        )
        parts.append(not_measured("no run has a cost per 1M tokens", "; ".join(reasons) or None))
        return "".join(parts) + "</section>"
    order = sorted(
        range(len(runs)),
        key=lambda i: (
            gpu_label(runs[i].result),
            model_label(runs[i].result),
            load_of(runs[i].result)[1] or 0.0,
        ),
    )
    gpus = sorted({gpu_label(r.result) for r in runs})
    gcolor = {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(gpus)}
    labels = [
        f"{gpu_label(runs[i].result, short=True)} · {model_label(runs[i].result)} · "
        f"{load_text(runs[i].result)}"
        for i in order
    ]
    values = [cost_per_million(runs[i].result) for i in order]
    colors = [gcolor[gpu_label(runs[i].result)] for i in order]
    prices = []
    for i in order:
        c = runs[i].result.cost
        if c is not None and num(c.usd_per_gpu_hour) is not None:
            src = (c.price and (c.price.provider or c.price.source)) or ""
            prices.append(
                f"{gpu_label(runs[i].result)}: ${fmt_number(c.usd_per_gpu_hour)}/GPU-hour"
                + (f" ({src})" if src else "")
            )
    plot = bar_chart(
        "cost_per_million",
        "Cost per 1M output tokens",
        labels,
        values,
        Axis("USD per 1M output tokens"),
        colors=colors,
    )
    plots.append(plot)
    parts.append(
        '<p class="note">USD per 1M output tokens = price per hour × GPUs / (output tokens/s × '
        "3600) × 10<sup>6</sup>, at each run's measured output throughput. Prices: "
        + esc("; ".join(dict.fromkeys(prices)) or NOT_MEASURED)
        + ".</p>"
    )
    parts.append(f'<div class="plots">{figure(plot)}</div>')
    return "".join(parts) + "</section>"


# (series key, chart title, y label, scale, y axis) for NVML series.
_GPU_CHARTS: tuple[tuple[str, str, str, float, Axis], ...] = (
    ("util_pct", "GPU utilization", "utilization (%)", 1.0, Axis("", lo=0, hi=100)),
    ("power_w", "GPU power", "power (W)", 1.0, Axis("", zero=True)),
    ("mem_used_bytes", "GPU memory used", "memory used (GiB)", 1.0 / GIB, Axis("", zero=True)),
    ("sm_clock_mhz", "SM clock", "SM clock (MHz)", 1.0, Axis("", zero=True)),
    ("temp_c", "GPU temperature", "temperature (°C)", 1.0, Axis("")),
)


def _scaled(values: Sequence[Any], factor: float) -> list[float | None]:
    return [None if (v := num(x)) is None else v * factor for x in values]


def _time_axis(
    window: TelemetryWindow | None,
) -> tuple[float, str, tuple[float, float, str] | None]:
    """(origin in the block's t_s, x label, measured-window band) for a telemetry block's
    measured window."""
    win = window or TelemetryWindow()
    start, end = num(win.start_s), num(win.end_s)
    if start is None:
        return 0.0, "time since telemetry start (s)", None
    band = (0.0, end - start, "measured window") if end is not None else None
    return start, "time since the measured window began (s)", band


def telemetry_section(runs: Sequence[RunData], names: Sequence[str], plots: list[Plot]) -> str:
    """Section 5: NVML and server /metrics series over time, per run."""
    parts = [
        '<section id="telemetry"><h2>Telemetry over time</h2>',
        '<p class="note">Time 0 is the start of the measured window (shaded); samples '
        "before it are warm-up. Gaps are samples that could not be read.</p>",
    ]
    stems: set[str] = set()
    for ri, (run, name) in enumerate(zip(runs, names, strict=True)):
        tel = run.result.telemetry or Telemetry()
        stem = safe_name(readable_name(run.result) or f"run{ri}")
        stem = stem if stem not in stems else f"{stem}_{ri}"  # plot names stay unique
        stems.add(stem)
        parts.append(
            f'<h3>{esc(name)} <span class="labels">{esc(readable_name(run.result))}</span></h3>'
        )
        gpu_plots, gpu_notes = _gpu_plots(tel.gpu or GpuTelemetry(), stem, name)
        server_plots, server_notes = _server_plots(tel.server_metrics or ServerMetrics(), stem,
                                                   name)
        run_plots = gpu_plots + server_plots
        plots.extend(run_plots)
        parts.extend(gpu_notes + server_notes)
        if run_plots:
            parts.append(f'<div class="plots">{"".join(figure(p) for p in run_plots)}</div>')
    return "".join(parts) + "</section>"


def _gpu_plots(gpu: GpuTelemetry, stem: str, name: str) -> tuple[list[Plot], list[str]]:
    """One run's NVML charts (one series per GPU; power with its limit when all GPUs share one),
    and the not-measured notes for the rest."""
    gpus = gpu.gpus
    if not gpu.available or not gpus:
        return [], [not_measured("GPU telemetry", gpu.reason or "no NVML samples")]
    origin, xlabel, band = _time_axis(gpu.window)
    plots: list[Plot] = []
    absent = []
    for key, title, ylabel, factor, yaxis in _GPU_CHARTS:
        series = []
        for g in gpus:
            ser = g.series
            t = [None if (v := num(x)) is None else v - origin for x in ser.get("t_s", [])]
            ys = _scaled(ser.get(key) or [None] * len(t), factor)
            if len(ys) != len(t):
                ys = [None] * len(t)
            index = "?" if g.index is None else g.index
            series.append(Series(f"GPU {index}: {g.name or ''}", t, ys))
        if not any(v is not None for s in series for v in s.y):
            absent.append(title)
            continue
        hl: list[tuple[float, str]] = []
        limits = {num(g.power_limit_w) for g in gpus}
        if key == "power_w" and len(limits) == 1 and None not in limits:
            (lim,) = limits
            assert lim is not None
            hl.append((lim, f"power limit {fmt_number(lim)} W"))
        plots.append(line_chart(
            f"telemetry_{stem}_{key}",
            f"{title} — {name}",
            series,
            Axis(xlabel),
            Axis(ylabel, zero=yaxis.zero, lo=yaxis.lo, hi=yaxis.hi),
            height=300,
            marks=Marks(band=band, hlines=hl),
        ))
    notes = [not_measured(", ".join(absent), "the GPU did not report it")] if absent else []
    return plots, notes


def _server_plots(sm: ServerMetrics, stem: str, name: str) -> tuple[list[Plot], list[str]]:
    """One run's server /metrics charts (KV cache usage; running and waiting requests), and the
    not-measured notes for the rest."""
    ser = sm.series
    if not sm.available or not ser.get("t_s"):
        return [], [not_measured("server metrics", sm.reason or "no /metrics scrape")]
    origin, xlabel, band = _time_axis(sm.window)
    t = [None if (v := num(x)) is None else v - origin for x in ser["t_s"]]
    kv = _scaled(ser.get("kv_cache_usage_perc") or [None] * len(t), 100.0)
    charts = [
        (
            "kv_cache",
            "KV cache usage",
            Axis("KV cache used (%)", lo=0, hi=100),
            [Series("KV cache used", t, kv)],
        ),
        (
            "requests",
            "Requests in the server",
            Axis("requests", zero=True, integer=True),
            [
                Series("running", t, _scaled(ser.get("running") or [None] * len(t), 1.0)),
                Series("waiting", t, _scaled(ser.get("waiting") or [None] * len(t), 1.0)),
            ],
        ),
    ]
    plots: list[Plot] = []
    absent = []
    for key, title, yaxis, series in charts:
        if not any(v is not None for s in series for v in s.y):
            absent.append(title)
            continue
        plots.append(line_chart(
            f"telemetry_{stem}_{key}",
            f"{title} — {name}",
            series,
            Axis(xlabel),
            yaxis,
            height=300,
            marks=Marks(band=band),
        ))
    notes = [not_measured(", ".join(absent), "the server's /metrics lacked it")] if absent else []
    return plots, notes


def footer(runs: Sequence[RunData]) -> str:
    """The page footer: metric definitions and the result files read."""
    srcs = "".join(
        f"<li><code>{esc(r.source or r.result.run_id)}</code>"
        + (f" — {esc(r.records_note)}" if r.records_note else "")
        + "</li>"
        for r in runs
    )
    return (
        "<footer><p><b>Definitions.</b> TTFT = first token-carrying chunk − request sent. "
        "E2E = last token-carrying chunk − request sent. TPOT = (E2E − TTFT) / (output tokens − 1)."
        " ITL = gaps between token-carrying chunks (a chunk of k tokens counts k gaps of gap/k). "
        "Token counts are the server's usage figures. “not measured” means the run has no value "
        "for it, never zero.</p>"
        f"<p><b>Sources.</b></p><ul>{srcs}</ul>"
        f"<p>infer-prof {esc(__version__)}</p></footer>"
    )
