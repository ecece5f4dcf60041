"""`infer-prof run` with several endpoints against real local servers: one table, the cheapest
marked, a dead endpoint reported while the others run, ordinary result files."""

import csv
import json
import signal
import socket
import time
import urllib.request

import pytest

from infer_prof.results.schema import load_result

from .conftest import cli, cli_background

pytestmark = pytest.mark.integration

# llama-2-7b's shipped config gives the vocabulary for token-ID prompts: no download needed.
LOAD = ("--model", "llama-2-7b", "--no-progress", "--input-len", "16",
        "--warmup-requests", "0", "--min-duration", "0.3")


def dead_url() -> str:
    """A local port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def wait_served(url: str, n: int, timeout_s: float = 60.0) -> None:
    """Wait until the synthetic server has finished ``n`` requests (its ``/truth`` records), so a
    test acts mid-run however long the client took to start on a busy machine."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{url}/truth", timeout=5) as r:
            if len(json.load(r)["requests"]) >= n:
                return
        time.sleep(0.2)
    raise AssertionError(f"{url} did not serve {n} requests in {timeout_s} s")


def test_two_servers_and_a_dead_one(synthetic, tmp_path):
    # "fast" streams twice as fast as "slow", but costs 3x as much per hour: slow is cheaper
    fast = synthetic(ttft_ms=10.0, itl_ms=20.0, tokens=8)
    slow = synthetic(ttft_ms=20.0, itl_ms=40.0, tokens=8)
    dead = dead_url()
    p = cli(
        "run", *LOAD, "-c", "4", "-n", "24", "--output-len", "8",
        "--endpoint", fast.url, "--gpu", "H100-SXM", "--price-per-hour", "3.0",
        "--endpoint-label", "fast",
        "--endpoint", dead, "--gpu", "H100-SXM", "--price-per-hour", "2.0",
        "--endpoint-label", "gone",
        "--endpoint", slow.url, "--gpu", "A100-80GB-SXM", "--price-per-hour", "1.0",
        "--endpoint-label", "slow",
        "--results-dir", str(tmp_path), "--json", "--label", "team=perf",
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["kind"] == "infer-prof.endpoints"
    rows = {r["endpoint"]: r for r in doc["rows"]}
    assert [r["endpoint"] for r in doc["rows"]] == ["fast", "gone", "slow"]

    gone = rows["gone"]
    assert gone["status"].startswith("failed: ") and "did not answer" in gone["status"]
    assert gone["url"] == dead and gone["output_throughput"] is None

    f, s = rows["fast"], rows["slow"]
    for r in (f, s):
        assert r["status"] == "ok", r["status"]
        assert r["load"] == "c4" and r["gpu_count"] == 1
        for key in ("ttft", "tpot", "itl", "e2e"):
            assert 0 < r[f"{key}_p50"] <= r[f"{key}_p99"]
    assert f["gpu"] == "H100-SXM" and s["gpu"] == "A100-80GB-SXM"
    assert 17.0 < f["itl_p50"] < 30.0 and 37.0 < s["itl_p50"] < 55.0
    assert 1.5 < f["output_throughput"] / s["output_throughput"] < 2.5
    # cost from each run's measured output rate and its own price
    for r, price in ((f, 3.0), (s, 1.0)):
        assert r["usd_per_hour"] == pytest.approx(price)
        assert r["usd_per_1m_output"] == pytest.approx(
            price / (r["output_throughput"] * 3600) * 1e6, rel=1e-9
        )
        assert r["usd_per_1m_total"] < r["usd_per_1m_output"]
    assert (f["cheapest_output"], s["cheapest_output"]) == (False, True)
    assert (f["cheapest_total"], s["cheapest_total"]) == (False, True)
    assert doc["cheapest"] == ["slow"]

    # each endpoint's run is an ordinary result file with its label in the name
    results = sorted(tmp_path.glob("*-c4.json"))
    assert [p.name.split("-llama-2-7b-")[1] for p in results] == ["fast-c4.json", "slow-c4.json"]
    for path, label, url in ((results[0], "fast", fast.url), (results[1], "slow", slow.url)):
        res = load_result(path)
        assert res["complete"] is True
        assert res["labels"] == {"team": "perf", "endpoint": label}
        assert res["server"]["url"] == url
        assert str(path) == rows[label]["result_file"]
    table_csv = list(csv.DictReader(next(tmp_path.glob("*-endpoints.csv")).open()))
    assert [r["endpoint"] for r in table_csv] == ["fast", "gone", "slow"]
    assert [r["cheapest_output"] for r in table_csv] == ["0", "0", "1"]
    assert table_csv[2]["output_throughput"] == str(s["output_throughput"])

    # compare, history and report read them as usual (the folder also holds the table files)
    c = cli("compare", str(tmp_path), "--format", "json")
    assert c.returncode == 0, c.stderr
    compared = json.loads(c.stdout)
    assert sorted(r["label"] for r in compared["rows"]) == [
        "endpoint=fast,team=perf", "endpoint=slow,team=perf"]
    h = cli("history", "--history", str(tmp_path / "history.sqlite"), "--json")
    assert h.returncode == 0, h.stderr
    assert sorted(r["run_name"] for r in json.loads(h.stdout)) == [p.stem for p in results]
    rep = cli("report", str(tmp_path), "--output", str(tmp_path / "report.html"))
    assert rep.returncode == 0, rep.stderr
    html = (tmp_path / "report.html").read_text()
    assert results[0].stem in html and results[1].stem in html


def test_every_endpoint_failing_exits_1_with_the_table(tmp_path):
    f = tmp_path / "endpoints.toml"
    f.write_text(
        f'[[endpoint]]\nurl = "{dead_url()}"\ngpu = "H100-SXM"\nlabel = "a"\n\n'
        f'[[endpoint]]\nurl = "{dead_url()}"\nlabel = "b"\n'
    )
    out = tmp_path / "res"
    p = cli("run", *LOAD, "-n", "4", "--endpoints", str(f), "--results-dir", str(out))
    assert p.returncode == 1, p.stderr
    assert "every endpoint failed" in p.stderr
    doc = json.loads(next(out.glob("*-endpoints.json")).read_text())
    assert [(r["endpoint"], r["status"].split(":")[0]) for r in doc["rows"]] == [
        ("a", "failed"), ("b", "failed")]
    assert doc["cheapest"] == []
    assert not list(out.glob("*-c*.json"))  # no result file for an endpoint never reached


def test_server_dying_mid_run_is_its_row_and_the_next_endpoint_runs(synthetic, tmp_path):
    doomed = synthetic(ttft_ms=10.0, itl_ms=20.0, tokens=10)
    quick = synthetic(ttft_ms=10.0, itl_ms=20.0, tokens=10)
    f = tmp_path / "endpoints.toml"
    f.write_text(
        f'[[endpoint]]\nurl = "{doomed.url}"\nlabel = "doomed"\nprice_per_hour = 1.0\n\n'
        f'[[endpoint]]\nurl = "{quick.url}"\nlabel = "quick"\nprice_per_hour = 1.0\n'
    )
    proc = cli_background(
        "run", *LOAD, "-c", "4", "--duration", "6", "--output-len", "10", "--endpoints", str(f),
        "--results-dir", str(tmp_path), "--json",
    )
    wait_served(doomed.url, 8)  # well within the first endpoint's 6 s
    doomed.proc.kill()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    rows = {r["endpoint"]: r for r in json.loads(out)["rows"]}
    assert rows["doomed"]["status"] == "incomplete: server_died"
    assert rows["doomed"]["output_throughput"] is not None  # what it measured is kept
    assert rows["quick"]["status"] == "ok"
    assert rows["quick"]["usd_per_1m_output"] is not None
    # one priced row that holds: nothing to be cheaper than
    assert not any(r["cheapest_output"] for r in rows.values())
    assert load_result(rows["doomed"]["result_file"])["complete"] is False


def test_ctrl_c_keeps_the_run_so_far_and_skips_the_rest(synthetic, tmp_path):
    a = synthetic(ttft_ms=10.0, itl_ms=20.0, tokens=10)
    b = synthetic(ttft_ms=10.0, itl_ms=20.0, tokens=10)
    proc = cli_background(
        "run", *LOAD, "-c", "4", "-n", "2000", "--output-len", "10", "--endpoint", a.url,
        "--endpoint", b.url, "--results-dir", str(tmp_path), "--json",
    )
    wait_served(a.url, 8)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    rows = json.loads(out)["rows"]
    assert [r["status"] for r in rows] == ["incomplete: interrupted", "not run: interrupted"]
    assert rows[0]["request_throughput"] is not None
    assert len(list(tmp_path.glob("*-c4.json"))) == 1


def test_max_cost_holds_for_every_endpoint_together(tmp_path):
    """--max-cost with several endpoints: their expected costs added, refused before any is
    contacted (two dead ports: a run that started would fail on them instead)."""
    p = cli("run", *LOAD, "-c", "1", "-n", "8", "--output-len", "8",
            "--endpoint", dead_url(), "--gpu", "H100-SXM", "--price-per-hour", "3.0",
            "--endpoint", dead_url(), "--gpu", "H100-SXM", "--price-per-hour", "1.0",
            "--max-cost", "1e-9", "--results-dir", str(tmp_path), timeout=60)
    assert p.returncode == 2, p.stderr
    assert "2 endpoints: expected rented time" in p.stderr and "2 points" in p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "above --max-cost 1e-09" in errors[0]
    assert not list(tmp_path.glob("*.json"))
