"""``infer-prof estimate`` as named steps: choose the GPUs, plan each configuration, predict and
read its frontier, price it, rank the rows.

1. GPUs: the ones asked for (``--gpu``), else every catalog GPU the market prices in the tier
   (and cloud) asked; ``--instance`` means its GPU.
2. Per GPU, the planner's configuration at each GPU count (:mod:`.configs`); a GPU where
   nothing fits, or without a FLOP/s figure, is listed in ``skipped`` with the reason.
3. Per configuration, the GPU's factors (:func:`infer_prof.catalog.estimate_factors.factors_for`:
   fitted on published measurements for the GPU or its architecture family, else the family's
   default; with ``--calibrate-from``, its family's refitted on the user's runs:
   :mod:`.calibrated`), the user's measured runs of the configuration beside it, its
   interconnect (:mod:`infer_prof.catalog.interconnects`), the predicted frontier
   read at the target and priced (:mod:`.rows`, :mod:`.pricing`).
4. Rows ranked cheapest first (:func:`.rows.rank`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infer_prof.catalog.interconnects import link_gbps
from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.market import InstanceOffer, Tier
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.estimate.factors import family_of
from infer_prof.core.workload.slo import Slo, format_slos
from infer_prof.estimate.calibrated import Calibration, source_of
from infer_prof.estimate.configs import Config, plan_configs
from infer_prof.estimate.document import EstimateDocument, ReadAt, Row, Skipped
from infer_prof.estimate.expected_error import ExpectedError
from infer_prof.estimate.pricing import priced_gpus, quote_for
from infer_prof.estimate.rows import Reading, build_row, rank


@dataclass(frozen=True)
class EstimateRequest:
    """What is asked: the model, the lengths (tokens), where to read (a target interactivity
    in tokens/s per user, SLOs, or neither: max throughput), the GPUs (empty: every priced
    one), the GPU count (None: the planner's smallest), ``--quantization``, and the price
    (tier, cloud, or one instance)."""

    model: ModelSpec
    input_len: int
    output_len: int
    target_interactivity: float | None = None
    slos: tuple[Slo, ...] = ()
    gpus: tuple[GpuSpec, ...] = ()
    gpu_count: int | None = None
    quantization: str = "auto"
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


def choose_gpus(request: EstimateRequest, catalog: dict[str, GpuSpec],
                offers: Sequence[InstanceOffer]) -> list[GpuSpec]:
    """Step 1: the GPUs asked for, else the instance's, else every priced one (catalog order)."""
    if request.gpus:
        return list(request.gpus)
    if request.instance is not None and request.instance.gpu in catalog:
        return [catalog[request.instance.gpu]]
    priced = priced_gpus(offers, request.tier, request.cloud)
    return [g for key, g in catalog.items() if key in priced]


def plan_all(request: EstimateRequest, gpus: Sequence[GpuSpec], catalog: Sequence[GpuSpec]
             ) -> tuple[list[Config], list[Skipped]]:
    """Step 2: each GPU's configuration, or why it has none."""
    configs, skipped = [], []
    for g in gpus:
        c = plan_configs(request.model, g, input_len=request.input_len,
                        output_len=request.output_len, quantization=request.quantization,
                        gpus=request.gpu_count, catalog=catalog)
        if isinstance(c, str):
            skipped.append(Skipped(gpu=g.key, why=c))
        else:
            configs.extend(c)
    return configs, skipped


def estimate(request: EstimateRequest, configs: Sequence[Config], skipped: Sequence[Skipped],
             offers: Sequence[InstanceOffer], *, prices: str, expected: ExpectedError,
             calibration: Calibration | None = None) -> EstimateDocument:
    """Steps 3 and 4: predict, read, price and rank each configuration; with a
    ``calibration`` (:mod:`.calibrated`), its factors where it refitted them and its measured
    runs beside the prediction."""
    cal = calibration if calibration is not None else Calibration()
    rows: list[Row] = []
    reading = Reading(request.input_len, request.output_len, request.read_at,
                      request.target_interactivity, request.slos)
    for c in configs:
        quote = quote_for(offers, c.gpu.key, c.gpu_count, tier=request.tier,
                          cloud=request.cloud, instance=request.instance)
        d = c.deployment(request.model, cal.factors_for(c.gpu),
                         link_gbps(c.gpu.key, c.gpu_count))
        rows.append(build_row(d, c, reading, quote=quote,
                              expected_error_pct=expected.for_family(family_of(c.gpu)),
                              measured=cal.runs_to_compare()))
    return EstimateDocument(
        model=request.model.name, input_len=request.input_len, output_len=request.output_len,
        target_interactivity=request.target_interactivity,
        slo=format_slos(request.slos) if request.slos else None, read_at=request.read_at,
        rows=rank(rows), skipped=list(skipped), prices=prices, expected_error=expected.says,
        factors_used=cal.families(c.gpu for c in configs), calibrated_from=cal.fit_source(),
        measured_from=source_of(cal.compare) if cal.compare is not None else None)
