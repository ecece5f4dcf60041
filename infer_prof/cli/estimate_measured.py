"""``infer-prof estimate``'s console output of measured runs: the "measured vs predicted" table
under the ranking and the footer lines on the factors refitted by ``--calibrate-from`` and the
runs that could not be used."""

from __future__ import annotations

from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from infer_prof.estimate.document import EstimateDocument, MeasuredSource
from infer_prof.report.fit import print_fitted


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.0f}%"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _run_name(source: str) -> str:
    """A result file's name, or ``history:<run id>`` cut to its first 13 characters."""
    if source.startswith("history:"):
        return source[:21]
    return Path(source).name


def print_measured(doc: EstimateDocument, console: Console) -> None:
    """The measured runs of the estimated configurations beside the prediction at their
    concurrency (every row's, not only each GPU's best); a line when none matches."""
    if doc.measured_from is None:
        return
    points = [(r, m) for r in doc.rows for m in r.measured]
    if not points:
        console.print(f"measured vs predicted: no run in {doc.measured_from.where} measured a "
                      f"configuration estimated here (same model, GPU, GPU count, precision, "
                      f"{doc.input_len} in + {doc.output_len} out)", markup=False,
                      highlight=False)
        return
    console.print("measured vs predicted (output tok/s per GPU at the measured concurrency):",
                  markup=False, highlight=False)
    table = Table(box=box.SIMPLE_HEAVY, show_edge=False)
    for col in ("GPU", "prec", "conc", "measured", "predicted", "error", "TPOT meas",
                "TPOT pred", "run"):
        table.add_column(col, justify="left" if col in ("GPU", "prec", "run") else "right",
                         no_wrap=True)
    for r, m in points:
        gpu = f"{r.gpu_count}x {r.gpu}" if r.gpu_count > 1 else r.gpu
        table.add_row(gpu, r.precision, str(m.concurrency), f"{m.output_tok_s_per_gpu:,.0f}",
                      f"{m.predicted_output_tok_s_per_gpu:,.0f}", _pct(m.error_pct),
                      _ms(m.tpot_ms_p50), _ms(m.predicted_tpot_ms_p50), _run_name(m.source))
    print_fitted(console, table, ("TPOT meas", "TPOT pred"), shorten=("run",))


def _unusable(source: MeasuredSource) -> str:
    said = "; ".join(f"{n} {why}" for why, n in source.unusable.items())
    line = f"runs in {source.where}: {source.read} read, {source.used} used"
    return line + (f"; not used: {said}" if said else "")


def calibration_lines(doc: EstimateDocument) -> list[str]:
    """Footer lines: each family's factors (refitted: on how many runs, from where, and the
    median error at those runs before and after; shipped: why), and the runs not used."""
    lines = []
    if doc.calibrated_from is not None:
        for f in doc.factors_used:
            if f.origin == "refitted":
                lines.append(f"{f.family}: factors {f.says}; median |error| at those runs "
                             f"{f.median_abs_error_pct_before:.0f} % (shipped) -> "
                             f"{f.median_abs_error_pct_after:.0f} % (refitted)")
            else:
                lines.append(f"{f.family}: shipped factors ({f.says})")
        lines.append(_unusable(doc.calibrated_from))
        if any(f.origin == "refitted" for f in doc.factors_used):
            lines.append("refitted factors are judged only on the runs they were fitted on; "
                         "the expected error below is the shipped factors'")
    m = doc.measured_from
    if m is not None and (doc.calibrated_from is None or m.where != doc.calibrated_from.where):
        lines.append(_unusable(m))
    return lines
