"""The root cause of a failed vLLM start-up, found in recorded server logs
(tests/fixtures/vllm_logs/README.md)."""

from pathlib import Path

import pytest

from infer_prof.servers.vllm_log import (
    drop_noise,
    failure_report,
    find_tracebacks,
    parse_line,
    root_cause,
    split_lines,
)

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm_logs"
WRAPPER = "Engine core initialization failed"


def read(name: str) -> str:
    return (LOGS / name).read_text()


def test_parse_line_splits_prefix_header_and_text():
    line = parse_line(
        "(EngineCore_DP0 pid=2981) ERROR 11-20 09:12:26 [core.py:1510] EngineCore failed to start."
    )
    assert line.proc == "EngineCore_DP0 pid=2981"
    assert line.process_name == "EngineCore_DP0"
    assert (line.level, line.ts, line.loc) == ("ERROR", "11-20 09:12:26", "core.py:1510")
    assert line.text == "EngineCore failed to start."
    bare = parse_line('(APIServer pid=2714)   File "x.py", line 3, in f')
    assert bare.proc == "APIServer pid=2714" and bare.level is None
    assert bare.text == '  File "x.py", line 3, in f'
    assert parse_line("INFO:     Application startup complete.").proc is None


@pytest.mark.parametrize(
    ("log", "exception", "innermost", "proc"),
    [
        (
            "cpu-0.32-tiny-llama-kv-cache-4096.log",
            "ValueError: No available memory for the cache blocks.",
            "_check_enough_kv_cache_memory: raise ValueError(",
            "EngineCore pid=5141",
        ),
        (
            "gpu-0.26-h100-llama-2-70b-bnb-no-weights.log",
            "RuntimeError: No model weights found in: "
            "`/root/.cache/infer-prof/configs/llama-2-70b`",
            "_get_weight_files: raise RuntimeError(",
            "EngineCore_DP0 pid=2981",
        ),
        (
            "gpu-0.26-h100-llama-2-7b-no-flashinfer.log",
            "ModuleNotFoundError: No module named 'flashinfer'",
            "flashinfer_sample: import flashinfer",
            "EngineCore_DP0 pid=2981",
        ),
    ],
)
def test_root_cause_is_the_engine_traceback_not_the_wrapper(log, exception, innermost, proc):
    text = read(log)
    # what infer-prof printed before: the last 25 lines hold only the API server's wrapper
    last25 = "\n".join(text.splitlines()[-25:])
    assert WRAPPER in last25 and exception not in last25
    cause = root_cause(text)
    assert cause is not None
    assert cause.proc == proc
    assert cause.exception is not None and cause.exception.startswith(exception)
    function, code = innermost.split(": ", 1)
    assert len(cause.frames) == 3
    assert cause.frames[-1][0].endswith(f"in {function}") and cause.frames[-1][1].startswith(code)
    assert "EngineCore failed to start." in cause.errors
    assert all(WRAPPER not in e for e in cause.errors)

    report = failure_report(text)
    lines = report.splitlines()
    # the cause comes first, then the tail; the wrapper only in the tail
    assert lines[0].startswith("--- root cause")
    assert lines[1].startswith(exception)
    tail_at = lines.index("--- last lines of the server log (known-harmless lines left out) ---")
    assert tail_at > 1 and WRAPPER in "\n".join(lines[tail_at:])
    assert WRAPPER not in "\n".join(lines[:tail_at])
    assert "resource_tracker" not in report


def test_real_cpu_failure_names_the_worker_death_too():
    cause = root_cause(read("cpu-0.32-tiny-llama-kv-cache-4096.log"))
    assert cause is not None
    assert any("Worker proc VllmWorker-0 died unexpectedly" in e for e in cause.errors)
    # the same exception is logged twice (logger.exception, then multiprocessing): shown once
    assert cause.chained == []


@pytest.mark.parametrize(
    "log", ["cpu-0.32-tiny-llama-start.log", "gpu-0.26-h100-llama-2-7b-start.log"]
)
def test_a_good_start_has_no_root_cause(log):
    # the GPU start logs the harmless "Chat template warmup failed" traceback
    assert root_cause(read(log)) is None


def test_chat_template_warmup_noise_is_dropped_whole():
    lines = split_lines(read("gpu-0.26-h100-llama-2-7b-start.log"))
    kept = drop_noise(lines)
    assert any("Chat template warmup failed" in ln for ln in lines)
    assert not any("Chat template warmup failed" in ln for ln in kept)
    assert not any("Tokenizer not available" in ln or "Traceback" in ln for ln in kept)
    assert len(lines) - len(kept) == 9  # the warning, 'Traceback', 3 frames x 2, the exception
    # the next line after the noise is kept
    assert any("Starting vLLM API server 0 on" in ln for ln in kept)


def test_resource_tracker_warning_is_dropped_with_its_source_line():
    lines = [
        "RuntimeError: boom",
        "/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: "
        "resource_tracker: There appear to be 1 leaked shared_memory objects to clean up at "
        "shutdown",
        "  warnings.warn('resource_tracker: There appear to be %d '",
        "next",
    ]
    assert drop_noise(lines) == ["RuntimeError: boom", "next"]


def test_chained_exception_keeps_the_original_and_what_it_led_to():
    text = "\n".join(
        [
            "(Worker pid=7) ERROR 11-23 06:48:40 [worker.py:1] WorkerProc failed to start.",
            "(Worker pid=7) ERROR 11-23 06:48:40 [worker.py:1] Traceback (most recent call last):",
            '(Worker pid=7) ERROR 11-23 06:48:40 [worker.py:1]   File "/x/site-packages/a.py", '
            "line 3, in f",
            "(Worker pid=7) ERROR 11-23 06:48:40 [worker.py:1]     import flashinfer",
            "(Worker pid=7) ERROR 11-23 06:48:40 [worker.py:1] ModuleNotFoundError: No module "
            "named 'flashinfer'",
            "(Worker pid=7) ERROR 11-23 06:48:40 [worker.py:1] ",
            "(Worker pid=7) ERROR 11-23 06:48:40 [worker.py:1] The above exception was the direct "
            "cause of the following exception:",
            "(Worker pid=7) ERROR 11-23 06:48:40 [worker.py:1] ",
            "(Worker pid=7) ERROR 11-23 06:48:40 [worker.py:1] Traceback (most recent call last):",
            '(Worker pid=7) ERROR 11-23 06:48:40 [worker.py:1]   File "/x/site-packages/b.py", '
            "line 9, in g",
            "(Worker pid=7) ERROR 11-23 06:48:40 [worker.py:1]     raise ImportError(msg) from e",
            "(Worker pid=7) ERROR 11-23 06:48:40 [worker.py:1] ImportError: the sampler needs "
            "flashinfer",
            "(APIServer pid=1) INFO 11-23 06:48:41 [x.py:1] unrelated",
        ]
    )
    [tb] = find_tracebacks([parse_line(r) for r in split_lines(text)])
    assert tb.exceptions == [
        "ModuleNotFoundError: No module named 'flashinfer'",
        "ImportError: the sampler needs flashinfer",
    ]
    cause = root_cause(text)
    assert cause is not None
    assert cause.exception == "ModuleNotFoundError: No module named 'flashinfer'"
    assert cause.chained == ["ImportError: the sampler needs flashinfer"]
    assert cause.frames == [('File "/x/site-packages/a.py", line 3, in f', "import flashinfer")]
    rendered = "\n".join(cause.render())
    assert 'File "a.py", line 3, in f: import flashinfer' in rendered  # site-packages shortened
    assert "which led to: ImportError" in rendered
    assert cause.errors == ["WorkerProc failed to start."]


def test_a_log_without_traceback_falls_back_to_error_lines():
    text = "\n".join(
        [
            "usage: api_server.py [-h] [--model MODEL]",
            "api_server.py: error: argument --kv-cache-memory-bytes: invalid int value: 'x'",
        ]
    )
    cause = root_cause(text)
    assert cause is not None and cause.exception is None
    assert cause.errors == [
        "api_server.py: error: argument --kv-cache-memory-bytes: invalid int value: 'x'"
    ]
    report = failure_report(text)
    assert report.splitlines()[-1].startswith("api_server.py: error")  # full tail kept


def test_a_log_with_nothing_gives_only_the_tail():
    assert root_cause("INFO starting\nnothing else") is None
    assert failure_report("a\nb").splitlines() == [
        "--- last lines of the server log (known-harmless lines left out) ---",
        "a",
        "b",
    ]
