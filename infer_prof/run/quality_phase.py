"""``run --quality SPEC``: the quality check as a phase of the run, on the same server and
precision as the load (:mod:`infer_prof.quality`).

- before anything starts (:func:`prepare`): the task file and text read and checked, the
  reference read (a malformed line, a missing file: ConfigError, exit 2);
- once the server answers, before the load (:func:`before_load`): random weights
  (``--load-format dummy``, or a generated untrained model such as ``tiny-llama``) make the
  check *not measured*, said in one line; otherwise a reference of another model or an
  endpoint without prompt log-probabilities is a ConfigError (exit 2) before any load;
- after the load (:func:`after_load`): the check, the comparison with the reference, and the
  section written into every point's result file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from infer_prof.quality.check import not_measured, probe, quality_line, run_check
from infer_prof.quality.completions_api import EndpointCallError, NoPromptLogprobs
from infer_prof.quality.reference import Reference, check_same, compare, load_reference
from infer_prof.quality.spec import QualityInputError, QualityInputs, parse_spec
from infer_prof.results.document import decode_result
from infer_prof.results.quality_sections import Quality
from infer_prof.results.store import write_result
from infer_prof.run.config import ConfigError, RunConfig
from infer_prof.run.record import RunOutcome
from infer_prof.run.startup import RunContext

#: The marker file and generator of a model with random weights made by ``catalog.tinymodel``.
_TINY_MARKER = "infer_prof_tiny.json"
_RANDOM_GENERATORS = ("infer_prof.tinymodel",)


@dataclass(frozen=True)
class QualityPlan:
    """A run's quality check: its inputs, the reference and the floor."""

    inputs: QualityInputs
    reference: Reference | None
    min_quality: float | None


def prepare(cfg: RunConfig) -> QualityPlan | None:
    """The check ``cfg`` asks for (None without ``--quality``). Raises ConfigError."""
    if not cfg.load.quality:
        return None
    try:
        inputs = parse_spec(cfg.load.quality)
        ref = load_reference(cfg.load.quality_reference) if cfg.load.quality_reference else None
    except QualityInputError as exc:
        raise ConfigError(str(exc)) from None
    return QualityPlan(inputs, ref, cfg.load.min_quality)


def random_weights_reason(ctx: RunContext) -> str | None:
    """Why the served weights are random (None when they are not known to be)."""
    if ctx.load_format == "dummy":
        return "random weights (--load-format dummy)"
    if ctx.weights and ctx.weights.weights == "random":
        return "random weights"
    marker = Path(ctx.engine_path) / _TINY_MARKER
    try:
        generator = json.loads(marker.read_text()).get("generator") if marker.exists() else None
    except (OSError, ValueError):
        generator = None
    if generator in _RANDOM_GENERATORS:
        return f"{ctx.model.name} has random weights (generated, never trained)"
    return None


def before_load(plan: QualityPlan, ctx: RunContext, say: Callable[[str], None]) -> Quality | None:
    """What can be known before the load: the section when quality will not be measured
    (random weights: said in one line), else None once the reference and the endpoint are
    checked. Raises ConfigError for a reference of another model or an endpoint without prompt
    log-probabilities."""
    reason = random_weights_reason(ctx)
    if reason is not None:
        q = not_measured(reason, plan.inputs)
        say(quality_line(q))
        return q
    try:
        if plan.reference is not None:
            check_same(plan.reference, ctx.served, plan.inputs.tasks_sha256,
                       plan.inputs.text_sha256)
        if plan.inputs.text_lines:
            probe(ctx.endpoint, ctx.served)
    except (QualityInputError, NoPromptLogprobs) as exc:
        raise ConfigError(str(exc)) from None
    except EndpointCallError as exc:
        raise ConfigError(f"--quality: {exc}") from None
    return None


def after_load(plan: QualityPlan, ctx: RunContext, say: Callable[[str], None]) -> Quality:
    """The check on the served model after the load, compared with the reference."""
    try:
        q = run_check(ctx.endpoint, ctx.served, plan.inputs, say)
    except NoPromptLogprobs as exc:  # answered the probe, not the check: incomplete
        q = not_measured(str(exc), plan.inputs)
        q.status = "incomplete"
    if plan.reference is not None and q.status != "not_measured":
        compare(q, plan.reference, plan.min_quality)
    q.model = ctx.served
    say(quality_line(q))
    return q


def attach(outcomes: list[RunOutcome], q: Quality) -> None:
    """Write ``q`` as the ``quality`` section of every point's result file."""
    section = msgspec.to_builtins(q)
    for out in outcomes:
        doc = {**out.result, "quality": section}
        write_result(out.result_path, doc)  # held to the declared type
        out.document = decode_result(doc)
