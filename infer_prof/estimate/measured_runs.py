"""Reading a user's measured runs for ``estimate --calibrate-from`` / ``--measured``.

A source is ``history`` (the run history: ``INFER_PROF_HISTORY``, else ``results/history.sqlite``,
as ``infer-prof history`` finds it), a history location (a SQLite file, ``sqlite:///PATH`` or a
``postgresql://`` URL), or result files, folders and glob patterns
(:func:`infer_prof.results.loading.expand_paths`). Each result becomes a
:class:`~infer_prof.core.estimate.measured.MeasuredRun`, or a reason it cannot be used:

- no GPU: a CPU run, or an endpoint run without ``--gpu`` (the GPU is unknown); a GPU name the
  catalog does not know;
- not a closed loop at a fixed concurrency (an open-loop ``--request-rate`` run, a matrix);
- incomplete, or marked invalid by its validity checks, or without a throughput;
- a model whose architecture the planner cannot read offline, or a precision not recorded;
- a configuration the estimate cannot predict (a precision the released vLLM does not run on the
  GPU, by the support table, or one without a FLOP/s figure for the GPU).

Random-weights runs (``--load-format dummy``) are kept: their speed is the real model's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from infer_prof.catalog.estimate_factors import factors_for
from infer_prof.catalog.gpus import catalog, match_gpu_name
from infer_prof.catalog.interconnects import tp_link
from infer_prof.catalog.vllm_support import precision_support
from infer_prof.core.catalog.gpus import GpuSpec
from infer_prof.core.catalog.models import ModelSpec
from infer_prof.core.estimate.factors import family_of
from infer_prof.core.estimate.measured import MeasuredRun, predict_run
from infer_prof.results import history, history_database
from infer_prof.results.config_record import option_value
from infer_prof.results.document import Result
from infer_prof.results.identity import gpu_count, gpu_name, model_name, precision_of

HISTORY_WORD = "history"
SQLITE_MAGIC = b"SQLite format 3\x00"


class MeasuredRunsError(ValueError):
    """A source of measured runs that cannot be read (one line: what and the fix)."""


@dataclass(frozen=True)
class MeasuredSet:
    """What a source gave: ``where`` (as said in the output), the usable ``runs``, how many
    results were ``read`` and the others counted by reason (``unusable``)."""

    where: str
    runs: tuple[MeasuredRun, ...]
    read: int
    unusable: dict[str, int] = field(default_factory=dict)


@cache
def _arch(name: str) -> ModelSpec | None:
    from infer_prof.catalog.models import resolve_model

    try:
        return resolve_model(name, create_tiny=False, fetch=False).spec
    except Exception:  # an unknown alias or hub id: its architecture is not known offline
        return None


def _gpu(result: Result) -> GpuSpec | str:
    name = gpu_name(result)
    if name == "cpu":
        if option_value(result.config, "endpoint"):
            return "endpoint run without --gpu (its GPU is unknown)"
        return "CPU run"
    spec = catalog().get(name) or match_gpu_name(name)
    return spec if spec is not None else f"GPU not in the catalog ({name})"


def _lengths(result: Result) -> tuple[int, int] | None:
    cfg, s = result.config, result.summary
    n = s.requests_completed or 0
    inp = cfg.input_len or (round(s.total_prompt_tokens / n) if s.total_prompt_tokens and n
                            else None)
    out = cfg.output_len or (round(s.total_output_tokens / n) if s.total_output_tokens and n
                             else None)
    return (inp, out) if inp and out else None


def _precision(result: Result) -> str | None:
    from infer_prof.core.planning.precisions import PlanError, normalize_precision

    try:
        p = normalize_precision(precision_of(result))
    except PlanError:
        return None
    return None if p == "auto" else p


def _unusable_load(result: Result) -> str | None:
    if result.matrix is not None:
        return "a matrix summary, not one run"
    if result.load is None or result.load.mode != "closed" or not result.load.concurrency:
        return "not a closed loop at a fixed concurrency (an open-loop --rate run)"
    if not result.complete:
        return "incomplete"
    if result.validity is not None and not result.validity.valid:
        return "marked invalid by its validity checks"
    return None


def to_measured(result: Result, source: str) -> MeasuredRun | str:
    """The :class:`MeasuredRun` of one result, or why it cannot be used (module docstring)."""
    gpu = _gpu(result)
    if isinstance(gpu, str):
        return gpu
    if (why := _unusable_load(result)) is not None:
        return why
    s, count = result.summary, max(1, gpu_count(result))
    per_gpu = s.output_tok_s_per_gpu or (s.output_throughput / count if s.output_throughput
                                         else None)
    lengths = _lengths(result)
    if not per_gpu or lengths is None:
        return "no output throughput or lengths recorded"
    name = model_name(result)
    arch = _arch(name) if name else None
    if arch is None:
        return "a model the planner cannot read offline (not a catalog alias or local folder)"
    precision = _precision(result)
    if precision is None:
        return "precision not recorded"
    assert result.load is not None and result.load.concurrency
    link = tp_link(gpu.key, count)
    run = MeasuredRun(
        source=source, run_id=result.run_id, started_at=result.started_at, arch=arch, gpu=gpu,
        family=family_of(gpu), gpu_count=count, precision=precision, input_len=lengths[0],
        output_len=lengths[1], concurrency=result.load.concurrency,
        output_tok_s_per_gpu=per_gpu, interactivity=s.interactivity_tok_s_user,
        ttft_ms_p50=s.ttft_ms.p50 if s.ttft_ms else None,
        tpot_ms_p50=s.tpot_ms.p50 if s.tpot_ms else None,
        link_gbps=link.bidirectional_gbps if link is not None else None,
        over_pcie=link is not None and link.kind == "pcie",
        kv_cache_dtype="fp8" if result.plan is not None and result.plan.kv_cache_dtype == "fp8"
        else "auto")
    support = precision_support(gpu, precision)
    if not support.runs:
        return f"the estimate cannot predict it (released vLLM does not run it: {support.why})"
    try:
        predict_run(factors_for(gpu), run)
    except ValueError as exc:
        return f"the estimate cannot predict it ({exc})"
    return run


def _collect(results: Sequence[tuple[str, Result | str]], where: str) -> MeasuredSet:
    runs: list[MeasuredRun] = []
    why: Counter[str] = Counter()
    for source, result in results:
        got = result if isinstance(result, str) else to_measured(result, source)
        if isinstance(got, str):
            why[got] += 1
        else:
            runs.append(got)
    return MeasuredSet(where, tuple(runs), len(results), dict(why.most_common()))


def _is_history(spec: str) -> bool:
    if spec == HISTORY_WORD or "://" in spec:
        return True
    p = Path(spec)
    if p.suffix in (".sqlite", ".sqlite3", ".db"):
        return True
    try:
        with p.open("rb") as fh:
            return p.is_file() and fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _from_history(spec: str) -> MeasuredSet:
    from infer_prof.results.loading import history_result
    from infer_prof.results.schema import ResultFileError

    db = history_database.resolve(None if spec == HISTORY_WORD else spec)
    where = f"history {history_database.describe(db)}"
    try:
        records = history.list_runs(db, limit=0)
        results: list[tuple[str, Result | str]] = []
        for rec in records:
            source = f"history:{rec.run_id}"
            if rec.gpu in (None, "cpu"):
                results.append((source, "CPU run, or an endpoint run without --gpu"))
                continue
            try:
                kept = history_result(db, rec.run_id)
            except ResultFileError:
                kept = None
            results.append((source, kept[0] if kept else "the history keeps no result file"))
    except history_database.HistoryError as exc:
        raise MeasuredRunsError(str(exc)) from None
    if not records:
        raise MeasuredRunsError(f"no runs recorded in the {where}; record some with "
                                "`infer-prof run` or `infer-prof history import`, or name "
                                "result files")
    return _collect(results, where)


def _from_files(specs: Sequence[str]) -> MeasuredSet:
    from infer_prof.results.loading import load_typed_results
    from infer_prof.results.schema import ResultFileError

    try:
        loaded = load_typed_results(specs)
    except (ResultFileError, OSError) as exc:
        raise MeasuredRunsError(str(exc).splitlines()[0]) from None
    return _collect([(str(p), r) for p, r in loaded], ", ".join(specs))


def read_measured(specs: Sequence[str]) -> MeasuredSet:
    """The measured runs of ``specs``: one history (module docstring) or result files, folders
    and patterns. Raises :class:`MeasuredRunsError` (one line) for a path without result files,
    an unreadable history or an empty one."""
    histories = [s for s in specs if _is_history(s)]
    if histories and len(specs) > 1:
        raise MeasuredRunsError(f"{histories[0]} is a history: give it alone, or give result "
                                "files and folders")
    return _from_history(histories[0]) if histories else _from_files(specs)
