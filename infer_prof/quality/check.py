"""The quality check on an endpoint: each task item completed at temperature 0 and graded by
its match rule, then each text line scored through its prompt log-probabilities; the
``quality`` section of the result (:class:`infer_prof.results.quality_sections.Quality`).

An endpoint that fails part-way leaves the section ``incomplete`` with the reason, keeping what
was measured until then. A run on random weights is :func:`not_measured`, never a number.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from infer_prof.core.quality.intervals import wilson_interval
from infer_prof.core.quality.likelihood import perplexity
from infer_prof.core.quality.tasks import is_correct
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.quality.completions_api import (
    EndpointCallError,
    NoPromptLogprobs,
    complete,
    prompt_logprobs,
)
from infer_prof.quality.spec import QualityInputs
from infer_prof.results.quality_sections import ItemOutcome, Passage, Quality, TokenLogprob


def not_measured(reason: str, inputs: QualityInputs | None = None) -> Quality:
    """The section of a run whose quality is not measured (``reason``: e.g. random weights):
    the inputs named, every figure null."""
    q = Quality(status="not_measured", reason=reason)
    if inputs is not None:
        q.tasks_file, q.tasks_sha256 = inputs.tasks_file, inputs.tasks_sha256
        q.text_file, q.text_sha256 = inputs.text_file, inputs.text_sha256
    return q


def probe(endpoint: Endpoint, model: str) -> None:
    """One short prompt-log-probability call, before a load: raises NoPromptLogprobs (or
    EndpointCallError) when the check could not run on this endpoint."""
    prompt_logprobs(endpoint, model, "1+1=2", 1)


def run_check(endpoint: Endpoint, model: str, inputs: QualityInputs,
              status: Callable[[str], None] | None = None) -> Quality:
    """Measure ``model``'s quality on ``endpoint``: accuracy over ``inputs.items`` (Wilson 95 %
    interval), perplexity over ``inputs.text_lines`` (each line one prompt; its first token
    unscored). Raises NoPromptLogprobs when the first text line's answer holds no prompt
    log-probabilities (the endpoint cannot do it); a failure after that is recorded as
    ``incomplete``."""
    start = time.perf_counter()
    q = Quality(status="measured", model=model, tasks_file=inputs.tasks_file,
                tasks_sha256=inputs.tasks_sha256, text_file=inputs.text_file,
                text_sha256=inputs.text_sha256, top_k=inputs.top_k if inputs.text_lines else None)
    try:
        for i, item in enumerate(inputs.items):
            out = complete(endpoint, model, item.prompt, inputs.max_tokens)
            q.outcomes.append(ItemOutcome(correct=is_correct(item, out), output=out))
            if status is not None and i % 20 == 19:
                status(f"quality: {i + 1}/{len(inputs.items)} task items")
        for line in inputs.text_lines:
            try:
                scored = prompt_logprobs(endpoint, model, line, inputs.top_k)
            except NoPromptLogprobs:
                if not q.passages:
                    raise
                raise EndpointCallError("the endpoint stopped returning prompt "
                                        "log-probabilities part-way") from None
            q.passages.append(Passage(tokens=[TokenLogprob(token=s.token, logprob=s.logprob,
                                                           top=s.top) for s in scored]))
    except EndpointCallError as exc:
        q.status, q.reason = "incomplete", f"the quality check stopped: {exc}"
    _fill_figures(q, len(inputs.text_lines))
    q.duration_s = round(time.perf_counter() - start, 3)
    return q


def _fill_figures(q: Quality, lines: int) -> None:
    """Accuracy and perplexity from the outcomes and passages held (``lines``: text lines)."""
    if q.outcomes:
        k = sum(o.correct for o in q.outcomes)
        iv = wilson_interval(k, len(q.outcomes))
        q.items, q.correct, q.accuracy = len(q.outcomes), k, iv.value
        q.accuracy_low, q.accuracy_high = iv.low, iv.high
        q.accuracy_interval = f"{iv.method}, {iv.level:.0%}"
    values = [t.logprob for p in q.passages for t in p.tokens]
    if lines:
        q.text_prompts = len(q.passages)
        q.scored_tokens = len(values)
    if values:
        q.perplexity = perplexity(values)


def quality_line(q: Quality) -> str:
    """The console line of a quality section."""
    if q.status == "not_measured":
        return f"quality: not measured ({q.reason})"
    parts = []
    if q.accuracy is not None:
        parts.append(f"accuracy {q.accuracy:.1%} [{q.accuracy_low:.1%}, {q.accuracy_high:.1%}] "
                     f"over {q.items} items")
    if q.perplexity is not None:
        parts.append(f"perplexity {q.perplexity:.3f} over {q.scored_tokens} tokens")
    ref = q.reference
    if ref is not None:
        if ref.accuracy_difference is not None:
            parts.append(f"vs reference {ref.accuracy_difference:+.1%} "
                         f"[{ref.accuracy_difference_low:+.1%}, "
                         f"{ref.accuracy_difference_high:+.1%}]")
        if ref.perplexity_ratio is not None:
            parts.append(f"perplexity x{ref.perplexity_ratio:.3f}")
        if ref.mean_kl is not None:
            parts.append(f"KL {ref.mean_kl:.4f} nats/token")
    if q.below_floor:
        parts.append(f"BELOW the floor {q.min_quality:g} of the reference's accuracy")
    elif q.below_floor is False:
        parts.append(f"meets the floor {q.min_quality:g}")
    text = "; ".join(parts) or "nothing measured"
    if q.status == "incomplete":
        text += f" (incomplete: {q.reason})"
    return f"quality: {text} ({q.duration_s:.1f} s)" if q.duration_s is not None else \
        f"quality: {text}"
