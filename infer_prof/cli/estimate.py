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
from rich import box
from rich.console import Console
from rich.table import Table

from infer_prof.cli.declared import declared_command
from infer_prof.cli.estimate_measured import calibration_lines, print_measured
from infer_prof.config.options import POSITIVE_INT, Opt, Range
from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.market import InstanceOffer
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.workload.slo import Slo
from infer_prof.estimate.document import EstimateDocument, Row
from infer_prof.report.fit import print_fitted

if TYPE_CHECKING:
    from infer_prof.estimate.measured_runs import MeasuredSet

WEIGHT_ONLY = ("int8", "bnb-nf4", "awq", "gptq", "int4", "bnb-int8")
"""Precisions whose weights are dequantized to 16-bit before each matmul."""

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
        ("--gpus",), "GPUs per configuration (tensor parallel). Default: each of 1, 2, 4, 8 "
        "the planner says holds the model.", range=Range("1 to 8", low=1, high=8))] = None
    quantization: Annotated[str, Opt(
        ("--quantization",), "auto (the planner's choice), or force one: bf16, fp8, int8, "
        "bitsandbytes, awq, gptq.")] = "auto"
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


def estimate_options(o: EstimateOptions) -> None:
    """Predict throughput per GPU against interactivity for every GPU on the market (or those
    named), at the GPU counts and precisions the planner says fit, and rank them by $ per 1M
    output tokens at the target. Every figure is a prediction, not a measurement."""
    from infer_prof.catalog.gpus import catalog
    from infer_prof.catalog.market import load_market
    from infer_prof.core.planning.precisions import PlanError, normalize_precision
    from infer_prof.estimate.calibrated import calibrate
    from infer_prof.estimate.expected_error import load_expected_error
    from infer_prof.estimate.workflow import EstimateRequest, choose_gpus, estimate, plan_all

    try:
        normalize_precision(o.quantization)
    except PlanError as exc:
        _fail(str(exc))
    spec = _model(o.model)
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
        tier="spot" if o.spot else "on-demand", cloud=o.cloud.lower() if o.cloud else None,
        instance=instance)
    cat = catalog()
    chosen = choose_gpus(request, cat, market.offers)
    if not chosen:
        _fail("no GPU to estimate: no catalog GPU has a price in the market asked "
              f"({market.describe()}); name one with --gpu")
    configs, skipped = plan_all(request, chosen, list(cat.values()))
    if not configs:
        first = skipped[0].why if skipped else ""
        names = ", ".join(g.key for g in chosen[:3]) + (", ..." if len(chosen) > 3 else "")
        _fail(f"{spec.name} fits on none of the GPUs asked ({names}) for "
              f"{input_len_text(inp, out)}: {first}")
    cal = calibrate(fit_on, compare, [c.gpu for c in configs])
    doc = estimate(request, configs, skipped, market.offers, prices=market.describe(),
                   expected=load_expected_error(), calibration=cal)
    if o.json_output:
        typer.echo(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode())
    else:
        print_estimate(doc, Console())
    if o.target_interactivity is not None and not any(r.reaches_target for r in doc.rows):
        best = max(r.best_interactivity for r in doc.rows)
        _fail(f"no configuration reaches {o.target_interactivity:g} tokens/s per user "
              f"(the best predicted: {best:.0f}); lower --target-interactivity")


def input_len_text(inp: int, out: int) -> str:
    """``512 in + 256 out tokens``."""
    return f"{inp} in + {out} out tokens"


def best_per_gpu(rows: list[Row]) -> list[Row]:
    """The first (best ranked) row of each GPU, in rank order."""
    seen: set[str] = set()
    out = []
    for r in rows:
        if r.gpu not in seen:
            seen.add(r.gpu)
            out.append(r)
    return out


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def print_estimate(doc: EstimateDocument, console: Console) -> None:
    """The ranked table (each GPU's best configuration), then the footer: where prices and
    factors come from, the expected error, the GPUs left out."""
    if doc.read_at == "target":
        where = f"at {doc.target_interactivity:g} tokens/s per user"
    elif doc.read_at == "slo":
        where = f"at the best point meeting {doc.slo}"
    else:
        where = "at each configuration's highest throughput"
    console.print(f"[bold]{doc.model}[/], {input_len_text(doc.input_len, doc.output_len)}, "
                  f"read {where}: PREDICTED, not measured", highlight=False)
    table = Table(box=box.SIMPLE_HEAVY, show_edge=False)
    for col in ("GPU", "prec", "tok/s/GPU", "$/1M out", "$/1M in", "TTFT ms", "TPOT ms",
                "instance"):
        table.add_column(col, justify="left" if col in ("GPU", "prec", "instance") else "right",
                         no_wrap=col in ("GPU", "instance", "$/1M out"))
    rows = best_per_gpu(doc.rows)
    for r in rows:
        gpu = f"{r.gpu_count}x {r.gpu}" if r.gpu_count > 1 else r.gpu
        inst = r.instance.instance_type if r.instance else "no price"
        if r.at_target is None:
            table.add_row(gpu, r.precision, "-", f"max {r.best_interactivity:.0f}", "-", "-",
                          "-", inst)
            continue
        table.add_row(gpu, r.precision, _num(r.at_target.output_tok_s_per_gpu),
                      _num(r.usd_per_million_output_tokens, ".2f"),
                      _num(r.usd_per_million_input_tokens, ".2f"), _num(r.ttft_ms_p50),
                      _num(r.tpot_ms_p50, ".1f"), inst)
    print_fitted(console, table, ("$/1M in",), shorten=("instance",))
    print_measured(doc, console)
    lines = []
    if any(r.at_target is None for r in rows):
        lines.append(f"max N: does not reach {doc.target_interactivity:g} tokens/s per user; "
                     "N is its best predicted")
    if len(doc.rows) > len(rows):
        lines.append(f"each GPU's best configuration shown; {len(doc.rows)} in --json")
    lines.append(f"prices: {doc.prices}, cheapest per GPU-hour")
    by_figures: dict[tuple[str, str], list[str]] = {}
    for r in doc.rows:
        key = (r.factors.figures(), f"{r.factors.family}: {r.factors.basis()}")
        gpus = by_figures.setdefault(key, [])
        if r.gpu not in gpus:
            gpus.append(r.gpu)
    for (figures, said), gpus in by_figures.items():
        lines.append(f"factors for {', '.join(gpus)}: {figures} ({said}; sources in --json)")
    notes = sorted({n for r in rows for n in r.notes if "all-reduce" in n})
    if notes:
        lines.append(f"{len(notes)} tensor-parallel rows without all-reduce time (optimistic):"
                     " no interconnect figure (NVLink domains only, see --json notes)")
    weight_only = sorted({r.precision for r in rows if r.precision in WEIGHT_ONLY})
    if weight_only:
        lines.append(f"{', '.join(weight_only)} rows: the weights' dequantization is not "
                     "modelled (only their bytes): optimistic")
    lines.extend(calibration_lines(doc))
    lines.append(doc.expected_error)
    for s in doc.skipped:
        lines.append(f"left out {s.gpu}: {s.why}")
    for line in lines:
        console.print(line, markup=False, highlight=False)


estimate_command = declared_command(EstimateOptions, estimate_options)
