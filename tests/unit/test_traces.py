"""Trace files: Azure CSV and Mooncake JSONL, windows, time scale, skips and bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infer_prof.loadgen.traces import TraceError, load_trace, parse_window

AZURE = ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
         "2023-11-16 18:15:46.6805900,374,44\n"
         "2023-11-16 18:15:50.9951690,396,109\n"
         "2023-11-16 18:15:48.2500000,879,0\n"
         "2023-11-16 18:15:52.0000000,3000,200\n")


def test_azure_sorted_offsets_and_too_long(tmp_path: Path) -> None:
    f = tmp_path / "azure.csv"
    f.write_text(AZURE)
    t = load_trace(f, context=2048)
    assert t.format == "azure"
    assert t.skipped == {"too_long": 1, "no_input": 0, "no_output": 1}
    assert t.input_lens == [374, 396] and t.output_lens == [44, 109]
    assert t.offsets == pytest.approx([0.0, 4.3145790], abs=1e-6)
    assert t.scheduled_rate() == pytest.approx(1 / 4.314579)
    half = load_trace(f, time_scale=0.5, context=None)
    assert half.offsets[-1] == pytest.approx((52.0 - 46.68059) * 0.5, abs=1e-6)
    assert len(half.offsets) == 3


def test_mooncake_window(tmp_path: Path) -> None:
    f = tmp_path / "mc.jsonl"
    rows = [{"timestamp": 1000 * i, "input_length": 10 + i, "output_length": 5,
             "hash_ids": [i]} for i in range(10)]
    f.write_text("\n".join(json.dumps(r) for r in rows[::-1]) + "\n")
    t = load_trace(f, window=parse_window("2:5"))
    assert t.format == "mooncake" and t.input_lens == [12, 13, 14]
    assert t.offsets == [0.0, 1.0, 2.0] and t.to_dict()["window_s"] == [2.0, 5.0]
    assert load_trace(f, window=parse_window(":3")).input_lens == [10, 11, 12]
    assert len(load_trace(f, window=parse_window("7:")).offsets) == 3


@pytest.mark.parametrize("text", ["5", "a:b", "5:2", "-1:3", "1:2:3"])
def test_bad_windows(text: str) -> None:
    with pytest.raises(ValueError, match="--trace-window"):
        parse_window(text)


@pytest.mark.parametrize("name,content,where", [
    ("a.csv", "TIMESTAMP,ContextTokens\n1,2\n", ":1: GeneratedTokens: missing column"),
    ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\nyesterday,2,3\n",
     ":3: TIMESTAMP: not a date-time"),
    ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,-3\n",
     ":2: GeneratedTokens: must be a whole number"),
    ("m.jsonl", '{"timestamp": 1, "input_length": 2, "output_length": 3}\n{"timestamp": 2}\n',
     ":2: input_length: missing"),
    ("m.jsonl", '{"timestamp": "x", "input_length": 2, "output_length": 3}\n',
     ":1: timestamp: must be a number"),
    ("m.jsonl", '{"timestamp": 1, "input_length": 2.5, "output_length": 3}\n',
     ":1: input_length: must be a whole number"),
    ("m.jsonl", '{"timestamp": 1, "input_length": 2, "output_length": 3}\n{oops\n',
     ":2: not valid JSON"),
])
def test_bad_files_name_file_line_and_field(tmp_path: Path, name: str, content: str,
                                            where: str) -> None:
    f = tmp_path / name
    f.write_text(content)
    with pytest.raises(TraceError) as exc:
        load_trace(f)
    assert str(exc.value).startswith(f"{f}{where}") and "\n" not in str(exc.value)


def test_empty_window_and_bad_scale(tmp_path: Path) -> None:
    f = tmp_path / "azure.csv"
    f.write_text(AZURE)
    with pytest.raises(TraceError, match="no usable request"):
        load_trace(f, window=(100.0, None))
    with pytest.raises(TraceError, match="--time-scale"):
        load_trace(f, time_scale=0)
