"""Was the GPU what bounded a published point? The check the fit applies before it learns from one.

The estimate's factors describe how close a GPU comes to its own peaks. A measurement teaches
them something only when the GPU bounded it. Where something else did (the client, the host, a
fallback kernel, a throttled or shared GPU), the point says nothing about the GPU and pulls its
family's factors towards that setup's limit.

One case shows it from the measurements alone: two GPUs measured by the **same source** in the
**same configuration** (engine, load, model, precision, GPU count, concurrency, KV-cache dtype,
input and output lengths within :data:`LENGTH_TOLERANCE` of each other), where GPU ``a``
dominates GPU ``b`` (at least ``b``'s memory bandwidth and at least its peak FLOP/s at that
precision, :func:`dominates`), and yet ``a`` measured fewer output tokens/s per GPU than ``b``.
No step of the roofline (:mod:`infer_prof.core.estimate.decode_step`) can be slower on ``a``:
``a``'s point was not bound by its GPU. :func:`inversions` finds such points, and
:func:`~infer_prof.estimate.published_fit.fit_cases` leaves them out of every fit. They are
still predicted and scored by the held-out validation (``benchmarks/estimate_loso.py``), which
lists them.

A sweep is one setup: where a GPU's points of one source and configuration but the concurrency
are inverted at every level that has a point to compare with, its levels without one are left
out with them (:func:`sweep_inversions`).

In the shipped set this finds ``sariekr/gpu_conc``'s B200 (gpt-oss-20b at 1-16 streams, 0.1-15 %
below its H200; the B200 has 1.6x the bandwidth and 2.3x the 16-bit FLOP/s, and native FP4) and
its MI300X (below both its H100 PCIe and its H200 at 1-16 streams, and so its 32 streams, which
no other GPU of the source measured), and ``globaledgepathway/voice-inference-benchmark``'s MI300X
at 4-16 users (Llama-3.1-8B, below its GH200's; at one user it is above, so that level stays).
Pure but for reading the GPU catalog.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import msgspec

from infer_prof.catalog.gpus import catalog
from infer_prof.catalog.published_results import PublishedPoint
from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.estimate.peaks import bandwidth_bytes_per_s, peak_flops

LENGTH_TOLERANCE = 0.1
"""Two points' input (and output) lengths are the same configuration within this share of the
larger: sources report the mean output length they measured (``sariekr/gpu_conc``: 899-948
tokens of a 1000-token cap), not the cap they asked for."""


@dataclass(frozen=True)
class Inversion:
    """Point ``id`` on ``gpu`` measured ``measured`` output tok/s per GPU, below ``other_gpu``'s
    ``other_measured`` in the same source and configuration, though ``gpu`` dominates it."""

    id: str
    gpu: str
    measured: float
    other_id: str
    other_gpu: str
    other_measured: float
    sweep_of: str = ""
    """Set when the point itself had nothing to compare with: the id of an inverted point of the
    same GPU's sweep (:func:`sweep_inversions`)."""

    def why(self) -> str:
        """One line for a listing."""
        if self.sweep_of:
            return (f"{self.gpu} measured {self.measured:,.1f} output tok/s per GPU, with "
                    f"nothing to compare with, in a sweep whose every level that has was slower "
                    f"than a GPU the {self.gpu} dominates ({self.sweep_of} below the "
                    f"{self.other_gpu}'s {self.other_measured:,.1f}, {self.other_id}): one "
                    "setup, not bound by the GPU")
        return (f"{self.gpu} measured {self.measured:,.1f} output tok/s per GPU, below the "
                f"{self.other_gpu}'s {self.other_measured:,.1f} ({self.other_id}) in the same "
                f"source and configuration, though the {self.gpu} has at least its bandwidth "
                "and FLOP/s: not bound by the GPU")


def dominates(a: GpuSpec, b: GpuSpec, precision: str) -> bool:
    """True when ``a`` is not ``b`` and has at least ``b``'s memory bandwidth and at least its
    dense peak FLOP/s at ``precision`` (:func:`~infer_prof.core.estimate.peaks.peak_flops`);
    False where either peak is unknown."""
    fa, fb = peak_flops(a, precision), peak_flops(b, precision)
    if a.key == b.key or not fa or not fb:
        return False
    return bandwidth_bytes_per_s(a) >= bandwidth_bytes_per_s(b) and fa >= fb


def same_configuration(p: PublishedPoint, q: PublishedPoint) -> bool:
    """True when ``p`` and ``q`` come from one source and differ at most in the GPU: same
    engine, load, model, precision, GPU count, concurrency and KV-cache dtype, and input and
    output lengths within :data:`LENGTH_TOLERANCE`."""
    def near(x: int, y: int) -> bool:
        return abs(x - y) <= LENGTH_TOLERANCE * max(x, y, 1)
    return (p.source.title == q.source.title and p.engine == q.engine and p.load == q.load
            and p.model == q.model and p.precision == q.precision
            and p.gpu_count == q.gpu_count and p.concurrency == q.concurrency
            and p.kv_cache_dtype == q.kv_cache_dtype
            and near(p.input_len, q.input_len) and near(p.output_len, q.output_len))


def inversions(points: Iterable[PublishedPoint]) -> dict[str, Inversion]:
    """Every point measured slower than a point of a GPU it dominates, in the same source and
    configuration (module docstring), by point id; each with the first such comparison (the
    other point with the highest throughput)."""
    gpus = catalog()
    pts = [p for p in points if p.gpu in gpus]
    by_source: dict[str, list[PublishedPoint]] = {}
    for p in pts:
        by_source.setdefault(p.source.title, []).append(p)
    out: dict[str, Inversion] = {}
    for group in by_source.values():
        for p in group:
            faster = [q for q in group
                      if q.gpu != p.gpu and same_configuration(p, q)
                      and q.output_tok_s_per_gpu > p.output_tok_s_per_gpu
                      and dominates(gpus[p.gpu], gpus[q.gpu], p.precision)]
            if faster:
                q = max(faster, key=lambda x: x.output_tok_s_per_gpu)
                out[p.id] = Inversion(p.id, p.gpu, p.output_tok_s_per_gpu, q.id, q.gpu,
                                      q.output_tok_s_per_gpu)
    out.update(sweep_inversions(pts, out))
    return out


def same_sweep(p: PublishedPoint, q: PublishedPoint) -> bool:
    """True when ``p`` and ``q`` are levels of one sweep: one source and GPU, the same
    configuration (:func:`same_configuration`) but for the concurrency."""
    return p.gpu == q.gpu and same_configuration(
        p, msgspec.structs.replace(q, concurrency=p.concurrency))


def sweep_inversions(points: list[PublishedPoint], found: dict[str, Inversion]
                     ) -> dict[str, Inversion]:
    """The levels of a sweep that have no point of a dominated GPU to compare with, where every
    level of it that has one is inverted (``found``): one setup, so not bound by the GPU either.
    A sweep with any level that compares and is not inverted keeps its other levels."""
    gpus = catalog()
    compared = {p.id for p in points
                if any(q.gpu != p.gpu and same_configuration(p, q)
                       and dominates(gpus[p.gpu], gpus[q.gpu], p.precision) for q in points)}
    out: dict[str, Inversion] = {}
    for p in points:
        if p.id in found or p.id in compared:
            continue
        levels = [q for q in points
                  if q.id != p.id and q.id in compared and same_sweep(p, q)]
        if levels and all(q.id in found for q in levels):
            inv = found[max(levels, key=lambda q: q.concurrency or 0).id]
            out[p.id] = Inversion(p.id, p.gpu, p.output_tok_s_per_gpu, inv.other_id,
                                  inv.other_gpu, inv.other_measured, sweep_of=inv.id)
    return out
