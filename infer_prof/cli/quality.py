"""``infer-prof quality``: the quality check on its own, on an OpenAI-compatible endpoint
(task accuracy and perplexity, and against a reference run). Exit 0, 1 when below
``--min-quality``, 2 on bad input (a malformed task line, an endpoint without prompt
log-probabilities, a reference of another model)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import msgspec
import typer

from infer_prof.cli.common import fail
from infer_prof.cli.declared import declared_command
from infer_prof.config.options import Opt, Range
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.quality.check import quality_line, run_check
from infer_prof.quality.completions_api import EndpointCallError, NoPromptLogprobs
from infer_prof.quality.reference import check_same, compare, load_reference
from infer_prof.quality.spec import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TOP_K,
    QualityInputError,
    load_inputs,
)
from infer_prof.results.quality_sections import QualityDocument


@dataclass(frozen=True)
class QualityOptions:
    """The options of ``infer-prof quality`` (:mod:`infer_prof.cli.declared`)."""

    endpoint: Annotated[str, Opt(
        ("--endpoint",), "The OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1.")]
    model: Annotated[str, Opt(("--model",), "The model name the endpoint serves.")]
    tasks: Annotated[str | None, Opt(
        ("--tasks",), "Task file (JSONL: prompt, answer, match = exact|number|regex|choice).")
    ] = None
    text: Annotated[str | None, Opt(
        ("--text",), "Text for perplexity, one passage a line.")] = None
    top_k: Annotated[int, Opt(
        ("--top-k",), "Top-k log-probabilities kept per text token (for KL against a "
        "reference).", range=Range("1 to 20", low=1, high=20))] = DEFAULT_TOP_K
    max_tokens: Annotated[int, Opt(
        ("--max-tokens",), "Longest answer generated per task item (tokens).",
        range=Range("a positive integer", low=1))] = DEFAULT_MAX_TOKENS
    quality_reference: Annotated[str | None, Opt(
        ("--quality-reference",), "A result of the same model (run --quality, or quality "
        "--output) to compare with: accuracy difference, perplexity ratio, KL.")] = None
    min_quality: Annotated[float | None, Opt(
        ("--min-quality",), "Share of the reference's accuracy required (0.99); under it the "
        "check is marked below the floor and exits 1.",
        range=Range("a share in (0, 1]", low=0, high=1, low_open=True))] = None
    api_key: Annotated[str | None, Opt(
        ("--api-key",), "Bearer token for the endpoint.", envvar="INFER_PROF_API_KEY")] = None
    output: Annotated[str | None, Opt(
        ("--output", "-o"), "Write the quality section here (JSON).")] = None


def quality(o: QualityOptions) -> None:
    """Measure a served model's quality: task accuracy (temperature 0) and perplexity through
    the completions API's prompt log-probabilities, optionally against a reference run."""
    if o.min_quality is not None and o.quality_reference is None:
        fail("--min-quality needs --quality-reference (the run whose accuracy it is a share of)")
    try:
        endpoint = Endpoint.from_url(o.endpoint, o.api_key)
        inputs = load_inputs(o.tasks, o.text, o.top_k, o.max_tokens)
        ref = load_reference(o.quality_reference) if o.quality_reference else None
        if ref is not None:
            check_same(ref, o.model, inputs.tasks_sha256, inputs.text_sha256)
        q = run_check(endpoint, o.model, inputs)
    except (ValueError, NoPromptLogprobs) as exc:  # QualityInputError is a ValueError
        fail(str(exc))
    except EndpointCallError as exc:
        fail(f"the quality check could not start: {exc}")
    if ref is not None:
        compare(q, ref, o.min_quality)
    typer.echo(quality_line(q))
    if o.output:
        doc = QualityDocument(schema_version=1, kind="infer-prof.quality", quality=q)
        Path(o.output).write_text(json.dumps(msgspec.to_builtins(doc), indent=1) + "\n")
    if q.below_floor:
        raise typer.Exit(1)


quality_command = declared_command(QualityOptions, quality)
__all__ = ["QualityInputError", "quality_command"]
