"""``infer-prof regress``: the regression gate (exit 1 on a regression, 0 otherwise, 2 on bad
input), each metric judged over runs (:mod:`infer_prof.results.gate`), with a Markdown summary and
JUnit XML for CI systems; how groups are judged and confirmed is
:mod:`infer_prof.cli.regress_judging`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from infer_prof.cli.common import fail
from infer_prof.cli.declared import declared_command
from infer_prof.cli.regress_judging import Judge, confirm_groups, gate_groups
from infer_prof.config.options import Opt
from infer_prof.core.analysis.regression import (
    DEFAULT_THRESHOLD_PCT,
    MetricComparison,
    Significance,
)
from infer_prof.core.analysis.run_to_run import DEFAULT_ALPHA, format_pct
from infer_prof.core.measurement.prefix_hits import mixed_hit_rates
from infer_prof.report.junit import junit_xml
from infer_prof.report.markdown import regress_markdown
from infer_prof.results import history, history_database
from infer_prof.results.gate import (
    DEFAULT_MAX_SAMPLES,
    RunData,
    run_from_history,
    run_from_result,
    verdict,
)
from infer_prof.results.identity import differing_fields
from infer_prof.results.loading import load_results
from infer_prof.results.schema import ResultFileError

DEFAULT_HISTORY = history_database.DEFAULT_HELP
RULES = ("ci", "mwu", "both", "either")
_PCT = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*%?\s*")


def _console() -> Console:
    """The terminal's console, or a wide one for a pipe or file (columns never squeezed)."""
    console = Console()
    return console if console.is_terminal else Console(width=400)


def parse_thresholds(items: list[str] | None, option: str = "--threshold") -> dict[str, float]:
    """``["5%", "ttft_ms.p99=10%", "ttft_ms.*=8"]`` -> ``{"*": 5.0, "ttft_ms.p99": 10.0, ...}``.

    A bare percentage is the default for every metric; ``NAME=PCT`` sets one metric (or a glob
    pattern of names). A malformed item is a bad-input error naming ``option``.
    """
    out: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.rpartition("=")
        m = _PCT.fullmatch(value)
        if not m or (sep and not name.strip()):
            fail(f"{option} {item!r} is not PCT or METRIC=PCT; write e.g. 5% or ttft_ms.p99=10%")
        out[name.strip() if sep else "*"] = float(m.group(1))
    return out


def _history_n(baseline: list[str], last: int | None) -> int | None:
    """N when the baseline is the history (``--baseline history:N`` or ``--last N``)."""
    specs = [b for b in baseline if b.startswith("history:")]
    if specs and (len(baseline) > 1 or last is not None):
        fail("--baseline history:N cannot be combined with other baselines or --last")
    if specs:
        text = specs[0].split(":", 1)[1]
        if not text.isdigit() or int(text) < 1:
            fail(f"--baseline {specs[0]!r}: write history:N with N >= 1, e.g. history:7")
        return int(text)
    if last is not None:
        if baseline:
            fail("--last N takes the baseline from the history; do not also give --baseline")
        if last < 1:
            fail("--last must be at least 1")
        return last
    return None


def _fmt(v: float | None, digits: int = 2, signed: bool = False) -> str:
    if v is None:
        return "n/a"
    return f"{v:+.{digits}f}" if signed else f"{v:,.{digits}f}"


def _table(comparisons: list[MetricComparison], verdicts: list[str]) -> Table:
    t = Table(box=box.SIMPLE_HEAVY)
    rerun = any(c.confirm_current is not None for c in comparisons)
    heads = ["metric", "baseline", "current", "change %"]
    if rerun:
        heads += ["rerun", "rerun %"]
    heads += ["interval", "p", "run spread %", "can see", "thr %"]
    for h in heads:
        t.add_column(h, justify="left" if h == "metric" else "right")
    t.add_column("verdict")
    for c, v in zip(comparisons, verdicts, strict=True):
        ci = (
            f"[{format_pct(c.ci_low_pct, True)}, {format_pct(c.ci_high_pct, True)}]"
            if c.ci_low_pct is not None and c.ci_high_pct is not None
            else "n/a"
        )
        style = "bold red" if c.regression else ("green" if c.improvement else "")
        cells = [c.name, _fmt(c.baseline, 3), _fmt(c.current, 3),
                 _fmt(c.change_pct, 2, signed=True)]
        if rerun:
            cells += [_fmt(c.confirm_current, 3), _fmt(c.confirm_change_pct, 2, signed=True)]
        spread = _fmt(c.spread_pct, 1)
        if c.spread_basis.startswith("assumed"):
            spread += " (assumed)"
        can_see = "n/a" if c.detectable_pct is None else format_pct(c.detectable_pct)
        cells += [ci, _fmt(c.p_value, 4), spread, can_see,
                  f"{c.threshold_pct:g}", f"[{style}]{v}[/{style}]" if style else v]
        t.add_row(*cells)
    return t


def _load_side(specs: list[str], side: str) -> list[RunData]:
    try:
        loaded = load_results(specs)
    except ResultFileError as exc:
        fail(f"{side}: {exc}")
    return [run_from_result(p, r) for p, r in loaded]


def _config_label(run: RunData) -> str:
    """A short name for a run's configuration: workload and load point."""
    r = run.result
    load = r.load if r else None
    wl = (r.workload.name if r and r.workload else None) or "custom"
    if load and load.mode == "open":
        return f"{wl} rate {load.rate}"
    conc = (load.concurrency if load else None) or (r.config.concurrency if r else None)
    return f"{wl} c{conc}"


def _by_fingerprint(runs: list[RunData]) -> dict[str | None, list[RunData]]:
    out: dict[str | None, list[RunData]] = {}
    for r in runs:
        out.setdefault(r.fingerprint, []).append(r)
    return out


def _pair_groups(
    cur: list[RunData],
    baseline: list[str],
    n_hist: int | None,
    history_db: str | Path,
    force: bool,
    notes: list[str],
    exclude_ids: frozenset[str] | set[str] = frozenset(),
) -> list[tuple[str, list[RunData], list[RunData], str]]:
    """Pair current runs with their baseline, one group per configuration:
    (label, baseline runs, current runs, baseline description).

    A history baseline takes, for each configuration among the current runs, the last N
    recorded runs of it, less the current runs and ``exclude_ids`` (a confirming rerun). File
    baselines pair by configuration when either side holds several (a nightly suite); with one
    configuration a side, differing settings need --force.
    """
    groups: list[tuple[str, list[RunData], list[RunData], str]] = []
    cur_groups = _by_fingerprint(cur)
    if n_hist is not None:
        shown = history_database.describe(history_db)
        for fp, cur_g in cur_groups.items():
            assert fp is not None
            label = _config_label(cur_g[0])
            exclude = {r.run_id for r in cur_g} | exclude_ids  # never its own baseline
            records = [
                r
                for r in history.last_runs(history_db, fp, n_hist + len(exclude))
                if r.run_id not in exclude
            ][:n_hist]
            if not records:
                notes.append(
                    f"{label}: no recorded run of this configuration (fingerprint {fp})"
                    f" in {shown}: not gated"
                )
                continue
            if len(records) < n_hist:
                notes.append(f"{label}: asked for {n_hist} history runs, found {len(records)}")
            groups.append(
                (
                    label,
                    [run_from_history(r, history_db) for r in records],
                    cur_g,
                    f"{label}: last {len(records)} run(s) in {shown}",
                )
            )
        if not groups:
            fail(
                f"no configuration of the current runs is recorded in {shown}; record "
                "some runs first or give --baseline FILES"
            )
        return groups
    base = _load_side(baseline, "baseline")
    base_groups = _by_fingerprint(base)
    if len(cur_groups) > 1 or len(base_groups) > 1:
        for fp, cur_g in cur_groups.items():
            label = _config_label(cur_g[0])
            if fp not in base_groups:
                notes.append(f"{label}: no baseline run of this configuration: not gated")
                continue
            b = base_groups[fp]
            groups.append((label, b, cur_g, f"{label}: " + ", ".join(r.source for r in b)))
        if not groups:
            fail("no configuration of the current runs appears in the baseline")
        return groups
    results = [r.result for r in (*base, *cur) if r.result is not None]
    diff = differing_fields(results, ignore=("labels", "host"))
    if diff:
        listing = "\n".join(f"  {k}: {json.dumps(v, default=str)}" for k, v in diff.items())
        if not force:
            fail(
                f"baseline and current runs differ in their settings:\n{listing}\n"
                "use --force to gate them anyway"
            )
        notes.append("settings differ (--force): " + ", ".join(diff))
    return [("", base, cur, ", ".join(r.source for r in base))]


def _mixed_cache_notes(
    groups: list[tuple[str, list[RunData], list[RunData], str]],
) -> list[str]:
    """One note per group whose runs' prefix-cache hit rates differ by more than 10 points
    (:func:`infer_prof.core.measurement.prefix_hits.mixed_hit_rates`)."""
    notes = []
    for label, base, cur, _ in groups:
        runs = [*base, *cur]
        mixed = mixed_hit_rates([r.source for r in runs],
                                [r.values.get("prefix_cache_hit_rate") for r in runs])
        if mixed:
            notes.append(f"{label}: {mixed}" if label else mixed)
    return notes


@dataclass(frozen=True)
class RegressOptions:
    """The options of ``infer-prof regress``, each declared once (:mod:`infer_prof.cli.declared`).
    """

    current: Annotated[list[str], Opt(
        ("--current",), "Current result files, folders or globs (repeatable).")]
    baseline: Annotated[list[str] | None, Opt(
        ("--baseline",), "Baseline result files, folders or globs (repeatable; several = repeated "
        "runs), or history:N for the last N recorded runs of the current run's "
        "configuration.")] = None
    threshold: Annotated[list[str] | None, Opt(
        ("--threshold", "-t"), "Worsening that counts: 5% for every metric (default 5%), or "
        "METRIC=PCT for one (e.g. ttft_ms.p99=10%, glob patterns allowed). Repeatable.")] = None
    junit: Annotated[Path | None, Opt(
        ("--junit",), "Write JUnit XML here (one case a metric).")] = None
    markdown: Annotated[Path | None, Opt(
        ("--markdown",), "Write a Markdown summary here.")] = None
    last: Annotated[int | None, Opt(
        ("--last",), "Baseline = the last N runs of this configuration in --history.")] = None
    history_db: Annotated[str | None, Opt(
        ("--history",), "History for history:N / --last: sqlite:///PATH (or a path) or "
        "postgresql://USER@HOST:PORT/DB. Default: $INFER_PROF_HISTORY, else "
        f"{DEFAULT_HISTORY}.")] = None
    alpha: Annotated[float | None, Opt(
        ("--alpha",), "The gate's false-alarm rate: identical runs fail it with at most this "
        f"probability, over all its metrics together (default {DEFAULT_ALPHA:g}; 0.05 per metric "
        "with --within-run).")] = None
    assumed_spread: Annotated[list[str] | None, Opt(
        ("--assumed-spread",), "Run-to-run spread (CV) to assume where nothing measured it (one "
        "run a side, no launch spread in --history): 10% for every metric or METRIC=PCT for one "
        "(glob patterns allowed). Repeatable. Default: 2%, TTFT 10%, p99 10%, TTFT and ITL p99 25% "
        "(docs/nightly.md).")] = None
    confirm: Annotated[list[str] | None, Opt(
        ("--confirm",), "A rerun of the current configuration (files, folders, globs): a metric "
        "fails the gate only if this confirming measurement is a regression too.")] = None
    within_run: Annotated[bool, Opt(
        ("--within-run",), "The earlier gate, to compare with: latencies judged by a bootstrap "
        "over the requests of the runs (request-to-request spread; flags identical runs).")] = False
    rule: Annotated[str, Opt(
        ("--rule",), "--within-run: what makes a latency change significant: ci (bootstrap CI "
        "excludes 0), mwu (Mann-Whitney p < alpha), both, either.")] = "ci"
    n_boot: Annotated[int, Opt(("--n-boot",), "--within-run: bootstrap replicates.")] = 2000
    max_samples: Annotated[int, Opt(
        ("--max-samples",), "--within-run: per side, thin larger latency samples to this many "
        "quantiles (conservative).")] = DEFAULT_MAX_SAMPLES
    force: Annotated[bool, Opt(
        ("--force",), "Gate even when baseline and current settings differ.")] = False
    json_output: Annotated[bool, Opt(("--json",), "Print the verdicts as JSON.")] = False


def regress(o: RegressOptions) -> None:
    """Is the current run worse than the baseline? Each metric judged against the spread between
    runs, with the smallest change it could see; --confirm a rerun before failing."""
    if o.rule not in RULES:
        fail(f"--rule {o.rule!r} is not one of {', '.join(RULES)}")
    alpha = o.alpha if o.alpha is not None else (0.05 if o.within_run else DEFAULT_ALPHA)
    if not 0.0 < alpha < 1.0:
        fail("--alpha must be within (0, 1)")
    if o.n_boot < 1:
        fail("--n-boot must be at least 1")
    thresholds = parse_thresholds(o.threshold)
    default_pct = thresholds.pop("*", DEFAULT_THRESHOLD_PCT)
    assumed = parse_thresholds(o.assumed_spread, "--assumed-spread")
    baseline = list(o.baseline or [])
    n_hist = _history_n(baseline, o.last)
    if n_hist is None and not baseline:
        fail("give --baseline (files, folders, globs, or history:N) or --last N")
    cur = _load_side(list(o.current), "current")
    confirm = _load_side(list(o.confirm), "confirm") if o.confirm else []
    notes: list[str] = []
    db = history_database.resolve(o.history_db)
    try:
        if n_hist is not None:
            history_database.parse_location(db)
        groups = _pair_groups(cur, baseline, n_hist, db, o.force, notes,
                              exclude_ids={r.run_id for r in confirm})
    except history_database.HistoryError as exc:
        fail(str(exc))
    notes += _mixed_cache_notes(groups)
    judge = Judge(
        thresholds=thresholds,
        default_pct=default_pct,
        alpha=alpha,
        assumed=assumed,
        within_run=o.within_run,
        significance=Significance(alpha=alpha, rule=o.rule, n_boot=o.n_boot),  # type: ignore[arg-type]
        max_samples=o.max_samples,
        history_db=db,
        against="this history" if n_hist is not None else "this baseline",
    )
    comparisons = gate_groups(groups, notes, judge)
    if not comparisons:
        fail("no metric is present on both sides; nothing to gate")
    if confirm:
        comparisons = confirm_groups(groups, confirm, comparisons, notes, judge)
    notes += [f"{c.name}: REGRESSION: {c.note}" for c in comparisons
              if c.regression and c.name.rpartition(": ")[2].startswith("quality.")]
    current_desc = ", ".join(r.source for r in cur)
    if confirm:
        current_desc += "; confirming rerun: " + ", ".join(r.source for r in confirm)
    out = _Outcome(
        comparisons=comparisons,
        verdicts=[verdict(c) for c in comparisons],
        baseline_desc="; ".join(desc for _, _, _, desc in groups),
        current_desc=current_desc,
        notes=notes,
    )
    _write_files(out, o.markdown, o.junit)
    if o.json_output:
        typer.echo(json.dumps(out.to_dict(), indent=2))
    else:
        _print_outcome(out)
    if out.regressions:
        raise typer.Exit(1)


regress_command = declared_command(RegressOptions, regress)


@dataclass(frozen=True)
class _Outcome:
    """What the gate found: one comparison and verdict per metric, what was compared with what,
    and the notes on how."""

    comparisons: list[MetricComparison]
    verdicts: list[str]
    baseline_desc: str
    current_desc: str
    notes: list[str]

    @property
    def regressions(self) -> list[str]:
        """Names of the metrics that regressed."""
        return [c.name for c in self.comparisons if c.regression]

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` payload."""
        return {
            "regression": bool(self.regressions),
            "regressions": self.regressions,
            "baseline": self.baseline_desc,
            "current": self.current_desc,
            "notes": self.notes,
            "metrics": [
                {**c.to_dict(), "verdict": v}
                for c, v in zip(self.comparisons, self.verdicts, strict=True)
            ],
        }


def _write_files(out: _Outcome, markdown: Path | None, junit: Path | None) -> None:
    """The Markdown summary and the JUnit XML, where asked for."""
    if markdown is not None:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(
            regress_markdown(out.comparisons, out.verdicts, out.baseline_desc, out.current_desc,
                             out.notes)
        )
    if junit is not None:
        junit.parent.mkdir(parents=True, exist_ok=True)
        junit.write_text(
            junit_xml(out.comparisons,
                      properties={"baseline": out.baseline_desc, "current": out.current_desc})
        )


def _print_outcome(out: _Outcome) -> None:
    """The table of verdicts, with what was compared and the notes, and the one-line verdict."""
    console = _console()
    console.print(f"baseline: {out.baseline_desc}\ncurrent:  {out.current_desc}", highlight=False)
    for n in out.notes:
        console.print(f"note: {n}", highlight=False)
    console.print(_table(out.comparisons, out.verdicts))
    blind = [c.note for c in out.comparisons
             if c.detectable_pct is not None and c.detectable_pct > c.threshold_pct]
    if blind:
        console.print("what this gate cannot see:", highlight=False)
        for line in blind:
            console.print(f"  {line}", highlight=False)
    if out.regressions:
        console.print(f"[bold red]REGRESSION[/bold red] in {', '.join(out.regressions)}")
    else:
        console.print("no regression")
