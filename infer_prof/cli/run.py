"""``infer-prof run``: profile a model on vLLM (started here) or on a running endpoint.

The command's options are :class:`~infer_prof.run.config.RunConfig`'s fields: each is declared
once, on its field (``Annotated[type, Opt(...)]``), and
:func:`~infer_prof.cli.declared.command_parameter` turns the declarations into typer options by
name, one help panel per group. The values go to the fields by the same names
(:func:`config_values`); the options that are no field of a run (how many endpoints, what is
printed) are declared once in :class:`RunCommandOptions`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from infer_prof.catalog.gpus import detect_gpus
from infer_prof.catalog.models import TINY_LLAMA
from infer_prof.cli.common import fail
from infer_prof.cli.declared import command_parameter
from infer_prof.cli.run_exit import finish_run, print_outcome
from infer_prof.cli.run_prices import check_instance
from infer_prof.config.options import OUTPUT, SERVER, Opt, declared_fields
from infer_prof.run.config import ConfigError, RunConfig, combine_warmup
from infer_prof.run.default_model import choose_default

if TYPE_CHECKING:  # (not at import: `infer-prof --help` stays light)
    from infer_prof.run.multi_endpoint import EndpointTarget


@dataclass
class RunCommandOptions:
    """The options of ``run`` that are no field of a run: several endpoints (each run is one
    :class:`RunConfig`) and the output format."""

    endpoints_file: Annotated[str | None, Opt(
        ("--endpoints",), "TOML file of endpoints to profile in turn, one endpoint table each: "
        "url, gpu, gpu_count, price_per_hour, label, served_model_name, api_key_env (see "
        "README).", SERVER)] = None
    endpoint_label: Annotated[list[str] | None, Opt(
        ("--endpoint-label",), "Name of each --endpoint (its row and result files).",
        SERVER)] = None
    json_output: Annotated[bool, Opt(
        ("--json",), "Print the summary as JSON on stdout.", OUTPUT)] = False


RUN_FIELDS = tuple(f for kind in RunConfig.sub_configs() for f in declared_fields(kind))
COMMAND_FIELDS = tuple(declared_fields(RunCommandOptions))


def config_values(given: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The command line's values as RunConfig field values, by field name (a value not given
    is left out: the field keeps its default), and the repeated per-endpoint lists apart.
    Bad text (a size, a load list, a label): one-line error, exit 2."""
    values: dict[str, Any] = {}
    repeated: dict[str, list[Any]] = {}
    try:
        for f in RUN_FIELDS:
            opt = f.opt
            if opt is None:  # an Internal field: set by the program
                continue
            value = given[f.name]
            if opt.repeat:
                repeated[f.name] = list(value or [])
            elif opt.negate:
                if value:
                    values[f.name] = False
            elif value is not None:
                values[f.name] = opt.parse(value, opt.flag) if opt.parse else value
        values["warmup"], values["warmup_requests"] = combine_warmup(
            values.get("warmup"), values.get("warmup_requests"))
    except ValueError as exc:
        fail(str(exc))
    return values, repeated


def run_command(**given: Any) -> None:
    """Profile a model: start vLLM, drive concurrent streams, report latency, throughput."""
    from infer_prof.cli.run_endpoints import run_many

    values, lists = config_values(given)
    cli = RunCommandOptions(**{f.name: given[f.name] for f in COMMAND_FIELDS})
    targets = _endpoints(values, lists, cli)
    cfg = RunConfig(**values)
    if "model" not in values:
        cfg = _default_model(cfg)
    if targets:
        run_many(cfg, targets, cli.json_output)
        return
    # imported here, not at the top: `infer-prof --help` must not pay for the engine side
    from infer_prof.run.runner import execute
    from infer_prof.servers.base import ServerStartError

    try:
        outcome = execute(cfg)
    except ConfigError as exc:
        fail(str(exc))
    except ServerStartError as exc:  # a refused key: the exit code of a run that measured nothing
        fail(str(exc), code=getattr(exc, "exit_code", 1))
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP before any load was sent
        fail(f"{exc or 'interrupted'} before any load was sent: nothing measured", code=3)
    print_outcome(outcome, cli.json_output, Console(stderr=False))
    finish_run(outcome, Console(stderr=True))


def _endpoints(values: dict[str, Any], lists: dict[str, list[Any]],
               cli: RunCommandOptions) -> list[EndpointTarget] | None:
    """The repeated per-endpoint options (``Opt.repeat``: --endpoint, --gpu, --gpus,
    --price-per-hour, with --endpoint-label or --endpoints FILE) as the endpoints of a
    several-endpoint run (None for one run), and their first values into ``values`` (the
    fields of the run; --instance names the GPU when --gpu is not given)."""
    from infer_prof.cli.run_endpoints import endpoint_targets

    gpu = lists["gpu"]
    instance_gpu = check_instance(values.get("instance"), values.get("prices_from"),
                                  gpu[0] if gpu else None)
    if instance_gpu and not gpu:
        gpu = lists["gpu"] = [instance_gpu]
    targets = endpoint_targets(lists["endpoint"], gpu, lists["gpus"], lists["price_per_hour"],
                               cli.endpoint_label, cli.endpoints_file)
    values.update({name: (items or [None])[0] for name, items in lists.items()})
    if targets:
        values["endpoint"] = targets[0].url
    return targets


_PARAMETERS = [command_parameter(f) for f in RUN_FIELDS + COMMAND_FIELDS if f.opt is not None]
run_command.__signature__ = inspect.Signature(_PARAMETERS)  # type: ignore[attr-defined]
run_command.__annotations__ = {p.name: p.annotation for p in _PARAMETERS} | {"return": None}


def _default_model(cfg: RunConfig) -> RunConfig:
    """No --model: tiny-llama, or on a GPU where it fits llama-2-7b with random weights at 128
    streams (:func:`infer_prof.run.default_model.choose_default`); says which and why. The
    load (unless given) and ``load_format`` (unless given) follow the choice."""
    if cfg.engine.endpoint:
        return cfg.with_options(model=TINY_LLAMA)  # only names the tokenizer/config
    choice = choose_default(detect_gpus())
    typer.echo(choice.why, err=True)
    load_given = cfg.load.rates or cfg.load.workload or cfg.load.suite or cfg.load.concurrency
    levels = [choice.concurrency] if choice.concurrency and not load_given else cfg.load.concurrency
    return cfg.with_options(model=choice.model, concurrency=levels,
                   load_format=cfg.engine.load_format or choice.load_format)
