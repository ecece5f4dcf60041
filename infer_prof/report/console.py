"""The summary table printed at the end of a run, read from its typed result (attributes:
a misspelt field is a type error), every section included."""

from __future__ import annotations

from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from infer_prof.core.measurement.metric_table import SUMMARY_STATS, metrics_at
from infer_prof.report.adapter_table import print_adapters
from infer_prof.report.fit import print_fitted
from infer_prof.report.serving_state import serving_rows
from infer_prof.results.comparison_rows import value_at
from infer_prof.results.document import Api, Client, Cost, Energy, Result, Validity, Warmup
from infer_prof.results.load_sections import PrefixCache
from infer_prof.results.sweep_document import Sweep


def fmt_value(v: Any, digits: int = 2) -> str:
    """A number for a table: thousands separators, ``digits`` decimals, ``n/a`` for None."""
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


def summary_table(result: Result) -> Table:
    """A rich table of one result: latencies (ms) by percentile, then throughputs and counts."""
    cfg = result.config
    title = (
        f"{result.model.name if result.model else cfg.model}  "
        f"concurrency {cfg.concurrency}  "
        f"in {cfg.input_len} / out {cfg.output_len} tokens"
    )
    t = Table(title=title, title_justify="left")
    t.add_column("latency (ms)")
    for col in SUMMARY_STATS:
        t.add_column(col, justify="right")
    for m in metrics_at("console", "latency"):  # the metric table's console place
        t.add_row(
            m.shows["console"].label or m.name,
            *(fmt_value(value_at(result, "|".join(f"{alt}.{c}" for alt in m.path.split("|"))))
              for c in SUMMARY_STATS),
        )
    return t


def totals_table(result: Result) -> Table:
    """Throughputs, counts, and (when known) cost and energy, as key/value rows."""
    s = result.summary
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold", max_width=28)
    t.add_column()
    failures = ", ".join(f"{k}: {v}" for k, v in s.failure_kinds.items())
    rows: list[tuple[str, str]] = [
        (
            "requests completed / failed",
            f"{s.requests_completed} / {s.requests_failed}"
            + (f" ({failures})" if failures else ""),
        ),
        ("measured window (s)", fmt_value(s.duration_s)
         + (f" (rates per stream: mean span {fmt_value(s.rate_window_s)} s)"
            if s.rate_basis == "stream_spans" else "")),
        ("requests/s", fmt_value(s.request_throughput, 3)),
        ("output tokens/s", fmt_value(s.output_throughput, 1)),
        ("total tokens/s", fmt_value(s.total_throughput, 1)),
    ]
    rows += _frontier_rows(result)
    rows += _api_rows(result)
    rows += _reasoning_rows(result)
    rows += _stream_rows(result)
    rows += _client_rows(result)
    rows += _warmup_rows(result)
    rows += _session_rows(result)
    rows += serving_rows(result)
    rows += _derived_rows(result)
    slo = result.slo
    if slo is not None:
        verdict = "PASS" if slo.passed else "FAIL: " + "; ".join(slo.failures)
        rows.append((f"SLO {slo.slos}", verdict))
        rows.append(("goodput (req/s)", fmt_value(slo.goodput, 3)))
    rows += _validity_rows(result.validity)
    if not result.complete:
        rows.append(("INCOMPLETE", str(result.incomplete_reason)))
    for k, v in rows:
        t.add_row(k, v)
    return t


#: which side each validity reason blames (core.measurement.validity): the rest is size or length
_STREAM_REASONS = ("buffered_stream", "first_token_unknown")
_CLIENT_REASONS = ("read_lag", "dispatch_lag", "client_cpu")


def _validity_rows(validity: Validity | None) -> list[tuple[str, str]]:
    """An invalid run's reasons, grouped by whom they blame: the run's size, the server or a
    proxy on the way (late or bunched delivery), or the client (could not keep up)."""
    if validity is None or validity.valid:
        return []
    groups: dict[tuple[str, str], list[str]] = {}
    for reason in validity.reasons:
        name = reason.split(":", 1)[0]
        # (row, what it blames): the row name fits the summary's key column (28)
        head = (("INVALID (server or proxy)", "delivered late or in bursts: ")
                if name in _STREAM_REASONS
                else ("INVALID (client)", "could not keep up: ") if name in _CLIENT_REASONS
                else ("INVALID", ""))
        groups.setdefault(head, []).append(reason)
    return [(head, blame + "; ".join(rs)) for (head, blame), rs in groups.items()]


def _stream_rows(result: Result) -> list[tuple[str, str]]:
    """How tokens arrived, and the requests left out of TTFT and TPOT (no first-token time)."""
    from infer_prof.core.measurement.stream_shape import describe_shape

    shape = result.stream
    if shape is None:
        return []
    rows = [("tokens arrived as", describe_shape(msgspec.to_builtins(shape)))]
    if shape.first_token_unknown:
        rows.append(("no TTFT/TPOT (left out)",
                     f"{shape.first_token_unknown} of {shape.requests} requests: all their "
                     "tokens came in one event, so their first token's time is unknown"))
    return rows


def _reasoning_rows(result: Result) -> list[tuple[str, str]]:
    """A reasoning model's thinking: requests that thought and those cut while thinking (no
    TTFO), reasoning and answer tokens per request and where they were counted, the parser;
    or the line saying TTFT includes the thinking; then prefill tokens/s per user."""
    rows: list[tuple[str, str]] = []
    rz = result.reasoning
    if rz is not None and rz.note:
        rows.append(("reasoning", rz.note))
    elif rz is not None and rz.streamed:
        rows.append(("reasoning: requests / cut",
                     f"{rz.requests} / {rz.ended_in_reasoning} (cut while thinking: no TTFO)"))
        mean = (lambda d: d.mean if d is not None else None)  # noqa: E731
        rows.append(("reasoning / answer tok/req",
                     f"{fmt_value(mean(rz.reasoning_tokens), 1)} / "
                     f"{fmt_value(mean(rz.answer_tokens), 1)} (from {rz.token_source}"
                     + (f"; parser {rz.parser})" if rz.parser else ")")))
    prefill = result.summary.prefill_tok_s_user
    if prefill is not None:
        rows.append(("prefill tok/s/user p50/p90",
                     f"{fmt_value(prefill.p50, 1)} / {fmt_value(prefill.p90, 1)}"))
    return rows


def _frontier_rows(result: Result) -> list[tuple[str, str]]:
    """The point on the cost-interactivity frontier (``core.analysis.frontier_axes``): tokens/s each
    user sees, tokens/s per GPU the engine used, and $ and J per token (n/a where not measured)."""
    s = result.summary
    gpus = result.gpu.engine_gpus if result.gpu else None
    per = f" ({gpus} GPU{'s' if gpus != 1 else ''})" if gpus else ""
    rows = [
        ("tokens/s/user (1000/TPOT p50 / p90)",
         f"{fmt_value(s.interactivity_tok_s_user, 1)} / "
         f"{fmt_value(s.interactivity_p90_tok_s_user, 1)}"),
        (f"tokens/s per GPU out / in / total{per}",
         " / ".join(fmt_value(v, 1) for v in (
             s.output_tok_s_per_gpu, s.input_tok_s_per_gpu, s.total_tok_s_per_gpu))),
    ]
    if s.usd_per_million_total_tokens is not None:
        rows.append(("$ per 1M out / in / total tokens (per GPU)",
                     " / ".join(fmt_value(v, 4) for v in (
                         s.usd_per_million_output_tokens, s.usd_per_million_input_tokens,
                         s.usd_per_million_total_tokens))))
    if s.joules_per_total_token is not None:
        rows.append(("J per output / total token",
                     f"{fmt_value(s.joules_per_output_token, 4)} / "
                     f"{fmt_value(s.joules_per_total_token, 4)}"))
    return rows


def _api_rows(result: Result) -> list[tuple[str, str]]:
    """The API used, how output tokens were counted, and the chat template's prompt tokens."""
    api: Api | None = result.api
    if api is None:
        return []
    from infer_prof.core.measurement.api_tokens import describe_token_source

    rows = [("API", f"{api.name} ({api.path})"),
            ("output tokens counted by", describe_token_source(
                api.token_count_source, api.token_count_sources))]
    if api.name == "chat":
        ct = api.chat_template_tokens
        rows.append(("chat template prompt tokens (mean, min-max)",
                     f"{fmt_value(ct.mean, 1)}, {ct.min}-{ct.max}" if ct
                     else f"- ({api.chat_template_tokens_reason})"))
    return rows


def _warmup_rows(result: Result) -> list[tuple[str, str]]:
    """What the warm-up did, and the first measured wave's TTFT beside the rest's (a first
    wave well above the rest is a cold start that the warm-up did not absorb)."""
    w: Warmup | None = result.warmup
    if w is None:
        return []
    rows: list[tuple[str, str]] = []
    how = {"steady": "until steady (every stream finished one)", "duration": "for a duration",
           "pool_exhausted": "until its requests ran out", "requests": "counted, then a pause"}
    if w.requests:
        rows.append(("warm-up", f"{w.requests} requests, {fmt_value(w.seconds)} s, "
                                f"{how.get(w.ended_by or '', w.ended_by)}"))
    else:
        rows.append(("warm-up", "none"))
    st = w.phase_stagger
    if st is not None:
        rows.append(("warm-up phase stagger",
                     f"first {st.requests} asked {st.output_len_min}.."
                     f"{st.output_len_max} tokens, so the streams run out of phase"))
    fw = w.first_wave
    a = fw.ttft_ms.first_wave if fw and fw.ttft_ms else None
    b = fw.ttft_ms.rest if fw and fw.ttft_ms else None
    if fw and a and b:
        rows.append(("TTFT mean: first wave / rest (ms)",
                     f"{fmt_value(a.mean, 1)} / {fmt_value(b.mean, 1)} "
                     f"({fw.requests} of the measured requests in the first wave)"))
    return rows


def _session_rows(result: Result) -> list[tuple[str, str]]:
    """Multi-turn sessions: sessions run, TTFT p50/p99 and mean input by turn, and the
    server's prefix-cache hit rate over the measured window (or why it is unknown)."""
    ses = result.sessions
    if ses is None:
        return []
    rows = [("sessions", f"{ses.sessions_completed} of {ses.sessions_started} "
                         f"completed, {ses.turns} turns, think time "
                         f"{ses.think_time_s} s ({ses.source})")]
    for t in ses.by_turn:
        ttft, inp = t.ttft_ms, t.input_tokens
        rows.append((f"turn {t.turn}: TTFT p50 / p99 (ms)",
                     f"{fmt_value(ttft.p50 if ttft else None, 1)} / "
                     f"{fmt_value(ttft.p99 if ttft else None, 1)}, "
                     f"input {fmt_value(inp.mean if inp else None, 0)} tokens, {t.requests} req"))
    pc = ses.prefix_cache or PrefixCache()
    rate = pc.hit_rate
    rows.append(("prefix-cache hits (server)",
                 f"{rate:.1%} ({pc.hits:,.0f} of {pc.queries:,.0f} tokens)"
                 if rate is not None else f"n/a ({pc.reason})"))
    return rows


def _client_rows(result: Result) -> list[tuple[str, str]]:
    """The load generator's own health, one row: processes, read-lag and event-loop-lag p99
    (ms), and the busiest client process's CPU share of the measured window."""
    c = result.client
    if c is None or c == Client():  # not recorded
        return []
    n = c.processes or 1
    reader = {"c": " (C reader)", "python": " (Python reader)"}.get(c.reader or "", "")
    parts = [f"{n} process{'es' if n != 1 else ''}{reader}"]
    for name, lag in (("read lag", c.read_lag_ms), ("loop lag", c.event_loop_lag_ms)):
        p99 = lag.p99 if lag else None
        if p99 is not None:
            parts.append(f"{name} p99 {p99:.3f} ms")
    share = c.cpu_share
    if share is not None:
        parts.append(f"busiest CPU {share:.0%}")
    rows = [("client", ", ".join(parts))]
    rows += _load_rows(result)
    tr = result.trace_replay
    if tr is not None and tr.achieved_rate is not None and tr.scheduled_rate:
        send_p99 = tr.send_lag_ms.p99 if tr.send_lag_ms else None
        rows.append(("trace replay", f"{tr.achieved_rate:.2f} req/s sent of "
                                     f"{tr.scheduled_rate:.2f} scheduled "
                                     f"({tr.rate_error_pct or 0.0:+.2f} %)"
                                     + (f", send lag p99 {send_p99:.2f} ms" if send_p99 is not None
                                        else "")))
    return rows


def _load_rows(result: Result) -> list[tuple[str, str]]:
    """How many requests were in flight against how many were asked for, and whether the
    closed loop's sends bunched into lock-step waves."""
    load = result.load
    if load is None:
        return []
    rows: list[tuple[str, str]] = []
    mean, asked = load.in_flight_mean, load.concurrency
    if mean is not None and asked:
        rows.append(("in flight (time-weighted mean)", f"{mean:.2f} of {asked} asked "
                                                        f"({mean / asked:.0%})"))
    bunch = load.send_bunching
    if load.mode == "closed" and bunch is not None and (asked or 0) > 1:
        share, indep = bunch.share or 0.0, bunch.independent_share or 0.0
        text = (f"{share:.0%} of send gaps < {bunch.within_ms:g} ms (independent sends: "
                f"{indep:.0%})")
        if share > 0.2 and share > 3 * indep:
            text += ("; streams in lock-step waves, so each wave's prefills queue together "
                     "(equal lengths keep them in phase; an output-length distribution breaks it)")
        rows.append(("sends bunched", text))
    return rows


def _clock_rows(energy: Energy) -> list[tuple[str, str]]:
    """GPU clock state: a power cap is normal under load (said plainly); a thermal or hardware
    slowdown is a warning (its reasons named)."""
    rows: list[tuple[str, str]] = []
    if energy.throttled:
        reasons = ", ".join(energy.throttle_reasons or []) or "slowdown"
        rows.append(
            (
                "WARNING GPU THROTTLED",
                f"{reasons}: clocks pulled below the power limit (heat or hardware); "
                "throughput is below this GPU's normal",
            )
        )
    if energy.power_capped:
        rows.append(("GPU power", "at its power cap (sw_power_cap): normal under full load"))
    return rows


def _derived_rows(result: Result) -> list[tuple[str, str]]:
    """Precision, cost, energy and roofline rows (each says why when it is not available)."""
    rows: list[tuple[str, str]] = []
    plan = result.plan
    if plan is not None:
        rows.append(("precision (planned)", f"{plan.precision_label or plan.precision}"))
        if plan.queue_message:
            rows.append(("KV cache (planned)", plan.queue_message))
    if result.cost is not None:
        rows += _cost_rows(result.cost)
    if result.energy is not None:
        rows += _energy_rows(result.energy)
    roof = result.roofline
    if roof is not None and roof.available:
        step = roof.decode_step_time_source
        window_mbu = fmt_value(roof.mbu_pct, 1)
        step_mbu = fmt_value(roof.decode_step_mbu_pct, 1)
        rows.append(
            (
                "MBU window / decode step (%)",
                f"{window_mbu} / {step_mbu}"
                + (f" (step = {step.replace('_', ' ')})" if step else ""),
            )
        )
        rows.append(("prefill MFU (%)", fmt_value(roof.mfu_pct, 1)))
        if roof.above_ceiling:
            rows.append(("ABOVE HARDWARE CEILING", "measurement error: check the setup"))
    return rows


def _cost_rows(cost: Cost) -> list[tuple[str, str]]:
    """The price and what a million tokens cost at it (rented, filled, owned), or why not."""
    rows: list[tuple[str, str]] = []
    if cost.available:
        price = cost.price
        where = " ".join(str(v) for v in (price.provider, price.instance_type, price.region)
                         if v) if price else ""
        said = (price.reason if price is not None and price.kind == "user" and price.reason
                else f"{where}, {price.kind if price else None}")
        text = f"${cost.usd_per_hour:.2f}/h for {cost.gpus} GPU(s) ({said})"
        if price is not None and price.low is not None and price.high != price.low:
            text += f"; ${price.low:.2f}-${price.high:.2f} per GPU-hour across instances"
        age = price.catalog.age_days if price and price.catalog else None
        if age is not None and age > 90:
            text += f"; prices {age} days old"
        rows.append(("price", text))
        rows.append(("$ per 1M output tokens", fmt_value(cost.usd_per_million_output_tokens, 4)))
        rows.append(("$ per 1M total tokens", fmt_value(cost.usd_per_million_total_tokens, 4)))
        rows.append(("output tokens per $", fmt_value(cost.output_tokens_per_usd, 0)))
        filled = cost.filled
        if filled:
            rows.append((
                f"$ per 1M out, {filled.replicas} replicas",  # fits the key column (28)
                f"{fmt_value(filled.usd_per_million_output_tokens, 4)} (the engine used "
                f"{cost.run_gpus} of the instance's {cost.gpus} GPUs; this fills "
                "them with copies of it)"))
    else:
        rows.append(("cost", f"n/a ({cost.reason})"))
    owned = cost.owned
    if owned and owned.usd_per_hour is not None:
        rows.append(("owned: $ per hour", fmt_value(owned.usd_per_hour, 3)))
        rows.append(("owned: $ per 1M output tokens",
                     fmt_value(owned.usd_per_million_output_tokens, 4)))
        rows.append(("break-even vs renting (h)", fmt_value(owned.break_even_hours, 0)))
    return rows


def _energy_rows(energy: Energy) -> list[tuple[str, str]]:
    """Energy over the measured window and per output token, or why not; the GPU's clocks."""
    rows: list[tuple[str, str]] = []
    if energy.energy_j is not None:
        per_token = fmt_value(energy.joules_per_output_token, 3)
        rows.append(("energy (J) / J per output token", f"{energy.energy_j:,.0f} / {per_token}"))
    else:
        rows.append(("energy", f"n/a ({energy.reason})"))
    return rows + _clock_rows(energy)


def print_summary(result: Result, console: Console | None = None) -> None:
    """Print the latency table and the totals of a result (to stderr by default), and a run
    over LoRA adapters' figures per adapter."""
    console = console or Console(stderr=True)
    print_fitted(console, summary_table(result))
    print_adapters(result, console)
    print_fitted(console, totals_table(result))


def print_sweep(sweep: Sweep, console: Console | None = None) -> None:
    """The curve of a sweep: one row per load point, the knee marked."""
    console = console or Console(stderr=True)
    t = Table(title="sweep", title_justify="left")
    for col in (
        "load",
        "req/s",
        "out tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "tok/s/user",
        "tot tok/s/GPU",
        "goodput",
        "SLO",
        "valid",
    ):
        t.add_column(col, justify="right")
    knee_rows = {k.row for k in sweep.knees}
    for i, row in enumerate(sweep.points):
        prefix = "c" if row.mode == "closed" else "r"
        mark = " <- knee" if i in knee_rows else ""
        slo = {True: "pass", False: "FAIL", None: "-"}[row.slo_passed]
        t.add_row(
            f"{prefix}{row.load}{mark}",
            fmt_value(row.request_throughput, 2),
            fmt_value(row.output_throughput, 1),
            fmt_value(row.ttft_p50_ms),
            fmt_value(row.ttft_p99_ms),
            fmt_value(row.tpot_p50_ms),
            fmt_value(row.tpot_p99_ms),
            fmt_value(row.interactivity_tok_s_user, 1),
            fmt_value(row.total_tok_s_per_gpu, 1),
            fmt_value(row.goodput, 2),
            slo,
            "yes" if row.valid else "NO",
        )
    print_fitted(console, t, ("tot tok/s/GPU", "tok/s/user", "TPOT p99", "TTFT p99", "goodput"))
    fm = sweep.find_max
    if fm and fm.result:
        console.print(
            f"highest {fm.load} meeting the SLOs: {fm.result.best}"
            f" (first failing: {fm.result.first_fail})"
        )
