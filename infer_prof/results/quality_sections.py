"""The result's ``quality`` section: what the quality check measured on the endpoint
(:mod:`infer_prof.quality.check`), and its comparison with a reference run
(:mod:`infer_prof.quality.reference`).

``status`` is ``measured``, ``not_measured`` (random weights, or no check asked: ``reason``
says why, and every figure is null, never a number) or ``incomplete`` (the endpoint failed
part-way: ``reason`` says how; what was measured until then is kept). Accuracy is a share
(0..1) of the task file's items graded correct at temperature 0, with its Wilson score
interval; perplexity is ``exp(-mean ln p)`` over the text's scored tokens; KL is in nats per
token (``core.quality.likelihood``).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from infer_prof.results.document_base import Section

QualityStatus = Literal["measured", "not_measured", "incomplete"]


class ItemOutcome(Section):
    """One task item: graded ``correct``, and the completion the endpoint gave."""

    correct: bool
    output: str | None = None


class TokenLogprob(Section):
    """One scored token of the text: the token, its natural-log probability, and the top-k
    alternatives the endpoint returned (token -> ln p) at that position."""

    token: str
    logprob: float
    top: dict[str, float] = {}


class Passage(Section):
    """One line of the text, scored as one prompt: its tokens after the first."""

    tokens: list[TokenLogprob] = []


class QualityReference(Section):
    """The comparison with a reference run of the same model (``--quality-reference``):
    accuracy here minus there with its paired bootstrap interval, the perplexity ratio (here /
    there), the mean KL divergence ``KL(reference || here)`` in nats per token over
    ``kl_tokens`` positions (top-k, coarsened: ``core.quality.likelihood``), and
    ``quality_share`` = accuracy here / accuracy there."""

    result: str
    run_id: str | None = None
    precision: str | None = None
    accuracy: float | None = None
    perplexity: float | None = None
    accuracy_difference: float | None = None
    accuracy_difference_low: float | None = None
    accuracy_difference_high: float | None = None
    accuracy_difference_method: str | None = None
    quality_share: float | None = None
    perplexity_ratio: float | None = None
    mean_kl: float | None = None
    kl_tokens: int | None = None


class Quality(Section):
    """The ``quality`` section (see the module): the task file (path, SHA-256, items, correct),
    accuracy with its interval, the text (path, SHA-256, prompts, scored tokens), its
    perplexity, the top-k asked for, seconds the check took, the reference comparison, and
    the floor (``min_quality``: the share of the reference's accuracy required; ``below_floor``
    true when under it)."""

    status: QualityStatus
    reason: str | None = None
    model: str | None = None
    tasks_file: str | None = None
    tasks_sha256: str | None = None
    items: int | None = None
    correct: int | None = None
    accuracy: float | None = None
    accuracy_low: float | None = None
    accuracy_high: float | None = None
    accuracy_interval: str | None = None
    text_file: str | None = None
    text_sha256: str | None = None
    text_prompts: int | None = None
    scored_tokens: int | None = None
    perplexity: float | None = None
    top_k: int | None = None
    duration_s: float | None = None
    reference: QualityReference | None = None
    min_quality: float | None = None
    below_floor: bool | None = None
    outcomes: list[ItemOutcome] = []
    passages: list[Passage] = []


class QualityDocument(Section):
    """What ``infer-prof quality --output`` writes: the section alone, under ``quality`` (a
    run's result holds the same section; either can be a ``--quality-reference``)."""

    schema_version: int
    kind: Literal["infer-prof.quality"]
    quality: Quality


def decode_quality(data: object) -> Quality:
    """A ``quality`` section (parsed JSON) as :class:`Quality`; raises msgspec.ValidationError."""
    return msgspec.convert(data, Quality, strict=False)
