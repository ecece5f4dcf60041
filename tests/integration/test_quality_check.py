"""The quality check (``infer-prof quality``) against a real HTTP server whose answers and
log-probabilities are known (tests/integration/quality_server.py): accuracy, perplexity, the
reference comparison and the floor, an endpoint that drops out part-way, and bad input."""

import json
import math

import pytest

from infer_prof.catalog.trained_tiny import ADDITION_TASKS, ADDITION_TEXT
from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.quality.check import run_check
from infer_prof.quality.spec import load_inputs
from tests.integration.conftest import cli
from tests.integration.quality_server import Behaviour, QualityServer

TASKS, TEXT = str(ADDITION_TASKS), str(ADDITION_TEXT)


@pytest.fixture
def serve():
    started = []

    def start(**kw):
        s = QualityServer(Behaviour(**kw))
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def _prompts(n):
    return [json.loads(line)["prompt"] for line in ADDITION_TASKS.read_text().splitlines()][:n]


def test_accuracy_and_perplexity_are_the_servers(serve, tmp_path):
    server = serve(wrong=set(_prompts(10)), p_char=0.5)
    out = tmp_path / "q.json"
    done = cli("quality", "--endpoint", server.url, "--model", "adder", "--tasks", TASKS,
               "--text", TEXT, "--top-k", "2", "-o", str(out))
    assert done.returncode == 0, done.stderr
    q = json.loads(out.read_text())["quality"]
    assert q["status"] == "measured" and q["items"] == 100 and q["correct"] == 90
    assert q["accuracy"] == 0.9 and q["accuracy_low"] < 0.9 < q["accuracy_high"]
    assert q["perplexity"] == pytest.approx(2.0)  # every scored character at p = 0.5
    lines = [ln for ln in ADDITION_TEXT.read_text().splitlines() if ln]
    assert q["text_prompts"] == len(lines)
    assert q["scored_tokens"] == sum(len(ln) - 1 for ln in lines)
    assert q["tasks_sha256"] and q["text_sha256"] and q["model"] == "adder"
    assert "accuracy 90.0%" in done.stdout and "perplexity 2.000" in done.stdout
    assert len(done.stdout.strip().splitlines()) == 1


def test_reference_comparison_and_the_floor(serve, tmp_path):
    good = serve(p_char=0.5)
    ref = tmp_path / "ref.json"
    assert cli("quality", "--endpoint", good.url, "--model", "adder", "--tasks", TASKS, "--text",
               TEXT, "-o", str(ref)).returncode == 0
    worse = serve(wrong=set(_prompts(30)), p_char=0.25)
    out = tmp_path / "q.json"
    done = cli("quality", "--endpoint", worse.url, "--model", "adder", "--tasks", TASKS,
               "--text", TEXT, "--quality-reference", str(ref), "--min-quality", "0.99",
               "-o", str(out))
    assert done.returncode == 1, done.stderr  # below the floor
    q = json.loads(out.read_text())["quality"]
    r = q["reference"]
    assert r["accuracy"] == 1.0 and q["accuracy"] == 0.7
    assert r["accuracy_difference"] == pytest.approx(-0.3)
    assert r["accuracy_difference_low"] < -0.3 < r["accuracy_difference_high"] < 0
    assert r["perplexity_ratio"] == pytest.approx(2.0)  # 4 / 2
    # per position: P = {c: .5, #: .1, rest .4}, Q = {c: .25, #: .1, rest .65}
    kl = 0.5 * math.log(0.5 / 0.25) + 0.4 * math.log(0.4 / 0.65)
    assert r["mean_kl"] == pytest.approx(kl, rel=1e-6)
    assert q["below_floor"] is True and q["min_quality"] == 0.99
    assert "BELOW the floor" in done.stdout
    same = cli("quality", "--endpoint", good.url, "--model", "adder", "--tasks", TASKS,
               "--text", TEXT, "--quality-reference", str(ref), "--min-quality", "0.99")
    assert same.returncode == 0 and "meets the floor" in same.stdout


def test_an_endpoint_that_stops_part_way_leaves_the_check_incomplete(serve):
    server = serve(fail_after=120)  # 100 task items, then 20 text lines answered
    inputs = load_inputs(TASKS, TEXT)
    q = run_check(Endpoint.from_url(server.url), "adder", inputs)
    assert q.status == "incomplete" and "HTTP 500" in (q.reason or "")
    assert q.items == 100 and q.accuracy == 1.0
    assert q.text_prompts == 20 and q.perplexity == pytest.approx(2.0)


def test_bad_input_is_one_line_and_exit_2(serve, tmp_path):
    server = serve()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "1+1=", "answer": "2", "match": "number"}\n{"prompt": 3}\n')
    base = ("quality", "--endpoint", server.url, "--model", "adder")
    cases = {
        (*base, "--tasks", str(bad)): "bad.jsonl:2: 'prompt' missing",
        ("quality", "--endpoint", serve(logprobs=False).url, "--model", "adder", "--text", TEXT):
            "returned no prompt log-probabilities",
        (*base, "--tasks", str(tmp_path / "none.jsonl")): "none.jsonl",
        (*base, "--tasks", TASKS, "--min-quality", "0.9"): "--min-quality needs",
    }
    ref = tmp_path / "ref.json"
    assert cli(*base, "--tasks", TASKS, "-o", str(ref)).returncode == 0
    other = ("quality", "--endpoint", server.url, "--model", "other", "--tasks", TASKS,
             "--quality-reference", str(ref))
    cases[other] = "is of model 'adder', this check's is 'other'"
    for args, says in cases.items():
        done = cli(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


LOAD = ("-c", "1", "-n", "4", "--input-len", "16", "--output-len", "8", "--warmup", "none")


def test_run_on_random_weights_records_quality_as_not_measured(tmp_path):
    done = cli("run", "--server", "synthetic", "--model", "llama-2-7b", *LOAD, "--quality",
               "addition", "--results-dir", str(tmp_path), "--output", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stderr
    said = [ln for ln in done.stderr.splitlines() if "quality" in ln]
    assert said == ["quality: not measured (random weights (--load-format dummy))"], said
    assert "quality: not measured (random weights (--load-format dummy))" in done.stdout
    q = json.loads((tmp_path / "r.json").read_text())["quality"]
    assert q["status"] == "not_measured" and q["reason"].startswith("random weights")
    assert q["accuracy"] is None and q["perplexity"] is None and q["items"] is None
    assert q["tasks_sha256"]  # what would have been checked is named


def test_run_against_an_endpoint_without_prompt_logprobs_stops_before_the_load(
        synthetic, serve, tmp_path):
    server = serve(model="llama-2-7b", logprobs=False)
    done = cli("run", "--endpoint", server.url, "--model", "llama-2-7b", *LOAD, "--quality",
               "addition", "--results-dir", str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert "returned no prompt log-probabilities" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not list(tmp_path.glob("*.json"))  # no load was sent, nothing recorded
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=8)  # streams only: cannot be checked
    done = cli("run", "--endpoint", server.url, "--model", "llama-2-7b", *LOAD, "--quality",
               "addition", "--results-dir", str(tmp_path))
    assert done.returncode == 2 and "error: --quality: " in done.stderr, done.stderr
    assert "HTTP 400" in done.stderr and not list(tmp_path.glob("*.json"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    done = cli("run", "--endpoint", server.url, "--model", "llama-2-7b", *LOAD, "--quality",
               f"tasks={bad}", "--results-dir", str(tmp_path))
    assert done.returncode == 2 and "bad.jsonl:1: not JSON" in done.stderr, done.stderr
