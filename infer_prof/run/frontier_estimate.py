"""``run --frontier --concurrency-from-estimate``: the concurrencies to measure, taken from the
predicted curve around ``--target-interactivity``, so fewer points are measured on a rented GPU.

Before anything starts: the model's architecture, the GPU (``--gpu`` / ``--instance`` or the
one detected) and the planner's configuration on it
(:func:`infer_prof.estimate.configs.plan_configs`: GPU count, precision, KV limit, vLLM's
per-step token budget; ``--gpus`` when given) give the predicted interactivity of ``c`` streams
(:func:`infer_prof.core.estimate.frontier_model.predict_point`, with
the architecture family's default factors), and
:func:`infer_prof.core.analysis.frontier_levels.levels_around_target` picks 1, half the predicted
concurrency at the target, it, twice it, and the limit (the KV cache's, capped by
``--max-concurrency``). They run as a ``--concurrency`` list does (every level, no plateau stop).

Refused (ConfigError, one line) without a target, with a load list or an open loop, without a
GPU to predict for, or for a model or GPU the predictor cannot take.
"""

from __future__ import annotations

import math
from dataclasses import replace

from infer_prof.catalog.estimate_factors import factors_for
from infer_prof.catalog.models import ModelError, resolve_model
from infer_prof.core.analysis.frontier_levels import LevelChoice, levels_around_target
from infer_prof.core.estimate.frontier_model import predict_point
from infer_prof.estimate.configs import plan_configs
from infer_prof.run.config import ConfigError, RunConfig
from infer_prof.run.engine_setup import resolve_gpu
from infer_prof.run.frontier_run import FrontierSpec, prepare
from infer_prof.run.load_points import base_workload

FLAG = "--concurrency-from-estimate"


def choose_levels(cfg: RunConfig) -> LevelChoice:
    """The concurrencies to measure for ``cfg``'s target, from the predicted curve (module
    docstring). Raises ConfigError when they cannot be predicted."""
    target = cfg.load.target_interactivity
    if target is None:
        raise ConfigError(f"{FLAG} reads the predicted curve at a target: add "
                          "--target-interactivity X")
    try:
        model = resolve_model(cfg.engine.model)
    except ModelError as exc:
        raise ConfigError(str(exc)) from None
    if model.spec is None:
        raise ConfigError(f"{FLAG}: {model.name} has no architecture to predict with; give "
                          "the concurrencies (--concurrency LIST)")
    gpu, _, how = resolve_gpu(cfg.engine)
    if gpu is None:
        raise ConfigError(f"{FLAG} predicts a GPU's curve and no GPU is known ({how}): give "
                          "--gpu NAME (or --instance)")
    wl = base_workload(cfg)
    i, o = round(wl.input_len.mean()), max(1, round(wl.output_len.mean()))
    configs = plan_configs(model.spec, gpu, input_len=i, output_len=o,
                           quantization=cfg.engine.quantization or "auto",
                           gpus=cfg.engine.gpus or cfg.engine.tensor_parallel_size)
    if isinstance(configs, str):
        raise ConfigError(f"{FLAG}: {model.name} on {gpu.key}: {configs}")
    c, arch = configs[0], model.spec
    limit = min(c.max_concurrency, cfg.load.max_concurrency or c.max_concurrency)
    deployment = c.deployment(arch, factors_for(gpu))

    def interactivity_at(streams: int) -> float:
        p = predict_point(deployment, input_len=i, output_len=o, concurrency=streams)
        return p.interactivity if math.isfinite(p.interactivity) else 0.0

    try:
        return levels_around_target(interactivity_at, target, limit)
    except ValueError as exc:  # a precision the catalog has no FLOP/s for on this GPU
        raise ConfigError(f"{FLAG}: {model.name} on {gpu.key}: {exc}") from None


def from_estimate(
    given: RunConfig, prepared: RunConfig, spec: FrontierSpec
) -> tuple[RunConfig, FrontierSpec, str]:
    """The configuration ``prepared`` and its frontier ``spec`` (what
    :func:`~infer_prof.run.frontier_run.prepare` made of the ``given`` one) with the levels of
    :func:`choose_levels`, run as a list; and the line that says them."""
    if given.load.concurrency or given.load.rates:
        raise ConfigError(f"{FLAG} chooses the concurrencies: drop --concurrency/--rate (or the "
                          "flag)")
    if spec.loop != "closed":
        raise ConfigError(f"{FLAG} predicts closed-loop streams; the workload is an open loop "
                          "(drop the flag, or give a closed-loop workload)")
    choice = choose_levels(given)
    levels = tuple(float(x) for x in choice.levels)
    new = prepared.with_options(concurrency=list(choice.levels))
    line = f"frontier from the estimate: {choice.why}"
    if not choice.reachable:
        line += " (the target is not expected to be bracketed: see the answer after the run)"
    return new, replace(spec, levels=levels, explicit=True,
                        ceiling_reason="list: every level predicted around the target was run"), \
        line


def frontier_levels(given: RunConfig) -> tuple[RunConfig, FrontierSpec, str | None]:
    """A ``--frontier`` run's configuration and levels (:func:`~infer_prof.run.frontier_run.
    prepare`; with ``--concurrency-from-estimate`` :func:`from_estimate`'s), and the line that
    says how the estimate chose them (None without it). ConfigError before anything starts."""
    cfg, spec = prepare(given, base_workload(given).arrival.mode == "open")
    if not given.load.concurrency_from_estimate:
        return cfg, spec, None
    return from_estimate(given, cfg, spec)
