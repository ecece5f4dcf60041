"""A bad input file on the command line: exit 2 with ONE line naming the file, the line and the
problem, before anything is sent (the endpoint here does not even listen: an error about it
would mean the file was read too late), and no traceback.

The parsers themselves are fuzzed in test_input_files_fuzz.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import cli

DEAD = "http://127.0.0.1:9"  # nothing listens on the discard port
RUN = ("run", "--model", "tiny-llama", "--no-progress", "--endpoint", DEAD, "-n", "4")

#: option, file name, content, what the one line must contain (besides the file's name)
CASES = [
    ("--dataset", "d.jsonl", b'{"prompt": "a"}\n' * 39_999 + b'{"output_len": 3}\n', ":40000"),
    ("--dataset", "d.jsonl", b"\x80\x81\x00binary", "not UTF-8"),
    ("--dataset", "d.json", b'[{"conversations": [{"from": "human", "val', "not valid JSON"),
    ("--dataset", "d.jsonl", b'{"prompt": "a", "output_len": "' + b"9" * 3_000_000 + b'"}\n',
     ":1: output_len"),
    ("--trace", "t.jsonl", b'{"timestamp": 0, "input_length": 5, "output_length": 2}\n' * 3
     + b'{"timestamp": 1, "input_length": [1]}\n', ":4"),
    ("--trace", "t.csv", b"TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n1," + b"2" * 200_000
     + b",3\n", ":3: not valid CSV"),
    ("--workload", "w.toml", b'name = "w"\ninput_len = "many"\noutput_len = 5\nnum_requests = 3\n',
     "field 'input_len"),
    ("--workload", "w.toml", b"", "missing"),
    ("--workload", "w.toml", b'name = "w"\ninput_len = [[[[1\n', "not valid TOML"),
    ("--endpoints", "e.toml", b"\xff\xfe\x00\x01", "not UTF-8"),
    ("--endpoints", "e.toml", b'[[endpoint]]\nurl = "http://a"\nspeed = 3\n', "unknown key"),
    ("--prices", "p.csv", b"provider,gpu\n", "header"),
]


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr[:2000]
    assert lines[0].startswith("error: "), lines[0]
    assert len(lines[0]) < 700, lines[0][:300]
    return lines[0]


@pytest.mark.parametrize(("option", "name", "content", "expected"), CASES,
                         ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_a_bad_file_is_one_line_and_exit_2_before_anything_starts(
    tmp_path: Path, option: str, name: str, content: bytes, expected: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    extra = ("--gpu", "H100-SXM") if option == "--prices" else ()
    args = (*RUN, option, str(path), *extra)
    if option == "--endpoints":  # instead of --endpoint
        args = ("run", "--model", "tiny-llama", "--no-progress", "-n", "4", option, str(path))
    p = cli(*args, timeout=300)
    assert p.returncode == 2, p.stderr[-2000:]
    line = one_error_line(p.stderr)
    assert name in line and expected in line, line
    assert "did not answer" not in line


def test_prices_command_with_a_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_bytes(b"provider,gpu,gpu_count,on_demand_usd_per_hour,spot_usd_per_hour,"
                     b"purchase_usd,source,date\n" + b"runpod,H100-SXM,1,2.49,,,x,2026-01\n" * 9
                     + b"runpod,H100-SXM,many,2.49,,,x,2026-01\n")
    p = cli("prices", "--prices", str(path))
    assert p.returncode == 2, p.stderr
    line = one_error_line(p.stderr)
    assert "p.csv line 11" in line and "gpu_count" in line, line
