"""What a run is given (:class:`RunConfig`: five typed sub-configs, each option declared once on
its field in :mod:`infer_prof.config.run_groups`), and the checks made before anything starts
(:func:`validate`: the one place the configuration is checked).

``infer_prof.cli.run`` builds the ``run`` command from the sub-configs' declarations and passes
the values to the fields by name; the only values that combine are the warm-up's
(:func:`combine_warmup`) and the per-endpoint lists (``Opt.repeat``, paired in
``infer_prof.cli.run_endpoints``). Code reads an option through its group (``cfg.load.
concurrency``, ``cfg.engine.model``), and a helper that needs one group takes that sub-config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, cast

from infer_prof.config.options import check_declared, parse_warmup
from infer_prof.config.run_groups import (
    SUB_CONFIGS,
    Api,
    CostConfig,
    EngineConfig,
    LoadConfig,
    PromptsConfig,
    ResultsConfig,
)
from infer_prof.core.messages import OneLineError


class ConfigError(OneLineError):
    """Bad input found before anything started; the message is one line naming the fix."""


#: Each option's sub-config, by field name (the names are unique across sub-configs).
GROUP_OF: dict[str, str] = {
    f.name: group for group, kind in SUB_CONFIGS.items() for f in fields(kind)
}


@dataclass(frozen=True, init=False)
class RunConfig:
    """Everything a run is given, in five typed sub-configs (one per group ``run --help``
    shows), each option declared once on its field. Built from options by name
    (``RunConfig(model="llama-2-7b", concurrency=[8])``: each goes to its sub-config) or from
    the sub-configs; never changed once made (:meth:`with_options` makes a new one). What the
    run decides from it (the API, the weights' load format, the engine plan) is the plan's
    (:class:`infer_prof.run.planning.RunPlan`), not written back here."""

    engine: EngineConfig
    load: LoadConfig
    prompts: PromptsConfig
    cost: CostConfig
    results: ResultsConfig

    def __init__(self, engine: EngineConfig | None = None, load: LoadConfig | None = None,
                 prompts: PromptsConfig | None = None, cost: CostConfig | None = None,
                 results: ResultsConfig | None = None, **options: Any) -> None:
        unknown = sorted(set(options) - set(GROUP_OF))
        if unknown:
            raise TypeError(f"RunConfig has no option {unknown[0]!r}")
        given = {"engine": engine, "load": load, "prompts": prompts, "cost": cost,
                 "results": results}
        for group, kind in SUB_CONFIGS.items():
            mine = {k: v for k, v in options.items() if GROUP_OF[k] == group}
            part = given[group]
            part = replace(part, **mine) if part is not None else kind(**mine)
            object.__setattr__(self, group, part)

    def with_options(self, **options: Any) -> RunConfig:
        """A copy with ``options`` (by field name) changed."""
        return RunConfig(self.engine, self.load, self.prompts, self.cost, self.results,
                         **options)

    def value(self, name: str) -> Any:
        """The value of the option named ``name`` (a field of one sub-config)."""
        return getattr(getattr(self, GROUP_OF[name]), name)

    def options(self) -> dict[str, Any]:
        """Every option by field name, one flat mapping (the result's ``config`` section)."""
        out: dict[str, Any] = {}
        for group in SUB_CONFIGS:
            out.update(asdict(getattr(self, group)))
        return out

    @staticmethod
    def sub_configs() -> tuple[type, ...]:
        """The sub-config classes, in the order ``run --help`` shows their groups."""
        return tuple(SUB_CONFIGS.values())


def combine_warmup(text: str | None, count: int | None) -> tuple[str | None, int | None]:
    """The command line's ``--warmup TEXT`` and ``--warmup-requests N`` as the fields
    ``(warmup, warmup_requests)``: the mode and the count
    (:func:`infer_prof.config.options.parse_warmup`). Raises ValueError when both are given."""
    if text is not None and count is not None:
        raise ValueError("give --warmup or --warmup-requests, not both")
    if text is not None:
        return parse_warmup(text)
    return ("requests" if count is not None else None), count


def _first_given(cfg: RunConfig, flags: dict[str, str]) -> str | None:
    """The first of ``flags`` (flag -> field name) whose field is set (truthy), or None."""
    return next((flag for flag, name in flags.items() if cfg.value(name)), None)


def _turns_clash(cfg: RunConfig) -> str | None:
    clash = _first_given(cfg, {"--suite": "suite", "--rate": "rates", "--trace": "trace"})
    return (f"--turns runs closed-loop sessions in one client process; drop {clash}"
            if cfg.prompts.turns is not None and clash else None)


def _trace_clash(cfg: RunConfig) -> str | None:
    clash = _first_given(cfg, {
        "--suite": "suite", "--concurrency": "concurrency", "--rate": "rates",
        "--input-len": "input_len", "--output-len": "output_len", "--duration": "duration_s",
        "--dataset": "dataset"})
    return f"--trace sets the arrivals and lengths itself; drop {clash}" if (
        cfg.prompts.trace and clash) else None


def _rule(broken: Callable[[RunConfig], object], message: str) -> Callable[[RunConfig], str | None]:
    return lambda cfg: message if broken(cfg) else None


_CHAT_TOKEN_IDS = ("--api chat sends text messages, not token IDs; drop --prompt token-ids "
                   "(chat uses --prompt text)")
_chat_token_ids = _rule(
    lambda c: c.engine.api == "chat" and c.prompts.prompt == "token-ids", _CHAT_TOKEN_IDS)

#: The rules between options, in the order they are checked: each returns the one-line message
#: of the broken rule, or None. (Rules that need the workload file, the model or the machine
#: are checked where those are read: run/load_points.py, run/session_setup.py,
#: run/frontier_run.py, run/planning.py.)
RULES: tuple[Callable[[RunConfig], str | None], ...] = (
    _rule(
        lambda c: c.load.concurrency and c.load.rates,
        "give --concurrency (closed loop) or --rate (open loop), not both",
    ),
    _rule(
        lambda c: c.load.suite and (c.load.workload or c.load.concurrency or c.load.rates),
        "--suite brings its own workloads and load points; drop --workload, --concurrency and "
        "--rate",
    ),
    _chat_token_ids,
    _rule(
        lambda c: c.prompts.think_time_s and c.prompts.turns is None,
        "--think-time applies to multi-turn sessions; give --turns K",
    ),
    _turns_clash,
    _trace_clash,
    _rule(
        lambda c: c.load.find_max and not c.load.slo and not c.load.workload,
        "--find-max needs SLOs to meet: give --slo ttft_p99=...,tpot_p99=...",
    ),
    _rule(
        lambda c: c.load.engine_sweep and not c.load.frontier,
        "--engine-sweep runs a frontier per configuration: add --frontier",
    ),
    _rule(
        lambda c: c.load.engine_sweep and c.engine.endpoint,
        "--engine-sweep relaunches vLLM per configuration; it cannot with --endpoint (drop one)",
    ),
    _rule(
        lambda c: c.load.frontier and c.load.find_max,
        "--frontier and --find-max both choose the load points; give one",
    ),
    _rule(
        lambda c: c.load.frontier and c.prompts.trace,
        "--trace replays its own arrival times; --frontier needs the load to vary: drop one "
        "of them",
    ),
    _rule(
        lambda c: c.load.repeat_relaunch and c.load.repeat < 2,
        "--repeat-relaunch restarts the server between repeats: give --repeat N (2 or more)",
    ),
    _rule(
        lambda c: c.engine.speculative_config and c.engine.endpoint,
        "--speculative-config starts vLLM with speculative decoding; an --endpoint runs with "
        "its own settings (drop --speculative-config; its acceptance is still read from its "
        "/metrics)",
    ),
    _rule(
        lambda c: c.load.repeat_relaunch and c.engine.endpoint,
        "--repeat-relaunch restarts the server it started; it cannot with --endpoint (drop one)",
    ),
    _rule(
        lambda c: c.load.repeat > 1 and (c.load.frontier or c.load.find_max),
        "--repeat measures the given load points again; --frontier and --find-max choose "
        "their own: drop --repeat or them",
    ),
    _rule(
        lambda c: c.load.target_interactivity is not None and not c.load.frontier,
        "--target-interactivity reads a frontier: add --frontier (or use compare "
        "--target-interactivity on frontier results)",
    ),
    _rule(
        lambda c: c.load.concurrency_from_estimate and not (
            c.load.frontier and c.load.target_interactivity is not None),
        "--concurrency-from-estimate picks a frontier's concurrencies around a target: add "
        "--frontier --target-interactivity X",
    ),
    _rule(
        lambda c: c.load.concurrency_from_estimate and c.load.suite,
        "--concurrency-from-estimate chooses the load points, and so does --suite: give one",
    ),
    _rule(
        lambda c: c.load.lora_mix and not c.engine.lora_modules and not c.engine.endpoint,
        "--lora-mix spreads requests over LoRA adapters: name them with --lora-modules "
        "NAME=PATH (or give the --endpoint that serves them)",
    ),
    _rule(
        lambda c: c.engine.lora_modules and c.engine.endpoint,
        "--lora-modules starts vLLM with the adapters; an --endpoint serves its own: drop "
        "--lora-modules and name its adapters in --lora-mix",
    ),
    _rule(
        lambda c: c.load.quality_reference and not c.load.quality,
        "--quality-reference compares a quality check: add --quality SPEC",
    ),
    _rule(
        lambda c: c.load.min_quality is not None and not c.load.quality_reference,
        "--min-quality is a share of a reference's accuracy: add --quality-reference RESULT",
    ),
)


def validate(cfg: RunConfig) -> None:
    """Reject bad option values before anything starts (raises :class:`ConfigError`, one line):
    each field's declared range and choices, ``--client-processes``, the rules between options
    (:data:`RULES`), the ``--endpoint`` URL and the ``--prices`` file. Pure but for reading that
    file; calling it again on the same configuration gives the same answer."""
    try:
        for group in SUB_CONFIGS:
            check_declared(getattr(cfg, group))
        check_client_processes(cfg.load.client_processes)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    for rule in RULES:
        message = rule(cfg)
        if message:
            raise ConfigError(message)
    from infer_prof.servers.registry import check_server_name  # not at import: --help

    bad_server = check_server_name(cfg.engine.server)
    if bad_server:
        raise ConfigError(bad_server)
    if cfg.engine.endpoint is not None:
        try:
            from infer_prof.loadgen.endpoint import Endpoint  # not at import: keeps --help fast

            Endpoint.from_url(
                cfg.engine.endpoint, ca_bundle=cfg.engine.ca_bundle, insecure=cfg.engine.insecure
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if cfg.cost.prices_file is not None:  # read now: a bad file is known before any load is sent
        from infer_prof.catalog.prices import PriceFileError, load_prices

        try:
            load_prices(cfg.cost.prices_file)
        except PriceFileError as exc:
            raise ConfigError(
                f"{exc}; fix the file, or leave out --prices to use the shipped catalog"
            ) from None


def check_api(prompts: PromptsConfig, api: Api) -> None:
    """The chat API takes text: refuse ``--prompt token-ids`` with it (raises ConfigError);
    ``api`` is the one the run resolved from its workloads (:func:`resolve_api`)."""
    if api == "chat" and prompts.prompt == "token-ids":
        raise ConfigError(_CHAT_TOKEN_IDS)


def resolve_api(engine: EngineConfig, workload_apis: list[str | None]) -> Api:
    """The API a run speaks: ``--api``, else its workloads' ``api`` (all the same), else
    ``completions``. Raises ConfigError when a suite's workloads ask for different ones."""
    if engine.api is not None:
        return engine.api
    asked = {a for a in workload_apis if a is not None}
    if len(asked) > 1:
        raise ConfigError(
            f"the workloads ask for different APIs ({', '.join(sorted(asked))}); "
            "give --api to run them all with one"
        )
    # (a workload file's api is one of these: checked when it is read, core/workload/workloads.py)
    return cast(Api, asked.pop()) if asked else "completions"


def check_client_processes(value: str | int) -> None:
    """``--client-processes`` must be ``auto`` or a positive integer (raises ConfigError)."""
    text = str(value).strip().lower()
    if text == "auto":
        return
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(
            f"--client-processes must be a positive integer or auto, got {str(value)!r}"
        )
