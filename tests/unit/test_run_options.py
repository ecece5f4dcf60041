"""`infer-prof run`'s options are declared once, on RunConfig's fields (config/options.py Opt), the
command is built from them by name, and the rules between options are checked in one place
(run/config.py validate)."""

import ast
import inspect
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import pytest
from typer.testing import CliRunner

from infer_prof.cli import app
from infer_prof.cli import declared as cli_declared
from infer_prof.cli import run as cli_run
from infer_prof.config.options import GROUPS, Internal, Opt, declared_fields
from infer_prof.run.config import ConfigError, RunConfig, validate

ALL_FIELDS = cli_run.RUN_FIELDS + cli_run.COMMAND_FIELDS


def _flags(opt: Opt) -> list[str]:
    return [f for decl in opt.flags for f in decl.split("/")]


def test_every_field_has_a_flag_or_is_marked_internal():
    internal = [f.name for f in cli_run.RUN_FIELDS if f.opt is None]
    assert internal == ["run_tag", "telemetry_interval_s", "metrics_interval_s"]
    assert all(f.opt.group in GROUPS for f in ALL_FIELDS if f.opt)

    @dataclass
    class Bare:  # a field added without its declaration is refused, by name
        ok: Annotated[int, Internal("test")] = 0
        forgotten: int = 0

    with pytest.raises(TypeError, match="Bare.forgotten has no Opt"):
        list(declared_fields(Bare))


def test_no_flag_is_declared_twice():
    flags = [f for field in ALL_FIELDS if field.opt for f in _flags(field.opt)]
    assert len(flags) == len(set(flags)), sorted(f for f in flags if flags.count(f) > 1)
    # the command declares no option of its own beside the ones built from the fields
    def option_calls(module: object) -> int:
        tree = ast.parse(Path(module.__file__).read_text())  # type: ignore[attr-defined]
        return sum(isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "Option"
                   for n in ast.walk(tree))

    assert option_calls(cli_run) == 0
    assert option_calls(cli_declared) == 1  # in command_parameter
    names = [p.name for p in inspect.signature(cli_run.run_command).parameters.values()]
    assert names == [f.name for f in ALL_FIELDS if f.opt]  # the field names, in order


def test_hints_say_none_where_the_value_can_be_none():
    for p in inspect.signature(cli_run.run_command).parameters.values():
        if p.default is None:
            hint = typing.get_args(p.annotation)[0]
            assert isinstance(hint, types.UnionType) and type(None) in hint.__args__, p.name
    hints = {name: hint for kind in RunConfig.sub_configs()
             for name, hint in typing.get_type_hints(kind).items()}
    assert hints["concurrency"] == list[int] | None and hints["served_model_name"] == str | None


def _help_panels() -> dict[str, str]:
    out = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "320"}).output
    panels: dict[str, str] = {}
    name = None
    for line in out.splitlines():
        m = re.match(r"╭─ (.+?) ─", line)
        if m:
            name = m.group(1)
            panels[name] = ""
        elif name and line.startswith("│"):
            cell = re.match(r"│\s*((?:-{1,2}[\w-]+[\s,]*)+)<", line)
            if cell:
                panels[name] += " " + cell.group(1).replace(",", " ")
    return panels


def test_help_lists_every_flag_in_its_group():
    panels = _help_panels()
    assert list(panels) == ["Options", *GROUPS]
    for field in ALL_FIELDS:
        if field.opt:
            for flag in _flags(field.opt):
                assert flag in panels[field.opt.group].split(), (flag, field.opt.group)


def _values(**given_by_flag) -> dict:
    """config_values of the command's parameters with these flags given (as typer passes them:
    converted to the type the user types, a repeated one as a list)."""
    given = {p.name: p.default for p in inspect.signature(cli_run.run_command).parameters.values()}
    for flag, value in given_by_flag.items():
        flag = "--" + flag.replace("_", "-")
        field = next(f for f in ALL_FIELDS if f.opt and flag in _flags(f.opt))
        given[field.name] = value
    return cli_run.config_values(given)[0]


def test_values_go_to_the_fields_by_name():
    cfg = RunConfig(**_values(duration=5.0, no_history=True, label=["team=a"],
                              kv_cache_memory="2GiB", concurrency="8,1", warmup_requests=3,
                              engine_arg=["--seed 1"], purchase_price=1000.0, tp=2))
    assert (
        cfg.load.duration_s == 5.0
        and cfg.cost.purchase_usd == 1000.0
        and cfg.engine.tensor_parallel_size == 2
    )
    assert (
        cfg.results.history is False
        and cfg.results.progress is True
        and cfg.results.labels == {"team": "a"}
    )
    assert cfg.engine.kv_cache_memory_bytes == 2 * 2**30 and cfg.load.concurrency == [1, 8]
    assert (cfg.load.warmup, cfg.load.warmup_requests) == ("requests", 3)
    assert cfg.engine.engine_args == ["--seed", "1"]
    warm = _values(warmup="30s")
    assert (warm["warmup"], warm["warmup_requests"]) == ("30s", None)
    assert RunConfig(**_values()) == RunConfig()  # nothing given: every field's default


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--warmup", "8", "--warmup-requests", "3"],
            "give --warmup or --warmup-requests, not both",
        ),
        (["--think-time", "2"], "--think-time applies to multi-turn sessions; give --turns K"),
        (
            ["--turns", "2", "--rate", "1"],
            "--turns runs closed-loop sessions in one client process; drop --rate",
        ),
        (
            ["--trace", "t.csv", "--input-len", "9"],
            "--trace sets the arrivals and lengths itself; drop --input-len",
        ),
        (
            ["--suite", "nightly", "--concurrency", "4"],
            "--suite brings its own workloads and load "
            "points; drop --workload, --concurrency and --rate",
        ),
        (
            ["--target-interactivity", "5"],
            "--target-interactivity reads a frontier: add --frontier "
            "(or use compare --target-interactivity on frontier results)",
        ),
        (
            ["--target-interactivity", "-1", "--frontier"],
            "--target-interactivity must be positive tokens/s/user, got -1.0",
        ),
        (
            ["--gpu-memory-utilization", "1.5"],
            "--gpu-memory-utilization must be within (0, 1], got 1.5",
        ),
        (["--prompt", "ids"], "--prompt must be text or token-ids, got 'ids'"),
    ],
)
def test_bad_combinations_one_line_exit_2_before_anything(args, message):
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--no-progress",
            "--model",
            "tiny-llama",
            "--endpoint",
            "http://127.0.0.1:9",
            *args,
        ],
    )
    assert r.exit_code == 2, r.output
    assert r.stderr.strip() == f"error: {message}"


@pytest.mark.parametrize(
    "cfg",
    [
        RunConfig(think_time_s=1.0),
        RunConfig(turns=2, suite="nightly"),
        RunConfig(trace="t.csv", duration_s=5.0),
        RunConfig(suite="nightly", workload="chat"),
        RunConfig(target_interactivity=5.0),
        RunConfig(frontier=True, find_max=True, slo="ttft_p99=1"),
        RunConfig(engine_sweep="max-num-seqs=4"),
    ],
)
def test_validate_holds_every_rule_between_options(cfg):
    # these were checked in the phases (session_setup, load_points, runner, frontier_run,
    # engine_sweep); validate alone now refuses each, before anything starts
    with pytest.raises(ConfigError):
        validate(cfg)
