"""The HTML report: one self-contained file (inline CSS and SVG, no script, no network).

Sections, each from what the results hold and "not measured" where they hold nothing:

1. Summary: a row per run: model, GPU, load (concurrency or request rate), requests/s, output
   tokens/s, TTFT/TPOT/ITL/E2E p50 and p99 (ms), $ per 1M output tokens (``result["cost"]``),
   joules per output token (``result["energy"]``). Numbers come from the result's summary as
   written by the run; nothing is recomputed.
2. Latency distributions: the empirical CDF of TTFT, TPOT, ITL and E2E per run, from the
   per-request records beside each result (measured, completed requests; warm-up excluded).
3. Sweeps: runs of one configuration (:func:`infer_prof.results.loading.config_fields` less
   concurrency and request rate) at two or more load levels: throughput and latency against load.
4. Cost per 1M output tokens by GPU: a bar per run.
5. Telemetry over time, per run: NVML series per GPU, and the server's /metrics gauges, on a
   time axis starting at the measured window's start (which is shaded).

:func:`build_report` is pure (dicts and records in, text out); :func:`load_run` reads files.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infer_prof import __version__
from infer_prof.core.metrics import NS_PER_MS, RequestRecord, e2e_ns, itl_ns, tpot_ns, ttft_ns
from infer_prof.report.plots import bar_chart, cdf_points, line_chart
from infer_prof.report.svg import PALETTE, Axis, Plot, Series, fmt_number, safe_name
from infer_prof.results.loading import config_fields, load_request_records, requests_path
from infer_prof.results.schema import load_result

NOT_MEASURED = "not measured"
GIB = 2**30


@dataclass
class RunData:
    """One run for the report: its result dict, where it came from, and its per-request records
    (``None`` when the requests file is missing; ``records_note`` says why)."""

    result: dict[str, Any]
    source: str = ""
    records: list[RequestRecord] | None = None
    records_note: str | None = None


@dataclass(frozen=True)
class Report:
    """The report's HTML text and its plots (for PNG output)."""

    html: str
    plots: list[Plot] = field(default_factory=list)


def load_run(path: str | Path) -> RunData:
    """Read a result file and the per-request records beside it (missing records are noted,
    not an error: the summary still reports)."""
    result = load_result(path)
    records = load_request_records(path, result)
    note = None
    if records is None:
        note = f"per-request records not found ({requests_path(path, result)})"
    return RunData(result, str(path), records, note)


# --------------------------------------------------------------------------- reading results


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _num(value: Any) -> float | None:
    """A finite number, else None (strings, NaN, missing)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def gpu_label(result: Mapping[str, Any], short: bool = False) -> str:
    """The GPU a run is priced and compared as: the catalog key the run resolved
    (``result["gpu"]["key"]``), else the NVML name, else ``CPU (<model>)`` (``CPU`` when
    ``short``); ``" x N"`` for several GPUs."""
    gpu = _d(result.get("gpu"))
    env = _d(result.get("environment"))
    name = gpu.get("key") or env.get("gpu_name")
    count = gpu.get("count") or env.get("gpu_count") or 1
    if not name:
        cpu = env.get("cpu")
        return f"CPU ({cpu})" if cpu and not short else "CPU"
    return f"{name} x {count}" if isinstance(count, int) and count > 1 else str(name)


def model_label(result: Mapping[str, Any]) -> str:
    return str(_d(result.get("model")).get("name") or _d(result.get("config")).get("model") or "?")


def load_of(result: Mapping[str, Any]) -> tuple[str, float | None]:
    """("rate", requests/s offered) for an open-loop run, else ("concurrency", streams)."""
    cfg = _d(result.get("config"))
    rate = _num(cfg.get("request_rate"))
    if rate is not None:
        return "rate", rate
    return "concurrency", _num(cfg.get("concurrency"))


def load_text(result: Mapping[str, Any]) -> str:
    kind, value = load_of(result)
    if value is None:
        return NOT_MEASURED
    return f"{fmt_number(value)} req/s" if kind == "rate" else f"c={value:g}"


def run_order(run: RunData) -> tuple[str, str, str, float, str]:
    """Sort key that puts runs in reading order: by GPU, model, load kind, then load."""
    r = run.result
    kind, value = load_of(r)
    return (gpu_label(r), model_label(r), kind, value or 0.0, str(r.get("run_id", "")))


def cost_per_million(result: Mapping[str, Any]) -> float | None:
    """USD per 1M output tokens from ``result["cost"]`` (None when absent or not computable)."""
    cost = _d(result.get("cost"))
    for key in ("usd_per_million_output_tokens", "usd_per_1m_output_tokens"):
        if _num(cost.get(key)) is not None:
            return _num(cost.get(key))
    return None


def joules_per_token(result: Mapping[str, Any]) -> float | None:
    """Joules per output token from ``result["energy"]`` (None when absent or not measured)."""
    return _num(_d(result.get("energy")).get("joules_per_output_token"))


def _dist(result: Mapping[str, Any], metric: str, stat: str) -> float | None:
    return _num(_d(_d(result.get("summary")).get(metric)).get(stat))


# Per-request samples in ms, from the records: (title, extractor).
_SAMPLES: tuple[tuple[str, str, Callable[[RequestRecord], list[float]]], ...] = (
    ("ttft", "TTFT", lambda r: [] if (v := ttft_ns(r)) is None else [v / NS_PER_MS]),
    ("tpot", "TPOT", lambda r: [] if (v := tpot_ns(r)) is None else [v / NS_PER_MS]),
    ("itl", "ITL", lambda r: [v / NS_PER_MS for v in itl_ns(r)]),
    ("e2e", "E2E latency", lambda r: [] if (v := e2e_ns(r)) is None else [v / NS_PER_MS]),
)


def samples_ms(records: Sequence[RequestRecord], metric: str) -> list[float]:
    """A metric's samples (ms) over measured, completed requests, as the run summary pools them."""
    get = next(f for key, _, f in _SAMPLES if key == metric)
    out: list[float] = []
    for r in records:
        if not r.warmup and r.ok:
            out.extend(get(r))
    return out


def sweep_groups(runs: Sequence[RunData]) -> list[tuple[str, str, list[RunData]]]:
    """Runs of one configuration at two or more load levels: ``(label, load kind, runs sorted
    by load)``. The configuration is :func:`config_fields` less concurrency and request rate;
    closed-loop (concurrency) and open-loop (rate) runs are separate sweeps."""
    groups: dict[str, list[RunData]] = {}
    for run in runs:
        kind, value = load_of(run.result)
        if value is None:
            continue
        fields = config_fields(run.result)
        fields.pop("concurrency", None)
        fields.pop("request_rate", None)
        key = repr((kind, sorted(fields.items(), key=lambda kv: kv[0])))
        groups.setdefault(key, []).append(run)
    out = []
    for members in groups.values():
        kind = load_of(members[0].result)[0]
        levels = {load_of(m.result)[1] for m in members}
        if len(levels) < 2:
            continue
        members = sorted(members, key=lambda m: load_of(m.result)[1] or 0.0)
        out.append(("", kind, members))
    # label each group by what tells it apart from the others (model, GPU, lengths, precision)
    facets = []
    for _, _, members in out:
        r0 = members[0].result
        cfg = _d(r0.get("config"))
        facets.append(
            (
                model_label(r0),
                gpu_label(r0, short=True),
                f"in {cfg.get('input_len')}/out {cfg.get('output_len')}",
                str(config_fields(r0).get("precision") or ""),
            )
        )
    varying = [i for i in range(4) if len({f[i] for f in facets}) > 1] or [0, 1]

    def label(f: tuple[str, str, str, str]) -> str:
        words = [f[i] for i in varying if f[i]]
        if 0 in varying and 1 in varying:  # "llama-2-7b on H100-SXM ..."
            words.insert(1, "on")
        return " ".join(words)

    return [(label(f), kind, members) for f, (_, kind, members) in zip(facets, out, strict=True)]


# --------------------------------------------------------------------------- HTML pieces

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


def _e(text: Any) -> str:
    return html.escape(str(text))


def _cell(value: float | None, title: str = "") -> str:
    t = f' title="{_e(title)}"' if title else ""
    if value is None:
        return f'<td class="num"{t}><span class="nm">{NOT_MEASURED}</span></td>'
    return f'<td class="num"{t}>{_e(fmt_number(value))}</td>'


def _figure(plot: Plot) -> str:
    return f'<figure id="fig-{_e(plot.name)}">{plot.svg}</figure>'


def _not_measured(what: str, why: str | None = None) -> str:
    reason = f": {_e(why)}" if why else ""
    return f'<p class="note"><span class="nm">{NOT_MEASURED}</span> &mdash; {_e(what)}{reason}</p>'


def run_names(runs: Sequence[RunData]) -> list[str]:
    """Short legend names: of GPU, model and load, the parts that differ between the runs
    (``H100 llama-2-7b c=8``, or just ``c=8`` in a one-GPU, one-model sweep); the run id is
    added where two runs would share a name."""
    parts = [
        (gpu_label(r.result, short=True), model_label(r.result), load_text(r.result)) for r in runs
    ]
    varying = [i for i in range(3) if len({p[i] for p in parts}) > 1] or [2]
    base = [" ".join(p[i] for i in varying) for p in parts]
    counts = {b: base.count(b) for b in base}
    return [
        b if counts[b] == 1 else f"{b} [{r.result.get('run_id', i)}]"
        for i, (b, r) in enumerate(zip(base, runs, strict=True))
    ]


# --------------------------------------------------------------------------- sections


def _status_badges(r: dict[str, Any]) -> str:
    """Badges for a run whose numbers do not hold: "incomplete" and "invalid", each with its
    reason beside it and in full on hover (title)."""
    out = []
    if r.get("complete") is False:
        why = str(r.get("incomplete_reason") or "reason not recorded")
        out.append(
            f'<span class="badge incomplete" title="incomplete: {_e(why)}">'
            f"incomplete: {_e(why)}</span>"
        )
    validity = _d(r.get("validity"))
    if validity.get("valid") is False:
        why = "; ".join(str(x) for x in validity.get("reasons") or []) or "reason not recorded"
        out.append(
            f'<span class="badge invalid" title="invalid: {_e(why)}">invalid: {_e(why)}</span>'
        )
    return "".join(out)


def _summary_section(runs: Sequence[RunData], names: Sequence[str]) -> str:
    lat = (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"), ("ITL", "itl_ms"), ("E2E", "e2e_ms"))
    head1 = (
        '<tr><th rowspan="2">run</th><th rowspan="2">model</th><th rowspan="2">GPU</th>'
        '<th rowspan="2">load</th><th rowspan="2">requests<br>ok / failed</th>'
        '<th rowspan="2">requests/s</th><th rowspan="2">output<br>tokens/s</th>'
        + "".join(f'<th colspan="2">{n} (ms)</th>' for n, _ in lat)
        + '<th rowspan="2">$ per 1M<br>output tokens</th>'
        '<th rowspan="2">J per<br>output token</th></tr>'
    )
    head2 = "<tr>" + "<th>p50</th><th>p99</th>" * len(lat) + "</tr>"
    rows = []
    for run, name in zip(runs, names, strict=True):
        r = run.result
        s = _d(r.get("summary"))
        labels = _d(r.get("labels"))
        badge = _status_badges(r)
        lab = (
            '<div class="labels">' + _e(", ".join(f"{k}={v}" for k, v in labels.items())) + "</div>"
            if labels
            else ""
        )
        cost = _d(r.get("cost"))
        energy = _d(r.get("energy"))
        cells = [
            f'<td class="wrap" title="{_e(run.source)}">{_e(r.get("run_id", name))}{badge}'
            f"{lab}</td>",
            f"<td>{_e(model_label(r))}</td>",
            f'<td class="wrap">{_e(gpu_label(r))}</td>',
            f"<td>{_e(load_text(r))}</td>",
            f'<td class="num">{_e(s.get("requests_completed", "?"))} / '
            f"{_e(s.get('requests_failed', '?'))}</td>",
            _cell(_num(s.get("request_throughput"))),
            _cell(_num(s.get("output_throughput"))),
        ]
        for _, key in lat:
            cells.append(_cell(_dist(r, key, "p50")))
            cells.append(_cell(_dist(r, key, "p99")))
        cells.append(_cell(cost_per_million(r), str(cost.get("reason") or "")))
        cells.append(_cell(joules_per_token(r), str(energy.get("reason") or "")))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    method = next(
        (
            _d(run.result.get("summary")).get("percentile_method")
            for run in runs
            if _d(run.result.get("summary")).get("percentile_method")
        ),
        None,
    )
    note = (
        "Latencies over measured, completed requests (warm-up excluded); throughputs over the "
        "measured window. Percentiles: " + _e(method or "as the run recorded them") + ". "
        "Hover a $ or J cell that reads “not measured” for the reason."
    )
    return (
        '<section id="summary"><h2>Summary</h2>'
        f'<p class="note">{note}</p>'
        f'<div class="table-wrap"><table><thead>{head1}{head2}</thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _latency_section(runs: Sequence[RunData], names: Sequence[str], plots: list[Plot]) -> str:
    parts = ['<section id="latency"><h2>Latency distributions</h2>']
    parts.append(
        '<p class="note">Empirical CDFs from the per-request records: the share of samples '
        "(measured, completed requests) at or below each latency. ITL pools the gaps between "
        "token-carrying chunks of every request.</p>"
    )
    missing = [(n, r.records_note) for r, n in zip(runs, names, strict=True) if r.records is None]
    for n, note in missing:
        parts.append(_not_measured(f"latency distributions of {n}", note))
    have = [(r, n) for r, n in zip(runs, names, strict=True) if r.records is not None]
    figs = []
    if have:
        for key, title, _ in _SAMPLES:
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
                Axis(
                    "requests at or below (%)"
                    if key in ("ttft", "e2e", "tpot")
                    else "inter-token gaps at or below (%)",
                    lo=0,
                    hi=100,
                ),
                hlines=((50.0, "p50"), (99.0, "p99")),
                note=note,
            )
            plots.append(plot)
            figs.append(_figure(plot))
    parts.append(f'<div class="plots">{"".join(figs)}</div></section>')
    return "".join(parts)


def _sweep_section(runs: Sequence[RunData], plots: list[Plot]) -> str:
    parts = ['<section id="sweeps"><h2>Throughput and latency against load</h2>']
    groups = sweep_groups(runs)
    if not groups:
        parts.append(
            _not_measured(
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
            (
                "ttft",
                f"TTFT vs {what}",
                "TTFT (ms)",
                [("ttft_ms.p50", "p50"), ("ttft_ms.p99", "p99")],
            ),
            (
                "tpot",
                f"TPOT vs {what}",
                "TPOT (ms)",
                [("tpot_ms.p50", "p50"), ("tpot_ms.p99", "p99")],
            ),
            (
                "e2e",
                f"E2E latency vs {what}",
                "E2E latency (ms)",
                [("e2e_ms.p50", "p50"), ("e2e_ms.p99", "p99")],
            ),
        ]
        for cname, title, ylabel, metrics in charts:
            series = []
            for gi, (glabel, _, members) in enumerate(kg):
                color = PALETTE[gi % len(PALETTE)]
                xs = [load_of(m.result)[1] for m in members]
                for mi, (path, stat) in enumerate(metrics):
                    if "." in path:
                        metric, st = path.split(".")
                        ys = [_dist(m.result, metric, st) for m in members]
                    else:
                        ys = [_num(_d(m.result.get("summary")).get(path)) for m in members]
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
            figs.append(_figure(plot))
        parts.append(f'<div class="plots">{"".join(figs)}</div>')
    return "".join(parts) + "</section>"


def _cost_section(runs: Sequence[RunData], plots: list[Plot]) -> str:
    parts = ['<section id="cost"><h2>Cost per 1M output tokens by GPU</h2>']
    if not any(isinstance(r.result.get("cost"), dict) for r in runs):
        parts.append(_not_measured("no result has a cost block", "no price applied to the runs"))
        return "".join(parts) + "</section>"
    if all(cost_per_million(r.result) is None for r in runs):
        reasons = sorted({str(_d(r.result.get("cost")).get("reason") or "") for r in runs} - {""})
        parts.append(_not_measured("no run has a cost per 1M tokens", "; ".join(reasons) or None))
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
        c = _d(runs[i].result.get("cost"))
        if _num(c.get("usd_per_gpu_hour")) is not None:
            price = _d(c.get("price"))
            src = price.get("provider") or price.get("source") or ""
            prices.append(
                f"{gpu_label(runs[i].result)}: ${fmt_number(c['usd_per_gpu_hour'])}/GPU-hour"
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
        + _e("; ".join(dict.fromkeys(prices)) or NOT_MEASURED)
        + ".</p>"
    )
    parts.append(f'<div class="plots">{_figure(plot)}</div>')
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
    return [None if (v := _num(x)) is None else v * factor for x in values]


def _time_axis(block: Mapping[str, Any]) -> tuple[float, str, tuple[float, float, str] | None]:
    """(origin in the block's t_s, x label, measured-window band) for a telemetry block."""
    win = _d(block.get("window"))
    start, end = _num(win.get("start_s")), _num(win.get("end_s"))
    if start is None:
        return 0.0, "time since telemetry start (s)", None
    band = (0.0, end - start, "measured window") if end is not None else None
    return start, "time since the measured window began (s)", band


def _telemetry_section(runs: Sequence[RunData], names: Sequence[str], plots: list[Plot]) -> str:
    parts = [
        '<section id="telemetry"><h2>Telemetry over time</h2>',
        '<p class="note">Time 0 is the start of the measured window (shaded); samples '
        "before it are warm-up. Gaps are samples that could not be read.</p>",
    ]
    stems: set[str] = set()
    for ri, (run, name) in enumerate(zip(runs, names, strict=True)):
        tel = _d(run.result.get("telemetry"))
        stem = safe_name(str(run.result.get("run_id") or f"run{ri}"))
        stem = stem if stem not in stems else f"{stem}_{ri}"  # plot names stay unique
        stems.add(stem)
        parts.append(
            f'<h3>{_e(name)} <span class="labels">{_e(run.result.get("run_id", ""))}</span></h3>'
        )
        figs: list[str] = []
        notes: list[str] = []
        gpu = _d(tel.get("gpu"))
        gpus = [g for g in gpu.get("gpus") or [] if isinstance(g, dict)]
        if not gpu.get("available") or not gpus:
            notes.append(_not_measured("GPU telemetry", gpu.get("reason") or "no NVML samples"))
        else:
            origin, xlabel, band = _time_axis(gpu)
            absent = []
            for key, title, ylabel, factor, yaxis in _GPU_CHARTS:
                series = []
                for g in gpus:
                    ser = _d(g.get("series"))
                    t = [None if (v := _num(x)) is None else v - origin for x in ser.get("t_s", [])]
                    ys = _scaled(ser.get(key) or [None] * len(t), factor)
                    if len(ys) != len(t):
                        ys = [None] * len(t)
                    series.append(Series(f"GPU {g.get('index', '?')}: {g.get('name', '')}", t, ys))
                if not any(v is not None for s in series for v in s.y):
                    absent.append(title)
                    continue
                hl: list[tuple[float, str]] = []
                limits = {_num(g.get("power_limit_w")) for g in gpus}
                if key == "power_w" and len(limits) == 1 and None not in limits:
                    (lim,) = limits
                    assert lim is not None
                    hl.append((lim, f"power limit {fmt_number(lim)} W"))
                plot = line_chart(
                    f"telemetry_{stem}_{key}",
                    f"{title} — {name}",
                    series,
                    Axis(xlabel),
                    Axis(ylabel, zero=yaxis.zero, lo=yaxis.lo, hi=yaxis.hi),
                    band=band,
                    hlines=hl,
                    height=300,
                )
                plots.append(plot)
                figs.append(_figure(plot))
            if absent:
                notes.append(_not_measured(", ".join(absent), "the GPU did not report it"))
        sm = _d(tel.get("server_metrics"))
        ser = _d(sm.get("series"))
        if not sm.get("available") or not ser.get("t_s"):
            notes.append(_not_measured("server metrics", sm.get("reason") or "no /metrics scrape"))
        else:
            origin, xlabel, band = _time_axis(sm)
            t = [None if (v := _num(x)) is None else v - origin for x in ser["t_s"]]
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
            absent = []
            for key, title, yaxis, series in charts:
                if not any(v is not None for s in series for v in s.y):
                    absent.append(title)
                    continue
                plot = line_chart(
                    f"telemetry_{stem}_{key}",
                    f"{title} — {name}",
                    series,
                    Axis(xlabel),
                    yaxis,
                    band=band,
                    height=300,
                )
                plots.append(plot)
                figs.append(_figure(plot))
            if absent:
                notes.append(_not_measured(", ".join(absent), "the server's /metrics lacked it"))
        parts.extend(notes)
        if figs:
            parts.append(f'<div class="plots">{"".join(figs)}</div>')
    return "".join(parts) + "</section>"


def _footer(runs: Sequence[RunData]) -> str:
    srcs = "".join(
        f"<li><code>{_e(r.source or r.result.get('run_id', '?'))}</code>"
        + (f" — {_e(r.records_note)}" if r.records_note else "")
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
        f"<p>infer-prof {_e(__version__)}</p></footer>"
    )


def build_report(
    runs: Sequence[RunData],
    *,
    title: str = "infer-prof report",
    generated_at: str | None = None,
) -> Report:
    """The report over ``runs`` (in the order given): one HTML document and its plots."""
    if not runs:
        raise ValueError("a report needs at least one run")
    when = generated_at or dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    names = run_names(runs)
    plots: list[Plot] = []
    body = [
        _summary_section(runs, names),
        _latency_section(runs, names, plots),
        _sweep_section(runs, plots),
        _cost_section(runs, plots),
        _telemetry_section(runs, names, plots),
    ]
    models = sorted({model_label(r.result) for r in runs})
    gpus = sorted({gpu_label(r.result) for r in runs})
    doc = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{_e(title)}</h1>"
        f"<p>{len(runs)} run{'s' if len(runs) != 1 else ''} · models: {_e(', '.join(models))} · "
        f"hardware: {_e(', '.join(gpus))} · generated {_e(when)}</p>"
        '<nav><a href="#summary">Summary</a><a href="#latency">Latency</a>'
        '<a href="#sweeps">Sweeps</a><a href="#cost">Cost</a>'
        '<a href="#telemetry">Telemetry</a></nav></header>'
        f"<main>{''.join(body)}</main>{_footer(runs)}</body></html>\n"
    )
    return Report(doc, plots)
