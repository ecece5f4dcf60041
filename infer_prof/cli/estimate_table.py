"""The console form of an ``infer-prof estimate`` answer: the ranked table (each GPU's best
configuration, or every one with ``--all-configs``) and the footer (where prices and factors
come from, how rows rank, what is lossy, what vLLM does not run, what was left out)."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from infer_prof.cli.estimate_measured import calibration_lines, print_measured
from infer_prof.core.estimate.moe_layer import MOE_LAYER_FIXED_US
from infer_prof.estimate.configs import lossy_weights_label
from infer_prof.estimate.document import EstimateDocument, Row
from infer_prof.estimate.expected_error import interval_precision
from infer_prof.report.fit import print_fitted

LOSSY_MARK = "†"
LINK_WORDS = {"pcie": "PCIe", "nvlink": "NVLink", "infinity-fabric": "Infinity Fabric"}


def input_len_text(inp: int, out: int) -> str:
    """``512 in + 256 out tokens``."""
    return f"{inp} in + {out} out tokens"


def gpu_label(r: Row) -> str:
    """``H100-SXM``, ``2x H100-SXM``, ``4x L40S PCIe`` (a tensor-parallel group over PCIe says
    so)."""
    gpu = f"{r.gpu_count}x {r.gpu}" if r.gpu_count > 1 else r.gpu
    pcie = r.interconnect == "pcie" and "pcie" not in r.gpu.lower()
    return f"{gpu} PCIe" if pcie else gpu


def config_label(r: Row) -> str:
    """The weight precision as vLLM runs it and ``/kv8`` for an fp8 KV cache, each lossy part
    marked: ``bf16``, ``fp16`` (no bf16 on the GPU), ``fp8``, ``fp8-w8a16`` (weight-only,
    Marlin), ``bnb-nf4†``, ``fp8/kv8†``."""
    prec = interval_precision(r.precision, r.weight_only)  # fp8 run weight-only: fp8-w8a16
    if prec == "bf16" and r.dtype == "float16":
        prec = "fp16"
    if lossy_weights_label(r.precision) in r.lossy:
        prec += LOSSY_MARK
    return prec + (f"/kv8{LOSSY_MARK}" if r.kv_cache_dtype == "fp8" else "")


def error_label(r: Row) -> str:
    """``±17%`` (the 90th percentile of |error| held out by source, of the row's kind of
    configuration) or ``unvalidated``."""
    e = r.expected_error
    if e is None or not r.validated or e.p90_abs_pct is None:
        return "unvalidated"
    return f"±{e.p90_abs_pct:.0f}%"


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def _table(doc: EstimateDocument, console: Console) -> None:
    table = Table(box=box.SIMPLE_HEAVY, show_edge=False)
    for col in ("GPU", "config", "tok/s/GPU", "$/1M out", "error", "$/1M slow", "$/1M in",
                "TTFT ms", "TPOT ms", "instance"):
        table.add_column(col, justify="left" if col in ("GPU", "config", "instance", "error")
                         else "right", no_wrap=col in ("GPU", "instance", "$/1M out", "config"))
    for r in doc.rows:
        inst = r.instance.instance_type if r.instance else "no price"
        if r.at_target is None:
            table.add_row(gpu_label(r), config_label(r), "-", f"max {r.best_interactivity:.0f}",
                          error_label(r), "-", "-", "-", "-", inst)
            continue
        table.add_row(gpu_label(r), config_label(r), _num(r.at_target.output_tok_s_per_gpu),
                      _num(r.usd_per_million_output_tokens, ".2f"), error_label(r),
                      _num(r.usd_per_million_output_tokens_pessimistic, ".2f"),
                      _num(r.usd_per_million_input_tokens, ".2f"), _num(r.ttft_ms_p50),
                      _num(r.tpot_ms_p50, ".1f"), inst)
    print_fitted(console, table, ("$/1M in", "TTFT ms", "$/1M slow", "TPOT ms"),
                 shorten=("instance", "GPU", "config"))


def _ranking_lines(doc: EstimateDocument) -> list[str]:
    lines = []
    if doc.rank_by == "point":
        lines.append("ranked by the central estimate (--rank-by point)")
    else:
        lines.append("ranked by $/1M slow (the cost at the error interval's slow end), validated "
                     "rows first; unvalidated rows after, by their central cost")
    lines.append("error: the interval of output tok/s; TTFT and TPOT are predicted medians "
                 "without one (TTFT against published runs: benchmarks/estimate_ttft.py)")
    s = doc.search
    if s is not None:
        shown = "every configuration" if doc.all_configs else "each GPU's best configuration"
        lines.append(f"searched {s.planned} configurations (GPU count x "
                     f"{'/'.join(s.precisions)} x KV {'/'.join(s.kv_cache_dtypes)}), "
                     f"{s.predicted} predicted; {shown} shown"
                     + ("" if doc.all_configs else " (--all-configs: all)"))
    if any(r.lossy for r in doc.rows):
        lines.append(f"{LOSSY_MARK} lossy: 4-bit weights or an fp8 KV cache (/kv8) cost "
                     "accuracy (--min-quality or --quantization keeps them out; measure with "
                     "infer-prof quality)")
    if any(r.interconnect == "pcie" for r in doc.rows):
        lines.append("PCIe: the tensor-parallel all-reduce runs over PCIe (no NVLink domain); "
                     "see --json notes")
    return lines


def print_estimate(doc: EstimateDocument, console: Console) -> None:
    """The ranked table, then the footer (module docstring)."""
    if doc.read_at == "target":
        where = f"at {doc.target_interactivity:g} tokens/s per user"
    elif doc.read_at == "slo":
        where = f"at the best point meeting {doc.slo}"
    else:
        where = "at each configuration's highest throughput"
    console.print(f"[bold]{doc.model}[/], {input_len_text(doc.input_len, doc.output_len)}, "
                  f"read {where}: PREDICTED, not measured", highlight=False)
    _table(doc, console)
    print_measured(doc, console)
    lines = []
    if any(r.at_target is None for r in doc.rows):
        lines.append(f"max N: does not reach {doc.target_interactivity:g} tokens/s per user; "
                     "N is its best predicted")
    lines.extend(_ranking_lines(doc))
    lines.append(f"prices: {doc.prices}, cheapest per GPU-hour")
    by_figures: dict[tuple[str, str], list[str]] = {}
    for r in doc.rows:
        key = (r.factors.figures(), f"{r.factors.family}: {r.factors.basis()}")
        gpus = by_figures.setdefault(key, [])
        if r.gpu not in gpus:
            gpus.append(r.gpu)
    for (figures, said), gpus in by_figures.items():
        lines.append(f"factors for {', '.join(gpus)}: {figures} ({said}; sources in --json)")
    if doc.moe_layer_fixed_ms:
        layers = round(doc.moe_layer_fixed_ms * 1e3 / MOE_LAYER_FIXED_US)
        lines.append(f"MoE layers: {doc.moe_layer_fixed_ms:.2f} ms a step beside these factors, "
                     f"on every GPU of a group ({layers} x {MOE_LAYER_FIXED_US:g} us, set from "
                     "vLLM's kernel benchmark: core/estimate/moe_layer.py)")
    weight_only = sorted({r.precision for r in doc.rows
                          if r.weight_only and r.precision != "fp8"})
    if weight_only:
        lines.append(f"{', '.join(weight_only)} rows: the weights' dequantization is modelled "
                     "from published ratios to 16-bit, not validated on a run "
                     "(core/estimate/weight_only.py)")
    lines.extend(calibration_lines(doc))
    lines.append(doc.expected_error)
    for u in doc.unsupported:
        what = u.precision or (f"KV {u.kv_cache_dtype}" if u.kv_cache_dtype else "")
        lines.append(f"not ranked, vLLM does not run {u.gpu}{' ' + what if what else ''}: "
                     f"{u.why}")
    for s in doc.skipped:
        lines.append(f"left out {s.gpu}: {s.why}")
    for line in lines:
        console.print(line, markup=False, highlight=False)
