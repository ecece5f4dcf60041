"""The concurrencies ``run --frontier --concurrency-from-estimate`` measures, from a predicted
curve (core/analysis/frontier_levels.py): hand-computed cases on a curve whose crossing of the
target is known exactly."""

from __future__ import annotations

import pytest

from infer_prof.core.analysis.frontier_levels import levels_around_target


def curve(c: int) -> float:
    """100 tokens/s/user for one stream, falling as 100 / (1 + c / 10): 50 at exactly 10."""
    return 100.0 / (1.0 + c / 10.0)


def test_levels_bracket_the_predicted_concurrency_at_the_target() -> None:
    choice = levels_around_target(curve, 50.0, 64)
    assert choice.at_target == 10 and choice.reachable  # 100 / (1 + 10/10) = 50 >= 50 > c=11
    assert choice.levels == (1, 5, 10, 20, 64)
    assert "10 streams predicted at the target 50" in choice.why


def test_double_is_capped_by_the_limit_and_levels_are_unique() -> None:
    assert levels_around_target(curve, 50.0, 12).levels == (1, 5, 10, 12)
    # 100 / (1 + 1/10) = 90.9: the target 90 sits at one stream
    assert levels_around_target(curve, 90.0, 64).levels == (1, 2, 64)


def test_a_target_outside_the_predicted_curve_says_so() -> None:
    above = levels_around_target(curve, 200.0, 64)  # one stream: 90.9 < 200
    assert above.levels == (1, 2) and above.at_target is None and not above.reachable
    below = levels_around_target(curve, 50.0, 8)  # 8 streams still at 55.6 >= 50
    assert below.at_target == 8 and not below.reachable and below.levels == (1, 4, 8)
    assert "even the limit of 8 streams" in below.why
    assert levels_around_target(curve, 200.0, 1).levels == (1,)


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError):
        levels_around_target(curve, 50.0, 0)
    with pytest.raises(ValueError):
        levels_around_target(curve, 0.0, 8)
