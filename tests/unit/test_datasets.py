"""Dataset files: formats, lengths as tokenized, skipping, sampling, bad files, and compare."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from infer_prof.catalog.tinymodel import ensure_tiny_llama
from infer_prof.loadgen.datasets import DatasetError, chat_template_renderer, load_dataset
from infer_prof.loadgen.text_prompts import load_tokenizer, server_token_counter
from infer_prof.results.document import decode_result as typed
from infer_prof.results.identity import config_fingerprint, differing_fields

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "datasets"
TOK = load_tokenizer(ensure_tiny_llama())
COUNT = server_token_counter(TOK)


def _load(path: Path | str, **kw):
    args = {"chat": None, "context": 2048, "output_len": None,
            "default_output": lambda rng: 100, "sample": None, "seed": 0, **kw}
    return load_dataset(path, COUNT, **args)


def test_prompt_jsonl_lengths_as_tokenized() -> None:
    ds = _load(DATA / "prompts.jsonl")
    lines = [json.loads(x) for x in (DATA / "prompts.jsonl").read_text().splitlines() if x]
    assert ds.format == "prompt" and len(ds.entries) == len(lines) == 6
    for e, line in zip(ds.entries, lines, strict=True):
        assert e.text == line["prompt"]
        assert e.input_len == len(TOK.encode(line["prompt"], add_special_tokens=True).ids)
        assert e.output_len == line.get("output_len", 100)
    assert ds.output_from == "data, else workload"


def test_sharegpt_first_human_turn_and_answer_length() -> None:
    ds = _load(DATA / "sharegpt.json")
    data = json.loads((DATA / "sharegpt.json").read_text())
    assert ds.format == "sharegpt" and ds.skipped == {"too_long": 0, "no_prompt": 1}
    first = data[0]["conversations"]
    assert ds.entries[0].text == first[0]["value"]
    assert ds.entries[0].output_len == len(TOK.encode(first[1]["value"]).ids)
    # a system turn first: the human turn after it is the prompt
    assert ds.entries[2].text == "Is zero an even number?"
    assert ds.entries[3].output_len == 100  # no answer: the workload's length


def test_messages_plain_join_and_chat_template(tmp_path: Path) -> None:
    plain = _load(DATA / "messages.jsonl")
    assert plain.rendering == "role: content"
    assert plain.entries[0].text == ("system: You are a terse assistant.\nuser: How many legs "
                                     "does a spider have?\nassistant:")
    assert plain.entries[0].output_len == len(TOK.encode("Eight legs, in four pairs.").ids)
    assert plain.entries[3].output_len == 20
    # tiny-llama has a chat template; the same folder without it has none
    chat = chat_template_renderer(ensure_tiny_llama())
    assert chat is not None
    folder = tmp_path / "tok"
    shutil.copytree(ensure_tiny_llama(), folder, ignore=shutil.ignore_patterns("*.safetensors"))
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    assert chat_template_renderer(folder) is None
    ds = _load(DATA / "messages.jsonl", chat=chat)
    assert ds.rendering == "chat_template"
    assert ds.entries[1].text == "<s><|user|>Give me a word that rhymes with orange.\n<|assistant|>"
    assert ds.entries[1].input_len == COUNT(ds.entries[1].text)


def test_too_long_skipped_and_counted_output_override() -> None:
    ds = _load(DATA / "prompts.jsonl", context=70, output_len=30)
    # inputs are 29..49 tokens: those above 40 do not fit 70 with 30 out
    kept = [e.input_len for e in ds.entries]
    assert all(n + 30 <= 70 for n in kept) and ds.skipped["too_long"] == 6 - len(kept) > 0
    assert all(e.output_len == 30 for e in ds.entries) and ds.output_from == "--output-len"
    with pytest.raises(DatasetError, match="no usable entry"):
        _load(DATA / "prompts.jsonl", context=10)


def test_sample_is_seeded() -> None:
    a = _load(DATA / "prompts.jsonl", sample=3, seed=4)
    b = _load(DATA / "prompts.jsonl", sample=3, seed=4)
    assert a.entries == b.entries and len(a.entries) == 3
    others = {tuple(e.text for e in _load(DATA / "prompts.jsonl", sample=3, seed=s).entries)
              for s in range(8)}
    assert len(others) > 1
    with pytest.raises(DatasetError, match="between 1 and the 6 usable"):
        _load(DATA / "prompts.jsonl", sample=7)


@pytest.mark.parametrize("content,where", [
    ('{"prompt": "a"}\n{"prompt": ""}\n', ":2: prompt: must be a non-empty string"),
    ('{"prompt": "a", "output_len": 0}\n', ":1: output_len: must be a positive integer"),
    ('{"prompt": "a"}\nnot json\n', ":2: not valid JSON"),
    ('{"text": "a"}\n', ':1: no "prompt" or "messages" field'),
    ('{"prompt": "a"}\n{"messages": [{"role": "user", "content": "b"}]}\n', ":2: messages: "),
    ('{"messages": [{"role": "user", "content": 3}]}\n', ":1: messages[0].content: must be"),
    ('{"messages": []}\n', ":1: messages: must be a non-empty list"),
    ('[{"conversations": [{"from": "human"}]}]', ": entry 0: conversations[0]: must be"),
    ('[{"id": 1}]', ": entry 0: conversations: missing"),
    ('[{"conversations": []},', ":1: not valid JSON"),
    ("\n\n", ": the file holds no entries"),
])
def test_bad_files_name_file_line_and_field(tmp_path: Path, content: str, where: str) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    with pytest.raises(DatasetError) as exc:
        _load(f)
    assert str(exc.value).startswith(f"{f}{where}") and "\n" not in str(exc.value)


def test_missing_file() -> None:
    with pytest.raises(DatasetError, match="cannot read the dataset"):
        _load("/nonexistent/data.jsonl")


def test_compare_refuses_to_mix_datasets() -> None:
    base = {"kind": "infer-prof.run", "schema_version": 1, "run_id": "r", "summary": {},
            "config": {"model": "m", "concurrency": 4},
            "model": {"name": "m"}, "environment": {"gpu_name": "X", "gpu_count": 1}}
    fp = config_fingerprint(typed(base))
    with_none = copy.deepcopy(base)
    with_none["config"]["dataset"] = None  # a result written without a dataset
    assert config_fingerprint(typed(with_none)) == fp
    a, b = copy.deepcopy(base), copy.deepcopy(base)
    a["config"]["dataset"] = {"sha256": "aa", "path": "x.jsonl"}
    b["config"]["dataset"] = {"sha256": "bb", "path": "x.jsonl"}
    assert len({fp, config_fingerprint(typed(a)), config_fingerprint(typed(b))}) == 3
    assert differing_fields([typed(a), typed(b)])["dataset_sha256"] == ["aa", "bb"]
    assert differing_fields([typed(base), typed(a)])["dataset_sha256"] == [None, "aa"]
    assert differing_fields([typed(a), typed(copy.deepcopy(a))]) == {}




def test_workload_file_names_a_dataset_relative_to_itself(tmp_path: Path) -> None:
    from infer_prof.catalog.workloads import load_workload

    (tmp_path / "sub").mkdir()
    f = tmp_path / "sub" / "w.toml"
    f.write_text('input_len = 64\noutput_len = 16\nnum_requests = 10\ndataset = "d.jsonl"\n')
    wl = load_workload(str(f))
    assert wl.dataset == str(tmp_path / "sub" / "d.jsonl")
    assert wl.to_dict()["dataset"] == wl.dataset
    assert wl.with_overrides(num_requests=3).dataset == wl.dataset
    f.write_text('input_len = 64\noutput_len = 16\nnum_requests = 10\ndataset = 3\n')
    with pytest.raises(ValueError, match="dataset"):
        load_workload(str(f))


def test_one_sharegpt_reader(tmp_path: Path) -> None:
    """ShareGPT is read in one place (``sharegpt_conversations``): the prompts of ``--dataset``
    and the conversations of ``--turns`` both take its entries, so a bad entry reads the same
    in both; no other module picks a ShareGPT entry apart."""
    import ast

    import infer_prof
    from infer_prof.loadgen import datasets
    from infer_prof.loadgen.sessions import load_sharegpt_sessions

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"conversations": [{"from": "human", "value": "hi"}]},
                               {"conversations": [{"from": "human", "value": 3}]}]))
    with pytest.raises(DatasetError) as from_dataset:
        datasets.sharegpt_conversations(str(bad), json.loads(bad.read_text()), "not a list")
    with pytest.raises(DatasetError) as from_sessions:
        load_sharegpt_sessions(bad, len, turns=2, context=None, output_len=8, sample=None,
                               seed=0)
    assert str(from_dataset.value) == str(from_sessions.value)
    assert "entry 1: conversations[0]" in str(from_sessions.value)
    readers = set()
    package = Path(infer_prof.__file__).parent
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            key = None
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                key = node.slice.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "get" and node.args
                  and isinstance(node.args[0], ast.Constant)):
                key = node.args[0].value
            if key == "conversations":
                readers.add(str(path.relative_to(package)))
    assert readers == {"loadgen/datasets.py"}
