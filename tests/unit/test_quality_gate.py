"""The gate's quality verdicts (results.quality_gate) and Newcombe's interval
(core.quality.intervals) against its published value."""

import pytest

from infer_prof.core.quality.intervals import newcombe_difference, z_for
from infer_prof.results.gate import RunData
from infer_prof.results.quality_gate import accuracy_comparison, quality_comparisons
from infer_prof.results.quality_sections import ItemOutcome, Quality


def test_newcombe_interval_matches_the_papers_example():
    # Newcombe (1998), Statistics in Medicine 17:873, table II: 56/70 - 48/80, method 10
    d = newcombe_difference(56, 70, 48, 80)
    assert d.value == pytest.approx(0.2)
    assert (round(d.low, 4), round(d.high, 4)) == (0.0524, 0.3339)
    assert z_for(0.95) == pytest.approx(1.959964, abs=1e-6)


def _q(correct, n=100, outcomes=True, **kw):
    return Quality(status="measured", items=n, correct=correct, accuracy=correct / n,
                   tasks_sha256="t",
                   outcomes=[ItemOutcome(correct=i < correct) for i in range(n)] if outcomes
                   else [], **kw)


def test_a_drop_beyond_chance_regresses_one_within_it_does_not():
    drop = accuracy_comparison(_q(96), _q(80), 0.99)
    assert drop.regression and drop.ci_high_pct < 0 and "paired" in drop.method
    near = accuracy_comparison(_q(96), _q(94), 0.99)
    assert not near.regression and near.crosses_threshold  # worse, not significant
    unpaired = accuracy_comparison(_q(96, outcomes=False), _q(80, outcomes=False), 0.99)
    assert unpaired.regression and "Newcombe" in unpaired.method


class _R:  # a typed result with only its quality section
    def __init__(self, q):
        self.quality = q


def _run(q):
    return RunData(run_id="r", source="r.json", values={}, result=_R(q))  # type: ignore[arg-type]


def test_other_task_files_or_a_missing_side_give_a_note_not_a_verdict():
    notes: list[str] = []
    assert quality_comparisons([_run(_q(96))], [_run(None)], 0.99, notes) == []
    assert notes == ["quality: the baseline measured it, the current run did not: not gated"]
    other = _q(50)
    other.tasks_sha256 = "u"
    assert quality_comparisons([_run(_q(96))], [_run(other)], 0.99, notes) == []
    assert "different task files" in notes[-1]
