"""``infer-prof estimate`` as named steps: choose the GPUs, search their configurations,
predict and read each frontier, price it, say how sure it is, rank the rows.

1. GPUs: the ones asked for (``--gpu``), else every catalog GPU the market prices in the tier
   (and cloud) asked; ``--instance`` means its GPU.
2. Per GPU, every configuration vLLM runs and that holds the model: GPU count x weight precision
   x KV-cache dtype (:mod:`.search`); what vLLM does not run is listed in ``unsupported``, a GPU
   with nothing to predict in ``skipped``, each with the reason.
3. Per configuration, the GPU's factors (:func:`infer_prof.catalog.estimate_factors.factors_for`:
   fitted on published measurements for the GPU or its architecture family, else the family's
   default; with ``--calibrate-from``, its family's refitted on the user's runs:
   :mod:`.calibrated`), the user's measured runs of the configuration beside it, its link
   (NVLink, Infinity Fabric or PCIe), the predicted frontier read at the target and priced
   (:mod:`.rows`, :mod:`.pricing`), and its kind's validated error interval (:mod:`.ranking`).
4. Rows ranked (:func:`.ranking.rank`: by the cost at the interval's slow end, validated rows
   first; or ``--rank-by point``); each GPU's best kept, and every configuration the user
   measured, unless ``--all-configs`` (all of them).
"""

from __future__ import annotations

from collections.abc import Sequence

from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.market import InstanceOffer, InstanceQuote
from infer_prof.core.estimate.factors import family_of
from infer_prof.core.estimate.moe_layer import moe_fixed_s
from infer_prof.core.workload.slo import format_slos
from infer_prof.estimate.calibrated import Calibration, source_of
from infer_prof.estimate.configs import Config
from infer_prof.estimate.document import EstimateDocument, Row, Skipped
from infer_prof.estimate.expected_error import ExpectedError
from infer_prof.estimate.pricing import priced_gpus, quote_for
from infer_prof.estimate.ranking import best_per_gpu, rank, with_interval
from infer_prof.estimate.request import EstimateRequest
from infer_prof.estimate.rows import Reading, build_row
from infer_prof.estimate.search import SearchResult, search

__all__ = ["EstimateRequest", "choose_gpus", "estimate", "plan_all", "search"]


def choose_gpus(request: EstimateRequest, catalog: dict[str, GpuSpec],
                offers: Sequence[InstanceOffer]) -> list[GpuSpec]:
    """Step 1: the GPUs asked for, else the instance's, else every priced one (catalog order)."""
    if request.gpus:
        return list(request.gpus)
    if request.instance is not None and request.instance.gpu in catalog:
        return [catalog[request.instance.gpu]]
    priced = priced_gpus(offers, request.tier, request.cloud)
    return [g for key, g in catalog.items() if key in priced]


def plan_all(request: EstimateRequest, gpus: Sequence[GpuSpec], catalog: Sequence[GpuSpec],
             offers: Sequence[InstanceOffer] = ()) -> SearchResult:
    """Step 2: every configuration to predict (:func:`.search.search`)."""
    return search(request, gpus, offers, catalog)


def _shown(ranked: Sequence[Row]) -> list[Row]:
    """Each GPU's best row, and every row the user measured (``--measured`` /
    ``--calibrate-from``: their runs stay beside the prediction of their own configuration),
    in rank order."""
    best = {id(r) for r in best_per_gpu(ranked)}
    return [r for r in ranked if id(r) in best or r.measured]


def estimate(request: EstimateRequest, configs: Sequence[Config], skipped: Sequence[Skipped],
             offers: Sequence[InstanceOffer], *, prices: str, expected: ExpectedError,
             calibration: Calibration | None = None,
             searched: SearchResult | None = None) -> EstimateDocument:
    """Steps 3 and 4: predict, read, price, bound and rank each configuration; with a
    ``calibration`` (:mod:`.calibrated`), its factors where it refitted them and its measured
    runs beside the prediction; ``searched`` the search's unsupported pairs and summary."""
    cal = calibration if calibration is not None else Calibration()
    rows: list[Row] = []
    reading = Reading(request.input_len, request.output_len, request.read_at,
                      request.target_interactivity, request.slos)
    by_gpu: dict[str | None, list[InstanceOffer]] = {}
    for o in offers:
        by_gpu.setdefault(o.gpu, []).append(o)
    quotes: dict[tuple[str, int], InstanceQuote | None] = {}
    for c in configs:
        key = (c.gpu.key, c.gpu_count)
        if key not in quotes:  # one quote per GPU and count, from that GPU's offers alone
            quotes[key] = quote_for(by_gpu.get(c.gpu.key, []), c.gpu.key, c.gpu_count,
                                    tier=request.tier, cloud=request.cloud,
                                    instance=request.instance)
        quote = quotes[key]
        d = c.deployment(request.model, cal.factors_for(c.gpu))
        row = build_row(d, c, reading, quote=quote,
                        expected_error_pct=expected.for_family(family_of(c.gpu)),
                        measured=cal.runs_to_compare())
        rows.append(with_interval(row, c, expected, hybrid=request.model.hybrid is not None))
    ranked = rank(rows, request.rank_by)
    return EstimateDocument(
        model=request.model.name, input_len=request.input_len, output_len=request.output_len,
        target_interactivity=request.target_interactivity,
        slo=format_slos(request.slos) if request.slos else None, read_at=request.read_at,
        rows=ranked if request.all_configs else _shown(ranked),
        skipped=list(skipped), prices=prices, expected_error=expected.says,
        factors_used=cal.families(c.gpu for c in configs), calibrated_from=cal.fit_source(),
        measured_from=source_of(cal.compare) if cal.compare is not None else None,
        rank_by=request.rank_by, all_configs=request.all_configs,
        unsupported=list(searched.unsupported) if searched is not None else [],
        search=searched.summary if searched is not None else None,
        moe_layer_fixed_ms=moe_fixed_s(request.model) * 1e3 or None)
