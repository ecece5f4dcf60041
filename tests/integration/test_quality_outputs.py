"""The quality check's figures in every output, read from real ``run --endpoint --quality``
results (the load and the check through real HTTP, tests/integration/quality_runs.py):
``compare --rank-by-cost --min-quality``, ``history``, the regression gate, ``--json`` and the
HTML report."""

import json

import pytest

from tests.integration.conftest import cli
from tests.integration.quality_runs import QualityRuns, make_runs

NAMES = ("ref", "cheap_bad", "mid_good", "unchecked")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> QualityRuns:
    return make_runs(tmp_path_factory.mktemp("quality-runs"))


def _files(runs):
    return [str(runs.path(n)) for n in NAMES]


def test_compare_ranks_by_cost_among_the_runs_meeting_the_floor(runs):
    done = cli("compare", *_files(runs), "--rank-by-cost", "--min-quality", "0.99", "-f", "json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    rows = {r["label"]: r for r in out["rows"]}
    order = [r["label"].removeprefix("variant=") for r in out["rows"]]
    # $3/h before $4/h among those meeting it; the cheaper 90 % run and the unchecked one apart
    assert order == ["mid_good", "ref", "cheap_bad", "unchecked"]
    assert rows["variant=mid_good"]["rank"] == 1 and rows["variant=ref"]["rank"] == 2
    bad = rows["variant=cheap_bad"]
    assert bad["rank"] is None and bad["meets_quality_floor"] is False
    assert bad["apart"].startswith("BELOW the floor: 0.900")
    assert bad["quality_share_of"] == "recorded reference"
    assert rows["variant=unchecked"]["apart"] == "quality not measured"
    assert rows["variant=unchecked"]["meets_quality_floor"] is None
    assert rows["variant=ref"]["quality_share_of"] == "best compared"
    # the cheapest of all is the unchecked run, and the 90 % run is cheaper than the ranked ones
    costs = {k: r["usd_per_1m_output"] for k, r in rows.items()}
    assert costs["variant=unchecked"] < costs["variant=cheap_bad"] < costs["variant=mid_good"]

    table = cli("compare", *_files(runs), "--rank-by-cost", "--min-quality", "0.99")
    assert table.returncode == 0, table.stderr
    lines = [ln for ln in table.stdout.splitlines() if "variant=" in ln]
    assert [ln.split()[0] for ln in lines] == ["1", "2", "-", "-"]
    assert "BELOW the floor" in lines[2] and "quality not measured" in lines[3]
    assert "(2 of 4)" in table.stdout

    marks = cli("compare", *_files(runs), "--min-quality", "0.95", "-f", "markdown")
    assert marks.returncode == 0, marks.stderr
    md = [ln for ln in marks.stdout.splitlines() if "variant=" in ln]
    assert [ln.split("|")[3].strip() for ln in md] == [f"variant={n}" for n in NAMES]  # as named
    assert "BELOW the floor: 0.900" in md[1] and "meets 0.95" in md[2]
