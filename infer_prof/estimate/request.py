"""What ``infer-prof estimate`` is asked: the model, the lengths, where to read, which GPUs, how
the configuration search is narrowed, how rows rank, and the price."""

from __future__ import annotations

from dataclasses import dataclass

from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.market import InstanceOffer, Tier
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.workload.slo import Slo
from infer_prof.estimate.document import RankBy, ReadAt


@dataclass(frozen=True)
class EstimateRequest:
    """What is asked: the model, the lengths (tokens), where to read (a target interactivity
    in tokens/s per user, SLOs, or neither: max throughput), the GPUs (empty: every priced
    one), and the search (:mod:`infer_prof.estimate.search`): ``gpu_count`` one GPU count
    (None: every count the market sells), ``quantization`` one weight precision (``auto``:
    search them), ``kv_cache_dtype`` one KV-cache dtype (None: search ``auto`` and ``fp8``),
    ``min_quality`` a quality floor (a share of the 16-bit model's accuracy; lossy
    configurations, whose accuracy is not known to meet it, are kept out); the ranking
    (``rank_by``; ``all_configs``: every configuration, not each GPU's best); and the price
    (tier, cloud, or one instance)."""

    model: ModelSpec
    input_len: int
    output_len: int
    target_interactivity: float | None = None
    slos: tuple[Slo, ...] = ()
    gpus: tuple[GpuSpec, ...] = ()
    gpu_count: int | None = None
    quantization: str = "auto"
    kv_cache_dtype: str | None = None
    min_quality: float | None = None
    rank_by: RankBy = "pessimistic"
    all_configs: bool = False
    tier: Tier = "on-demand"
    cloud: str | None = None
    instance: InstanceOffer | None = None

    @property
    def read_at(self) -> ReadAt:
        """``target`` when an interactivity is asked, else ``slo`` with SLOs, else
        ``max-throughput``."""
        if self.target_interactivity is not None:
            return "target"
        return "slo" if self.slos else "max-throughput"
