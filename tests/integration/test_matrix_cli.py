"""``infer-prof matrix FILE`` as a user runs it, in a fresh interpreter: a bad file exits 2 with
one line before anything starts; ``--dry-run`` prints each cell's plan (pipeline parallel over
nodes for a model larger than one, ``--frontier`` passed on to the cell's run).

Here, not in tests/unit (where the matrix file, its cells and the multi-node plan are): each case
starts ``python -m infer_prof``, 0.4-0.6 s on the 2-core VM.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_matrix_cli_bad_input_exits_2_before_anything_starts(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text('models = ["tiny-llama"]\ngpus = ["H900"]\ninput_len = 8\noutput_len = 8\n')
    p = subprocess.run([sys.executable, "-m", "infer_prof", "matrix", str(f), "--results-dir",
                        str(tmp_path / "r")], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 2
    assert p.stderr.startswith(f"error: {f}: gpus[0]: unknown GPU 'H900'")
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_dry_run_plans_pipeline_parallel_for_70b_on_l40s_nodes(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text('models = ["llama-2-70b"]\ngpus = ["L40S"]\nmax_nodes = 4\nconcurrency = 8\n'
                 'input_len = 512\noutput_len = 128\n[[engines]]\nname = "bf16"\n'
                 'quantization = "bf16"\n')
    p = subprocess.run([sys.executable, "-m", "infer_prof", "matrix", str(f), "--dry-run"],
                       capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0, p.stderr
    assert "pipeline parallel over 4 nodes of 1 x L40S" in p.stdout
    flat = " ".join(p.stdout.split())
    assert ("--gpus 4 --engine-arg=--tensor-parallel-size=1 --engine-arg=--pipeline-parallel-"
            "size=4 --engine-arg=--distributed-executor-backend=ray") in flat
    assert json.dumps({"GPU": 1.0, "accelerator_type:L40S": 0.001}).replace('"', "'") in p.stdout


def test_frontier_cells_need_a_run_with_frontier(tmp_path):
    from infer_prof.run.matrix_cell import supports_frontier

    f = tmp_path / "m.toml"
    f.write_text('models = ["llama-2-7b"]\ngpus = ["cpu"]\nfrontier = true\ninput_len = 8\n'
                 'output_len = 8\n')
    p = subprocess.run([sys.executable, "-m", "infer_prof", "matrix", str(f), "--dry-run"],
                       capture_output=True, text=True, cwd=REPO)
    if supports_frontier():  # the installed run has --frontier: the cell passes it on
        assert p.returncode == 0 and "--frontier" in p.stdout, p.stderr
    else:
        assert p.returncode == 2
        assert p.stderr.startswith(f"error: {f}: frontier: frontier = true needs infer-prof "
                                   "run --frontier")
