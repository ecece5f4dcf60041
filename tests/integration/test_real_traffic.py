"""Real traffic against a real local server: exact-length text prompts and dataset files."""

import hashlib
import json
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from infer_prof.loadgen.text_prompts import TextPromptMaker
from infer_prof.schema import load_result
from infer_prof.store import read_requests
from infer_prof.tinymodel import ensure_tiny_llama

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
    assert ds["rendering"] == ("role: content" if fmt == "messages" else None)
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
