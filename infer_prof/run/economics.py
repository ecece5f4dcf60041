"""What a run's numbers mean in money, energy and hardware limits.

Joins a finished run's summary with the price catalog, the NVML energy reading and the GPU
catalog's bandwidth and FLOP/s figures. The arithmetic lives in ``core.catalog.prices`` and
``core.catalog.roofline``; this module only chooses the inputs and records where each came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from infer_prof.catalog.market import Market, find_instance, load_market
from infer_prof.catalog.prices import PriceError, PriceQuote, load_prices, select_price
from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.market import InstanceQuote, Tier, cheapest_offer, quote_instance
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.catalog.prices import (
    break_even_hours,
    cost_per_million_output_tokens,
    cost_report,
    owned_cost_per_hour,
)
from infer_prof.core.catalog.roofline import RooflineInputs, roofline_report
from infer_prof.core.catalog.roofline_record import Roofline
from infer_prof.core.measurement.timeseries import joules_per_token, joules_per_token_at_rate
from infer_prof.core.planning.memory import (
    checkpoint_precision,
    kv_bytes_per_token,
    routed_expert_bytes,
    weight_bytes,
)
from infer_prof.results.cost_sections import Cost, Energy, Filled, OwnedCost, Price, PriceCatalog
from infer_prof.results.document import Summary


@dataclass(frozen=True)
class CostOptions:
    """Price choices from the command line."""

    price_per_hour: float | None = None  # per GPU, overrides the catalog
    provider: str | None = None
    prices_file: str | None = None
    spot: bool = False
    purchase_usd: float | None = None  # owned hardware: price of ONE GPU (or the whole box)
    amortize_years: float = 3.0
    usd_per_kwh: float = 0.12
    utilization: float = 1.0
    instance: str | None = None  # CLOUD:TYPE[:REGION] from the instance market
    prices_from: str | None = None  # a folder of SkyPilot catalogs (else ~/.sky, else snapshot)


def choose_price(
    gpu: GpuSpec | None, gpus: int, opts: CostOptions
) -> tuple[PriceQuote | InstanceQuote, int, PriceCatalog | None]:
    """The price a run is costed at, the GPUs it covers, and the market it came from.

    In order: ``--price-per-hour``; ``--instance`` (the whole instance is costed: its price
    for its GPUs); ``--provider``/``--prices`` (the seed price rows); the cheapest instance of
    the GPU in the market (``--prices-from``, ``~/.sky/catalogs`` or the snapshot), preferring
    instances of exactly ``gpus`` GPUs; the seed rows when the market has none. ``--spot``
    picks the spot tier. Raises PriceError (or ValueError) when nothing applies.
    """
    tier: Tier = "spot" if opts.spot else "on-demand"
    if opts.price_per_hour is not None or opts.provider or opts.prices_file:
        catalog = load_prices(opts.prices_file)
        key = gpu.key if gpu else None
        return select_price(catalog, key, opts.provider, opts.price_per_hour, opts.spot), gpus, None
    if opts.instance:
        market = load_market(opts.prices_from)
        offer = find_instance(market, opts.instance)
        if offer.price(tier) is None:
            raise PriceError(f"--instance {opts.instance}: {offer.key()} has no {tier} price in "
                             f"{market.describe()}")
        quote = quote_instance(offer, tier, f"named with --instance {opts.instance}")
        return quote, offer.gpu_count, _market_section(market)
    if gpu is not None:
        market = load_market(opts.prices_from)
        found = cheapest_offer(market.offers, gpu.key, tier, gpus)
        if found is not None:
            return found, gpus, _market_section(market)
    seed = select_price(load_prices(None), gpu.key if gpu else None, None, None, opts.spot)
    return seed, gpus, None


def _market_section(market: Market) -> PriceCatalog:
    """Where a market price came from, as ``cost.price.catalog`` records it."""
    return msgspec.convert(market.to_dict(), PriceCatalog)


def cost_block(
    summary: Summary,
    gpu: GpuSpec | None,
    gpus: int,
    opts: CostOptions,
    energy_j: float | None,
    window_s: float | None,
) -> Cost:
    """Rental cost of the run (price covers all ``gpus``) and, when a purchase price is given,
    the owned-hardware cost and the break-even hours against renting. Null with a reason when
    no price applies (e.g. a CPU run without ``--price-per-hour``)."""
    priced_gpus = gpus
    market: PriceCatalog | None = None
    quote: PriceQuote | InstanceQuote | None
    reason: str | None = None
    try:
        quote, priced_gpus, market = choose_price(gpu, gpus, opts)
    except (PriceError, ValueError) as exc:
        reason = (
            str(exc)
            if gpu or opts.price_per_hour or opts.instance
            else ("no GPU to price: pass --gpu NAME (for --endpoint runs) or --price-per-hour")
        )
        quote = None
    output_tps, total_tps = summary.output_throughput, summary.total_throughput
    owned = (_owned_cost(output_tps, gpu, gpus, opts.purchase_usd, opts, (energy_j, window_s),
                         quote) if opts.purchase_usd is not None else None)
    if quote is None:
        return Cost(available=False, reason=reason, owned=owned)
    report = cost_report(quote.usd_per_hour, priced_gpus, output_tps, total_tps)
    price = msgspec.convert(quote.to_dict(), Price)
    return Cost(
        available=True,
        reason=None,
        usd_per_gpu_hour=_float(report["usd_per_gpu_hour"]),
        gpus=report["gpus"],
        usd_per_hour=_float(report["usd_per_hour"]),
        usd_per_million_output_tokens=_float(report["usd_per_million_output_tokens"]),
        usd_per_million_total_tokens=_float(report["usd_per_million_total_tokens"]),
        output_tokens_per_usd=_float(report["output_tokens_per_usd"]),
        total_tokens_per_usd=_float(report["total_tokens_per_usd"]),
        price=price if market is None else msgspec.structs.replace(price, catalog=market),
        run_gpus=gpus,
        filled=filled_instance(quote.usd_per_hour, priced_gpus, gpus, summary),
        owned=owned,
    )


def _owned_cost(output_tps: float | None, gpu: GpuSpec | None, gpus: int, purchase: float,
                opts: CostOptions, energy: tuple[float | None, float | None],
                quote: PriceQuote | InstanceQuote | None) -> OwnedCost:
    """The cost of owning the run's ``gpus`` (``purchase`` USD each, over ``opts``' years,
    utilization and power price; ``energy``: the joules measured and the window in s, else the
    TDP), its $ per 1M output tokens at ``output_tps`` (output tokens/s) and, with a rental
    ``quote``, the hours after which buying beats renting; unavailable with the reason when the
    options cannot be costed."""
    energy_j, window_s = energy
    tdp = gpu.tdp_watts * gpus if gpu and gpu.tdp_watts else None
    measured = energy_j is not None and window_s
    try:
        owned = owned_cost_per_hour(
            purchase * gpus,
            opts.amortize_years,
            opts.usd_per_kwh,
            utilization=opts.utilization,
            energy_joules=energy_j if measured else None,
            duration_s=window_s if measured else None,
            tdp_watts=tdp,
        )
    except ValueError as exc:
        return OwnedCost(available=False, reason=str(exc))
    section = msgspec.convert(owned.to_dict(), OwnedCost)
    per_million = cost_per_million_output_tokens(owned.usd_per_hour, output_tps, 1)
    break_even = None if quote is None else break_even_hours(
        purchase * gpus,
        quote.usd_per_hour * gpus,
        owned.electricity_usd_per_hour + owned.overhead_usd_per_hour,
    )
    return msgspec.structs.replace(section, available=True,
                                   usd_per_million_output_tokens=_float(per_million),
                                   break_even_hours=_float(break_even))


def filled_instance(
    usd_per_gpu_hour: float, instance_gpus: int, engine_gpus: int, summary: Summary
) -> Filled | None:
    """The cost if every GPU of the instance served a replica like the measured one.

    A run priced by a whole instance (``--instance``) whose engine used fewer GPUs than the
    instance has pays for idle GPUs: the cost block's $/1M is that whole price over one engine's
    tokens. With ``replicas = instance_gpus // engine_gpus`` copies of the engine (data
    parallel, each as fast as the measured one):
    ``$/1M = usd_per_gpu_hour x instance_gpus / (replicas x tokens/s x 3600 / 1e6)``, which is
    the frontier's per-GPU figure when the division is exact. None when no GPU sits idle.
    """
    if engine_gpus <= 0 or instance_gpus <= engine_gpus:
        return None
    replicas = instance_gpus // engine_gpus
    whole = cost_report(usd_per_gpu_hour, instance_gpus,
                        _times(summary.output_throughput, replicas),
                        _times(summary.total_throughput, replicas))
    return Filled(
        replicas=replicas,
        idle_gpus=instance_gpus - replicas * engine_gpus,
        usd_per_million_output_tokens=_float(whole["usd_per_million_output_tokens"]),
        usd_per_million_total_tokens=_float(whole["usd_per_million_total_tokens"]),
    )


def _times(value: float | None, factor: int) -> float | None:
    return float(value) * factor if value is not None else None


def energy_block(telemetry_gpu: dict[str, Any] | None, summary: Summary) -> Energy:
    """Energy over the measured window and joules per output token (null without NVML).

    Also the clock state: ``power_capped`` (the clocks sat at the board's power limit, normal
    under full load) and ``throttled`` / ``throttle_reasons`` (thermal or hardware slowdowns: a
    warning); see ``core.measurement.nvml.summarize_gpu``.
    """
    total = (telemetry_gpu or {}).get("total") or {}
    energy = total.get("energy_j")
    source: str | None = "nvml_energy_counter"
    if energy is None and total.get("energy_j_integrated") is not None:
        energy, source = total["energy_j_integrated"], "nvml_power_integrated"
    if energy is None:
        source = None
    return Energy(
        energy_j=_float(energy),
        source=source,
        joules_per_output_token=_float(
            joules_per_token_at_rate(energy, summary.duration_s, summary.output_throughput)
            if summary.rate_basis == "stream_spans"
            else joules_per_token(energy, summary.total_output_tokens)
        ),
        mean_power_w=_float(total.get("power_w_mean")),
        power_capped=total.get("power_capped"),
        throttled=total.get("throttled"),
        throttle_reasons=total.get("throttle_reasons"),
        reason=None
        if energy is not None
        else (telemetry_gpu or {}).get("reason") or "no energy reading",
    )


def _float(value: float | None) -> float | None:
    """A number as the result's float fields hold it (an int becomes a float, as decoding the
    section from JSON would make it); None stays None."""
    return None if value is None else float(value)


def decode_batch(
    metrics_summary: dict[str, Any], client_busy: float | None, asked: int
) -> tuple[float, str]:
    """The batch a decode step ran with, and where it came from, best first:

    - ``server_running_busy_mean``: vLLM's running-requests gauge averaged over the time it was
      above 0 (idle time runs no step; the plain time average would count it as a smaller batch);
    - ``client_in_flight_busy_mean``: the client's requests in flight, averaged over the time
      any was (no gauge: a server without vLLM's /metrics);
    - ``asked_concurrency``: the concurrency asked for (nothing measured).
    """
    running = metrics_summary.get("running_busy_mean")
    if running:
        return float(running), "server_running_busy_mean"
    if client_busy:
        return float(client_busy), "client_in_flight_busy_mean"
    return float(asked), "asked_concurrency"


def decode_step_time(summary: Summary) -> tuple[float | None, str | None]:
    """The time of one decode step (s) and its source: the ITL p50 (``itl_p50``: the typical
    gap between two tokens of a stream), else the TPOT p50 (``tpot_p50``); ``(None, None)``
    when neither was measured."""
    for dist, source in ((summary.itl_ms, "itl_p50"), (summary.tpot_ms, "tpot_p50")):
        p50 = dist.p50 if dist is not None else None
        if p50:
            return p50 / 1000.0, source
    return None, None


@dataclass(frozen=True)
class DecodeLoad:
    """The load a run's decode steps ran under: ``mean_batch`` sequences per step
    (:func:`decode_batch`, named by ``batch_source``; None: unknown) and the mean prompt and
    output lengths of its requests (``input_len``, ``output_len``, tokens)."""

    mean_batch: float | None
    input_len: int
    output_len: int
    batch_source: str | None = None


def roofline_block(
    spec: ModelSpec | None,
    gpu: GpuSpec | None,
    gpus: int,
    precision: str | None,
    summary: Summary,
    load: DecodeLoad,
) -> Roofline:
    """The result's ``roofline`` section: decode bandwidth ceiling at the batch the server ran,
    prefill compute ceiling, window and decode-step MBU, MFU (``core.catalog.roofline``).

    ``load.mean_batch``: sequences per decode step (:class:`DecodeLoad`).
    Weight bytes follow the precision the engine ran; KV bytes per token assume a 16-bit cache;
    the mean context of a decoding sequence is input_len + output_len / 2 tokens. The decode
    step time is :func:`decode_step_time`.
    Prefill throughput is the run's prompt tokens over the measured window: an average, so the
    MFU it gives is a lower bound of what prefill reached while it ran.
    """
    if spec is None or gpu is None:
        return Roofline(
            available=False,
            reason="needs a known model architecture and a GPU from the catalog "
            "(--gpu NAME for a remote endpoint)",
        )
    prec = checkpoint_precision(spec) if spec.quant is not None else precision or "bf16"
    peak = (
        gpu.fp8_tflops if prec == "fp8" and gpu.fp8_tflops else gpu.bf16_tflops or gpu.fp16_tflops
    )
    duration = summary.rate_window_s or summary.duration_s  # as the other rates
    prefill_tps = (summary.total_prompt_tokens or 0) / duration if duration else None
    step_s, step_source = decode_step_time(summary)
    mean_batch, input_len, output_len = load.mean_batch, load.input_len, load.output_len
    report = roofline_report(RooflineInputs(
        spec,
        weight_bytes=float(weight_bytes(spec, prec, 1)),
        kv_bytes_per_token=float(kv_bytes_per_token(spec, 1, 2)),
        bandwidth_bytes_per_s=gpu.memory_bandwidth_gbps * 1e9 * gpus,
        peak_flops=peak * 1e12 * gpus if peak else None,
        batch_size=mean_batch,
        mean_context_len=input_len + output_len / 2,
        output_tokens_per_s=summary.output_throughput,
        prefill_tokens_per_s=prefill_tps,
        mean_prompt_len=float(input_len),
        decode_step_time_s=step_s,
        decode_step_time_source=step_source,
        routed_expert_bytes=float(routed_expert_bytes(spec, prec)),
    ))
    report.batch_source = load.batch_source
    report.precision = prec
    report.gpu = gpu.key
    report.gpus = gpus
    return report
