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
    # $4/h before $16/h among those meeting it; the cheaper 90 % run and the unchecked one apart
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

    for bad, says in ((("--min-quality", "1.5"), "--min-quality"),
                      (("--rank-by-cost", "--tiers"), "leave out")):
        done = cli("compare", *_files(runs), *bad)
        assert done.returncode == 2 and says in done.stderr, done.stderr


def test_history_holds_the_quality_figures_recorded_after_the_check(runs):
    done = cli("history", "--history", runs.history, "--json")
    assert done.returncode == 0, done.stderr
    listed = {r["labels"]["variant"]: r["metrics"] for r in json.loads(done.stdout)}
    assert listed["cheap_bad"]["quality.accuracy"] == 0.9
    assert listed["cheap_bad"]["quality.perplexity"] == pytest.approx(2.0)
    assert listed["cheap_bad"]["quality.reference.mean_kl"] == pytest.approx(0.0, abs=1e-12)
    assert listed["ref"]["quality.accuracy"] == 1.0
    assert listed["ref"]["quality.reference.mean_kl"] is None  # no reference
    assert listed["unchecked"]["quality.accuracy"] is None  # not measured: no row, never a 0
    table = cli("history", "--history", runs.history)
    assert "accuracy" in table.stdout and "perplexity" in table.stdout, table.stdout
    # the result file the history keeps is the one with the quality section (written after it)
    out = runs.folder / "exported"
    assert cli("history", "export", "-o", str(out), "--history", runs.history).returncode == 0
    kept = {json.loads(p.read_text())["labels"]["variant"]: json.loads(p.read_text())
            for p in out.glob("*.json") if not p.name.endswith(".requests.json")}
    assert kept["cheap_bad"]["quality"]["below_floor"] is True
    assert kept["cheap_bad"]["quality"]["items"] == 100
    # a trend of the accuracy, as of any metric
    trend = cli("history", "--history", runs.history, "--metric", "quality.accuracy", "--json",
                "--label", "variant=cheap_bad")
    assert trend.returncode == 0, trend.stderr
    assert "0.9" in trend.stdout


def test_the_gate_fails_a_run_below_its_floor_or_whose_accuracy_dropped(runs, tmp_path):
    md, xml = tmp_path / "gate.md", tmp_path / "gate.xml"
    done = cli("regress", "--baseline", str(runs.path("ref")), "--current",
               str(runs.path("cheap_bad")), "--markdown", str(md), "--junit", str(xml), "--json")
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    # (a loaded machine may move a latency too: only the quality rows are asserted)
    assert [m for m in out["regressions"] if m.startswith("quality.")] == [
        "quality.floor", "quality.accuracy"]
    metrics = {m["name"]: m for m in out["metrics"]}
    acc = metrics["quality.accuracy"]
    assert (acc["baseline"], acc["current"]) == (1.0, 0.9) and acc["ci_high_pct"] < 0
    assert "paired bootstrap" in acc["method"] and "99 % interval" in acc["method"]
    assert metrics["quality.floor"]["current"] == pytest.approx(0.9)
    assert any("BELOW the floor 0.99" in n for n in out["notes"])
    text = md.read_text()
    assert "| quality.accuracy | 1 | 0.9 | -10.00% |" in text and "**REGRESSION**" in text
    assert "quality.floor: REGRESSION:" in text
    junit = xml.read_text()
    assert 'name="quality.accuracy"' in junit and "a drop beyond chance over the items" in junit
    # the same accuracy as the baseline's: the quality rows pass
    same = cli("regress", "--baseline", str(runs.path("ref")), "--current",
               str(runs.path("mid_good")), "--json")
    verdicts = {m["name"]: m["verdict"] for m in json.loads(same.stdout)["metrics"]}
    assert verdicts["quality.accuracy"] == "ok" and verdicts["quality.floor"] == "ok"
    # a current run without the check: not gated on quality, and said
    none = cli("regress", "--baseline", str(runs.path("ref")), "--current",
               str(runs.path("unchecked")), "--json")
    gone = json.loads(none.stdout)
    assert not [m for m in gone["metrics"] if m["name"].startswith("quality.")]
    assert "quality: the baseline measured it, the current run did not: not gated" in gone["notes"]


def test_run_json_carries_the_quality_figures(runs):
    bad = json.loads(runs.stdout["cheap_bad"])
    q = bad["quality"]
    assert q["status"] == "measured" and q["accuracy"] == 0.9 and q["items"] == 100
    assert q["accuracy_low"] < 0.9 < q["accuracy_high"] and q["perplexity"] == pytest.approx(2.0)
    assert q["below_floor"] is True and q["min_quality"] == 0.99
    assert q["reference"]["quality_share"] == pytest.approx(0.9)
    assert q["reference"]["accuracy_difference"] == pytest.approx(-0.1)
    assert "outcomes" not in q and "passages" not in q  # the result file holds the records
    assert "quality" not in json.loads(runs.stdout["unchecked"])  # no check asked: no section


def test_html_report_plots_accuracy_against_cost_when_quality_was_measured(runs, tmp_path):
    html, png = tmp_path / "r.html", tmp_path / "png"
    done = cli("report", *_files(runs), "-o", str(html), "--png-dir", str(png))
    assert done.returncode == 0, done.stderr
    page = html.read_text()
    assert '<section id="quality">' in page and 'href="#quality"' in page
    section = page.split('<section id="quality">')[1].split("</section>")[0]
    svg = section.split('<figure id="fig-accuracy_vs_cost">')[1].split("</figure>")[0]
    for name in ("ref", "cheap_bad", "mid_good"):  # a point each, the unchecked run not
        assert f"variant={name}" in svg
    assert "variant=unchecked" not in section
    assert "floor 0.99 × reference 100.0%" in svg
    assert "BELOW 0.99" in section and "meets 0.99" in section
    assert (png / "accuracy_vs_cost.png").stat().st_size > 0
    alone = tmp_path / "alone.html"
    assert cli("report", str(runs.path("unchecked")), "-o", str(alone)).returncode == 0
    assert 'id="quality"' not in alone.read_text()  # no check: no section
