"""The runs a report is built from, and what the report reads off each result: labels (GPU,
model, load), costs, energy, per-request latency samples, sweeps and legend names.

Pure apart from :func:`load_run`, which reads a result file and the records beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_prof.core.measurement.metric_table import metrics_at
from infer_prof.core.measurement.metrics import NS_PER_MS, RequestRecord
from infer_prof.report.svg import fmt_number
from infer_prof.results.document import Environment, GpuUsed, Result
from infer_prof.results.identity import config_fields, readable_name
from infer_prof.results.loading import load_request_records, requests_path
from infer_prof.results.schema import load_typed_result

NOT_MEASURED = "not measured"


@dataclass
class RunData:
    """One run for the report: its result document, where it came from, and its per-request
    records (``None`` when the requests file is missing; ``records_note`` says why)."""

    result: Result
    source: str = ""
    records: list[RequestRecord] | None = None
    records_note: str | None = None


def load_run(path: str | Path) -> RunData:
    """Read a result file and the per-request records beside it (missing records are noted,
    not an error: the summary still reports)."""
    result = load_typed_result(path)
    records = load_request_records(path, result.requests_file)
    note = None
    if records is None:
        note = f"per-request records not found ({requests_path(path, result.requests_file)})"
    return RunData(result, str(path), records, note)


# --------------------------------------------------------------------------- reading results


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a dict, else an empty dict (a missing or malformed open block)."""
    return value if isinstance(value, dict) else {}


def num(value: Any) -> float | None:
    """A finite number, else None (strings, NaN, missing)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def gpu_label(result: Result, short: bool = False) -> str:
    """The GPU a run is priced and compared as: the catalog key the run resolved
    (``result.gpu.key``), else the NVML name, else ``CPU (<model>)`` (``CPU`` when
    ``short``); ``" x N"`` for several GPUs."""
    gpu = result.gpu or GpuUsed()
    env = result.environment or Environment()
    if result.server is not None and result.server.kind == "endpoint" and not gpu.key:
        # the machine measured is the server's, which no one named: never the client's own
        return "hardware unknown" if short else "hardware unknown (endpoint; no --gpu)"
    name = gpu.key or env.gpu_name
    count = gpu.count or env.gpu_count or 1
    if not name:
        cpu = env.cpu
        return f"CPU ({cpu})" if cpu and not short else "CPU"
    return f"{name} x {count}" if count > 1 else str(name)


def model_label(result: Result) -> str:
    return str((result.model.name if result.model else None) or result.config.model or "?")


def load_of(result: Result) -> tuple[str, float | None]:
    """("rate", requests/s offered) for an open-loop run, else ("concurrency", streams)."""
    cfg = result.config
    rate = num(cfg.rate)
    if rate is not None:
        return "rate", rate
    return "concurrency", num(cfg.concurrency)


def load_text(result: Result) -> str:
    """The load a run was under, for people: ``c=N``, ``R req/s``, or for a trace replay
    ``trace replay, R req/s`` (the achieved arrival rate, else the scheduled one)."""
    replay = result.trace_replay
    if replay:
        rate = replay.achieved_rate if replay.achieved_rate is not None else replay.scheduled_rate
        rate = num(rate)
        return "trace replay" + (f", {fmt_number(rate)} req/s" if rate is not None else "")
    kind, value = load_of(result)
    if value is None:
        return NOT_MEASURED
    return f"{fmt_number(value)} req/s" if kind == "rate" else f"c={value:g}"


def run_order(run: RunData) -> tuple[str, str, str, float, str]:
    """Sort key that puts runs in reading order: by GPU, model, load kind, then load."""
    r = run.result
    kind, value = load_of(r)
    return (gpu_label(r), model_label(r), kind, value or 0.0, r.run_id)


def cost_per_million(result: Result) -> float | None:
    """USD per 1M output tokens from ``result.cost`` (None when absent or not computable)."""
    cost = result.cost
    if cost is None:
        return None
    for value in (cost.usd_per_million_output_tokens, cost.usd_per_1m_output_tokens):
        if num(value) is not None:
            return num(value)
    return None


def joules_per_token(result: Result) -> float | None:
    """Joules per output token from ``result.energy`` (None when absent or not measured)."""
    return num(result.energy.joules_per_output_token) if result.energy else None


def dist(result: Result, metric: str, stat: str) -> float | None:
    """``result.summary.<metric>.<stat>`` (e.g. ``"ttft_ms"``, ``"p99"``), or None."""
    d = getattr(result.summary, metric)
    return None if d is None else num(getattr(d, stat))


def _in_ms(
    samples_ns: Callable[[RequestRecord], list[float]],
) -> Callable[[RequestRecord], list[float]]:
    return lambda r: [v / NS_PER_MS for v in samples_ns(r)]


# Per-request samples in ms, from the records: (key, title, extractor), of the metric table's
# ``report`` place (its latency CDFs).
SAMPLES: tuple[tuple[str, str, Callable[[RequestRecord], list[float]]], ...] = tuple(
    (m.column, m.title or m.name, _in_ms(m.samples_ns))
    for m in metrics_at("report", "latency")
    if m.samples_ns is not None
)


def samples_ms(records: Sequence[RequestRecord], metric: str) -> list[float]:
    """A metric's samples (ms) over measured, completed requests, as the run summary pools them."""
    get = next(f for key, _, f in SAMPLES if key == metric)
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
        cfg = r0.config
        facets.append(
            (
                model_label(r0),
                gpu_label(r0, short=True),
                f"in {cfg.input_len}/out {cfg.output_len}",
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
        b if counts[b] == 1 else f"{b} [{readable_name(r.result) or i}]"
        for i, (b, r) in enumerate(zip(base, runs, strict=True))
    ]
