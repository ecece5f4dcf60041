"""The metric table: every metric infer-prof reports, declared once.

Pure (no I/O). Each :class:`Metric` says what the metric is (its key in the result document,
display name, unit, which way is better), how it is obtained (a latency: the per-request formula
of :mod:`infer_prof.core.measurement.metrics` whose values the run summary pools into a
distribution; any other metric: the path in the result document it is read from) and where it shows.
The places (:data:`Place`) read this table instead of keeping their own lists:

==========  ==================================================================================
place       what shows the metric
==========  ==================================================================================
console     the latency table printed at the end of a run (``report.console``)
slo         ``--slo`` / a workload's ``[slo]`` keys, their check and goodput (``core.workload.slo``)
gate        ``infer-prof regress`` verdicts (``results.gate``), named as in the history
compare     ``infer-prof compare`` columns and their best values (``core.analysis.comparison``)
history     the key metrics of ``infer-prof history`` (``cli.history``)
endpoints   the several-endpoint table, JSON/CSV rows, console (``results.endpoint_rows``)
report      the HTML report's summary table and latency CDFs (``report.sections``)
sweep       the HTML report's latency-against-load charts (``report.sections``)
==========  ==================================================================================

A latency metric shows at a place with the statistics its :class:`Show` names (columns
``<column>_<stat>``, paths ``summary.<key>.<stat>``); the ``--json`` summary
(``results.schema.public_summary``) holds every latency of the table. Adding a metric: one entry
in :data:`METRICS` (and, for a new latency, its per-request formula and its field of the run
summary in :mod:`infer_prof.core.measurement.metrics`); docs/development.md walks through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, cast, get_args

from infer_prof.core.measurement.metrics import (
    RequestRecord,
    answer_tpot_ns,
    e2e_ns,
    itl_ns,
    queue_ns,
    tpot_ns,
    ttfo_ns,
    ttft_ns,
)

Better = Literal["lower", "higher"]
#: latency: a distribution over requests (ms); rate: per second; cost: $; energy: J; quality:
#: the quality check's figures (a share of items, a perplexity, a KL divergence against the
#: reference run in nats per token); tokens: a token count per request; server: the server
#: state that changes the numbers (the prefix cache's hit rate, speculative decoding's
#: acceptance: docs/measurement.md)
Kind = Literal["latency", "rate", "cost", "energy", "quality", "tokens", "server"]
Place = Literal["console", "slo", "gate", "compare", "history", "endpoints", "report", "sweep"]
PLACES: tuple[Place, ...] = get_args(Place)

#: The statistics a run summary holds of each latency distribution (``core.measurement.stats``).
SUMMARY_STATS = ("mean", "p50", "p90", "p99", "max")
#: Places whose latency headers carry the unit (their tables have no caption saying "ms").
UNIT_IN_HEADER: frozenset[Place] = frozenset({"compare"})


@dataclass(frozen=True)
class Show:
    """How a metric shows at one place. ``stats``: for a latency, the statistics shown (a
    column each); ``label``, ``digits``, ``path``: that place's header, decimals and result path
    where they differ from the metric's own; ``when_measured``: a table there shows its column
    only where some row has a value (compare's console table: what a plain run does not measure,
    as a reasoning model's TTFO or the quality check, stays out of it; CSV and JSON keep every
    column)."""

    stats: tuple[str, ...] = ()
    label: str | None = None
    digits: int | None = None
    path: str | None = None
    when_measured: bool = False


@dataclass(frozen=True)
class Metric:
    """One metric.

    ``key``: its key in the result document (``summary.ttft_ms``, ``summary.request_throughput``,
    ``cost.usd_per_hour``). ``column``: the short key of table rows and SLOs (``ttft`` ->
    ``ttft_p99``). ``path``: where the result holds it, dotted, alternatives (older spellings)
    separated by ``|``. ``samples_ns``: a latency's per-request values in ns (one, none when
    undefined, or several: ITL's gaps), pooled over completed requests into its distribution.
    ``sample_noun``: what one of those values is; ``many_per_request``: a request gives several,
    which are not independent. ``title``: the long name of the report's plots."""

    key: str
    column: str
    name: str
    unit: str
    better: Better
    kind: Kind
    path: str
    shows: Mapping[Place, Show] = field(default_factory=dict)
    samples_ns: Callable[[RequestRecord], list[float]] | None = None
    title: str = ""
    digits: int = 2
    sample_noun: str = "requests"
    many_per_request: bool = False

    def show(self, place: Place) -> Show | None:
        """How it shows at ``place``; None when it does not."""
        return self.shows.get(place)


@dataclass(frozen=True)
class Column:
    """One column a place shows: ``key`` (row key: ``ttft_p99``, ``request_throughput``),
    ``label`` (header), ``path`` (dotted result path, ``|`` alternatives), ``better``,
    ``digits``, and the metric (and statistic, for a latency) it comes from."""

    key: str
    label: str
    path: str
    better: Better
    digits: int
    metric: Metric
    stat: str | None = None

    @property
    def history_name(self) -> str:
        """The name the history and the gate give it: the path less ``summary.``, alternatives
        kept (``ttft_ms.p99``, ``cost.usd_per_million_output_tokens|cost.usd_per_1m_...``)."""
        return "|".join(a.removeprefix("summary.") for a in self.path.split("|"))


def _one(
    formula: Callable[[RequestRecord], float | None],
) -> Callable[[RequestRecord], list[float]]:
    """A per-request formula giving one value (or None) as a list of samples."""

    def samples(r: RequestRecord) -> list[float]:
        v = formula(r)
        return [] if v is None else [float(v)]

    samples.__doc__ = formula.__doc__
    return samples


def _itl(r: RequestRecord) -> list[float]:
    return itl_ns(r)


P50_P99 = ("p50", "p99")
_EVERYWHERE: tuple[Place, ...] = PLACES


def _latency_shows(*places: Place, **override: Show) -> dict[Place, Show]:
    """p50 and p99 at each of ``places``, every summary statistic on the console, any
    statistic as an SLO; ``override`` replaces a place's."""
    out: dict[Place, Show] = {}
    for p in places:  # an SLO takes any statistic (core.workload.slo): none listed
        out[p] = Show() if p == "slo" else Show(SUMMARY_STATS if p == "console" else P50_P99)
    return _with(out, override)


def _at(*places: Place, **override: Show) -> dict[Place, Show]:
    """A scalar metric shown at ``places``; ``override`` replaces a place's :class:`Show`."""
    return _with({p: Show() for p in places}, override)


def _with(shows: dict[Place, Show], override: Mapping[str, Show]) -> dict[Place, Show]:
    for place, show in override.items():
        if place not in PLACES:
            raise ValueError(f"unknown place {place!r}; places: {', '.join(PLACES)}")
        shows[cast(Place, place)] = show
    return shows


_MEASURED = Show(when_measured=True)
_MEASURED_P50_P99 = Show(P50_P99, when_measured=True)

_OUT_USD = "cost.usd_per_million_output_tokens|cost.usd_per_1m_output_tokens"

#: Every metric, in the order tables show them (the gate judges rates, then latencies, then
#: the rest, each in this order).
METRICS: tuple[Metric, ...] = (
    Metric("request_throughput", "request_throughput", "req/s", "requests/s", "higher", "rate",
           "summary.request_throughput", _at("gate", "compare", "history", "endpoints")),
    Metric("output_throughput", "output_throughput", "out tok/s", "output tokens/s", "higher",
           "rate", "summary.output_throughput", _at("gate", "compare", "history", "endpoints"),
           digits=1),
    Metric("ttft_ms", "ttft", "TTFT", "ms", "lower", "latency", "summary.ttft_ms",
           _latency_shows(*_EVERYWHERE, endpoints=Show(P50_P99, digits=1)),
           samples_ns=_one(ttft_ns)),
    Metric("ttfo_ms", "ttfo", "TTFO", "ms", "lower", "latency", "summary.ttfo_ms",
           _latency_shows("console", "slo", "gate", "compare", "history", "report",
                          history=Show(("p50",)), compare=_MEASURED_P50_P99),
           samples_ns=_one(ttfo_ns), title="time to first output (answer) token"),
    Metric("tpot_ms", "tpot", "TPOT", "ms", "lower", "latency", "summary.tpot_ms",
           _latency_shows(*_EVERYWHERE, history=Show(("p50",))), samples_ns=_one(tpot_ns)),
    Metric("answer_tpot_ms", "answer_tpot", "answer TPOT", "ms", "lower", "latency",
           "summary.answer_tpot_ms",
           _latency_shows("console", "slo", "gate", "compare", compare=_MEASURED_P50_P99),
           samples_ns=_one(answer_tpot_ns), title="time per answer token"),
    Metric("itl_ms", "itl", "ITL", "ms", "lower", "latency", "summary.itl_ms",
           _latency_shows("console", "slo", "gate", "endpoints", "report"),
           samples_ns=_itl, sample_noun="inter-token gaps", many_per_request=True),
    Metric("e2e_ms", "e2e", "E2E", "ms", "lower", "latency", "summary.e2e_ms",
           _latency_shows("console", "slo", "gate", "compare", "endpoints", "report", "sweep",
                          endpoints=Show(P50_P99, digits=1)),
           samples_ns=_one(e2e_ns), title="E2E latency"),
    Metric("queue_ms", "queue", "queue", "ms", "lower", "latency", "summary.queue_ms",
           {"console": Show(SUMMARY_STATS, label="queue (client)")}, samples_ns=_one(queue_ns)),
    Metric("interactivity_tok_s_user", "interactivity", "tok/s/user", "tokens/s per user",
           "higher", "rate", "summary.interactivity_tok_s_user",
           _at("gate", "compare", "history", "endpoints"), digits=1),
    Metric("interactivity_p90_tok_s_user", "interactivity_p90", "tok/s/user p90",
           "tokens/s per user", "higher", "rate", "summary.interactivity_p90_tok_s_user",
           _at("gate", "compare"), digits=1),
    Metric("prefill_tok_s_user", "prefill_tok_s_user", "prefill tok/s/user",
           "prompt tokens/s per user", "higher", "rate", "summary.prefill_tok_s_user.p50",
           _at("gate", "compare", "history", history=Show(label="prefill tok/s/user"))),
    Metric("output_tok_s_per_gpu", "output_tok_s_per_gpu", "out tok/s/GPU", "tokens/s per GPU",
           "higher", "rate", "summary.output_tok_s_per_gpu", _at("gate", "compare"), digits=1),
    Metric("input_tok_s_per_gpu", "input_tok_s_per_gpu", "in tok/s/GPU", "tokens/s per GPU",
           "higher", "rate", "summary.input_tok_s_per_gpu", _at("gate", "compare"), digits=1),
    Metric("total_tok_s_per_gpu", "total_tok_s_per_gpu", "tot tok/s/GPU", "tokens/s per GPU",
           "higher", "rate", "summary.total_tok_s_per_gpu",
           _at("gate", "compare", "history", "endpoints"), digits=1),
    Metric("usd_per_hour", "usd_per_hour", "$/hour", "$", "lower", "cost", "cost.usd_per_hour",
           _at("compare", "endpoints", endpoints=Show(label="$/h"))),
    Metric("usd_per_million_output_tokens", "usd_per_1m_output", "$/1M out tok", "$", "lower",
           "cost", f"summary.usd_per_million_output_tokens|{_OUT_USD}",
           _at("gate", "compare", "history", "endpoints",
               gate=Show(path=_OUT_USD),
               history=Show(label="$/1M out", path=_OUT_USD),
               endpoints=Show(label="$/1M out", digits=3,
                              path="cost.usd_per_million_output_tokens")),
           digits=4),
    Metric("usd_per_million_input_tokens", "usd_per_1m_input", "$/1M in tok", "$", "lower",
           "cost", "summary.usd_per_million_input_tokens", _at("gate", "compare"), digits=4),
    Metric("usd_per_million_total_tokens", "usd_per_1m_total", "$/1M tot tok", "$", "lower",
           "cost", "summary.usd_per_million_total_tokens|cost.usd_per_million_total_tokens",
           _at("gate", "compare", "history", "endpoints",
               gate=Show(path="summary.usd_per_million_total_tokens"),
               history=Show(label="$/1M tot"),
               endpoints=Show(label="$/1M total", digits=3,
                              path="cost.usd_per_million_total_tokens")),
           digits=4),
    Metric("output_tokens_per_usd", "output_tokens_per_usd", "out tok/$", "output tokens per $",
           "higher", "cost", "cost.output_tokens_per_usd", _at("compare"), digits=0),
    Metric("joules_per_output_token", "joules_per_token", "J/out tok", "J", "lower", "energy",
           "energy.joules_per_output_token", _at("gate", "compare"), digits=4),
    Metric("joules_per_total_token", "joules_per_total_token", "J/tot tok", "J", "lower",
           "energy", "summary.joules_per_total_token", _at("gate", "compare"), digits=4),
    Metric("prefix_cache_hit_rate", "prefix_hit_rate", "prefix hits", "share of prompt tokens",
           "higher", "server", "summary.prefix_cache_hit_rate",
           _at("compare", "history", compare=Show(label="prefix hit", when_measured=True)),
           digits=3),
    Metric("spec_acceptance_rate", "spec_acceptance", "accept rate", "share of draft tokens",
           "higher", "server", "summary.spec_acceptance_rate",
           _at("compare", "history", compare=_MEASURED), digits=3),
    Metric("spec_acceptance_length", "spec_length", "accept len", "tokens per verify step",
           "higher", "server", "summary.spec_acceptance_length",
           _at("compare", "history", compare=_MEASURED), digits=2),
    Metric("reasoning_tokens", "reasoning_tokens", "reasoning tok", "tokens per request",
           "lower", "tokens", "reasoning.reasoning_tokens.mean",
           _at("compare", "history", compare=_MEASURED), digits=1),
    Metric("answer_tokens", "answer_tokens", "answer tok", "tokens per request", "lower",
           "tokens", "reasoning.answer_tokens.mean", _at(compare=_MEASURED), digits=1),
    Metric("quality_accuracy", "accuracy", "accuracy", "share of task items", "higher",
           "quality", "quality.accuracy", _at("compare", "history", compare=_MEASURED),
           digits=3),
    Metric("quality_perplexity", "perplexity", "perplexity", "", "lower", "quality",
           "quality.perplexity", _at("compare", "history", compare=_MEASURED), digits=3),
    Metric("quality_mean_kl", "kl", "KL", "nats per token", "lower", "quality",
           "quality.reference.mean_kl",
           _at("compare", "history", compare=Show(label="KL nats/tok", when_measured=True)),
           digits=4),
)


def metrics_at(place: Place, kind: Kind | None = None) -> tuple[Metric, ...]:
    """The metrics shown at ``place`` (of ``kind`` only, when given), in table order."""
    return tuple(m for m in METRICS if place in m.shows and (kind is None or m.kind == kind))


def latencies() -> tuple[Metric, ...]:
    """Every latency metric (each a distribution in the run summary), in table order."""
    return tuple(m for m in METRICS if m.kind == "latency")


def columns_of(metric: Metric, place: Place) -> tuple[Column, ...]:
    """The columns ``metric`` gives at ``place``: a latency one per statistic shown there
    (``ttft_p99``, label ``TTFT p99``, path ``summary.ttft_ms.p99``), any other metric one."""
    show = metric.shows.get(place)
    if show is None:
        return ()
    label = show.label or metric.name
    path = show.path or metric.path
    digits = metric.digits if show.digits is None else show.digits
    if metric.kind != "latency":
        return (Column(metric.column, label, path, metric.better, digits, metric),)
    unit = f" {metric.unit}" if place in UNIT_IN_HEADER else ""
    return tuple(
        Column(f"{metric.column}_{stat}", f"{label} {stat}{unit}",
               "|".join(f"{alt}.{stat}" for alt in path.split("|")),
               metric.better, digits, metric, stat)
        for stat in show.stats
    )


def columns_at(place: Place, kind: Kind | None = None) -> tuple[Column, ...]:
    """Every column shown at ``place`` (of metrics of ``kind``, when given), in table order."""
    return tuple(c for m in metrics_at(place, kind) for c in columns_of(m, place))


def metric_by_column(column: str) -> Metric:
    """The metric whose short key is ``column`` (``ttft``); KeyError when none is."""
    for m in METRICS:
        if m.column == column:
            return m
    raise KeyError(column)


def better_for(history_name: str) -> Better | None:
    """Which way is better for a metric named as the history names it (``ttft_ms.p99``,
    ``cost.usd_per_hour``, ``output_throughput``); None for a name the table does not hold."""
    for m in METRICS:
        for alt in m.path.split("|"):
            name = alt.removeprefix("summary.")
            stat_of_it = m.kind == "latency" and history_name.startswith(name + ".")
            if history_name == name or stat_of_it:
                return m.better
        for show in m.shows.values():
            if show.path and history_name in (a.removeprefix("summary.")
                                              for a in show.path.split("|")):
                return m.better
    return None
