"""A run over LoRA adapters (``run --lora-modules NAME=PATH``, ``--lora-mix``): the adapters
read and the mix checked before anything starts, the server's ``/v1/models`` checked for every
adapter before any load, each request's adapter, and the result's ``lora`` section.

Before the start (:func:`plan_lora`): each adapter folder is read (its rank, the SHA-256 of its
weights: :mod:`infer_prof.catalog.lora_adapters`) and the mix parsed over their names
(:mod:`infer_prof.core.workload.adapter_mix`); a bad folder or a name not given is one line,
exit 2. Against an ``--endpoint`` the adapters are the server's: ``uniform`` and ``zipf`` take
those its ``/v1/models`` lists with a ``parent`` (vLLM lists each adapter so).

Once the server answers (:func:`check_served`): an adapter of the mix that ``/v1/models`` does
not list (an endpoint that does not serve it, or a launch that failed to register it) is one
line naming it and what the server lists, exit 2, before any load is sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from infer_prof.catalog.lora_adapters import AdapterError, LoraAdapter, read_adapters
from infer_prof.core.measurement import stats
from infer_prof.core.measurement.adapter_figures import per_adapter
from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.workload.adapter_mix import BASE, AdapterMix, MixError, parse_mix
from infer_prof.loadgen.closed_loop import RequestSpec
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.results.document_base import Distribution
from infer_prof.results.lora_sections import AdapterFigures, AdapterServed, Lora
from infer_prof.run.config import ConfigError, RunConfig
from infer_prof.servers.http_get import http_get
from infer_prof.servers.vllm_args import max_lora_rank

#: The mix when --lora-modules is given without --lora-mix.
DEFAULT_MIX = "uniform"


@dataclass(frozen=True)
class LoraPlan:
    """What :func:`plan_lora` fixed before the start: the adapters to launch with (none on an
    endpoint), the mix as given and its seed, and the mix itself when it could be resolved
    already (None on an endpoint for ``uniform``/``zipf``, resolved from its listing)."""

    adapters: tuple[LoraAdapter, ...]
    mix_text: str
    seed: int
    mix: AdapterMix | None
    max_lora_rank: int | None = None  # as launched: ours, or the user's --engine-arg
    max_loras: int | None = None


@dataclass(frozen=True)
class LoraRun:
    """The run's adapters once the server answered: the plan's adapters, the resolved mix, the
    engine's limits as launched (None on an endpoint) and what ``/v1/models`` listed."""

    adapters: tuple[LoraAdapter, ...]
    mix: AdapterMix
    listed: tuple[str, ...]
    max_lora_rank: int | None = None
    max_loras: int | None = None

    def as_plan(self) -> LoraPlan:
        """This run's adapters and mix as a plan, to check a relaunched server against."""
        return LoraPlan(self.adapters, self.mix.spec, self.mix.seed, self.mix,
                        self.max_lora_rank, self.max_loras)

    def adapter_of(self, index: int) -> str | None:
        """The adapter request (or multi-turn session) ``index`` asks for:
        :meth:`AdapterMix.pick` of it, None for ``base``."""
        name = self.mix.pick(index)
        return None if name == BASE else name

    def assign(self, specs: Iterable[RequestSpec]) -> Iterator[RequestSpec]:
        """``specs`` each with its adapter (:meth:`adapter_of` its index). Lazy: a
        duration-bound point's endless specs stay endless."""
        for spec in specs:
            yield replace(spec, adapter=self.adapter_of(spec.index))


def plan_lora(cfg: RunConfig) -> LoraPlan | None:
    """The run's adapters and mix, checked before anything starts (raises ConfigError, one
    line); None when the run uses no adapter."""
    engine, mix_text = cfg.engine, cfg.load.lora_mix
    if not engine.lora_modules and not mix_text:
        return None
    seed = cfg.prompts.seed if cfg.prompts.seed is not None else 0
    text = mix_text or DEFAULT_MIX
    try:
        adapters = tuple(read_adapters(engine.lora_modules))
    except AdapterError as exc:
        raise ConfigError(str(exc)) from None
    names = [a.name for a in adapters]
    limits = _limits(adapters, engine.engine_args)
    try:
        if engine.endpoint and _over_listing(text):
            return LoraPlan(adapters, text, seed, None, *limits)  # the endpoint's, once listed
        if engine.endpoint:  # explicit names: checked against the listing once it answers
            names = [n.split("=", 1)[0].strip() for n in text.split(",")]
            names = [n for n in names if n != BASE]
        return LoraPlan(adapters, text, seed, parse_mix(text, names, seed), *limits)
    except MixError as exc:
        raise ConfigError(str(exc)) from None


def _limits(adapters: Sequence[LoraAdapter], engine_args: Sequence[str]
            ) -> tuple[int | None, int | None]:
    """vLLM's ``--max-lora-rank`` and ``--max-loras`` as the launch gets them: the user's
    ``--engine-arg`` value where given, else ours (:func:`~infer_prof.servers.vllm_args.
    lora_flags`); (None, None) without adapters to launch (an endpoint)."""
    if not adapters:
        return None, None
    given = _engine_arg_values(engine_args)
    rank, loras = given.get("--max-lora-rank"), given.get("--max-loras")
    for flag, value in (("--max-lora-rank", rank), ("--max-loras", loras)):
        if value is not None and not value.isdigit():
            raise ConfigError(f"--engine-arg {flag} {value!r}: give a whole number")
    try:
        ours = max_lora_rank([a.rank for a in adapters])
    except ValueError as exc:
        raise ConfigError(f"{exc}; serve adapters of a lower rank") from None
    return (int(rank) if rank else ours, int(loras) if loras else len(adapters))


def _engine_arg_values(args: Sequence[str]) -> dict[str, str]:
    """``--flag=value`` and ``--flag value`` pairs of engine arguments as ``{flag: value}``."""
    out: dict[str, str] = {}
    for i, a in enumerate(args):
        if not a.startswith("--"):
            continue
        flag, sep, value = a.partition("=")
        if not sep and i + 1 < len(args) and not args[i + 1].startswith("--"):
            value = args[i + 1]
        out[flag] = value
    return out


def _over_listing(text: str) -> bool:
    """Whether the mix spreads over every adapter (``uniform``, ``zipf:A``), not named ones."""
    low = text.strip().lower()
    return low == "uniform" or low.startswith("zipf:")


def check_served(plan: LoraPlan, endpoint: Endpoint, api_key: str | None) -> LoraRun:
    """The run's adapters against what the server lists at ``/v1/models``: ConfigError (exit 2,
    before any load) naming each adapter of the mix it does not list. On an endpoint,
    ``uniform``/``zipf`` spread over the adapters it lists (those with a ``parent``)."""
    models = listed_models(endpoint, api_key)
    ids = tuple(m for m, _ in models)
    mix = plan.mix
    if mix is None:
        adapters = [m for m, parent in models if parent]
        try:
            mix = parse_mix(plan.mix_text, adapters, plan.seed)
        except MixError as exc:
            raise ConfigError(f"{exc} (the endpoint lists no LoRA adapter at /v1/models: "
                              f"{', '.join(ids) or 'nothing'})") from None
    missing = [a for a in mix.adapters if a not in ids]
    if missing:
        how = ("the launch did not register them: see the server log" if plan.adapters
               else "serve them there or fix the names in --lora-mix")
        raise ConfigError(f"LoRA adapter(s) {', '.join(missing)} not served: {endpoint.url}"
                          f"/v1/models lists {', '.join(ids) or 'nothing'} ({how})")
    return LoraRun(adapters=plan.adapters, mix=mix, listed=ids,
                   max_lora_rank=plan.max_lora_rank, max_loras=plan.max_loras)


def listed_models(endpoint: Endpoint, api_key: str | None) -> list[tuple[str, str | None]]:
    """Each model id ``/v1/models`` lists, with its ``parent`` (set for a LoRA adapter in
    vLLM's listing; None for the served model). ConfigError when it does not answer 200 with
    a model list."""
    try:
        status, body = http_get(f"{endpoint.url}/v1/models", 5.0, api_key,
                                endpoint.ssl_context())
        data = json.loads(body) if status == 200 else None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{endpoint.url}/v1/models could not be read to check the LoRA "
                          f"adapters: {exc}") from None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ConfigError(f"{endpoint.url}/v1/models gave no model list (HTTP {status}): the "
                          "LoRA adapters cannot be checked")
    return [(str(e.get("id")), e.get("parent") or None) for e in entries
            if isinstance(e, dict) and e.get("id")]


def lora_section(run: LoraRun, records: Sequence[RequestRecord],
                 rate_window_s: float | None, running_max: float | None = None) -> Lora:
    """The result's ``lora`` section: the mix, the adapters, the engine's limits, the listing,
    the most adapters the server ran at once (``running_max``, from its /metrics), and each
    name's figures (:func:`~infer_prof.core.measurement.adapter_figures.per_adapter`,
    in the mix's order, rates over the whole run's ``rate_window_s`` or window)."""
    mix = run.mix
    figures = per_adapter(records, mix.names, mix.shares, rate_window_s)
    return Lora(
        mix=mix.spec,
        seed=mix.seed,
        shares=dict(zip(mix.names, mix.shares, strict=True)),
        adapters=[AdapterServed(name=a.name, path=a.path, rank=a.rank, alpha=a.alpha,
                                target_modules=list(a.target_modules), sha256=a.sha256)
                  for a in run.adapters]
        or [AdapterServed(name=n) for n in mix.adapters],
        max_lora_rank=run.max_lora_rank,
        max_loras=run.max_loras,
        listed=list(run.listed),
        adapters_running_max=running_max,
        per_adapter=[
            AdapterFigures(
                adapter=f.adapter,
                share_asked=f.share_asked,
                share_sent=f.share_sent,
                requests_completed=f.summary.requests_completed,
                requests_failed=f.summary.requests_failed,
                ttft_ms=_dist(f.summary.ttft_ms),
                tpot_ms=_dist(f.summary.tpot_ms),
                itl_ms=_dist(f.summary.itl_ms),
                e2e_ms=_dist(f.summary.e2e_ms),
                request_throughput=f.summary.request_throughput,
                output_throughput=f.summary.output_throughput,
                total_throughput=f.summary.total_throughput,
                total_output_tokens=f.summary.total_output_tokens,
                total_prompt_tokens=f.summary.total_prompt_tokens,
            )
            for f in figures
        ],
    )


def _dist(d: stats.Distribution | None) -> Distribution | None:
    """A core distribution (``core.measurement.stats.Distribution``) as the result's."""
    if d is None:
        return None
    return Distribution(count=d.count, mean=d.mean, p50=d.p50, p90=d.p90, p99=d.p99,
                        max=d.max, min=d.min, std=d.std)
