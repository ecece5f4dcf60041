"""``infer-prof plan``: will this model serve this load on this GPU, at which precision, and why.

Starts nothing: resolves the model's architecture, the GPU (``--gpu``, else the one NVML
detects), runs the pure planner and prints the decision, the per-GPU memory breakdown, the
rejected better options and, when nothing fits, what would. Exit 0 when a precision runs, 1 when
nothing fits, 2 on bad input.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, NoReturn

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from infer_prof.catalog.gpus import DetectedGpu, catalog, detect_gpus, find_gpus
from infer_prof.cli.declared import declared_command
from infer_prof.config.options import Opt
from infer_prof.core.catalog.gpus import GIB, GpuSpec
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.planning.lora_memory import VLLM_LORA_RANKS, LoraSlots
from infer_prof.core.planning.plan_result import Plan
from infer_prof.core.planning.planner import PlanRequest, plan
from infer_prof.core.planning.precisions import PRECISION_LABELS, PlanError
from infer_prof.report.fit import print_fitted

_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}


def parse_bytes(text: str) -> int:
    """``"24GiB"`` -> 25769803776; ``"512MiB"``, ``"16GB"`` (decimal), ``"1.5GiB"``, ``"1024"``.

    Raises ``ValueError`` for anything else.
    """
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"cannot read {text!r} as a size; write e.g. 24GiB, 512MiB or 16GB")
    return round(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / GIB:,.2f}"


def _resolve_spec(model: str) -> ModelSpec:
    from infer_prof.catalog.models import ModelError, resolve_model

    try:
        resolved = resolve_model(model)
    except (ModelError, ImportError, OSError) as exc:
        _fail(str(exc))
    if resolved.spec is None:
        _fail(f"the planner needs {model!r}'s architecture (config.json); give a known alias or a "
              "local model directory")
    return resolved.spec


def _resolve_gpus(gpu: str | None, gpus: int | None, memory_budget: int | None
                  ) -> tuple[list[GpuSpec | None], int, list[DetectedGpu], str]:
    """(specs, count, the GPUs NVML detects, how the GPU was chosen). ``--gpu`` naming a
    family (``A100``) gives every variant, each planned in turn; otherwise one spec."""
    if gpu is not None:
        try:
            specs: list[GpuSpec | None] = list(find_gpus(gpu))
        except ValueError as exc:
            _fail(f"{exc}; pass --gpu with one of them")
        how = "--gpu" if len(specs) == 1 else f"--gpu {gpu}: one of {len(specs)} variants"
        return specs, gpus or 1, detect_gpus(), how
    spec, count, found, how = _resolve_gpu(gpus, memory_budget)
    return [spec], count, found, how


def _resolve_gpu(gpus: int | None, memory_budget: int | None
                 ) -> tuple[GpuSpec | None, int, list[DetectedGpu], str]:
    """Without ``--gpu``: (spec, count, the GPUs NVML detects, how the GPU was chosen)."""
    if memory_budget is not None:
        return None, gpus or 1, [], "--memory-budget (CPU)"
    found = detect_gpus()
    if not found:
        _fail("no GPU detected (NVML found none); pass --gpu NAME to plan for one, or "
              "--memory-budget SIZE for a CPU run")
    first = found[0]
    if first.spec is None:
        _fail(f"detected GPU {first.nvml_name!r} is not in the catalog; pass --gpu NAME")
    same = sum(1 for d in found if d.nvml_name == first.nvml_name)
    return first.spec, gpus or same, found, f"detected ({first.nvml_name})"


def _print_plan(p: Plan, how: str, console: Console) -> None:
    where = (f"{p.gpu_count} x {p.gpu}" if p.gpu else "CPU memory budget") + f" [{how}]"
    console.print(f"[bold]{p.model}[/] on {where}: {p.concurrency} concurrent x "
                  f"({p.input_len} in + {p.output_len} out = {p.seq_len} tokens)")
    budget = (f"{p.gpu_memory_utilization:g} x {_gib(p.memory_per_gpu_bytes)} GiB"
              if p.gpu_memory_utilization is not None else "--memory-budget")
    console.print(f"budget per {'GPU' if p.gpu else 'device'}: "
                  f"{_gib(p.budget_per_gpu_bytes)} GiB ({budget}"
                  + (f"; memory from {p.memory_source})" if p.gpu else ")"))
    console.print(f"overhead model: {p.assumptions.get('overhead_model')}")
    if p.precision and p.memory:
        verdict = "[green]fits[/]" if p.fits_load else "[yellow]runs, with queueing[/]"
        kv = ", fp8 KV cache" if p.kv_cache_dtype == "fp8" else ""
        console.print(f"decision: [bold]{PRECISION_LABELS[p.precision]}{kv}[/] -> {verdict}; "
                      f"{p.memory.max_sequences} sequences of {p.seq_len} tokens fit at once "
                      f"({p.memory.kv_tokens:,} KV tokens)")
        if p.memory.state_bytes_per_sequence:
            m = p.memory
            state = m.state_bytes_per_sequence
            kv_part = m.kv_needed_bytes // max(1, p.concurrency) - state
            console.print(f"per sequence of {p.seq_len} tokens: KV {kv_part / 2**20:,.1f} MiB "
                          f"({_per_token(m.kv_bytes_per_token)} a token, attention layers) + "
                          f"state {state / 2**20:,.1f} MiB (linear layers, whatever the length), "
                          f"in pages of {m.block_size} tokens")
    else:
        console.print("decision: [bold red]nothing fits[/]")

    table = Table(title="memory per GPU (GiB)", box=box.SIMPLE_HEAVY, show_edge=False)
    hybrid = any(c.memory.state_bytes_per_sequence for c in p.candidates)
    lora = any(c.memory.lora_bytes for c in p.candidates)
    cols = ("precision", "weights", *(("LoRA",) if lora else ()), "overhead", "KV cache",
            "KV/token",
            *(("state/seq",) if hybrid else ()), "seqs at once", "verdict")
    for col in cols:
        table.add_column(col, justify="left" if col in ("precision", "verdict") else "right",
                         no_wrap=col == "precision")
    rejected = {c.label for c in p.rejections}
    fp8_kv_note = False
    for c in p.candidates:
        m = c.memory
        chosen = c.precision == p.precision and c.kv_cache_dtype == p.kv_cache_dtype
        if chosen:
            verdict = "chosen"
        elif not c.available:
            verdict = "unavailable"
        elif c.kv_cache_dtype == "fp8" and p.kv_cache_dtype != "fp8":
            verdict, fp8_kv_note = "if asked", True
        elif c.label in rejected:
            verdict = "rejected"
        else:
            verdict = c.reason or "fits"
        table.add_row(("* " if chosen else "  ") + c.label, _gib(m.weights_bytes),
                      *((_gib(m.lora_bytes),) if lora else ()),
                      _gib(m.overhead_bytes), _gib(m.kv_cache_bytes),
                      f"{m.kv_bytes_per_token / 1024:,.0f} KiB",
                      *((f"{m.state_bytes_per_sequence / 2**20:,.1f} MiB",) if hybrid else ()),
                      f"{m.max_sequences:,}", verdict, style="bold" if chosen else None)
    print_fitted(console, table, ("overhead", "state/seq", "KV/token"), more="--json")
    if fp8_kv_note:
        console.print("if asked: an fp8 KV cache is planned only when asked (--kv-cache-dtype "
                      "fp8) or when nothing else fits")
    if p.memory:
        m = p.memory
        lora_part = f"LoRA buffers {_gib(m.lora_bytes)} + " if m.lora_bytes else ""
        console.print(f"breakdown: weights {_gib(m.weights_bytes)} (whole model "
                      f"{_gib(m.weights_bytes_total)}) + {lora_part}fixed "
                      f"{_gib(m.fixed_overhead_bytes)} + "
                      f"activations {_gib(m.activation_bytes)} + KV cache {_gib(m.kv_cache_bytes)}"
                      f" = {_gib(m.budget_bytes)} GiB; the load needs {_gib(m.kv_needed_bytes)} "
                      "GiB of KV")
    for c in p.rejections:
        console.print(f"rejected {c.label}: {c.reason}")
    for c in p.candidates:
        if not c.available and c.label not in rejected:
            console.print(f"unavailable {c.label}: {c.reason}")
    for w in p.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    for s in p.suggestions:
        console.print(f"to hold the whole load: {s}")
    for n in p.notes:
        console.print(f"note: {n}")
    args = _vllm_args(p)
    if args:
        console.print(f"vLLM engine args: {json.dumps(args)}")


def _per_token(n: int) -> str:
    """KV bytes per token in words: ``24 KiB``, or ``512 B`` below a KiB."""
    return f"{n:,} B" if n < 1024 else f"{n / 1024:,.0f} KiB"


def _vllm_args(p: Plan) -> dict[str, object]:
    """The plan's engine settings as vLLM's engine arguments (the engine this command plans
    for), spelled for the vLLM version the plan was checked against."""
    from infer_prof.run.engine_setup import planned_engine_version
    from infer_prof.servers.vllm_args import vllm_engine_args

    return vllm_engine_args(p.settings, planned_engine_version(p))


@dataclass(frozen=True)
class PlanOptions:
    """The options of ``infer-prof plan``, each declared once (:mod:`infer_prof.cli.declared`)."""

    model: Annotated[str, Opt(("--model",), "Model alias (e.g. llama-2-70b) or local dir.")]
    gpu: Annotated[str | None, Opt(
        ("--gpu",), "GPU to plan for (catalog key, e.g. A100-80GB-SXM, or a family, e.g. A100: "
        "each variant is planned); default: the detected one.")] = None
    gpus: Annotated[int | None, Opt(
        ("--gpus",), "GPUs to split the model over (tensor parallel); default: --gpu 1, else all "
        "detected GPUs of the first kind.")] = None
    concurrency: Annotated[int, Opt(("--concurrency",), "Concurrent requests to serve.")] = 1
    input_len: Annotated[int, Opt(("--input-len",), "Prompt tokens per request.")] = 512
    output_len: Annotated[int, Opt(("--output-len",), "Output tokens per request.")] = 256
    gpu_memory_utilization: Annotated[float, Opt(
        ("--gpu-memory-utilization",), "Fraction of GPU memory vLLM may use.")] = 0.9
    quantization: Annotated[str, Opt(
        ("--quantization",), "auto, or force one: bf16, fp8, int8, bitsandbytes, awq, "
        "gptq.")] = "auto"
    load_format: Annotated[str | None, Opt(
        ("--load-format",), "vLLM --load-format, as for run: 'dummy' (random weights) rules out "
        "in-flight bitsandbytes, which vLLM loads from real weight files only.")] = None
    kv_cache_dtype: Annotated[str, Opt(
        ("--kv-cache-dtype",), "auto, or fp8 (half the KV bytes). With auto, fp8 is chosen only "
        "when no precision holds one sequence with a 16-bit KV cache.")] = "auto"
    memory_budget: Annotated[str | None, Opt(
        ("--memory-budget",), "Memory the engine may use (e.g. 24GiB, 512MiB): a CPU run without "
        "--gpu; replaces the utilization budget with one.")] = None
    max_loras: Annotated[int | None, Opt(
        ("--max-loras",), "LoRA adapters in one batch, as vLLM's --max-loras (run sets it to the "
        "--lora-modules count): plan the adapter buffers vLLM reserves before the KV cache.")
    ] = None
    max_lora_rank: Annotated[int, Opt(
        ("--max-lora-rank",), "The adapters' largest rank, as vLLM's --max-lora-rank (with "
        "--max-loras).")] = 16
    json_output: Annotated[bool, Opt(("--json",), "Print the plan as JSON.")] = False


def plan_options(o: PlanOptions) -> None:
    """Plan precision, tensor parallelism and memory for a model and load, without running it.

    A family name for ``--gpu`` (``A100``, ``H100``) plans every variant in turn (``--json``: a
    list); exit 0 when the load fits on at least one."""
    budget = None
    if o.memory_budget is not None:
        try:
            budget = parse_bytes(o.memory_budget)
        except ValueError as exc:
            _fail(f"--memory-budget: {exc}")
    lora = _lora_slots(o)
    spec = _resolve_spec(o.model)
    gpu_specs, count, found, how = _resolve_gpus(o.gpu, o.gpus, budget)
    results = [_plan_one(o, spec, g, count, found, budget, lora) for g in gpu_specs]
    if o.json_output:
        docs = [r.to_dict(_vllm_args(r)) for r in results]
        typer.echo(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
    else:
        console = Console()
        for i, r in enumerate(results):
            if i:
                console.print()
            _print_plan(r, how, console)
        if len(results) > 1:
            fits = [r.gpu for r in results if r.fits]
            family = gpu_specs[0].family if gpu_specs[0] else o.gpu
            console.print(f"{family} is a GPU family: planned on each variant; fits on "
                          f"{', '.join(str(k) for k in fits) or 'none'}", markup=False,
                          highlight=False)
    if not any(r.fits for r in results):
        raise typer.Exit(1)


def _lora_slots(o: PlanOptions) -> LoraSlots | None:
    """``--max-loras`` and ``--max-lora-rank`` as the planner's slots (None without adapters);
    exits 2 on a count below 1 or a rank vLLM does not take."""
    if o.max_loras is None:
        return None
    if o.max_loras < 1:
        _fail(f"--max-loras must be at least 1, got {o.max_loras}")
    if o.max_lora_rank not in VLLM_LORA_RANKS:
        _fail(f"--max-lora-rank {o.max_lora_rank} is not one vLLM takes; use one of "
              f"{', '.join(map(str, VLLM_LORA_RANKS))}")
    return LoraSlots(o.max_loras, o.max_lora_rank)


def _plan_one(o: PlanOptions, spec: ModelSpec, gpu_spec: GpuSpec | None, count: int,
              found: list[DetectedGpu], budget: int | None, lora: LoraSlots | None) -> Plan:
    """The plan on one GPU model (exits 2 with the planner's one-line reason)."""
    from infer_prof.run.engine_setup import device_memory, engine_capabilities  # --help stays fast

    memory, source = device_memory(gpu_spec, found)
    try:
        return plan(PlanRequest(
            spec, gpu_spec, gpus=count, concurrency=o.concurrency, input_len=o.input_len,
            output_len=o.output_len, gpu_memory_utilization=o.gpu_memory_utilization,
            quantization=o.quantization, memory_budget_bytes=budget,
            memory_per_gpu_bytes=memory, memory_source=source,
            kv_cache_dtype=o.kv_cache_dtype, load_format=o.load_format,
            caps=engine_capabilities(gpu_spec is not None),
            catalog=list(catalog().values()), lora=lora))
    except PlanError as exc:
        _fail(str(exc))


plan_command = declared_command(PlanOptions, plan_options)
