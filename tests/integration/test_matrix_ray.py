"""`infer-prof matrix --ray` on a real three-raylet Ray cluster kept on loopback: the cluster
lives in a network and PID namespace of its own (``unshare --net --pid --fork --mount-proc``),
so no byte leaves 127.0.0.1 and every Ray process dies with the namespace. The scenarios run in
one cluster (``matrix_ray_scenarios.py``, about 2 minutes); each test asserts one behaviour."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent
PY = os.environ.get("INFER_PROF_RAY_PYTHON", sys.executable)


def _can_run() -> str | None:
    if subprocess.run([PY, "-c", "import ray"], capture_output=True).returncode != 0:
        return "Ray is not installed (scripts/install_ray.sh installs it)"
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return "needs root, unshare and ip for a private network namespace"
    return None


@pytest.fixture(scope="module")
def seen(tmp_path_factory):
    why = _can_run()
    if why:
        pytest.skip(why)
    out = tmp_path_factory.mktemp("ray") / "seen.json"
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1]), "RAY_USAGE_STATS_ENABLED": "0"}
    p = subprocess.run(["unshare", "--net", "--pid", "--fork", "--mount-proc", PY,
                        str(HERE / "matrix_ray_scenarios.py"), str(out)],
                       env=env, capture_output=True, text=True, timeout=900)
    assert out.exists(), p.stderr[-3000:]
    return json.loads(out.read_text())


def test_each_cell_runs_on_a_node_of_its_type_and_comes_home(seen):
    s = seen["place"]
    assert s["rc"] == 0, s["stderr"]
    placed = {r["matrix"]["cell"]["gpu"]: r["matrix"]["placement"] for r in s["results"]}
    assert placed["H100-SXM"]["accelerator_type"] == "H100"
    assert placed["A100-80GB-SXM"]["accelerator_type"] == "A100"
    assert placed["H100-SXM"]["node_id"] != placed["A100-80GB-SXM"]["node_id"]
    assert all(r["complete"] and r["summary"]["requests_completed"] == 16 for r in s["results"])
    assert s["history_rows"] == 2
    assert "GPU" in s["stdout"] and "A100-80GB-SXM" in s["stdout"]  # the comparison table


def test_a_gpu_type_the_cluster_lacks_is_said_before_anything_starts(seen):
    s = seen["lacks"]
    assert s["rc"] == 2
    assert "error: the Ray cluster has no H200 node (accelerator_type:H200)" in s["stderr"]
    assert s["files"] == []


def test_a_node_lost_mid_cell_is_recorded_incomplete_and_retried(seen):
    s = seen["lost"]
    assert s["killed"], s["stderr"]
    by_attempt = {r["matrix"]["attempt"]: r for r in s["results"]}
    assert by_attempt[1]["complete"] is False
    assert "lost mid-cell" in by_attempt[1]["incomplete_reason"]
    assert by_attempt[1]["matrix"]["placement"]["node_id"].startswith(s["node"][0])
    assert by_attempt[2]["complete"] is True, (by_attempt[2].get("incomplete_reason"), s["stderr"])
    assert by_attempt[2]["matrix"]["placement"]["accelerator_type"] == "H100"
    assert not by_attempt[2]["matrix"]["placement"]["node_id"].startswith(s["node"][0])
    assert s["rc"] == 0, s["stderr"]


def test_ctrl_c_cancels_every_cell_and_leaves_no_run(seen):
    s = seen["stop"]
    assert s["running_before"] == 2
    assert s["rc"] == 130, s["stderr"]
    assert s["running_after"] == 0
    reasons = [r["incomplete_reason"] for r in s["results"]]
    assert len(reasons) == 2 and all("interrupted" in (x or "") for x in reasons)


def test_a_node_with_another_infer_prof_version_is_refused(seen):
    s = seen["version"]
    assert seen["l40s_alive_after_s"] is not None, "the L40S raylet never registered"
    assert s["rc"] == 2, s["stderr"][-3000:]
    assert "has infer-prof 9.9.0.1.0, this driver 0.1.0" in s["stderr"]
