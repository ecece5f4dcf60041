"""Bad input to `infer-prof run`: one clear line, exit code 2, before anything starts."""

import pytest
from typer.testing import CliRunner

from infer_prof.cli import app

runner = CliRunner()


def run(*args):
    # --endpoint points nowhere: if validation let anything through, the run would fail
    # differently (exit 1, "did not answer"), so exit 2 proves nothing started
    return runner.invoke(app, ["run", "--no-progress", *args])


def one_error_line(result):
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_unknown_alias_lists_known_ones():
    r = run("--model", "llama-9-1b")
    assert r.exit_code == 2
    line = one_error_line(r)
    assert "llama-9-1b" in line and "llama-2-7b" in line and "tiny-llama" in line


def test_missing_model_directory(tmp_path):
    r = run("--model", str(tmp_path / "nope"))
    assert r.exit_code == 2
    assert "does not exist" in one_error_line(r)


def test_directory_without_config(tmp_path):
    r = run("--model", str(tmp_path))
    assert r.exit_code == 2
    assert "config.json" in one_error_line(r)


@pytest.mark.parametrize("flag", ["--concurrency", "--input-len", "--output-len", "--num-requests"])
@pytest.mark.parametrize("value", ["0", "-3"])
def test_non_positive_values(flag, value):
    r = run("--model", "llama-2-7b", "--endpoint", "http://127.0.0.1:9", flag, value)
    assert r.exit_code == 2
    assert flag in one_error_line(r)


def test_output_beyond_context():
    r = run(
        "--model",
        "llama-2-7b",
        "--endpoint",
        "http://127.0.0.1:9",
        "--input-len",
        "4000",
        "--output-len",
        "200",
    )
    assert r.exit_code == 2
    line = one_error_line(r)
    assert "4200" in line and "4096" in line


def test_bad_label_and_size():
    assert run("--label", "novalue").exit_code == 2
    assert run("--kv-cache-memory", "lots").exit_code == 2


def test_other_schemes_and_a_missing_ca_bundle_are_refused_with_the_fix():
    # (https:// itself is supported since the TLS work: tests/integration/test_tls.py)
    r = run("--model", "llama-2-7b", "--endpoint", "ftp://example.invalid")
    assert r.exit_code == 2
    assert "https://" in one_error_line(r)
    r = run("--model", "llama-2-7b", "--endpoint", "https://example.invalid",
            "--ca-bundle", "/nonexistent/ca.pem")
    assert r.exit_code == 2
    assert "--ca-bundle /nonexistent/ca.pem" in one_error_line(r)


def test_unreachable_endpoint_is_a_start_failure_not_bad_input():
    r = run("--model", "llama-2-7b", "--endpoint", "http://127.0.0.1:9")
    assert r.exit_code == 1
    assert "did not answer" in r.stderr
