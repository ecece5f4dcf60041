"""Ranking by $/1M output tokens at equal quality (core.analysis.quality_ranking): the share
against the recorded reference or the best compared run, the floor, the rows listed apart."""

from infer_prof.core.analysis.quality_ranking import quality_shares, rank_by_cost


def _row(acc, cost, *, share=None, below=None, model="m", tasks="t"):
    return {"model": model, "quality_tasks": tasks, "accuracy": acc, "usd_per_1m_output": cost,
            "quality_share": share, "quality_below_floor": below}


def test_share_is_the_recorded_one_else_of_the_best_compared_run():
    rows = [_row(0.96, 4.0), _row(0.94, 2.0), _row(0.5, 1.0, share=0.6), _row(0.2, 1.0, model="x"),
            _row(None, 1.0)]
    shares = quality_shares(rows)
    assert shares[0] == (1.0, "best compared")
    assert shares[1][0] == 0.94 / 0.96 and shares[1][1] == "best compared"
    assert shares[2] == (0.6, "recorded reference")
    assert shares[3] == (1.0, "best compared")  # another model: its own best
    assert shares[4] == (None, None)


def test_ranked_cheapest_first_among_those_meeting_the_floor_the_rest_apart():
    rows = [_row(0.96, 4.0), _row(0.94, 2.0), _row(0.96, 3.0), _row(None, 0.5),
            _row(0.96, None)]
    r = rank_by_cost(rows, 0.99)
    assert [(p.row, p.rank) for p in r.ranked] == [(2, 1), (0, 2)]
    apart = {p.row: (p.apart, p.meets) for p in r.apart}
    assert apart[1][0].startswith("BELOW the floor: 0.979") and apart[1][1] is False
    assert apart[3] == ("quality not measured", None)
    assert apart[4] == ("no $/1M output tokens (no price)", True)
    assert r.order() == [2, 0, 1, 3, 4]
    # a lower floor lets the cheaper, less accurate run lead
    assert [p.row for p in rank_by_cost(rows, 0.95).ranked] == [1, 2, 0]


def test_without_a_floor_the_runs_recorded_mark_decides():
    rows = [_row(0.96, 4.0), _row(0.5, 1.0, share=0.52, below=True), _row(0.9, 2.0, share=0.94)]
    r = rank_by_cost(rows, None)
    assert [p.row for p in r.ranked] == [2, 0]
    assert r.apart[0].row == 1 and r.apart[0].apart == "BELOW the floor its run recorded"
