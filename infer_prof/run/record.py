"""Recording a run: each load point's result document (summary, SLOs, validity, economics,
the server and the client's health), its files, its row in the history, and the sweep summary
over the points.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from infer_prof.core.api_tokens import api_block
from infer_prof.core.frontier_axes import gpus_used, result_axes
from infer_prof.core.metrics import (
    RequestRecord,
    busy_concurrency,
    in_flight_mean,
    send_bunching,
    stream_span_s,
    summarize_run,
)
from infer_prof.core.slo import evaluate_slos, slos_from_mapping
from infer_prof.core.stats import summary_dict
from infer_prof.core.stream_shape import stream_shape
from infer_prof.core.sweep import find_knee
from infer_prof.core.validity import ValidityRules, check_validity, client_figures
from infer_prof.core.warmup import warmup_block
from infer_prof.core.workloads import Workload
from infer_prof.loadgen.traces import Trace
from infer_prof.report.progress import ProgressLine
from infer_prof.results import history_database
from infer_prof.results.loading import record_result
from infer_prof.results.run_ids import new_run_id
from infer_prof.results.schema import RESULT_KIND, SCHEMA_VERSION
from infer_prof.results.store import (
    make_run_name,
    result_paths,
    safe_name,
    write_new_file,
)
from infer_prof.run import result_files
from infer_prof.run.config import RunConfig
from infer_prof.run.economics import (
    CostOptions,
    DecodeLoad,
    cost_block,
    decode_batch,
    energy_block,
    roofline_block,
)
from infer_prof.run.environment import fingerprint
from infer_prof.run.load_points import point_concurrency, point_label, prompt_mode
from infer_prof.run.planning import history_location
from infer_prof.run.startup import RunContext, warn
from infer_prof.telemetry.prometheus import mark_not_counted


@dataclass
class RunOutcome:
    """One load point's outcome (:func:`infer_prof.run.runner.execute`): the result dict and
    where it was written."""

    result: dict[str, Any]
    result_path: Path
    requests_path: Path
    history_error: str | None = None  # why the run is not in the history (result still written)
    write_error: str | None = None  # why the files are not where asked (and where they are)


@dataclass
class SweepOutcome:
    """Everything :func:`infer_prof.run.runner.execute` produced: one outcome per load point,
    in run order, and the sweep summary (curve, knee, find-max) when there was more than one
    point."""

    points: list[RunOutcome]
    sweep: dict[str, Any] | None = None
    sweep_path: Path | None = None
    stopped_by: str | None = None  # the stop signal that ended the run (SIGTERM, ...), if any

    @property
    def complete(self) -> bool:
        return all(p.result["complete"] for p in self.points)

    @property
    def write_errors(self) -> list[str]:
        """Why points' files are not where asked, each naming where they are instead."""
        return [p.write_error for p in self.points if p.write_error]

    @property
    def history_errors(self) -> list[str]:
        """Why points could not be recorded in the history (their result files are written)."""
        return [p.history_error for p in self.points if p.history_error]


def now() -> dt.datetime:
    """The current time, UTC (result timestamps and file names)."""
    return dt.datetime.now(dt.UTC)


def check_history(cfg: RunConfig, progress: ProgressLine) -> None:
    """With --history, check now that the history can be written (a warning if not, not
    after an hour of measuring; the run goes on regardless)."""
    if cfg.history:
        try:
            history_database.check(history_location(cfg))
        except history_database.HistoryError as exc:
            warn(progress, f"warning: {exc} (the run goes on; its result files are written)")


def point_files(ctx: RunContext, wl: Workload, many: bool) -> tuple[str, str, str, Path]:
    """A load point's label, run ID (a new UUIDv7), readable run name and result file (as
    asked: the file is created exclusively at the end, :func:`save_point`, so a name another
    run took meanwhile becomes ``-2``; ``--output`` with ``many`` points gets the label
    appended)."""
    cfg = ctx.cfg
    label = point_label(wl) if wl.name == "custom" else f"{wl.name}-{point_label(wl)}"
    if cfg.run_tag:  # several endpoints in one command: the endpoint's label
        label = f"{cfg.run_tag}-{label}"
    run_name = make_run_name(now().strftime("%Y%m%d-%H%M%S"), ctx.model.name, label)
    output = cfg.output
    if output and many:
        out = Path(output)
        output = str(out.with_name(f"{out.stem}-{label}{out.suffix or '.json'}"))
    result_path, _ = result_paths(output, Path(cfg.results_dir), run_name)
    return label, new_run_id(), run_name, result_path


def server_section(ctx: RunContext, state: dict[str, Any]) -> dict[str, Any]:
    """The point's ``server`` section: the session's, plus the exit code, log tail and root
    cause when the server died (which marks the point incomplete in ``state``)."""
    server = ctx.server
    server_info = dict(ctx.server_info)
    if server is not None and server.poll() is not None:
        state["incomplete_reason"] = state["incomplete_reason"] or "server_died"
        server_info.update(server.diagnosis())  # exit_code, log_tail, root_cause
    return server_info


def plan_section(ctx: RunContext) -> dict[str, Any] | None:
    """The result's ``plan``: the engine plan, its settings as the server's own options
    (``engine_args``); None without a plan."""
    if ctx.plan is None:
        return None
    settings, server = ctx.plan.settings, ctx.server
    spelled = server.plan_arguments(settings) if server and settings else {}
    return ctx.plan.to_dict(spelled)


def save_point(
    cfg: RunConfig,
    result: dict[str, Any],
    records: list[RequestRecord],
    result_path: Path,
    progress: ProgressLine,
) -> RunOutcome:
    """Write the point's result and requests files (:func:`result_files.write_point`: created
    exclusively, atomically, in a temporary folder when the results folder fails) and, with
    --history, record it there. The outcome says where the files are, and why the run is not
    in the history or not where asked."""
    written = result_files.write_point(cfg, result, records, result_path)
    if written.error:
        warn(progress, f"warning: {written.error}")
    history_error = None
    if cfg.history:
        db = history_location(cfg)
        try:
            record_result(db, result, written.result_path)
        # the result file is written; say so
        except (OSError, history_database.HistoryError) as exc:
            history_error = str(exc)
            warn(progress, f"warning: not recorded in the history: {exc}")
    return RunOutcome(
        result, written.result_path, written.requests_path, history_error, written.error
    )


def build_result(
    ctx: RunContext,
    wl: Workload,
    run_id: str,
    started: dt.datetime,
    records: list[RequestRecord],
    state: dict[str, Any],
    client: dict[str, Any],
    telemetry: dict[str, Any],
    server_info: dict[str, Any],
    run_name: str,
) -> dict[str, Any]:
    """The result document of one load point (see :mod:`infer_prof.results.schema`)."""
    cfg, model, gpu = ctx.cfg, ctx.model, ctx.gpu
    # a closed loop's rates are over its streams' mean span (stream_span_s), not the wall window
    rate_window_s = stream_span_s(records) if wl.arrival.mode == "closed" else None
    summary = summarize_run(records, rate_window_s=rate_window_s)
    sdict = summary.to_dict()
    energy = energy_block(telemetry.get("gpu"), sdict)
    scraped = telemetry.get("server_metrics") or {}
    if scraped.get("summary"):  # a counter the server did not count is null, not 0
        scraped["summary"] = mark_not_counted(
            scraped["summary"],
            ctx.server.command() if ctx.server else None,
            sdict.get("total_output_tokens"),
        )
    metrics_summary = scraped.get("summary") or {}
    batch, batch_source = decode_batch(
        metrics_summary, busy_concurrency(records), point_concurrency(wl)
    )
    precision = (
        ctx.plan.precision
        if ctx.plan
        else (None if cfg.quantization in ("auto", None) else cfg.quantization)
    )
    a = wl.arrival
    slos = ctx.slos if ctx.cfg.slo else (slos_from_mapping(wl.slo) or ctx.slos)
    slo = evaluate_slos(records, slos, rate_window_s=rate_window_s).to_dict() if slos else None
    figures = client_figures(client)
    shape = stream_shape(records)
    validity = check_validity(
        summary.requests_completed,
        summary.duration_s,
        ValidityRules(
            min_requests=wl.min_requests if wl.min_requests is not None else 10,
            min_duration_s=wl.min_duration_s if wl.min_duration_s is not None else 5.0,
        ),
        read_lag_p99_ms=figures["read_lag_p99_ms"],
        itl_p50_ms=summary.itl_ms.p50 if summary.itl_ms else None,
        dispatch_lag_p99_ms=figures["dispatch_lag_p99_ms"] if a.mode == "open" else None,
        cpu_share_max=figures["cpu_share_max"],
        stream=shape,
    )
    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "kind": RESULT_KIND,
        "run_id": run_id,  # UUIDv7: unique across processes and machines
        "run_name": run_name,  # readable, not unique: <time>-<model>-<load>
        "started_at": started.isoformat(),
        "finished_at": now().isoformat(),
        "complete": state["incomplete_reason"] is None,
        "incomplete_reason": state["incomplete_reason"],
        "config": {
            **asdict(cfg),
            "api_key": "***" if cfg.api_key else None,
            # where it was recorded, never with a password
            "history_db": history_database.describe(history_location(cfg)) if cfg.history else None,
            # the values this point ran with (the workload's, after command-line overrides)
            "concurrency": a.concurrency if a.mode == "closed" else None,
            "rate": a.rate if a.mode == "open" else None,
            "input_len": wl.input_len.support()[1] if wl.input_len.kind == "fixed" else None,
            "output_len": wl.output_len.support()[1] if wl.output_len.kind == "fixed" else None,
            "num_requests": wl.num_requests,
            "warmup_requests": wl.warmup_requests,
            "prompt": ctx.sessions.settings.prompt if ctx.sessions
            else prompt_mode(cfg, ctx.dataset),
            "dataset": ctx.dataset.to_dict() if ctx.dataset else None,
            "trace": ctx.trace.to_dict() if ctx.trace else None,
            "sessions": ctx.sessions.to_dict() if ctx.sessions else None,
        },
        "sessions": state["session_run"].result(records, scraped)
        if state.get("session_run") else None,
        "trace_replay": trace_replay(ctx.trace, records) if ctx.trace else None,
        "api": api_block(cfg.api or "completions", records),
        "workload": wl.to_dict(),
        "load": {
            "mode": a.mode,
            "concurrency": a.concurrency if a.mode == "closed" else None,
            "rate": a.rate if a.mode == "open" else None,
            "burstiness": a.burstiness if a.mode == "open" else None,
            "max_concurrency": a.max_concurrency if a.mode == "open" else None,
            # time-weighted mean of requests in flight over the measured window (client side)
            "in_flight_mean": round_or_none(in_flight_mean(records), 3),
            # share of send gaps < 1 ms, beside independent sends' share: streams in lock-step
            "send_bunching": send_bunching(records),
        },
        "warmup": warmup_block(wl.warmup, wl.warmup_requests, records, state.get("warmup"),
                               a.concurrency if a.mode == "closed" else None,
                               staggered=cfg.warmup_stagger),
        "labels": dict(cfg.labels),
        "model": {
            "name": model.name,
            "path": model.path,
            "engine_path": ctx.engine_path,
            "hub_id": model.hub_id,
            "source": model.source,
            "has_tokenizer": model.has_tokenizer,
            "spec": asdict(model.spec) if model.spec else None,
            "param_count": model.spec.param_count() if model.spec else None,
            "weights": ctx.weights,
        },
        "server": server_info,
        "environment": fingerprint(),
        "summary": sdict,
        "stream": shape,  # how tokens arrived (core.stream_shape)
        "slo": slo,
        "validity": validity.to_dict(),
        "client": client,
        "gpu": {"key": gpu.key if gpu else None, "count": ctx.gpu_count, "how": ctx.gpu_how},
        "plan": plan_section(ctx),
        "plan_reason": ctx.plan_reason,
        "duration_estimate": ctx.estimate,
        "precision": precision or "bf16",
        "energy": energy,
        "telemetry": telemetry or None,
        "requests_file": None,  # set when written (save_point)
    }
    # Cost and roofline are for the GPUs the engine used (tp x pp x dp of the server it ran;
    # --gpus for an --endpoint, default 1), as the frontier's per-GPU axes are.
    engine_gpus, engine_gpus_how = gpus_used(result)
    result["gpu"].update(engine_gpus=engine_gpus, engine_gpus_how=engine_gpus_how)
    result["cost"] = cost_block(
        sdict,
        gpu,
        engine_gpus,
        CostOptions(
            cfg.price_per_hour,
            cfg.provider,
            cfg.prices_file,
            cfg.spot,
            cfg.purchase_usd,
            cfg.amortize_years,
            cfg.usd_per_kwh,
            instance=cfg.instance,
            prices_from=cfg.prices_from,
        ),
        energy["energy_j"],
        sdict.get("duration_s"),
    )
    result["roofline"] = roofline_block(
        model.spec,
        gpu,
        engine_gpus,
        precision,
        sdict,
        DecodeLoad(batch, round(wl.input_len.mean()), round(wl.output_len.mean()), batch_source),
    )
    # the frontier's axes (interactivity, tok/s, $ and J per GPU used): core.frontier_axes
    sdict.update(result_axes(result))
    return result


def trace_replay(trace: Trace, records: list[RequestRecord]) -> dict[str, Any]:
    """Achieved vs scheduled for a trace replay: the arrival rate of the sends made,
    ``(n - 1) / (last send - first send)``, against the schedule's, and each request's send lag
    (actual send - scheduled send, ms, signed: negative when sent early; ``client.dispatch_lag_ms``
    is the same figure clamped at 0)."""
    sent = sorted(r.send_ns for r in records if not r.warmup and r.send_ns is not None)
    span_s = (sent[-1] - sent[0]) / 1e9 if len(sent) > 1 else 0.0
    achieved = (len(sent) - 1) / span_s if span_s > 0 else None
    scheduled = trace.scheduled_rate()
    lags = [r.send_ns - r.scheduled_ns for r in records
            if not r.warmup and r.send_ns is not None and r.scheduled_ns is not None]
    return {
        "scheduled_requests": len(trace.offsets),
        "sent_requests": len(sent),
        "scheduled_rate": round_or_none(scheduled, 4),
        "achieved_rate": round_or_none(achieved, 4),
        "rate_error_pct": round_or_none(100.0 * (achieved - scheduled) / scheduled, 3)
        if achieved is not None and scheduled else None,
        "send_lag_ms": dist_ms(lags),
    }


def relabel_server_died(records: list[RequestRecord]) -> None:
    """After the server died, the connection errors it caused are failures of kind
    ``server_died`` (the original kind is kept in ``error_detail``)."""
    for r in records:
        if r.error in (
            "connection_closed",
            "connection_error",
            "connect_failed",
            "cancelled",
            "protocol_error",
            "truncated",
        ):
            r.error_detail = f"{r.error}: {r.error_detail}"
            r.error = "server_died"


def record_health(records: list[RequestRecord]) -> dict[str, Any]:
    """The client figures read off the records: timestamp source(s) and client queue time."""
    queue = [
        r.send_ns - r.scheduled_ns
        for r in records
        if r.send_ns is not None and r.scheduled_ns is not None
    ]
    sources = sorted({r.timestamp_source for r in records})
    return {
        "timestamp_source": sources[0] if len(sources) == 1 else sources,
        "queue_ms": dist_ms(queue),
    }


def sweep_summary(outcomes: list[RunOutcome], search: dict[str, Any] | None) -> dict[str, Any]:
    """The curve over load points: one row per point, the knee (TPOT p50 past 1.5x its
    lowest-load value) and the find-max answer when one was searched."""
    rows = []
    for o in outcomes:
        r = o.result
        s = r["summary"]
        load = r["load"]
        rows.append(
            {
                "result_file": o.result_path.name,
                "workload": (r.get("workload") or {}).get("name"),
                "mode": load["mode"],
                "load": load["concurrency"] if load["mode"] == "closed" else load["rate"],
                "request_throughput": s["request_throughput"],
                "output_throughput": s["output_throughput"],
                "ttft_p50_ms": (s["ttft_ms"] or {}).get("p50"),
                "ttft_p99_ms": (s["ttft_ms"] or {}).get("p99"),
                "tpot_p50_ms": (s["tpot_ms"] or {}).get("p50"),
                "tpot_p99_ms": (s["tpot_ms"] or {}).get("p99"),
                "interactivity_tok_s_user": s.get("interactivity_tok_s_user"),
                "total_tok_s_per_gpu": s.get("total_tok_s_per_gpu"),
                "usd_per_million_output_tokens": s.get("usd_per_million_output_tokens"),
                "e2e_p50_ms": (s["e2e_ms"] or {}).get("p50"),
                "goodput": (r.get("slo") or {}).get("goodput"),
                "slo_passed": (r.get("slo") or {}).get("passed"),
                "valid": (r.get("validity") or {}).get("valid"),
                "complete": r["complete"],
            }
        )
    # one curve per workload and loop mode (a suite holds several); rate inf is no point on it
    groups: dict[tuple[str, str], list[int]] = {}
    for i, row in enumerate(rows):
        if row["load"] is not None and row["load"] != math.inf:
            groups.setdefault((row["workload"], row["mode"]), []).append(i)
    knees = []
    for (workload, mode), idx in groups.items():
        knee = find_knee([(float(rows[i]["load"]), rows[i]["tpot_p50_ms"]) for i in idx])
        if knee is not None:
            knees.append(
                {**knee.to_dict(), "row": idx[knee.index], "workload": workload, "mode": mode}
            )
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "infer-prof.sweep",
        "points": rows,
        "knees": knees,
        "knee_rule": "first point whose TPOT p50 exceeds 1.5 x the lowest load's",
        "find_max": search,
    }


def record_sweep(
    cfg: RunConfig,
    model_name: str,
    stamp: str,
    outcomes: list[RunOutcome],
    search: dict[str, Any] | None,
    frontier: dict[str, Any] | None = None,
    frontiers: list[dict[str, Any]] | None = None,
) -> SweepOutcome:
    """The execution's outcome; with several points, --find-max or --frontier, the sweep
    summary (with ``frontier``: :mod:`infer_prof.run.frontier_run`) written to
    ``<results dir>/<stamp>-<model>[-<tag>].sweep.json``."""
    results_dir = Path(cfg.results_dir)
    sweep, sweep_path = None, None
    if len(outcomes) > 1 or cfg.find_max or frontier is not None or frontiers:
        sweep = sweep_summary(outcomes, search)
        sweep["frontier"] = frontier
        if frontiers is not None:  # --frontier --suite: one per member
            sweep["frontiers"] = frontiers
        tag = f"-{cfg.run_tag}" if cfg.run_tag else ""
        sweep_path = write_new_file(
            results_dir / f"{stamp}-{safe_name(model_name)}{tag}.sweep.json",
            json.dumps(sweep, indent=2, default=str) + "\n",
        )
    return SweepOutcome(outcomes, sweep, sweep_path)


def round_or_none(x: float | None, digits: int) -> float | None:
    """``round(x, digits)``; None stays None."""
    return None if x is None else round(x, digits)


def dist_ms(values_ns: Sequence[int | float]) -> dict[str, Any] | None:
    """The summary (:func:`summary_dict`) of nanosecond values, in ms."""
    return summary_dict(values_ns, 1e-6)
