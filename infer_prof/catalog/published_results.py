"""The shipped data set of published measured serving results (`published_results.json`).

Each :class:`PublishedPoint` is one measurement somebody published: a source (a URL, or a
repository, path and commit), the engine and version, the GPU (a catalog key) and how many, the
model (an infer-prof alias where one exists, else the Hugging Face repo id), precision, input and
output lengths, the load (``closed-loop`` at a concurrency, a ``burst`` of N requests sent at once,
or ``offline-max`` where the engine picked the batch and no concurrency is published), and the
measured output tokens/s (in all and per GPU), with TTFT/TPOT where given. ``split`` says whether
the point may calibrate the estimate (``fit``) or only judge it (``holdout``).

The figures were transcribed from the sources named, never estimated; a field the source does not
publish is ``None`` and ``note`` says so. ``benchmarks/estimate_accuracy.py`` compares the
estimate against these points; ``infer_prof.core.estimate.calibration`` fits on the ``fit`` part.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Literal

import msgspec

SHIPPED_FILE = "published_results.json"

Load = Literal["closed-loop", "burst", "offline-max"]
Split = Literal["fit", "holdout"]


class PublishedSource(msgspec.Struct, frozen=True):
    """Where a point was published: ``url``, or ``repo`` + ``path`` (+ ``commit``); ``title``
    says what it is; ``note`` how the source measured (tool, statistic, what it leaves out)."""

    title: str
    url: str | None = None
    repo: str | None = None
    path: str | None = None
    commit: str | None = None
    note: str = ""

    def cite(self) -> str:
        """One line naming the source: the URL, or ``repo:path@commit`` (the commit shortened)."""
        if self.url:
            return self.url
        where = f"{self.repo}:{self.path}" if self.repo else str(self.path)
        return f"{where}@{self.commit[:12]}" if self.commit else where


class PublishedPoint(msgspec.Struct, frozen=True):
    """One published measurement. Units: tokens, tokens/s, milliseconds.

    ``output_tok_s_per_gpu = output_tok_s / gpu_count``. ``concurrency`` is the closed-loop
    concurrency (``load == "closed-loop"``), the number of requests sent at once (``"burst"``), or
    ``None`` (``"offline-max"``). ``latency_stat`` names the statistic of ``ttft_ms``/``tpot_ms``
    (``p50``, ``mean`` or ``unspecified``). ``kv_cache_dtype``: ``fp8`` where the source ran an
    fp8 KV cache, ``None`` for the engine's default (16-bit). ``mxfp4_activations``: ``mxfp8``
    where the source ran an ``mxfp4`` model's MoE with MXFP8 activations
    (``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1``), ``None`` for vLLM's default (16-bit).
    ``prerelease``: True where the engine was a build no release is (a preview wheel, a nightly,
    a build of main): measured, and fitted where its GPU bounded it, but not one of the released
    engines the estimate's held-out goal is judged on.
    """

    id: str
    source: PublishedSource
    engine: str
    gpu: str
    gpu_count: int
    model: str
    precision: str
    input_len: int
    output_len: int
    load: Load
    output_tok_s: float
    output_tok_s_per_gpu: float
    split: Split
    date: str | None = None
    engine_version: str | None = None
    tensor_parallel: int | None = None
    concurrency: int | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    latency_stat: str | None = None
    kv_cache_dtype: str | None = None
    mxfp4_activations: Literal["mxfp8"] | None = None
    prerelease: bool = False
    note: str = ""


class PublishedResults(msgspec.Struct, frozen=True):
    """The whole data set: its points, in file order."""

    points: list[PublishedPoint]

    def by_split(self, split: Split) -> list[PublishedPoint]:
        """The points of one split, in file order."""
        return [p for p in self.points if p.split == split]


def parse_published_results(text: str) -> PublishedResults:
    """Parse the data set's JSON text (the ``_comment``/``_units`` keys are ignored).

    Raises ``ValueError`` naming the first point that does not fit :class:`PublishedPoint`."""
    raw = json.loads(text)
    points: list[PublishedPoint] = []
    for i, entry in enumerate(raw.get("points", [])):
        try:
            points.append(msgspec.convert(entry, PublishedPoint, strict=False))
        except msgspec.ValidationError as exc:
            name = entry.get("id", f"#{i}") if isinstance(entry, dict) else f"#{i}"
            raise ValueError(f"published results: point {name}: {exc}") from None
    return PublishedResults(points=points)


@cache
def published_results() -> PublishedResults:
    """The shipped data set (``infer_prof/catalog/data/published_results.json``)."""
    text = resources.files("infer_prof.catalog.data").joinpath(SHIPPED_FILE).read_text("utf-8")
    return parse_published_results(text)
