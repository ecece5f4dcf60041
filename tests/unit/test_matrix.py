"""The matrix file as typed cells, its one-line errors, the cell's run options, the Ray
accelerator names and the multi-node (pipeline-parallel) plan and vLLM options. The command
itself, run as a user runs it (bad input, --dry-run), is
tests/integration/test_matrix_cli.py's."""

from __future__ import annotations

import pytest

from infer_prof.catalog.gpus import catalog_document
from infer_prof.catalog.ray_accelerators import RAY_ACCELERATOR_TYPES, choose_ray_type
from infer_prof.core.planning.matrix import MatrixError, cell_run_args, parse_matrix
from infer_prof.core.planning.multinode import (
    choose_pipeline,
    multinode_engine_args,
    placement_bundles,
)

MINIMAL = {"models": ["tiny-llama"], "gpus": ["H100-SXM", "A100-80GB-SXM"],
           "concurrency": [2, 8], "input_len": 64, "output_len": 32, "num_requests": 32}


def test_the_issues_minimal_file_is_one_cell_per_model_and_gpu():
    m = parse_matrix(MINIMAL, "m.toml")
    assert [c.cell_id for c in m.cells] == ["tiny-llama/H100-SXM/default/default",
                                           "tiny-llama/A100-80GB-SXM/default/default"]
    c = m.cells[0]
    assert c.workload.concurrency == (2, 8) and c.workload.num_requests == 32
    assert cell_run_args(c, "R") == [
        "--model", "tiny-llama", "--results-dir", "R", "--no-history", "--label",
        "matrix_cell=tiny-llama/H100-SXM/default/default", "--gpu", "H100-SXM",
        "--concurrency", "2,8", "--input-len", "64", "--output-len", "32",
        "--num-requests", "32"]


def test_engines_and_workloads_multiply_the_cells():
    doc = {**MINIMAL, "engines": [{"name": "bf16", "quantization": "bf16"},
                                  {"name": "fp8", "quantization": "fp8",
                                   "engine_args": ["--max-num-seqs=64"]}],
           "workloads": [{"name": "short"}, {"name": "long", "input_len": 2048,
                                               "concurrency": 4}]}
    m = parse_matrix(doc, "m.toml")
    assert len(m.cells) == 2 * 2 * 2
    long_fp8 = [c for c in m.cells if c.engine.name == "fp8" and c.workload.name == "long"][0]
    args = cell_run_args(long_fp8, "R")
    assert args[args.index("--input-len") + 1] == "2048"
    assert args[args.index("--concurrency") + 1] == "4"
    assert "--engine-arg=--max-num-seqs=64" in args and "fp8" in args


@pytest.mark.parametrize("change,message", [
    ({"modles": ["x"]}, "m.toml: modles: unknown key"),
    ({"models": []}, "m.toml: models: must be a non-empty list of strings"),
    ({"concurrency": [2, 0]}, "m.toml: concurrency: must be a positive integer"),
    ({"num_requests": "32"}, "m.toml: num_requests: must be a positive integer, got '32'"),
    ({"input_len": None}, "m.toml: input_len: give input_len and output_len"),
    ({"engines": [{"name": "a", "quantisation": "fp8"}]}, "m.toml: engines[0].quantisation"),
    ({"engines": [{"name": "a"}, {"name": "a"}]}, "m.toml: engines[1].name: 'a' is used twice"),
    ({"frontier": True}, "m.toml: concurrency: frontier = true chooses the concurrencies"),
])
def test_bad_files_give_one_line_naming_file_key_and_problem(change, message):
    doc = {k: v for k, v in {**MINIMAL, **change}.items() if v is not None}
    with pytest.raises(MatrixError) as e:
        parse_matrix(doc, "m.toml")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_every_catalog_gpu_has_the_ray_type_ray_itself_derives():
    ray_rule = pytest.importorskip("ray._private.accelerators.nvidia_gpu")
    derive = ray_rule.NvidiaGPUAcceleratorManager._gpu_name_to_accelerator_type
    gpus = catalog_document()["gpus"]
    assert set(RAY_ACCELERATOR_TYPES) == set(gpus)
    for key, entry in gpus.items():
        if entry.get("nvml_names"):  # NVIDIA: the least specific type is Ray's own label
            assert RAY_ACCELERATOR_TYPES[key][-1] == derive(entry["nvml_names"][0]), key
    assert choose_ray_type("A100-80GB-SXM", {"accelerator_type:A100": 1}) == "A100"
    assert choose_ray_type("A100-80GB-SXM", {"accelerator_type:A100-80G": 1,
                                             "accelerator_type:A100": 1}) == "A100-80G"
    assert choose_ray_type("H100-SXM", {"accelerator_type:A100": 1}) is None


def test_a_model_larger_than_a_node_is_split_over_the_fewest_nodes():
    asked = []

    def fits(gpus: int) -> bool:
        asked.append(gpus)
        return gpus * 48 * 0.9 > 140  # 70B in bf16 on 48 GB GPUs

    p = choose_pipeline(fits, gpus_per_node=1, max_nodes=8)
    assert (p.tensor, p.pipeline, p.fits) == (1, 4, True) and asked == [1, 2, 3, 4]
    assert not choose_pipeline(fits, 1, 2).fits
    assert choose_pipeline(lambda g: g >= 4, gpus_per_node=2, max_nodes=4).pipeline == 2
    with pytest.raises(ValueError):
        choose_pipeline(fits, gpus_per_node=2, max_nodes=2, tensor=4)
    assert multinode_engine_args(2, 3) == ["--tensor-parallel-size=2",
                                           "--pipeline-parallel-size=3",
                                           "--distributed-executor-backend=ray"]
    bundles = placement_bundles(2, 3, "accelerator_type:L40S")
    assert len(bundles) == 6 and bundles[0] == {"GPU": 1.0, "accelerator_type:L40S": 0.001}
