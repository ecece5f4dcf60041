"""``infer-prof estimate``: which GPU to rent for a model, predicted before renting any.

Checks every input first (one line and exit 2 for a bad one: an unknown GPU with the nearest
names, an unknown model, cloud or instance, a bad number), then runs
:mod:`infer_prof.estimate.workflow` and prints the ranked rows (a table fitted to the terminal,
or ``--json``). Exit 2 also when the model fits on none of the GPUs, or when no configuration
reaches ``--target-interactivity`` (after the table that says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, NoReturn

import msgspec
import typer
from rich.console import Console

from infer_prof.cli.declared import declared_command
from infer_prof.cli.estimate_table import input_len_text, print_estimate
from infer_prof.config.options import POSITIVE_INT, Opt, Range
from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.market import InstanceOffer
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.workload.slo import Slo
from infer_prof.estimate.document import RankBy

if TYPE_CHECKING:
    from infer_prof.estimate.measured_runs import MeasuredSet
    from infer_prof.estimate.search import SearchResult

RANK_BY: tuple[RankBy, ...] = ("pessimistic", "point")

DEFAULT_INPUT_LEN = 512
DEFAULT_OUTPUT_LEN = 256


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


@dataclass(frozen=True)
class EstimateOptions:
    """The options of ``infer-prof estimate``, each declared once
    (:mod:`infer_prof.cli.declared`)."""

    model: Annotated[str, Opt(("--model",), "Model alias (e.g. llama-3.1-70b) or local dir.")]
    input_len: Annotated[int | None, Opt(
        ("--input-len",), f"Prompt tokens per request (default {DEFAULT_INPUT_LEN}, or the "
        "--workload's mean).", range=POSITIVE_INT)] = None
    output_len: Annotated[int | None, Opt(
        ("--output-len",), f"Output tokens per request (default {DEFAULT_OUTPUT_LEN}, or the "
        "--workload's mean).", range=POSITIVE_INT)] = None
    workload: Annotated[str | None, Opt(
        ("--workload",), "A workload (name or TOML file): its mean lengths, and its SLOs when "
        "--slo is not given.")] = None
    target_interactivity: Annotated[float | None, Opt(
        ("--target-interactivity",), "Read each frontier at this many tokens/s per user "
        "(1000 / TPOT ms) and rank there.",
        range=Range("a positive number", low=0, low_open=True))] = None
    slo: Annotated[str | None, Opt(
        ("--slo",), "Read each frontier at its best point meeting these (e.g. "
        "ttft_p99=2000,tpot_p99=50; checked against predicted medians).")] = None
    gpu: Annotated[list[str] | None, Opt(
        ("--gpu",), "GPU to estimate (catalog key or family; repeatable). Default: every GPU "
        "with a market price.")] = None
    gpus: Annotated[int | None, Opt(
        ("--gpus",), "GPUs per configuration (tensor parallel). Default: search every count "
        "an instance of the GPU is sold with (1, 2, 4, 8, ...).",
        range=Range("1 to 72", low=1, high=72))] = None
    quantization: Annotated[str, Opt(
        ("--quantization",), "auto (search bf16/fp16, fp8, bitsandbytes; a quantized "
        "checkpoint at its own), or only one: bf16, fp16, fp8, bitsandbytes, awq, gptq, nvfp4, "
        "mxfp4, int8.")] = "auto"
    kv_cache_dtype: Annotated[str | None, Opt(
        ("--kv-cache-dtype",), "auto or fp8: only that KV-cache dtype. Default: search "
        "both.")] = None
    min_quality: Annotated[float | None, Opt(
        ("--min-quality",), "A quality floor (share of the 16-bit model's accuracy, e.g. "
        "0.99): keeps out lossy configurations (4-bit weights other than a checkpoint's "
        "native precision, fp8 KV cache), whose accuracy is not known to meet it.",
        range=Range("a share in (0, 1]", low=0, high=1, low_open=True))] = None
    rank_by: Annotated[str, Opt(
        ("--rank-by",), "pessimistic: by the cost at the error interval's slow end, validated "
        "rows first; point: by the central estimate.")] = "pessimistic"
    all_configs: Annotated[bool, Opt(
        ("--all-configs",), "List every configuration searched, not each GPU's best.")] = False
    spot: Annotated[bool, Opt(("--spot",), "Price at spot rates, not on-demand.")] = False
    cloud: Annotated[str | None, Opt(
        ("--cloud",), "Price only from this cloud's instances (e.g. aws, gcp).")] = None
    instance: Annotated[str | None, Opt(
        ("--instance",), "Price from this instance, CLOUD:TYPE[:REGION] (its GPU only).")] = None
    calibrate_from: Annotated[list[str] | None, Opt(
        ("--calibrate-from",), "Refit each GPU family's factors on your measured runs: "
        "'history' (the run history), a history database, or result files/folders "
        "(repeatable). Implies --measured from the same runs.")] = None
    measured: Annotated[list[str] | None, Opt(
        ("--measured",), "Show your measured runs of the estimated configurations beside the "
        "prediction: 'history', a history database, or result files/folders (repeatable).")
        ] = None
    json_output: Annotated[bool, Opt(("--json",), "Print the estimate as JSON.")] = False


def _model(name: str) -> ModelSpec:
    from infer_prof.catalog.models import ModelError, resolve_model

    try:
        resolved = resolve_model(name)
    except (ModelError, ImportError, OSError) as exc:
        _fail(str(exc))
    if resolved.spec is None:
        _fail(f"estimate needs {name!r}'s architecture (config.json); give a known alias or a "
              "local model directory")
    return resolved.spec


def _gpus(names: list[str]) -> tuple[GpuSpec, ...]:
    from infer_prof.catalog.gpus import find_gpus, known_gpu_keys
    from infer_prof.catalog.market import nearest

    out: list[GpuSpec] = []
    for name in names:
        try:
            found = find_gpus(name)
        except ValueError:
            _fail(f"unknown GPU {name!r}; nearest: {nearest(name, known_gpu_keys())}")
        out.extend(g for g in found if g not in out)
    return tuple(out)


def _lengths(o: EstimateOptions) -> tuple[int, int, tuple[Slo, ...]]:
    from infer_prof.core.workload.slo import SloError, parse_slos, slos_from_mapping

    inp, out = o.input_len, o.output_len
    slos: tuple[Slo, ...] = ()
    try:
        if o.workload is not None:
            from infer_prof.catalog.workloads import load_workload

            w = load_workload(o.workload)
            inp = inp or round(w.input_len.mean())
            out = out or round(w.output_len.mean())
            slos = tuple(slos_from_mapping(w.slo))
        if o.slo is not None:
            slos = tuple(parse_slos(o.slo))
    except (SloError, ValueError, OSError) as exc:
        _fail(str(exc))
    return inp or DEFAULT_INPUT_LEN, out or DEFAULT_OUTPUT_LEN, slos


def _instance(o: EstimateOptions, offers_market: object) -> InstanceOffer | None:
    from infer_prof.catalog.market import Market, find_instance, nearest

    assert isinstance(offers_market, Market)
    if o.cloud is not None:
        clouds = sorted({x.cloud for x in offers_market.offers})
        if o.cloud.lower() not in clouds:
            _fail(f"--cloud {o.cloud}: no such cloud in {offers_market.describe()}; nearest: "
                  f"{nearest(o.cloud, clouds)}")
    if o.instance is None:
        return None
    try:
        return find_instance(offers_market, o.instance)
    except ValueError as exc:
        _fail(str(exc))


def _measured_sets(o: EstimateOptions) -> tuple[MeasuredSet | None, MeasuredSet | None]:
    """The ``--calibrate-from`` and ``--measured`` runs (None where not asked)."""
    from infer_prof.estimate.measured_runs import MeasuredRunsError, read_measured

    try:
        fit_on = read_measured(o.calibrate_from) if o.calibrate_from else None
        compare = read_measured(o.measured) if o.measured else None
    except MeasuredRunsError as exc:
        _fail(str(exc))
    if fit_on is not None and not fit_on.runs:
        said = "; ".join(f"{n} {why}" for why, n in fit_on.unusable.items())
        _fail(f"--calibrate-from {' '.join(o.calibrate_from or [])}: none of its "
              f"{fit_on.read} runs can be used ({said}); name runs on a GPU, closed loop, of a "
              "catalog model")
    return fit_on, compare


def _search_options(o: EstimateOptions, spec: ModelSpec) -> tuple[str | None, RankBy]:
    """The ``--kv-cache-dtype`` (None: search both) and ``--rank-by`` asked, checked; with
    ``--quantization`` against ``--min-quality`` (a precision that costs ``spec`` accuracy)."""
    from infer_prof.core.planning.precisions import (
        PlanError,
        normalize_kv_cache_dtype,
        normalize_precision,
    )
    from infer_prof.estimate.configs import costs_accuracy

    try:
        wanted = normalize_precision(o.quantization)
        kv = normalize_kv_cache_dtype(o.kv_cache_dtype) if o.kv_cache_dtype else None
    except PlanError as exc:
        _fail(str(exc))
    rank_by = next((r for r in RANK_BY if r == o.rank_by.strip().lower()), None)
    if rank_by is None:
        _fail(f"unknown --rank-by {o.rank_by!r}; use pessimistic or point")
    if o.min_quality is not None and (costs_accuracy(wanted, spec) or kv == "fp8"):
        _fail(f"--min-quality keeps out lossy configurations, and --quantization "
              f"{o.quantization} / --kv-cache-dtype {o.kv_cache_dtype or 'auto'} asks for one; "
              "drop one of them")
    return kv, rank_by


def estimate_options(o: EstimateOptions) -> None:
    """Predict throughput per GPU against interactivity for every GPU on the market (or those
    named), searching every GPU count, weight precision and KV-cache dtype vLLM runs there, and
    rank each GPU's cheapest configuration by $ per 1M output tokens at the target (at the slow
    end of its validated error). Every figure is a prediction, not a measurement."""
    from infer_prof.catalog.gpus import catalog
    from infer_prof.catalog.market import load_market
    from infer_prof.estimate.calibrated import calibrate
    from infer_prof.estimate.expected_error import load_expected_error
    from infer_prof.estimate.workflow import EstimateRequest, choose_gpus, estimate, plan_all

    spec = _model(o.model)
    kv, rank_by = _search_options(o, spec)
    gpus = _gpus(o.gpu or [])
    inp, out, slos = _lengths(o)
    fit_on, compare = _measured_sets(o)
    market = load_market()
    instance = _instance(o, market)
    if instance is not None and gpus and instance.gpu not in {g.key for g in gpus}:
        _fail(f"--instance {o.instance} has {instance.gpu or instance.accelerator}, not "
              f"{', '.join(g.key for g in gpus)}; leave out --gpu or name another instance")
    request = EstimateRequest(
        model=spec, input_len=inp, output_len=out, target_interactivity=o.target_interactivity,
        slos=slos, gpus=gpus, gpu_count=o.gpus, quantization=o.quantization,
        kv_cache_dtype=kv, min_quality=o.min_quality, rank_by=rank_by,
        all_configs=o.all_configs,
        tier="spot" if o.spot else "on-demand", cloud=o.cloud.lower() if o.cloud else None,
        instance=instance)
    cat = catalog()
    chosen = choose_gpus(request, cat, market.offers)
    if not chosen:
        _fail("no GPU to estimate: no catalog GPU has a price in the market asked "
              f"({market.describe()}); name one with --gpu")
    found = plan_all(request, chosen, list(cat.values()), market.offers)
    if not found.configs:
        _fail(_nothing_to_rank(spec.name, chosen, found, input_len_text(inp, out)))
    cal = calibrate(fit_on, compare, [c.gpu for c in found.configs])
    doc = estimate(request, found.configs, found.skipped, market.offers,
                   prices=market.describe(), expected=load_expected_error(), calibration=cal,
                   searched=found)
    if o.json_output:
        typer.echo(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode())
    else:
        print_estimate(doc, Console())
    if o.target_interactivity is not None and not any(r.reaches_target for r in doc.rows):
        best = max(r.best_interactivity for r in doc.rows)
        _fail(f"no configuration reaches {o.target_interactivity:g} tokens/s per user "
              f"(the best predicted: {best:.0f}); lower --target-interactivity")


def _nothing_to_rank(model: str, chosen: list[GpuSpec], found: SearchResult,
                     lengths: str) -> str:
    """One line when no configuration is left to predict: what vLLM does not run (a precision
    forced on a GPU that cannot run it), else why nothing fits."""
    names = ", ".join(g.key for g in chosen[:3]) + (", ..." if len(chosen) > 3 else "")
    if found.unsupported and not found.skipped:
        u = found.unsupported[0]
        return f"vLLM does not run what was asked on {names}: {u.why}"
    first = found.skipped[0].why if found.skipped else (
        found.unsupported[0].why if found.unsupported else "")
    return f"{model} fits on none of the GPUs asked ({names}) for {lengths}: {first}"


estimate_command = declared_command(EstimateOptions, estimate_options)
