"""How right is ``infer-prof estimate``? Predicted against published measurements, point by point.

For every point of ``infer_prof/catalog/data/published_results.json`` it predicts the output
tokens/s per GPU the way ``estimate`` does (:func:`infer_prof.core.estimate.frontier_model.
predict_point`, vLLM's continuous batching) at the point's GPU, GPU count (tensor parallel),
precision, KV-cache dtype, input/output lengths and concurrency, and prints predicted beside
measured and the signed error ``predicted / measured - 1``. The concurrency predicted at:

- ``closed-loop``: the published concurrency, capped at what the planner says the KV cache
  holds (beyond it requests queue and the throughput is the cap's);
- ``burst`` (N requests sent at once) and ``offline-max`` (every request queued, the engine
  chose the batch): the planner's cap for the point's lengths, i.e. the most the KV cache runs at
  once (``offline-max``), or N when fewer (``burst``). Both are rougher comparisons than a
  closed loop: the summary keeps them apart.

Then the median and 90th percentile of |error| on the points of split "holdout" (since the
shipped factors are fitted on every source, these are fitted too: the error on sources held out
of the fit is ``benchmarks/estimate_loso.py``'s),
by GPU family, by model family and by engine, vLLM apart from other engines (the estimate
models vLLM; other engines are reported, not fitted). Then the pair check: wherever one source
measured one configuration on two GPUs, is the cheaper by $ per 1M output tokens the same by
prediction as by measurement? Prices: the cheapest on-demand per-GPU-hour instance of each GPU
in the shipped market snapshot (:mod:`infer_prof.catalog.market`).

    .venv/bin/python benchmarks/estimate_accuracy.py            # table + summaries
    .venv/bin/python benchmarks/estimate_accuracy.py --json     # the same as one JSON document
    .venv/bin/python benchmarks/estimate_accuracy.py --write    # refit on every source, write
        # catalog/data/estimate_factors.json and estimate_errors.json, then report

Factors: those ``estimate`` uses (:func:`infer_prof.catalog.estimate_factors.factors_for`: the
GPU's own fit shipped in ``estimate_factors.json``, else its architecture family's, else the
estimate's default); ``--write`` refits them first.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from infer_prof.catalog.estimate_factors import (
    FACTORS_FILE,
    fitted_factors,
    fitted_gpu_factors,
)
from infer_prof.catalog.gpus import catalog
from infer_prof.catalog.market import snapshot_market
from infer_prof.catalog.published_results import PublishedPoint, published_results
from infer_prof.core.catalog.market import cheapest_offer
from infer_prof.core.estimate.calibration import FITTED, Search, percentile
from infer_prof.core.estimate.factors import family_of
from infer_prof.estimate.published_fit import (
    GPU_FITTED,
    MIN_FAMILY_SOURCES,
    MIN_GPU_POINTS,
    TP_ONLY,
    Case,
    Chooser,
    Fitted,
    architecture,
    chooser,
    fit_all,
    fit_cases,
    identifiable,
    model_family,
    predict,
    prepare,
    shipped_factors,
)

__all__ = ["FITTED", "GPU_FITTED", "MIN_FAMILY_SOURCES", "MIN_GPU_POINTS", "TP_ONLY", "Case",
           "Chooser", "Fitted", "Search", "chooser", "fit_all", "fit_cases", "identifiable",
           "model_family", "predict", "prepare", "shipped_factors"]

ERRORS_FILE = "estimate_errors.json"
DATA = Path(__file__).resolve().parents[1] / "infer_prof" / "catalog" / "data"
COMMAND = "python benchmarks/estimate_accuracy.py"
GOAL = {"median": 15.0, "p90": 30.0, "pairs": 90.0}
"""Issue 37's goal for vLLM points: median |error| <= 15 %, p90 <= 30 %, pairs right >= 90 %."""


@dataclass(frozen=True)
class Row:
    """Predicted beside measured for one point (``predicted`` None when it cannot be
    predicted; ``why`` then says why)."""

    id: str
    engine: str
    source: str
    gpu: str
    family: str
    model: str
    model_family: str
    precision: str
    load: str
    split: str
    concurrency: int | None
    predicted_at: int | None
    measured: float
    predicted: float | None
    error_pct: float | None
    why: str = ""


def evaluate(points: Iterable[PublishedPoint], choose: Chooser = shipped_factors) -> list[Row]:
    """A :class:`Row` for every point, predicted with the factors ``choose`` picks."""
    rows = []
    for p in points:
        case = prepare(p)
        base = {"id": p.id, "engine": p.engine, "source": p.source.title.split(" (")[0][:60],
                "gpu": p.gpu, "model": p.model,
                "precision": p.precision, "load": p.load, "split": p.split,
                "concurrency": p.concurrency, "measured": p.output_tok_s_per_gpu}
        if isinstance(case, str):
            rows.append(Row(**base, family=family_of(catalog()[p.gpu]),
                            model_family=model_family(p.model, architecture(p.model)),
                            predicted_at=None, predicted=None, error_pct=None, why=case))
            continue
        try:
            value = predict(choose(p.gpu), case)
        except ValueError as exc:
            rows.append(Row(**base, family=case.family, model_family=case.model_family,
                            predicted_at=case.concurrency, predicted=None, error_pct=None,
                            why=str(exc)))
            continue
        rows.append(Row(**base, family=case.family, model_family=case.model_family,
                        predicted_at=case.concurrency, predicted=value,
                        error_pct=(value / p.output_tok_s_per_gpu - 1.0) * 100.0))
    return rows


def summary(rows: list[Row]) -> dict[str, Any] | None:
    """n, median and 90th percentile of |error| (percent) over the predicted rows."""
    errs = [abs(r.error_pct) for r in rows if r.error_pct is not None]
    if not errs:
        return None
    return {"n": len(errs), "median_abs_error_pct": round(statistics.median(errs), 1),
            "p90_abs_error_pct": round(percentile(errs, 90), 1)}


def grouped(rows: list[Row], key: Callable[[Row], str]) -> dict[str, dict[str, Any]]:
    """:func:`summary` per value of ``key``, keys sorted."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return {k: s for k, v in sorted(groups.items()) if (s := summary(v))}


@cache
def gpu_price(gpu: str, gpus: int) -> float | None:
    """Cheapest on-demand USD per GPU-hour of ``gpu`` in the shipped market snapshot."""
    quote = cheapest_offer(snapshot_market().offers, gpu, "on-demand", gpus=gpus)
    return None if quote is None else quote.usd_per_hour


def usd_per_million(price: float, tok_s_per_gpu: float) -> float:
    """$ per 1M output tokens: price per GPU-hour / (tokens/s per GPU x 3600) x 1e6."""
    return price / (tok_s_per_gpu * 3600.0) * 1e6


def pairs(rows: list[Row]) -> list[dict[str, Any]]:
    """Every two GPUs one source measured in one configuration (same source, engine, model,
    precision, lengths, tensor parallelism and concurrency): the cheaper by $/1M output tokens,
    measured and predicted, and whether they agree."""
    points = {p.id: p for p in published_results().points}
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        p = points[r.id]
        if r.predicted is None:
            continue
        key = (p.source.title, p.engine, p.model, p.precision, p.input_len, p.output_len,
               p.tensor_parallel, p.concurrency, p.load, p.split)
        groups.setdefault(key, []).append(r)
    out = []
    for members in groups.values():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                if a.gpu == b.gpu:
                    continue
                pa = gpu_price(a.gpu, points[a.id].gpu_count)
                pb = gpu_price(b.gpu, points[b.id].gpu_count)
                if pa is None or pb is None:
                    continue
                assert a.predicted is not None and b.predicted is not None
                meas = (usd_per_million(pa, a.measured), usd_per_million(pb, b.measured))
                pred = (usd_per_million(pa, a.predicted), usd_per_million(pb, b.predicted))
                cheaper_m = a.gpu if meas[0] <= meas[1] else b.gpu
                cheaper_p = a.gpu if pred[0] <= pred[1] else b.gpu
                out.append({"a": a.id, "b": b.id, "engine": a.engine, "split": a.split,
                            "measured_usd_per_m": [round(x, 4) for x in meas],
                            "predicted_usd_per_m": [round(x, 4) for x in pred],
                            "cheaper_measured": cheaper_m, "cheaper_predicted": cheaper_p,
                            "right": cheaper_m == cheaper_p})
    return out


def pair_share(prs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """How many pairs, and the share (percent) whose cheaper GPU the prediction got right."""
    if not prs:
        return None
    right = sum(1 for x in prs if x["right"])
    return {"pairs": len(prs), "right": right, "share_pct": round(100.0 * right / len(prs), 1)}


def is_vllm(r: Row) -> bool:
    return r.engine == "vllm"


def report(rows: list[Row]) -> dict[str, Any]:
    """The whole comparison as one document: rows, holdout summaries, pairs, the goal."""
    hold = [r for r in rows if r.split == "holdout"]
    vllm_hold = [r for r in hold if is_vllm(r)]
    closed = [r for r in vllm_hold if r.load == "closed-loop"]
    other = [r for r in hold if not is_vllm(r)]
    prs = pairs(rows)
    vllm_pairs = pair_share([x for x in prs if x["engine"] == "vllm" and x["split"] == "holdout"])
    headline = summary(closed)  # the goal is at the measured concurrency: closed loops
    met = None
    if headline and vllm_pairs:
        met = (headline["median_abs_error_pct"] <= GOAL["median"]
               and headline["p90_abs_error_pct"] <= GOAL["p90"]
               and vllm_pairs["share_pct"] >= GOAL["pairs"])
    return {
        "command": COMMAND,
        "factors": {k: f.source for k, f in
                    sorted({**fitted_factors(), **fitted_gpu_factors()}.items())},
        "rows": [asdict(r) for r in rows],
        "holdout": {
            "vllm": summary(vllm_hold),
            "vllm_closed_loop": summary(closed),
            "vllm_by_gpu_family": grouped(vllm_hold, lambda r: r.family),
            "vllm_closed_loop_by_gpu_family": grouped(closed, lambda r: r.family),
            "vllm_by_model_family": grouped(vllm_hold, lambda r: r.model_family),
            "vllm_by_load": grouped(vllm_hold, lambda r: r.load),
            "vllm_by_source": grouped(vllm_hold, lambda r: r.source),
            "other_engines": grouped(other, lambda r: r.engine),
            "other_by_gpu_family": grouped(other, lambda r: f"{r.engine} {r.family}"),
        },
        "fit_split": {"vllm": summary([r for r in rows if r.split == "fit" and is_vllm(r)])},
        "pairs": prs,
        "pairs_holdout_vllm": vllm_pairs,
        "pairs_holdout_other": pair_share(
            [x for x in prs if x["engine"] != "vllm" and x["split"] == "holdout"]),
        "pairs_all_vllm": pair_share([x for x in prs if x["engine"] == "vllm"]),
        "goal": {**GOAL, "met": met},
        "not_predicted": [{"id": r.id, "why": r.why} for r in rows if r.predicted is None],
    }


def write_files(fit: Fitted, doc: dict[str, Any], day: str) -> None:
    """Write ``estimate_factors.json`` and ``estimate_errors.json`` (module docstring)."""
    fdoc = {"_comment": ("StepFactors per architecture family whose points come from "
                         f"{MIN_FAMILY_SOURCES}+ sources and, where a family of several GPUs "
                         f"has {MIN_GPU_POINTS}+ points of one GPU, per GPU; fitted on every "
                         "vLLM closed-loop point of published_results.json by "
                         "benchmarks/estimate_accuracy.py --write. A GPU uses its own, else its "
                         "family's, else the fallback (the precision-weighted mean of the fitted "
                         "families' factors, published_fit.population_factors), "
                         "else the estimate's default."),
            "families": {k: msgspec.to_builtins(v) for k, v in fit.families.items()},
            "gpus": {k: msgspec.to_builtins(v) for k, v in fit.gpus.items()},
            "fallback": msgspec.to_builtins(fit.fallback) if fit.fallback else None}
    (DATA / FACTORS_FILE).write_text(json.dumps(fdoc, indent=1) + "\n")
    hold = doc["holdout"]
    head = hold["vllm_closed_loop"] or {}
    engines = dict(hold["other_engines"])
    if hold["vllm"]:
        engines["vllm"] = hold["vllm"]
    edoc = {"_comment": ("|predicted / measured - 1| of output tokens/s per GPU on the 'holdout' "
                         "split of published_results.json (points never used to fit): "
                         "expected_error_pct / p90_error_pct over the vLLM closed-loop points, "
                         "by_family their median per GPU architecture family; engines and "
                         "vllm_by_load for reference."),
            "expected_error_pct": head.get("median_abs_error_pct"),
            "p90_error_pct": head.get("p90_abs_error_pct"),
            "by_family": {k: v["median_abs_error_pct"]
                          for k, v in hold["vllm_closed_loop_by_gpu_family"].items()},
            "source": (f"{COMMAND} --write on {head.get('n', 0)} held-out vLLM closed-loop "
                       f"points, {day}"),
            "engines": engines, "vllm_by_load": hold["vllm_by_load"]}
    (DATA / ERRORS_FILE).write_text(json.dumps(edoc, indent=1) + "\n")


def _fmt(x: float | None, spec: str = ".0f") -> str:
    return "-" if x is None else format(x, spec)


def print_report(doc: dict[str, Any]) -> None:
    """The table per point, then the holdout summaries, the pairs and the goal."""
    print(f"{'point':<58} {'split':<7} {'conc':>5} {'at':>5} {'measured':>9} "
          f"{'predicted':>9} {'error':>7}")
    for r in doc["rows"]:
        err = "-" if r["error_pct"] is None else f"{r['error_pct']:+.0f}%"
        print(f"{r['id'][:58]:<58} {r['split']:<7} {_fmt(r['concurrency'], 'd'):>5} "
              f"{_fmt(r['predicted_at'], 'd'):>5} {r['measured']:>9.0f} "
              f"{_fmt(r['predicted']):>9} {err:>7}" + (f"  ({r['why']})" if r["why"] else ""))
    print("\noutput tok/s per GPU, |predicted / measured - 1| on the points of split holdout "
          "(fitted too: in-sample;\n held out by source: benchmarks/estimate_loso.py):")

    def line(name: str, s: dict[str, Any] | None) -> None:
        if s:
            print(f"  {name[:34]:<34} n={s['n']:<3} median {s['median_abs_error_pct']:>5.1f} %   "
                  f"p90 {s['p90_abs_error_pct']:>5.1f} %")

    hold = doc["holdout"]
    line("vLLM, all loads", hold["vllm"])
    line("vLLM, closed loop only", hold["vllm_closed_loop"])
    for title, key in (("vLLM by GPU family", "vllm_by_gpu_family"),
                       ("vLLM by model family", "vllm_by_model_family"),
                       ("vLLM by load", "vllm_by_load"),
                       ("vLLM by source", "vllm_by_source"),
                       ("other engines (not fitted)", "other_engines"),
                       ("other engines by GPU family", "other_by_gpu_family")):
        print(f" {title}:")
        for k, s in hold[key].items():
            line(k, s)
    line("(vLLM on split fit, for reference)", doc["fit_split"]["vllm"])
    print("\npairs (two GPUs, one source, one configuration): cheaper by $/1M output tokens")
    for name in ("pairs_holdout_vllm", "pairs_holdout_other", "pairs_all_vllm"):
        s = doc[name]
        if s:
            print(f"  {name:<22} {s['right']}/{s['pairs']} right ({s['share_pct']:.0f} %)")
    g = doc["goal"]
    print(f"\nissue 37 goal on split holdout (in-sample): median <= {g['median']:.0f} %, p90 <= "
          f"{g['p90']:.0f} %, pairs >= {g['pairs']:.0f} %: {'met' if g['met'] else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--write", action="store_true",
                    help="refit on every source, write estimate_factors.json and "
                         "estimate_errors.json")
    args = ap.parse_args(argv)
    day = dt.date.today().isoformat()
    if args.write:
        fit = fit_all(day, log=lambda line: print(line, file=sys.stderr))
        doc = report(evaluate(published_results().points, chooser(fit)))
        doc["factors"] = {k: f.source for k, f in sorted({**fit.families, **fit.gpus}.items())}
        write_files(fit, doc, day)
    else:
        doc = report(evaluate(published_results().points))
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print_report(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
