"""One writer of the concurrency tests, run as its own process:

    python -m tests.integration.history_writer LOCATION WORKER COUNT GO_FILE RESULT_DIR

Waits for GO_FILE (all writers start at once), then records COUNT results of :func:`result`
into LOCATION through the same path a run uses (``record_result``: summary, metrics, labels
and the result file).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from infer_prof.results.loading import record_result

CONFIGS = 4  # results cycle through 4 configurations (concurrency 1, 2, 3, 4)


def seq(worker: int, i: int, workers: int = 8) -> int:
    """A global sequence number: the runs of all writers interleave in time."""
    return i * workers + worker


def result(worker: int, i: int) -> dict[str, Any]:
    n = seq(worker, i)
    return {
        "kind": "infer-prof.run",
        "schema_version": 1,
        "run_id": f"w{worker}-r{i:03d}",
        "started_at": f"2026-03-01T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}+00:00",
        "complete": True,
        "config": {
            "model": "tiny-llama",
            "concurrency": 1 + i % CONFIGS,
            "input_len": 32,
            "output_len": 16,
        },
        "labels": {"writer": str(worker)},
        "model": {"name": "tiny-llama"},
        "environment": {"gpu_name": None, "cpu": "Xeon", "git_revision": "abc"},
        "summary": {"output_throughput": float(1000 + n), "ttft_ms": {"p50": 20.0 + n % 7}},
    }


def main() -> None:
    location, worker, count, go, folder = sys.argv[1:6]
    w, folder_p = int(worker), Path(folder)
    deadline = time.monotonic() + 120
    while not Path(go).exists():
        if time.monotonic() > deadline:
            sys.exit("never told to go")
        time.sleep(0.01)
    for i in range(int(count)):
        r = result(w, i)
        path = folder_p / f"{r['run_id']}.json"
        path.write_text(json.dumps(r, indent=2) + "\n")
        record_result(location, r, path)


if __name__ == "__main__":
    main()
