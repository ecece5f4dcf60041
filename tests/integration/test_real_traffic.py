"""Real traffic against a real local server: exact-length text prompts and dataset files."""

import hashlib
import json
import random
import shutil
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from infer_prof.catalog.tinymodel import ensure_tiny_llama
from infer_prof.loadgen.text_prompts import TextPromptMaker
from infer_prof.results.schema import load_result
from infer_prof.results.store import read_requests

from .conftest import cli

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "datasets"
BASE = ("run", "--model", "tiny-llama", "--no-progress", "--no-history", "--warmup", "none")


def _run(server_url: str, out: Path, *extra: str) -> dict:
    p = cli(*BASE, "--endpoint", server_url, "--output", str(out), "-c", "2", *extra)
    assert p.returncode == 0, p.stderr
    return load_result(out)


def _measured(out: Path) -> list:
    return [r for r in read_requests(out.with_name(out.stem + ".requests.jsonl")) if not r.warmup]


def test_text_prompts_sent_as_text_of_exact_length(synthetic, tmp_path):
    tok = Tokenizer.from_file(str(ensure_tiny_llama() / "tokenizer.json"))
    # the synthetic server counts words of a text prompt: a text prompt of N tokens has fewer
    # than N words but more than none; token IDs would be counted exactly
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=8)
    out = tmp_path / "t.json"
    result = _run(server.url, out, "-n", "6", "--input-len", "40", "--output-len", "8",
                  "--prompt", "text", "--seed", "3")
    assert result["config"]["prompt"] == "text" and result["config"]["dataset"] is None
    recs = _measured(out)
    assert len(recs) == 6 and all(r.input_len == 40 for r in recs)
    assert all(1 <= r.prompt_tokens < 40 for r in recs)  # words, not token IDs, were sent
    # the same prompts are rebuilt from the seed: exactly 40 tokens each
    maker = TextPromptMaker.from_tokenizer(tok)
    text = maker.make(40, random.Random("3/prompt/0"))
    assert len(tok.encode(text).ids) == 40


@pytest.mark.parametrize(
    "name,fmt,n_entries,skipped",
    [("prompts.jsonl", "prompt", 6, 0), ("messages.jsonl", "messages", 4, 0),
     ("sharegpt.json", "sharegpt", 4, 1)],
)
def test_dataset_formats(synthetic, tmp_path, name, fmt, n_entries, skipped):
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=8)
    out = tmp_path / "d.json"
    path = DATA / name
    result = _run(server.url, out, "-n", str(2 * n_entries), "--dataset", str(path))
    ds = result["config"]["dataset"]
    assert ds["format"] == fmt and ds["entries"] == n_entries
    assert ds["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert ds["skipped"]["no_prompt"] == skipped and ds["skipped"]["too_long"] == 0
    assert ds["rendering"] == ("chat_template" if fmt == "messages" else None)
    assert result["config"]["prompt"] == "text"
    assert result["workload"]["input_len"]["kind"] == "empirical"
    recs = sorted(_measured(out), key=lambda r: r.index)
    assert len(recs) == 2 * n_entries and all(r.ok for r in recs)
    # every entry is sent twice, in order, with its own lengths; the output is what was asked
    lens = [(r.input_len, r.output_tokens) for r in recs]
    assert lens[:n_entries] == lens[n_entries:]
    assert len(set(lens)) > 1
    if fmt == "prompt":  # output_len from the file where given, else the workload's 128
        assert [o for _, o in lens[:n_entries]] == [24, 48, 128, 16, 32, 64]


def test_dataset_output_len_override_and_sample(synthetic, tmp_path):
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=8)
    out = tmp_path / "s.json"
    result = _run(server.url, out, "-n", "3", "--dataset", str(DATA / "prompts.jsonl"),
                  "--dataset-sample", "3", "--seed", "5", "--output-len", "7")
    ds = result["config"]["dataset"]
    assert ds["sample"] == 3 and ds["seed"] == 5 and ds["entries"] == 3
    assert ds["output_len_from"] == "--output-len"
    assert all(r.output_tokens == 7 for r in _measured(out))


def test_bad_dataset_line_exits_2(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "fine"}) + "\n" + json.dumps({"prompt": 3}) + "\n")
    p = cli(*BASE, "--endpoint", "http://127.0.0.1:9", "--dataset", str(bad))
    assert p.returncode == 2
    assert f"{bad}:2: prompt: must be a non-empty string" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def _poisson_times(n: int, rate: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate)
    return out


@pytest.mark.parametrize("fmt", ["mooncake", "azure"])
def test_trace_replay_rate_within_one_percent(synthetic, tmp_path, fmt):
    times = _poisson_times(400, 80.0, seed=3)  # about 5 s of trace
    rng = random.Random(4)
    lens = [(rng.randint(8, 200), rng.randint(2, 12)) for _ in times]
    if fmt == "mooncake":
        trace = tmp_path / "trace.jsonl"
        trace.write_text("".join(json.dumps({"timestamp": round(t * 1000, 3), "input_length": i,
                                             "output_length": o, "hash_ids": [1, 2]}) + "\n"
                                 for t, (i, o) in zip(times, lens, strict=True)))
    else:
        trace = tmp_path / "trace.csv"
        trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
            f"{1700000000 + t:.6f},{i},{o}\n" for t, (i, o) in zip(times, lens, strict=True)))
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=8)
    out = tmp_path / "trace.json"
    p = cli(*BASE[:-2], "--endpoint", server.url, "--output", str(out), "--trace", str(trace),
            "--time-scale", "0.8")
    assert p.returncode == 0, p.stderr
    result = load_result(out)
    assert result["config"]["trace"]["format"] == fmt
    assert result["config"]["trace"]["requests"] == 400 and result["load"]["mode"] == "open"
    replay = result["trace_replay"]
    scheduled = 399 / (times[-1] * 0.8)
    assert replay["scheduled_rate"] == pytest.approx(scheduled, rel=1e-3)
    assert replay["sent_requests"] == 400
    assert abs(replay["achieved_rate"] - scheduled) / scheduled < 0.01
    assert abs(replay["rate_error_pct"]) < 1.0
    assert replay["send_lag_ms"]["p50"] is not None
    recs = sorted(_measured(out), key=lambda r: r.index)
    # exact lengths, in trace order; scheduled at the trace's (scaled) offsets
    assert [(r.input_len, r.output_tokens) for r in recs] == lens
    assert [r.prompt_tokens for r in recs] == [i for i, _ in lens]
    t0 = recs[0].scheduled_ns
    assert [(r.scheduled_ns - t0) / 1e9 for r in recs] == pytest.approx(
        [t * 0.8 for t in times], abs=1e-5)


def test_trace_window_and_clash(synthetic, tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": 100 * k, "input_length": 16,
                                         "output_length": 4}) + "\n" for k in range(30)))
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=8)
    out = tmp_path / "w.json"
    p = cli(*BASE[:-2], "--endpoint", server.url, "--output", str(out), "--trace", str(trace),
            "--trace-window", "1:2")
    assert p.returncode == 0, p.stderr
    result = load_result(out)
    assert result["config"]["trace"]["requests"] == 10
    assert result["config"]["trace"]["window_s"] == [1.0, 2.0]
    p = cli(*BASE, "--endpoint", server.url, "--trace", str(trace), "--rate", "4")
    assert p.returncode == 2 and "drop --rate" in p.stderr


def test_workload_file_names_the_dataset(synthetic, tmp_path):
    (tmp_path / "data").mkdir()
    shutil.copy(DATA / "prompts.jsonl", tmp_path / "data" / "p.jsonl")
    wl = tmp_path / "wl.toml"
    wl.write_text('input_len = 64\noutput_len = 16\nnum_requests = 6\ndataset = "data/p.jsonl"\n'
                  '[arrival]\nmode = "closed"\nconcurrency = 2\n')
    server = synthetic(ttft_ms=5.0, itl_ms=1.0, tokens=8)
    out = tmp_path / "wl.json"
    p = cli(*BASE, "--endpoint", server.url, "--output", str(out), "--workload", str(wl))
    assert p.returncode == 0, p.stderr
    ds = load_result(out)["config"]["dataset"]
    assert ds["path"] == str(tmp_path / "data" / "p.jsonl") and ds["entries"] == 6
    # lengths come from the data, the workload's 16 only where the data has none
    assert [r.output_tokens for r in sorted(_measured(out), key=lambda r: r.index)] == [
        24, 48, 16, 16, 32, 64]
