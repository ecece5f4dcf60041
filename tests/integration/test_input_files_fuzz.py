"""Every input file parser, fed generated garbage (hypothesis): it either reads the file or
raises its own error (:data:`PARSERS`), whose text is ONE line naming the file and the problem,
short enough to read; never another exception (which the CLI would print as a traceback).

Garbage: random bytes; valid files truncated at any byte; valid lines with random JSON values
(wrong types, unknown keys, deep nesting, huge numbers) put in at any line; random TOML tables.
The parsers are called directly (the CLI's exit 2 for their errors is tested in
test_bad_input_files.py). A few fixed cases: a missing field on line 40 000 is named by that
line; a 2 MB line; an empty file.

Here, not in tests/unit: about 2,800 generated files and a few of 45,000 lines or 2 MB take
15-20 s on the 2-core VM, too long for ``make unit``.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infer_prof.catalog.prices import PriceFileError, load_prices
from infer_prof.catalog.workloads import load_file
from infer_prof.core.workload.workload_fields import WorkloadError
from infer_prof.loadgen.datasets import DatasetError, load_dataset
from infer_prof.loadgen.traces import TraceError, load_trace
from infer_prof.run.config import ConfigError
from infer_prof.run.multi_endpoint import load_endpoints_file

pytestmark = pytest.mark.integration

FUZZ = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
#: An error line is this long at most (values quoted in it are cut short).
MAX_MESSAGE = 600


def read_dataset(path: Path) -> object:
    return load_dataset(path, lambda t: len(t.encode("utf-8")), chat=None, context=None,
                        output_len=None, default_output=lambda rng: 8, sample=None, seed=0)


#: name -> (parse the file at a path, the error it may raise, a valid file's text, suffix)
PARSERS: dict[str, tuple[Callable[[Path], object], type[Exception], str, str]] = {
    "dataset-prompt": (read_dataset, DatasetError,
                       '{"prompt": "hello there", "output_len": 4}\n'
                       '{"prompt": "general kenobi"}\n', ".jsonl"),
    "dataset-messages": (read_dataset, DatasetError,
                         '{"messages": [{"role": "user", "content": "hi"}, '
                         '{"role": "assistant", "content": "yo"}]}\n', ".jsonl"),
    "dataset-sharegpt": (read_dataset, DatasetError,
                         '[{"conversations": [{"from": "human", "value": "hi"}, '
                         '{"from": "gpt", "value": "hello"}]}]\n', ".json"),
    "trace-mooncake": (lambda p: load_trace(p), TraceError,
                       '{"timestamp": 0, "input_length": 10, "output_length": 5, '
                       '"hash_ids": [1, 2]}\n{"timestamp": 250, "input_length": 7, '
                       '"output_length": 3}\n', ".jsonl"),
    "trace-azure": (lambda p: load_trace(p), TraceError,
                    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n",
                    ".csv"),
    "workload": (lambda p: load_file(str(p)), WorkloadError,
                 'name = "chat"\ninput_len = 128\noutput_len = 64\nnum_requests = 10\n'
                 '[arrival]\nmode = "closed"\nconcurrency = 4\n', ".toml"),
    "prices": (lambda p: load_prices(p), PriceFileError,
               "provider,gpu,gpu_count,on_demand_usd_per_hour,spot_usd_per_hour,purchase_usd,"
               "source,date\nrunpod,H100-SXM,1,2.49,,,test,2026-01\n",
               ".csv"),
    "endpoints": (lambda p: load_endpoints_file(str(p)), ConfigError,
                  '[[endpoint]]\nurl = "http://127.0.0.1:8000"\ngpu = "H100-SXM"\n'
                  'gpu_count = 1\nprice_per_hour = 2.5\n', ".toml"),
}


def check(name: str, folder: Path, data: bytes) -> str | None:
    """Write ``data`` as the parser's input and parse it: returns the error line, or None when
    it parsed. Fails the test on any other exception or a message that is not one short line
    naming the file."""
    parse, error, _, suffix = PARSERS[name]
    path = folder / f"input{suffix}"
    path.write_bytes(data)
    try:
        parse(path)
    except error as exc:
        msg = str(exc)
        assert "\n" not in msg and "\r" not in msg, f"{name}: not one line: {msg[:300]!r}"
        assert str(path) in msg or path.name in msg, f"{name}: file not named: {msg[:300]!r}"
        assert len(msg) <= MAX_MESSAGE, f"{name}: {len(msg)} characters: {msg[:300]!r}..."
        return msg
    return None


json_scalars = (st.none() | st.booleans() | st.integers() | st.floats()
                | st.text(max_size=30) | st.integers(min_value=10**30, max_value=10**40))
json_values = st.recursive(json_scalars, lambda kids: st.lists(kids, max_size=4)
                           | st.dictionaries(st.text(max_size=10), kids, max_size=4),
                           max_leaves=12)
#: the keys the parsers know, so that wrong types of known fields are tried, not only unknowns
KNOWN_KEYS = ["prompt", "output_len", "messages", "role", "content", "conversations", "from",
              "value", "timestamp", "input_length", "output_length", "hash_ids", "url", "gpu",
              "gpu_count", "price_per_hour", "label", "insecure", "name", "input_len",
              "num_requests", "arrival", "mode", "concurrency", "rate", "kind", "endpoint"]
json_objects = st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=8), json_values,
                               max_size=6)


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_a_valid_file_parses(name: str, tmp_path: Path) -> None:
    assert check(name, tmp_path, PARSERS[name][2].encode()) is None


@pytest.mark.parametrize("name", sorted(PARSERS))
@FUZZ
@given(data=st.binary(max_size=400))
def test_random_bytes(name: str, data: bytes, tmp_path: Path) -> None:
    check(name, tmp_path, data)


@pytest.mark.parametrize("name", sorted(PARSERS))
@FUZZ
@given(cut=st.integers(min_value=0, max_value=10_000), junk=st.binary(max_size=8))
def test_truncated_file(name: str, cut: int, junk: bytes, tmp_path: Path) -> None:
    valid = PARSERS[name][2].encode()
    check(name, tmp_path, valid[: cut % (len(valid) + 1)] + junk)


@pytest.mark.parametrize("name", sorted(PARSERS))
@FUZZ
@given(where=st.integers(min_value=0, max_value=5), obj=json_values | json_objects)
def test_a_json_line_of_any_shape(name: str, where: int, obj: Any, tmp_path: Path) -> None:
    lines = PARSERS[name][2].splitlines()
    lines.insert(where % (len(lines) + 1), json.dumps(obj))
    check(name, tmp_path, ("\n".join(lines) + "\n").encode())


toml_keys = st.sampled_from(KNOWN_KEYS) | st.text(string.ascii_lowercase + "_", min_size=1,
                                                  max_size=8)
toml_scalars = (st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
                | st.floats() | st.text(string.printable, max_size=20))


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if v != v else ("inf" if v == float("inf") else
                                     "-inf" if v == float("-inf") else repr(v))
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(v) if isinstance(v, str) else str(v)


@pytest.mark.parametrize("name", ["workload", "endpoints"])
@FUZZ
@given(table=st.sampled_from(["", "[arrival]", "[[endpoint]]", "[slo]", "[input_len]",
                              "[shared_prefix]"]),
       pairs=st.dictionaries(toml_keys, toml_scalars | st.lists(toml_scalars, max_size=3),
                             max_size=6),
       keep=st.booleans())
def test_toml_tables_of_any_shape(name: str, table: str, pairs: dict[str, Any], keep: bool,
                                  tmp_path: Path) -> None:
    body = "\n".join(f"{k} = {_toml_value(v)}" for k, v in pairs.items())
    head = PARSERS[name][2] if keep else ""
    check(name, tmp_path, f"{head}\n{table}\n{body}\n".encode())


@pytest.mark.parametrize("name", ["prices", "trace-azure"])
@FUZZ
@given(rows=st.lists(st.lists(st.text(string.printable, max_size=12), max_size=7), max_size=5))
def test_csv_rows_of_any_shape(name: str, rows: list[list[str]], tmp_path: Path) -> None:
    header = PARSERS[name][2].splitlines()[0]
    body = "\n".join(",".join(cells) for cells in rows)
    check(name, tmp_path, f"{header}\n{body}\n".encode())


# --------------------------------------------------------------------------- fixed cases

#: (parser, a valid line, the same line without a field it must have)
LINE_40000 = {
    "dataset-prompt": ('{"prompt": "p", "output_len": 3}', '{"output_len": 3}'),
    "trace-mooncake": ('{"timestamp": 1, "input_length": 5, "output_length": 2}',
                       '{"timestamp": 1, "input_length": 5}'),
    "trace-azure": ("2023-11-16 18:15:46.68,374,44", "2023-11-16 18:15:46.68,374"),
    "prices": ("runpod,H100-SXM,1,2.49,,,test,2026-01", ",H100-SXM,1,2.49,,,test,2026-01"),
}


@pytest.mark.parametrize("name", sorted(LINE_40000))
def test_a_missing_field_on_line_40000_is_named_by_its_line(name: str, tmp_path: Path) -> None:
    good, bad = LINE_40000[name]
    header = PARSERS[name][2].splitlines()[0] if name in ("trace-azure", "prices") else None
    lines = ([header] if header else []) + [good] * 45_000
    lines[39_999] = bad  # line 40 000 of the file
    msg = check(name, tmp_path, ("\n".join(lines) + "\n").encode())
    assert msg is not None
    assert ":40000" in msg or "line 40000" in msg, msg


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_an_empty_file_is_one_line(name: str, tmp_path: Path) -> None:
    assert check(name, tmp_path, b"") is not None
    assert check(name, tmp_path, b"\n\n  \n") is not None


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_a_huge_line_is_one_short_line(name: str, tmp_path: Path) -> None:
    """A 2 MB line (a value far too long, or one unbroken string): the error quotes a short
    part of it, not all of it."""
    huge = "x" * 2_000_000
    for text in (f'{{"prompt": 5, "output_len": "{huge}"}}\n', f"{huge}\n",
                 f'name = "{huge}"\ninput_len = "{huge}"\n'):
        check(name, tmp_path, text.encode())


def test_deep_nesting_is_an_error_not_a_crash(tmp_path: Path) -> None:
    """JSON nested deeper than Python's recursion limit (json raises RecursionError)."""
    deep = "[" * 100_000 + "]" * 100_000
    for name in ("dataset-prompt", "dataset-sharegpt", "trace-mooncake"):
        line = deep if name == "dataset-sharegpt" else '{"prompt": ' + deep + "}"
        check(name, tmp_path, (line + "\n").encode())
