"""How ``infer-prof regress`` judges its groups of runs: over runs (the default) or within runs
(``--within-run``, the earlier gate), with the launch spread the history holds, and with a
confirming rerun (``--confirm``): a metric fails the gate only when the rerun regressed too."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from infer_prof.cli.common import fail
from infer_prof.core.analysis.regression import MetricComparison, Significance
from infer_prof.results import history, history_database
from infer_prof.results.gate import LaunchSpread, RunData, evaluate, evaluate_within_run
from infer_prof.results.quality_gate import quality_comparisons

Group = tuple[str, list[RunData], list[RunData], str]


@dataclass(frozen=True)
class Judge:
    """How each group is judged: thresholds (%), the gate's false-alarm rate, the assumed spreads
    (%), the earlier within-run gate's settings, and the history holding launch spreads."""

    thresholds: dict[str, float]
    default_pct: float
    alpha: float
    assumed: dict[str, float]
    within_run: bool
    significance: Significance
    max_samples: int
    history_db: str | Path
    against: str

    def launch_spread(
        self, fingerprint: str | None, notes: list[str]
    ) -> tuple[dict[str, tuple[float, int]], str]:
        """The launch spread the history holds for this configuration (empty when none), and
        where it came from (the source recorded with it, and the history)."""
        if fingerprint is None or self.within_run:
            return {}, ""
        try:
            rows = history.launch_spreads(self.history_db, fingerprint)
        except history_database.HistoryError as exc:
            notes.append(f"launch spread not read from the history: {exc}")
            return {}, ""
        sources = sorted({r.source for r in rows.values() if r.source})
        where = f"in {history_database.describe(self.history_db)}"
        source = f"{sources[0]}, {where}" if len(sources) == 1 else f"stored {where}"
        return {m: (r.cv, r.n_runs) for m, r in rows.items()}, source

    def __call__(
        self, base: list[RunData], cur: list[RunData], notes: list[str]
    ) -> list[MetricComparison]:
        """The comparisons of one group (bad input exits 2), then its quality verdicts
        (:mod:`infer_prof.results.quality_gate`, intervals at 1 - alpha)."""
        try:
            if self.within_run:
                found = evaluate_within_run(
                    base, cur, thresholds=self.thresholds,
                    default_threshold_pct=self.default_pct, significance=self.significance,
                    max_samples=self.max_samples,
                )
            else:
                spread, source = self.launch_spread(cur[0].fingerprint, notes)
                found = evaluate(
                    base, cur, thresholds=self.thresholds,
                    default_threshold_pct=self.default_pct, alpha=self.alpha,
                    assumed_spread=self.assumed,
                    launch_spread=LaunchSpread(spread, source) if spread else None,
                    against=self.against,
                )
        except ValueError as exc:
            fail(str(exc))
        return found + quality_comparisons(base, cur, 1.0 - self.alpha, notes)


def gate_groups(
    groups: list[Group],
    notes: list[str],
    judge: Judge,
) -> list[MetricComparison]:
    """Every group's comparisons (named ``label: metric`` when there are several groups), with a
    note for incomplete runs and, for the within-run gate, for groups judged on summary
    percentiles."""
    comparisons: list[MetricComparison] = []
    for label, base, cur_g, _ in groups:
        for r in (*base, *cur_g):
            if not r.complete:
                notes.append(f"run {r.run_id} is incomplete")
        if judge.within_run and any(r.samples is None for r in (*base, *cur_g)):
            notes.append(
                f"{label or 'runs'}: latency judged on per-run summary percentiles "
                "(requests files not at hand)"
            )
        found = judge(base, cur_g, notes)
        if len(groups) > 1:
            found = [dataclasses.replace(c, name=f"{label}: {c.name}") for c in found]
        comparisons.extend(found)
    return comparisons


def confirm_groups(
    groups: list[Group],
    confirm: list[RunData],
    first: list[MetricComparison],
    notes: list[str],
    judge: Judge,
) -> list[MetricComparison]:
    """``first`` with each metric's confirming measurement: the rerun of its configuration
    judged against the same baseline. A metric stays a regression only when the rerun is one
    too; a configuration without a rerun keeps its first verdict (and a note says so)."""
    by_fp: dict[str | None, list[RunData]] = {}
    for r in confirm:
        by_fp.setdefault(r.fingerprint, []).append(r)
    second: dict[str, MetricComparison] = {}
    for label, base, cur_g, _ in groups:
        runs = by_fp.get(cur_g[0].fingerprint)
        if runs is None and len(groups) == 1 and len(by_fp) == 1:
            runs = confirm  # one configuration: the rerun is its rerun (settings checked below)
            fps = {cur_g[0].fingerprint, confirm[0].fingerprint}
            if len(fps) > 1:
                notes.append("the confirming rerun's settings differ from the current run's")
        if runs is None:
            notes.append(f"{label or 'runs'}: no confirming rerun of this configuration: "
                         "its first measurement decides")
            continue
        for c in judge(base, runs, notes):
            second[f"{label}: {c.name}" if len(groups) > 1 else c.name] = c
    out = []
    for c in first:
        k = second.get(c.name)
        if k is None:
            out.append(c)
            continue
        if c.regression and not k.regression:
            notes.append(f"{c.name}: the first measurement regressed, the rerun did not: passes")
        out.append(dataclasses.replace(
            c, regression=c.regression and k.regression, confirm_current=k.current,
            confirm_change_pct=k.change_pct, confirm_regression=k.regression,
        ))
    return out
