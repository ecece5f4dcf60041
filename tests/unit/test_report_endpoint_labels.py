"""The HTML report names an endpoint's hardware as unknown (never the client's own CPU) and a
trace replay's load as the replay and its rate (never "not measured")."""

from infer_prof.report.html import build_report
from infer_prof.report.run_data import gpu_label, load_text, run_names
from infer_prof.results.schema import typed_document as typed
from tests.unit.test_report_html import make_result, run


def endpoint_result(run_id: str, gpu: str | None = None) -> dict:
    r = make_result(run_id, gpu=gpu, price=None)
    r["server"] = {"kind": "endpoint", "url": "https://gw.example/v1"}
    return r


def test_an_endpoint_without_gpu_is_hardware_unknown_not_the_clients_cpu():
    r = endpoint_result("ep")
    assert gpu_label(typed(r)) == "hardware unknown (endpoint; no --gpu)"
    assert gpu_label(typed(r), short=True) == "hardware unknown"
    html = build_report([run(r)]).html
    assert "Test CPU" not in html and "hardware unknown" in html
    assert gpu_label(typed(endpoint_result("ep2", gpu="H100-SXM"))) == "H100-SXM"
    local = make_result("local", gpu=None, price=None)  # a server this machine ran: its CPU
    assert gpu_label(typed(local)) == "CPU (Test CPU)"


def test_a_trace_replay_reads_as_the_replay_and_its_rate():
    r = make_result("trace", price=None)
    r["config"]["concurrency"] = None
    r["config"]["trace"] = {"path": "t.jsonl"}
    r["trace_replay"] = {"scheduled_rate": 4.0, "achieved_rate": 3.98}
    assert load_text(typed(r)) == "trace replay, 3.98 req/s"
    other = make_result("c8", concurrency=8, price=None)
    assert run_names([run(r), run(other)]) == ["trace replay, 3.98 req/s", "c=8"]
    html = build_report([run(r), run(other)]).html
    assert "trace replay, 3.98 req/s" in html
