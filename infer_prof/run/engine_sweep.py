"""``run --frontier --engine-sweep``: one frontier per engine configuration, each on its own
vLLM launch, every frontier kept and the upper envelope marked (which configuration wins where).

Every configuration is checked and planned before the first server starts (an unknown setting,
or one the planner says does not fit: one line, exit 2); then each runs as ``run --frontier``
does (:func:`infer_prof.run.runner.execute`), its files tagged with the configuration's name
(with ``--output FILE``: the engine sweep's summary is ``FILE``, each configuration's frontier
``<FILE stem>-<configuration>.json`` and its points ``<FILE stem>-<configuration>-<point>.json``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from infer_prof.core.analysis.engine_sweep import (
    EngineConfig,
    EngineSweepError,
    envelope,
    parse_document,
    parse_flag,
)
from infer_prof.results.frontier_sections import Frontier
from infer_prof.results.store import result_paths, safe_name, write_result
from infer_prof.results.sweep_document import EngineConfigFrontier, decode_sweep
from infer_prof.run.config import ConfigError, RunConfig, validate
from infer_prof.run.record import SweepOutcome, now, sweep_summary
from infer_prof.run.result_files import check_result_location
from infer_prof.run.run_cost import check_total_cost

#: Settings passed to vLLM as engine arguments (the others are run options of their own).
_ENGINE_ARGS = ("max-num-seqs", "max-num-batched-tokens")
#: Settings that are RunConfig fields.
_FIELDS = {
    "quantization": "quantization",
    "tensor-parallel-size": "tensor_parallel_size",
    "kv-cache-dtype": "kv_cache_dtype",
    "dtype": "dtype",
    "gpu-memory-utilization": "gpu_memory_utilization",
    "max-model-len": "max_model_len",
    "enforce-eager": "enforce_eager",
}


def engine_configs(text: str) -> list[EngineConfig]:
    """``--engine-sweep``'s configurations: a TOML file (``[[config]]`` tables) when ``text``
    names a file or ends in ``.toml``, else the flag form ``setting=v1,v2``."""
    try:
        if text.endswith(".toml") or Path(text).is_file():
            path = Path(text).expanduser()
            try:
                doc = tomllib.loads(path.read_text())
            except OSError as exc:
                raise ConfigError(f"--engine-sweep {text}: {exc.strerror or exc}") from None
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"--engine-sweep {text}: {exc}") from None
            return parse_document(doc, str(path))
        return parse_flag(text)
    except EngineSweepError as exc:
        raise ConfigError(str(exc)) from None


def configured(cfg: RunConfig, ec: EngineConfig) -> RunConfig:
    """``cfg`` with configuration ``ec`` applied (engine arguments replace any given with
    ``--engine-arg``), tagged with its name for the file names."""
    fields: dict[str, Any] = {}
    flags = {f"--{k}" for k in ec.settings if k in _ENGINE_ARGS}
    args = [a for a in cfg.engine.engine_args if a.split("=", 1)[0] not in flags]
    for key, value in ec.settings.items():
        if key in _ENGINE_ARGS:
            args.append(f"--{key}={value}")
        else:
            fields[_FIELDS[key]] = value
    tag = safe_name(ec.name)
    output = cfg.results.output
    if output:  # --output names the engine sweep's file; each frontier's file is beside it
        out = Path(output)
        output = str(out.with_name(f"{out.stem}-{tag}{out.suffix or '.json'}"))
    return cfg.with_options(**fields, engine_args=args, engine_sweep=None, output=output,
                   run_tag=f"{cfg.results.run_tag}-{tag}" if cfg.results.run_tag else tag,
                   labels={**cfg.results.labels, "engine_config": ec.name})


def check(cfg: RunConfig) -> list[tuple[EngineConfig, RunConfig]]:
    """Every configuration, checked and planned before anything starts (ConfigError naming the
    configuration on bad input or when the planner says it does not fit)."""
    validate(cfg)  # the options' rules (run/config.py): needs --frontier, not --endpoint
    out = [(ec, configured(cfg, ec)) for ec in engine_configs(cfg.load.engine_sweep or "")]
    # each planned (bad input, does not fit), and every launch's expected cost together
    check_total_cost([(f"engine configuration {ec.name!r}", one) for ec, one in out],
                     cfg.cost.max_cost, "engine configurations")
    return out


def execute_engine_sweep(
    cfg: RunConfig, execute: Callable[[RunConfig], SweepOutcome]
) -> SweepOutcome:
    """Run the frontier of each configuration (``execute``: one launch each) and write the
    engine sweep summary ``<stamp>-<model>.engine-sweep.json``: the sweep rows of every point,
    ``engine_sweep.configs`` (each frontier, as ``run --frontier`` writes it) and
    ``engine_sweep.envelope``."""
    checked = check(cfg)  # ConfigError before anything starts
    check_result_location(cfg.results)  # --output: absent (or --overwrite), writable
    stamp = now().strftime("%Y%m%d-%H%M%S")
    outcomes = []
    configs: list[EngineConfigFrontier] = []
    for ec, one in checked:
        done = execute(one)
        outcomes.extend(done.points)
        read = done.sweep.frontier if done.sweep else None  # as its sweep file reads back
        frontier = read if isinstance(read, Frontier) else None
        configs.append(EngineConfigFrontier(
            name=ec.name, settings=dict(ec.settings), frontier=frontier,
            sweep_file=done.sweep_path.name if done.sweep_path else None))
        if not done.complete:
            break  # a configuration that did not complete ends the sweep, as a point does
    typed = sweep_summary(outcomes, None)
    typed.kind = "infer-prof.engine-sweep"
    summary = msgspec.to_builtins(typed)  # no frontier of its own: the configurations' below
    fronts = [(c.name, msgspec.to_builtins(c.frontier.points) if c.frontier else [])
              for c in configs]
    summary["engine_sweep"] = {
        "configs": msgspec.to_builtins(configs),
        "envelope": envelope(fronts),
        "problems": [],
    }
    short = [f"{c.name}: {'; '.join(c.frontier.problems)}"
             for c in configs if c.frontier and c.frontier.problems]
    if configs and len(short) == len(configs):  # no configuration gives an answer
        summary["engine_sweep"]["problems"] = short
    name = f"{stamp}-{safe_name(cfg.engine.model)}.engine-sweep"
    path = result_paths(cfg.results.output, Path(cfg.results.results_dir), name)[0]
    write_result(path, summary)  # held to its declared type (Sweep) first
    return SweepOutcome(outcomes, decode_sweep(summary), path)
