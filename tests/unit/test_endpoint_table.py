"""The several-endpoint table (core.analysis.endpoint_table, its rows read from typed results by
results.endpoint_rows) and how the endpoints are given (TOML file, paired options): rows,
cheapest marking, failures, and one-line errors for bad input."""

import pytest
from typer.testing import CliRunner

from infer_prof.cli import app
from infer_prof.core.analysis.endpoint_table import COLUMNS, cheapest, table_csv_rows
from infer_prof.results.document import decode_result
from infer_prof.results.endpoint_rows import EndpointRun, endpoint_rows
from infer_prof.results.schema import SCHEMA_VERSION
from infer_prof.run.config import ConfigError, RunConfig
from infer_prof.run.multi_endpoint import (
    EndpointTarget,
    pair_targets,
    parse_endpoints_toml,
    target_config,
)


def result(out_tps, usd_per_hour, *, conc=4, complete=True, valid=True, gpus=1, key="H100-SXM"):
    """A result document as the runner writes it, with the fields the table reads."""
    total_tps = out_tps * 3  # prompt tokens twice the output tokens
    priced = usd_per_hour is not None
    return {
        "complete": complete,
        "incomplete_reason": None if complete else "server_died",
        "validity": {"valid": valid, "reasons": [] if valid else ["min_requests: 3 < 10"]},
        "load": {"mode": "closed", "concurrency": conc, "rate": None},
        "gpu": {"key": key, "count": gpus},
        "summary": {
            "request_throughput": out_tps / 16,
            "output_throughput": out_tps,
            "ttft_ms": {"p50": 20.0, "p99": 30.0},
            "tpot_ms": {"p50": 5.0, "p99": 6.0},
            "itl_ms": {"p50": 5.0, "p99": 9.0},
            "e2e_ms": {"p50": 100.0, "p99": 120.0},
        },
        "cost": {
            "available": priced,
            "reason": None if priced else "no price",
            "usd_per_hour": usd_per_hour,
            "usd_per_million_output_tokens": usd_per_hour / (out_tps * 3600) * 1e6
            if priced
            else None,
            "usd_per_million_total_tokens": usd_per_hour / (total_tps * 3600) * 1e6
            if priced
            else None,
        },
    }


def typed(r, run_id):
    """``r`` as a typed Result, with the envelope every result file has."""
    envelope = {"schema_version": SCHEMA_VERSION, "kind": "infer-prof.run", "run_id": run_id,
                "config": {}}
    return decode_result({**envelope, **r})


def run(label, *results, error=None):
    return EndpointRun(label, f"http://{label}:8000", "H100-SXM", 1,
                       [(typed(r, f"{label}-{i}"), f"/r/{label}-{i}.json")
                        for i, r in enumerate(results)], error)


def test_rows_carry_the_measured_values_and_cost():
    rows = endpoint_rows([run("a", result(1000.0, 3.6)), run("b", result(500.0, 1.2))])
    assert [r["endpoint"] for r in rows] == ["a", "b"]
    assert set(rows[0]) == set(COLUMNS)
    a = rows[0]
    assert a["status"] == "ok" and a["load"] == "c4"
    assert a["output_throughput"] == 1000.0 and a["itl_p99"] == 9.0 and a["e2e_p50"] == 100.0
    # $/1M output = $/h / (tokens/s x 3600) x 1e6: 3.6 / 3.6e6 x 1e6 = 1.0
    assert a["usd_per_1m_output"] == pytest.approx(1.0)
    assert a["usd_per_1m_total"] == pytest.approx(1.0 / 3)
    assert a["result_file"] == "/r/a-0.json"


def test_cheapest_is_by_cost_not_speed():
    # b is half as fast but at a third of the price: cheaper per token
    rows = endpoint_rows([run("a", result(1000.0, 3.6)), run("b", result(500.0, 1.2))])
    assert [r["cheapest_output"] for r in rows] == [False, True]
    assert [r["cheapest_total"] for r in rows] == [False, True]
    assert cheapest(rows) == ["b"]


def test_ties_are_all_cheapest():
    rows = endpoint_rows([run("a", result(1000.0, 2.0)), run("b", result(500.0, 1.0))])
    assert [r["cheapest_output"] for r in rows] == [True, True]


def test_failed_endpoint_is_a_row_with_its_reason_and_no_numbers():
    rows = endpoint_rows([
        run("a", result(1000.0, 3.6)),
        run("dead", error="endpoint http://dead:8000 did not answer GET /v1/models"),
        run("b", result(500.0, 1.2)),
    ])
    dead = rows[1]
    assert dead["status"] == "failed: endpoint http://dead:8000 did not answer GET /v1/models"
    assert dead["output_throughput"] is None and dead["usd_per_1m_output"] is None
    assert dead["cheapest_output"] is False
    assert cheapest(rows) == ["b"]


def test_incomplete_or_invalid_runs_are_never_cheapest():
    rows = endpoint_rows([
        run("died", result(500.0, 0.1, complete=False)),
        run("invalid", result(500.0, 0.1, valid=False)),
        run("a", result(1000.0, 3.6)),
        run("b", result(500.0, 1.2)),
    ])
    assert rows[0]["status"] == "incomplete: server_died"
    assert rows[1]["status"] == "invalid: min_requests: 3 < 10"
    assert [r["cheapest_output"] for r in rows] == [False, False, False, True]


def test_one_priced_row_is_not_marked_and_no_price_is_none_not_zero():
    rows = endpoint_rows([run("a", result(1000.0, 3.6)), run("b", result(500.0, None))])
    assert not any(r["cheapest_output"] for r in rows)
    assert rows[1]["usd_per_1m_output"] is None and rows[1]["cost_reason"] == "no price"


def test_cheapest_is_per_load_point():
    rows = endpoint_rows([
        run("a", result(1000.0, 3.6, conc=1), result(4000.0, 3.6, conc=8)),
        run("b", result(500.0, 1.2, conc=1), result(1000.0, 1.2, conc=8)),
    ])
    assert [(r["endpoint"], r["load"], r["cheapest_output"]) for r in rows] == [
        ("a", "c1", False), ("a", "c8", True), ("b", "c1", True), ("b", "c8", False),
    ]


def test_csv_cells():
    rows = endpoint_rows([run("a", result(1000.0, 3.6)), run("x", error="refused")])
    cells = table_csv_rows(rows)
    assert cells[0] == list(COLUMNS)
    failed = dict(zip(cells[0], cells[2], strict=True))
    assert failed["output_throughput"] == "" and failed["cheapest_output"] == "0"
    assert failed["status"] == "failed: refused"


# --- how the endpoints are given -----------------------------------------------------------


GOOD = """
[[endpoint]]
url = "http://a:8000"
gpu = "A100-80GB-SXM"
gpu_count = 2
price_per_hour = 1.5
label = "a100"

[[endpoint]]
url = "http://b:8000"
gpu = "H100-SXM"

[[endpoint]]
url = "http://c:8000"
gpu = "H100-SXM"
"""


def test_toml_file():
    targets = parse_endpoints_toml(GOOD)
    assert targets[0] == EndpointTarget("http://a:8000", "A100-80GB-SXM", 2, 1.5, "a100")
    # a missing label is the GPU key, made unique
    assert [t.label for t in targets] == ["a100", "H100-SXM", "H100-SXM-2"]
    assert targets[1].gpu_count is None and targets[1].price_per_hour is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[endpoint]\nurl=", "not valid TOML"),
        ("", "no endpoints"),
        ("[[endpoint]]\ngpu = \"H100-SXM\"\n", "has no url"),
        ("[[endpoint]]\nurl = \"http://a\"\nprice = 2\n", "unknown key 'price'"),
        ("[[endpoint]]\nurl = \"http://a\"\ngpu_count = 0\n", "gpu_count must be a positive"),
        ("[[endpoint]]\nurl = \"http://a\"\ngpu_count = 1.5\n", "gpu_count must be a positive"),
        ("[[endpoint]]\nurl = \"http://a\"\nprice_per_hour = -1\n", "price_per_hour must be"),
        ("[[endpoint]]\nurl = \"http://a\"\nprice_per_hour = \"2\"\n", "price_per_hour must be"),
        ("[[endpoint]]\nurl = \"http://a\"\nlabel = \"x\"\n[[endpoint]]\nurl = \"http://b\"\n"
         "label = \"x\"\n", "label 'x' is given twice"),
        ("[endpoint]\nurl = \"http://a\"\n", "no endpoints"),
        ("[[endpoints]]\nurl = \"http://a\"\n", "unknown top-level key 'endpoints'"),
        ("[[endpoint]]\nurl = \"https://a\"\ninsecure = \"yes\"\n", "insecure must be true"),
        ("[[endpoint]]\nurl = \"https://a\"\nca_bundle = \"\"\n", "ca_bundle must be a non"),
    ],
)
def test_toml_errors_name_the_problem(text, expected):
    with pytest.raises(ConfigError, match=expected) as info:
        parse_endpoints_toml(text, "--endpoints f.toml")
    assert str(info.value).startswith("--endpoints f.toml")
    assert "\n" not in str(info.value)


def test_pairing_in_order_and_count_mismatch():
    t = pair_targets(["http://a", "http://b"], ["A100-80GB-SXM", "H100-SXM"], [], [1.0, 2.0],
                     [])
    assert [(x.gpu, x.price_per_hour, x.label) for x in t] == [
        ("A100-80GB-SXM", 1.0, "A100-80GB-SXM"), ("H100-SXM", 2.0, "H100-SXM")]
    assert pair_targets(["http://a:1", "http://b"], ["none", "H100-SXM"], [], [], [])[0].gpu is None
    assert pair_targets(["http://a:1", "http://b"], ["none", "H100-SXM"], [], [], [])[0].label == (
        "a_1")
    with pytest.raises(ConfigError, match="3 --gpu for 2 --endpoint"):
        pair_targets(["http://a", "http://b"], ["A", "B", "C"], [], [], [])


def test_tls_settings_per_endpoint_or_shared():
    targets = parse_endpoints_toml(
        '[[endpoint]]\nurl = "https://a/v1"\nca_bundle = "a-ca.pem"\n'
        '[[endpoint]]\nurl = "https://b/v1"\ninsecure = true\n'
        '[[endpoint]]\nurl = "https://c/v1"\n')
    cfg = RunConfig(ca_bundle="shared.pem")
    a, b, c = (target_config(cfg, t) for t in targets)
    assert (a.engine.ca_bundle, a.engine.insecure) == ("a-ca.pem", False)
    assert (b.engine.ca_bundle, b.engine.insecure) == ("shared.pem", True)
    assert (c.engine.ca_bundle, c.engine.insecure) == ("shared.pem", False)
    assert target_config(RunConfig(insecure=True), targets[2]).engine.insecure is True


def test_target_config_puts_the_label_in_the_run():
    cfg = RunConfig(labels={"team": "x"}, price_per_hour=9.0, output="r.json")
    one = target_config(cfg, EndpointTarget("http://a", "H100-SXM", 2, None, "my a100/spot"))
    engine = one.engine
    assert engine.endpoint == "http://a" and engine.gpu == "H100-SXM" and engine.gpus == 2
    assert one.cost.price_per_hour == 9.0  # the shared price where the endpoint has none
    assert one.results.labels == {"team": "x", "endpoint": "my a100/spot"}
    assert one.results.run_tag == "my_a100_spot" and one.results.output is None


cli = CliRunner()


def one_error_line(r):
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_cli_count_mismatch_is_one_line_exit_2():
    r = cli.invoke(app, ["run", "--no-progress", "--endpoint", "http://127.0.0.1:9",
                         "--endpoint", "http://127.0.0.1:10", "--gpu", "A100-80GB-SXM",
                         "--gpu", "H100-SXM", "--gpu", "H100-PCIe"])
    assert r.exit_code == 2
    assert "3 --gpu for 2 --endpoint" in one_error_line(r)


def test_cli_bad_gpu_of_one_endpoint_is_found_before_any_load(tmp_path):
    r = cli.invoke(app, ["run", "--no-progress", "--results-dir", str(tmp_path),
                         "--endpoint", "http://127.0.0.1:9", "--gpu", "H100-SXM",
                         "--endpoint", "http://127.0.0.1:10", "--gpu", "H900"])
    assert r.exit_code == 2
    line = one_error_line(r)
    assert "endpoint H900" in line and "H900" in line
    assert not list(tmp_path.iterdir())  # nothing ran


def test_cli_file_and_options_together_refused(tmp_path):
    f = tmp_path / "e.toml"
    f.write_text(GOOD)
    r = cli.invoke(app, ["run", "--endpoints", str(f), "--gpu", "H100-SXM"])
    assert r.exit_code == 2
    assert "drop --gpu" in one_error_line(r)


def test_cli_missing_file(tmp_path):
    r = cli.invoke(app, ["run", "--endpoints", str(tmp_path / "none.toml")])
    assert r.exit_code == 2
    assert "cannot read it" in one_error_line(r)


def test_cli_two_gpus_for_one_endpoint():
    r = cli.invoke(app, ["run", "--endpoint", "http://127.0.0.1:9", "--gpu", "H100-SXM",
                         "--gpu", "A100-80GB-SXM"])
    assert r.exit_code == 2
    assert "--gpu is given 2 times for one endpoint" in one_error_line(r)


def test_an_endpoint_not_run_says_why():
    rows = endpoint_rows([run("a", result(1000.0, 3.6)),
                          EndpointRun("b", "http://b", skipped="interrupted")])
    assert rows[1]["status"] == "not run: interrupted" and rows[1]["gpu"] is None


def test_price_source():
    r = result(1000.0, 3.6)
    r["cost"]["price"] = {"kind": "user", "provider": "user", "usd_per_hour": 3.6}
    r2 = result(500.0, 1.2)
    r2["cost"]["price"] = {"kind": "on-demand", "provider": "lambda", "usd_per_hour": 1.2}
    rows = endpoint_rows([run("a", r), run("b", r2), run("c", result(500.0, None))])
    assert [x["price_source"] for x in rows] == ["user", "lambda on-demand", None]


def test_api_key_from_the_endpoints_own_variable(monkeypatch):
    t = parse_endpoints_toml('[[endpoint]]\nurl = "http://a"\napi_key_env = "PROV_KEY"\n')[0]
    monkeypatch.setenv("PROV_KEY", "sk-1")
    assert target_config(RunConfig(api_key="shared"), t).engine.api_key == "sk-1"
    shared = target_config(RunConfig(api_key="shared"), EndpointTarget("http://b"))
    assert shared.engine.api_key == "shared"
    monkeypatch.delenv("PROV_KEY")
    with pytest.raises(ConfigError, match="PROV_KEY, which is not set"):
        target_config(RunConfig(), t)


def test_cheapest_is_per_workload_too():
    a1, b1 = result(1000.0, 3.6), result(500.0, 1.2)
    a2, b2 = result(1000.0, 1.0), result(500.0, 1.2)
    for r in (a1, b1):
        r["workload"] = {"name": "chat"}
    for r in (a2, b2):
        r["workload"] = {"name": "rag"}
    rows = endpoint_rows([run("a", a1, a2), run("b", b1, b2)])
    assert [(r["endpoint"], r["workload"], r["cheapest_output"]) for r in rows] == [
        ("a", "chat", False), ("a", "rag", True), ("b", "chat", True), ("b", "rag", False)]


def test_cli_same_bad_input_for_every_endpoint_is_exit_2_without_a_table(tmp_path):
    # the context check comes before any endpoint is contacted: nothing listens on these ports
    r = cli.invoke(app, ["run", "--no-progress", "--model", "llama-2-7b", "--results-dir",
                         str(tmp_path), "--input-len", "4096", "--output-len", "8",
                         "--endpoint", "http://127.0.0.1:9", "--endpoint", "http://127.0.0.1:10"])
    assert r.exit_code == 2, r.output
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "exceeds the model's context" in errors[0]
    assert not list(tmp_path.iterdir())
