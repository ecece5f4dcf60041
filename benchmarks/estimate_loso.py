"""How right is ``infer-prof estimate`` on a source it never saw? Leave one source out.

Every vLLM closed-loop point of ``infer_prof/catalog/data/published_results.json`` that the
estimate can predict is a case (bursts and offline tables are not a steady concurrency; other
engines are not what the estimate models). Each SOURCE in turn (one publication: one
InferenceMAX run, one repository's sweep, this project's own H100 runs, ...) is held out: the
factors are refitted exactly as ``benchmarks/estimate_accuracy.py --write`` fits the shipped
ones (per architecture family, then per GPU with enough points: ``fit_cases`` of
:mod:`infer_prof.estimate.published_fit`) on the cases of every OTHER source, and the held-out
source's cases are predicted with those factors. A family none of the other sources measured
(or one measured by a single other source) takes the fit of the family the most other sources
measured, as ``estimate`` itself would (``MIN_FAMILY_SOURCES``). A family the held-out source
has no point in has the same fit as without the fold (memoized).

Reported, on the points of a released vLLM 0.10 or later (``engine_version``, and not
``prerelease``: a preview wheel, a nightly or a build of main is scored on its own line; the
goal's set):

- per point ``error = predicted / measured - 1`` of output tokens/s per GPU; median and 90th
  percentile of ``|error|`` over all; over the transformer points by (family, precision, TP,
  interconnect) cell (what a row's interval is looked up by) and by (family, precision) pair,
  and, of those their GPU bounded
  (:mod:`infer_prof.estimate.gpu_bound`: the groups a cell of few points falls back on), by GPU
  family, precision, GPU count (tensor parallel) and the interconnect the all-reduce crosses;
  over the hybrid models' points alone (a hybrid row's interval) and those their GPU did not
  bound alone; by model and by source;
- GPU pairs: two GPUs one source measured in one configuration (model, precision, lengths, TP,
  concurrency): is the faster per GPU by prediction the faster by measurement, and the median
  ``|predicted ratio / measured ratio - 1|`` of the two throughputs;
- TP ratios: one source, GPU, model, precision, lengths and concurrency at TPn and TP1: the
  median ``|predicted / measured - 1|`` of ``(tok/s per GPU at TPn) / (tok/s per GPU at TP1)``.

    python benchmarks/estimate_loso.py            # the tables
    python benchmarks/estimate_loso.py --json     # one JSON document
    python benchmarks/estimate_accuracy.py --write && python benchmarks/estimate_loso.py --write
        # refit the shipped factors on every source, then write catalog/data/estimate_errors.json:
        # its "held_out" section and the headline figures estimate prints

Goal (issue 43): median <= 10 %, p90 <= 25 %, TP ratio median <= 15 %, pairs >= 90 %.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import msgspec

from infer_prof.catalog.gpus import catalog
from infer_prof.catalog.interconnects import link_gbps
from infer_prof.catalog.published_results import PublishedPoint, published_results
from infer_prof.catalog.vllm_support import precision_support
from infer_prof.core.estimate.calibration import Search, percentile
from infer_prof.estimate.expected_error import (
    ERRORS_FILE,
    HeldOutErrors,
    HeldOutStats,
    interval_precision,
)
from infer_prof.estimate.gpu_bound import inversions
from infer_prof.estimate.published_fit import (
    Case,
    architecture,
    chooser,
    fit_cases,
    fitted_model,
    predict,
    prepare,
    unfitted,
)

DATA = Path(__file__).resolve().parents[1] / "infer_prof" / "catalog" / "data"
COMMAND = "python benchmarks/estimate_loso.py"
GOAL = {"median": 10.0, "p90": 25.0, "tp_ratio_median": 15.0, "pairs": 90.0}
"""Issue 43's goal on released vLLM >= 0.10 points held out by source."""
MIN_VERSION = (0, 10)


@dataclass(frozen=True)
class Held:
    """One case predicted with factors fitted without its source."""

    id: str
    source: str
    gpu: str
    family: str
    model: str
    precision: str
    tp: int
    interconnect: str
    input_len: int
    output_len: int
    concurrency: int
    engine_version: str | None
    goal_set: bool
    measured: float
    predicted: float
    error_pct: float


@dataclass(frozen=True)
class Stats:
    """n, median and 90th percentile of |error| in percent."""

    n: int
    median_abs_error_pct: float
    p90_abs_error_pct: float


def source_key(p: PublishedPoint) -> str:
    """What one held-out fold removes: the source's title (one publication)."""
    return p.source.title


def version_at_least(version: str | None, floor: tuple[int, int] = MIN_VERSION) -> bool:
    """Whether an ``engine_version`` (``0.13.0``, ``>=0.10.1``) is at least ``floor``; False when
    the source does not state one."""
    if not version:
        return False
    parts = version.lstrip(">=v ").split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= floor
    except (ValueError, IndexError):
        return False


def in_goal_set(p: PublishedPoint) -> bool:
    """Whether ``p`` is one the goal is judged on: a released vLLM of 0.10 or later
    (:func:`version_at_least`, and not ``p.prerelease``). A pre-release build (the gpt-oss
    preview wheel, a nightly, main) is scored on its own line, outside the goal's set."""
    return version_at_least(p.engine_version) and not p.prerelease


def interconnect(gpu: str, gpus: int) -> str:
    """``none`` on one GPU; else the link the all-reduce crosses as the estimate counts it:
    ``link`` where the catalog states an NVLink / Infinity Fabric figure, else ``pcie``."""
    if gpus <= 1:
        return "none"
    return "link" if link_gbps(gpu, gpus) else "pcie"


def cases() -> tuple[list[Case], list[tuple[str, str]]]:
    """The predictable vLLM closed-loop cases, and (id, why) for the ones that are not."""
    out: list[Case] = []
    skipped: list[tuple[str, str]] = []
    for p in published_results().points:
        if p.engine != "vllm" or p.load != "closed-loop":
            continue
        case = prepare(p)
        if isinstance(case, str):
            skipped.append((p.id, case))
        else:
            out.append(case)
    return out, skipped


def held_out(all_cases: list[Case], day: str = "held-out",
             search: Search | None = None) -> list[Held]:
    """Every case predicted with factors fitted on the other sources' cases (module docstring)."""
    by_source: dict[str, list[Case]] = {}
    for c in all_cases:
        by_source.setdefault(source_key(c.point), []).append(c)
    out: list[Held] = []
    for source, members in sorted(by_source.items()):
        rest = [c for c in all_cases if source_key(c.point) != source]
        choose = chooser(fit_cases(rest, day, search=search))
        for c in members:
            p = c.point
            value = predict(choose(p.gpu), c)
            out.append(Held(
                id=p.id, source=source, gpu=p.gpu, family=c.family, model=p.model,
                precision=interval_precision(
                    p.precision, precision_support(catalog()[p.gpu], p.precision).weight_only),
                tp=p.gpu_count,
                interconnect=interconnect(p.gpu, p.gpu_count),
                input_len=p.input_len, output_len=p.output_len, concurrency=c.concurrency,
                engine_version=p.engine_version, goal_set=in_goal_set(p),
                measured=p.output_tok_s_per_gpu, predicted=value,
                error_pct=(value / p.output_tok_s_per_gpu - 1.0) * 100.0))
    return out


def stats(errors: Iterable[float]) -> Stats | None:
    """:class:`Stats` of the absolute values of ``errors`` (percent); None when empty."""
    xs = [abs(e) for e in errors]
    if not xs:
        return None
    return Stats(len(xs), round(statistics.median(xs), 1), round(percentile(xs, 90), 1))


def grouped(rows: list[Held], key: Callable[[Held], str]) -> dict[str, Stats]:
    """:func:`stats` per value of ``key``, keys sorted."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r.error_pct)
    return {k: s for k, v in sorted(groups.items()) if (s := stats(v))}


def cell_key(r: Held) -> str:
    """``family|precision|tp|interconnect``: the cell an estimate row is looked up by."""
    return f"{r.family}|{r.precision}|{r.tp}|{r.interconnect}"


@dataclass(frozen=True)
class Ratio:
    """A ratio of two held-out points' throughputs per GPU, measured and predicted."""

    a: str
    b: str
    measured: float
    predicted: float

    @property
    def error_pct(self) -> float:
        return (self.predicted / self.measured - 1.0) * 100.0

    @property
    def order_right(self) -> bool:
        """Whether the prediction calls the faster of the two as the measurement does."""
        return (self.measured >= 1.0) == (self.predicted >= 1.0)


def _config(r: Held) -> tuple[object, ...]:
    return (r.source, r.model, r.precision, r.input_len, r.output_len, r.concurrency)


def gpu_pairs(rows: list[Held]) -> list[Ratio]:
    """GPU a over GPU b, one source and configuration (same TP too): throughput per GPU."""
    groups: dict[tuple[object, ...], list[Held]] = {}
    for r in rows:
        groups.setdefault((*_config(r), r.tp), []).append(r)
    out = []
    for members in groups.values():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                if a.gpu != b.gpu:
                    out.append(Ratio(a.id, b.id, a.measured / b.measured,
                                     a.predicted / b.predicted))
    return out


def tp_ratios(rows: list[Held]) -> list[Ratio]:
    """TPn over TP1, one source, GPU and configuration: throughput per GPU."""
    groups: dict[tuple[object, ...], dict[int, Held]] = {}
    for r in rows:
        groups.setdefault((*_config(r), r.gpu), {})[r.tp] = r
    out = []
    for by_tp in groups.values():
        one = by_tp.get(1)
        if one is None:
            continue
        for n, r in sorted(by_tp.items()):
            if n > 1:
                out.append(Ratio(r.id, one.id, r.measured / one.measured,
                                 r.predicted / one.predicted))
    return out


TIE_PCT = 5.0
"""Two GPUs whose measured throughputs per GPU are within this many percent are a near-tie:
which is faster is within a run's repeatability, so :func:`apart_share` reports the pairs
beyond it apart (the goal's figure counts every pair)."""


def apart_share(pairs: list[Ratio]) -> dict[str, float | int]:
    """Pairs measured more than :data:`TIE_PCT` apart: how many, how many called right."""
    apart = [x for x in pairs if abs(x.measured - 1.0) * 100.0 > TIE_PCT]
    right = sum(1 for x in apart if x.order_right)
    return {"pairs": len(apart), "right": right,
            "share_pct": round(100.0 * right / len(apart), 1) if apart else 0.0}


def report(rows: list[Held], skipped: list[tuple[str, str]]) -> dict[str, object]:
    """The whole held-out comparison as one JSON-ready document."""
    goal_rows = [r for r in rows if r.goal_set]
    # the groups a configuration's interval is looked up by: transformer points (a hybrid
    # model's row is held to the hybrid points' own line, "hybrid"); a cell holds every such
    # point of its configuration, the family, precision, TP and interconnect groups a small
    # cell falls back on only those their GPU bounded (a setup the GPU did not bound speaks
    # for its own configuration, not for the family's others: "not_gpu_bound")
    unbound = set(inversions(published_results().points))
    prerelease = {p.id for p in published_results().points if p.prerelease}
    cell_rows = [r for r in goal_rows if not is_hybrid(r.model)]
    group_rows = [r for r in cell_rows if r.id not in unbound]
    pairs = gpu_pairs(goal_rows)
    tps = tp_ratios(goal_rows)
    head = stats(r.error_pct for r in goal_rows)
    pair_right = sum(1 for x in pairs if x.order_right)
    pair_share = round(100.0 * pair_right / len(pairs), 1) if pairs else None
    tp_stats = stats(x.error_pct for x in tps)
    met = None
    if head and tp_stats and pair_share is not None:
        met = (head.median_abs_error_pct <= GOAL["median"]
               and head.p90_abs_error_pct <= GOAL["p90"]
               and tp_stats.median_abs_error_pct <= GOAL["tp_ratio_median"]
               and pair_share >= GOAL["pairs"])
    return {
        "command": COMMAND,
        "held_out_by": "source (published_results.json source title)",
        "goal_set": "vLLM closed-loop points of a released engine_version >= 0.10",
        "overall": head,
        "overall_gpu_bound": stats(r.error_pct for r in goal_rows if r.id not in unbound),
        "all_vllm_closed_loop": stats(r.error_pct for r in rows),
        "prerelease": stats(r.error_pct for r in rows if r.id in prerelease),
        "groups_over": "transformer points (hybrid models' on the hybrid line)",
        "by_family": grouped(group_rows, lambda r: r.family),
        "by_precision": grouped(group_rows, lambda r: r.precision),
        "by_tp": grouped(group_rows, lambda r: str(r.tp)),
        "by_interconnect": grouped(group_rows, lambda r: r.interconnect),
        "by_cell": grouped(cell_rows, cell_key),
        "by_family_precision": grouped(cell_rows, lambda r: f"{r.family}|{r.precision}"),
        "by_source": grouped(rows, lambda r: r.source[:60]),
        "by_model": grouped(goal_rows, lambda r: r.model),
        "hybrid": stats(r.error_pct for r in goal_rows if is_hybrid(r.model)),
        "not_gpu_bound": stats(r.error_pct for r in cell_rows if r.id in unbound),
        "gpu_pairs": {"pairs": len(pairs), "right": pair_right, "share_pct": pair_share,
                      "ratio_error": stats(x.error_pct for x in pairs),
                      "apart": apart_share(pairs)},
        "tp_ratio": {"ratios": len(tps), "error": tp_stats,
                     "by_tp": {str(n): s for n in sorted({int(x.a.split("-tp")[1].split("-")[0])
                                                         for x in tps if "-tp" in x.a})
                               if (s := stats(x.error_pct for x in tps
                                              if f"-tp{n}-" in x.a))}},
        "goal": {**GOAL, "met": met},
        "rows": rows,
        "not_predicted": [{"id": i, "why": w} for i, w in skipped],
        "not_fitted": not_fitted(),
    }


def is_hybrid(model: str) -> bool:
    """True for a hybrid model's alias (:func:`infer_prof.estimate.published_fit.fitted_model`
    False): its points are scored, not fitted, and give hybrid rows their own interval."""
    arch = architecture(model)
    return arch is not None and not fitted_model(arch)


def not_fitted() -> list[dict[str, str]]:
    """The vLLM closed-loop points every fit leaves out, each with why
    (:func:`infer_prof.estimate.published_fit.unfitted`)."""
    out = unfitted(p for p in published_results().points
                   if p.engine == "vllm" and p.load == "closed-loop")
    return [{"id": i, "why": w} for i, w in sorted(out.items())]


def _jsonable(x: object) -> object:
    if isinstance(x, Stats | Held):
        return asdict(x)
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    return x


def print_report(doc: dict[str, object]) -> None:
    """The per-group tables and the goal."""
    def line(name: str, s: object) -> None:
        if isinstance(s, Stats):
            print(f"  {name[:44]:<44} n={s.n:<4} median {s.median_abs_error_pct:>6.1f} %   "
                  f"p90 {s.p90_abs_error_pct:>6.1f} %")

    print("output tok/s per GPU, |predicted / measured - 1|, each source held out of the fit:")
    line("released vLLM >= 0.10, closed loop (the goal's set)", doc["overall"])
    line("... of them, the points their GPU bounded", doc["overall_gpu_bound"])
    line("every vLLM closed-loop point", doc["all_vllm_closed_loop"])
    line("pre-release builds (scored, outside the goal's set)", doc["prerelease"])
    line("hybrid models' points (scored, not fitted)", doc["hybrid"])
    line("points their GPU did not bound (not fitted)", doc["not_gpu_bound"])
    for title in ("by_family", "by_precision", "by_tp", "by_interconnect", "by_model",
                  "by_source", "by_family_precision", "by_cell"):
        over = (" (transformer points their GPU bounded: the two lines above apart)"
                if title in ("by_family", "by_precision", "by_tp", "by_interconnect")
                else " (transformer points)" if title in ("by_cell", "by_family_precision")
                else "")
        print(f" {title.replace('_', ' ')}{over}:")
        groups = doc[title]
        assert isinstance(groups, dict)
        for k, s in groups.items():
            line(str(k), s)
    pairs = doc["gpu_pairs"]
    tp = doc["tp_ratio"]
    assert isinstance(pairs, dict) and isinstance(tp, dict)
    print(f"\nGPU pairs (faster per GPU called right): {pairs['right']}/{pairs['pairs']} "
          f"({pairs['share_pct']} %)")
    apart = pairs["apart"]
    print(f"  measured more than {TIE_PCT:.0f} % apart: {apart['right']}/{apart['pairs']} "
          f"({apart['share_pct']} %)")
    line("GPU a / GPU b ratio", pairs["ratio_error"])
    print(f"TPn / TP1 ratios: {tp['ratios']}")
    line("TPn / TP1 ratio", tp["error"])
    for n, s in tp["by_tp"].items():
        line(f"TP{n} / TP1", s)
    g = doc["goal"]
    assert isinstance(g, dict)
    print(f"\ngoal: median <= {g['median']:.0f} %, p90 <= {g['p90']:.0f} %, TP ratio median <= "
          f"{g['tp_ratio_median']:.0f} %, pairs >= {g['pairs']:.0f} %: "
          f"{'met' if g['met'] else 'NOT met'}")
    print(f"not predicted: {len(doc['not_predicted'])} points (--json lists why)")
    unbound = doc["not_fitted"]
    assert isinstance(unbound, list)
    print(f"left out of every fit (scored above where predicted): {len(unbound)} points, "
          "their GPU did not bound them (measured slower than a GPU they dominate, same source "
          "and configuration; infer_prof/estimate/gpu_bound.py) or a hybrid model's "
          "(published_fit.fitted_model):")
    for u in unbound:
        print(f"  {u['id']}: {u['why']}")


def errors_section(doc: dict[str, object], day: str) -> HeldOutErrors:
    """The ``held_out`` section of ``estimate_errors.json``, as
    :mod:`infer_prof.estimate.expected_error` reads it."""
    def typed(groups: object) -> dict[str, HeldOutStats]:
        assert isinstance(groups, dict)
        return {k: HeldOutStats(**asdict(v)) for k, v in groups.items()}

    overall = doc["overall"]
    assert isinstance(overall, Stats)
    hybrid = doc["hybrid"]
    return HeldOutErrors(
        hybrid=HeldOutStats(**asdict(hybrid)) if isinstance(hybrid, Stats) else None,
        overall=HeldOutStats(**asdict(overall)), by_family=typed(doc["by_family"]),
        by_precision=typed(doc["by_precision"]), by_tp=typed(doc["by_tp"]),
        by_interconnect=typed(doc["by_interconnect"]), by_cell=typed(doc["by_cell"]),
        by_family_precision=typed(doc["by_family_precision"]),
        source=(f"{COMMAND} --write on {overall.n} released vLLM >= 0.10 closed-loop points, each "
                f"source held out of the fit, {day}"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--write", action="store_true",
                    help="write the held_out section of catalog/data/estimate_errors.json")
    args = ap.parse_args(argv)
    day = dt.date.today().isoformat()
    found, skipped = cases()
    doc = report(held_out(found, day), skipped)
    if args.write:
        path = DATA / ERRORS_FILE
        errors = json.loads(path.read_text())
        section = errors_section(doc, day)
        errors["held_out"] = msgspec.to_builtins(section)
        errors["expected_error_pct"] = section.overall.median_abs_error_pct
        errors["p90_error_pct"] = section.overall.p90_abs_error_pct
        errors["by_family"] = {k: v.median_abs_error_pct for k, v in section.by_family.items()}
        errors["source"] = section.source
        errors["_comment"] = (
            "expected_error_pct / p90_error_pct / by_family and held_out: |predicted / measured"
            " - 1| of output tokens/s per GPU with each published source held out of the fit "
            "(benchmarks/estimate_loso.py --write); engines and vllm_by_load: "
            "benchmarks/estimate_accuracy.py --write, on the fitted factors, for reference.")
        path.write_text(json.dumps(errors, indent=1) + "\n")
    if args.json:
        print(json.dumps(_jsonable(doc), indent=1))
    else:
        print_report(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
