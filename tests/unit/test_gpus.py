"""GPU catalog: every canonical key with its figures and their sources; name matching; NVML."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from infer_prof.catalog.gpus import (
    DetectedGpu,
    catalog,
    catalog_document,
    detect_gpus,
    find_gpu,
    match_gpu_name,
)
from infer_prof.core.catalog.gpus import GIB, SPEC_FIGURES, GpuSpec, normalize_gpu_name

#: The GPUs the seed articles name: the catalog must hold each (the package's own key list is
#: the catalog's, catalog.gpus.CANONICAL_GPU_KEYS, so it cannot be the expectation here).
CANONICAL_GPU_KEYS: tuple[str, ...] = (
    "RTX-4090", "RTX-3090", "RTX-5090", "A4000", "A5000", "A6000", "RTX-6000-Ada", "L40", "L40S",
    "A100-40GB-PCIe", "A100-80GB-PCIe", "A100-40GB-SXM", "A100-80GB-SXM", "H100-PCIe", "H100-SXM",
    "H100-NVL", "H200", "V100", "MI100",
)

SEED_FILE = re.compile(r"\b(\d{3}_[0-9a-f]{16}\.txt)\b")


def test_every_canonical_key_is_in_the_catalog_with_its_core_figures():
    cat = catalog()
    missing = [k for k in CANONICAL_GPU_KEYS if k not in cat]
    assert missing == []
    for key in CANONICAL_GPU_KEYS:
        g = cat[key]
        assert g.memory_gib > 0, key
        assert g.memory_bandwidth_gbps > 0, key
        assert g.compute_capability, key
        assert g.tdp_watts > 0, key
        assert g.architecture, key
        assert g.vendor in ("NVIDIA", "AMD"), key


def test_every_figure_names_a_source_and_seed_citations_are_real_seed_files():
    seeds = set(catalog_document()["_seeds"])
    assert len(seeds) == 5
    for key, g in catalog().items():
        sources = g.source_map
        assert sorted(sources) == sorted(SPEC_FIGURES), key
        for figure, text in sources.items():
            assert text.strip(), (key, figure)
            for cited in SEED_FILE.findall(text):
                assert cited in seeds, (key, figure, cited)


def test_catalog_cites_the_seeds_where_they_state_a_figure():
    # The AIME list (seed 002) states the RTX 4090's memory, bandwidth and power.
    src = find_gpu("RTX-4090").source_map
    for figure in ("memory_gib", "memory_bandwidth_gbps", "tdp_watts"):
        assert "002_b522777045ceaeb9.txt" in src[figure]
    # DeployBase (seed 001) states the A100 80GB SXM4's 2.039 TB/s and 400 W.
    a100 = find_gpu("A100-80GB-SXM")
    assert a100.memory_bandwidth_gbps == 2039
    assert "001_cd298c08d48cf0a0.txt" in a100.source_map["memory_bandwidth_gbps"]


@pytest.mark.parametrize(
    ("key", "figure", "datasheet_value", "seed_said"),
    [
        ("L40", "memory_bandwidth_gbps", 864, "1 TB/s"),
        ("L40", "fp16_tflops", 181.05, "147"),
        ("L40S", "tdp_watts", 350, "300 W"),
        ("RTX-5090", "memory_bandwidth_gbps", 1792, "1,800"),
        ("A4000", "memory_bandwidth_gbps", 448, "512"),
        ("MI100", "tdp_watts", 300, "250 W"),
    ],
)
def test_seed_datasheet_disagreements_take_the_datasheet_and_say_so(
    key, figure, datasheet_value, seed_said
):
    g = find_gpu(key)
    assert getattr(g, figure) == datasheet_value
    assert any(seed_said in note for note in g.notes), g.notes


def test_tensor_figures_are_dense_not_sparse():
    # Datasheets headline 2:4-sparse figures; the catalog keeps half of them.
    assert find_gpu("H100-SXM").bf16_tflops == 1979 / 2
    assert find_gpu("H100-SXM").fp8_tflops == 3958 / 2
    assert find_gpu("H100-PCIe").bf16_tflops == 1513 / 2
    assert find_gpu("A100-80GB-SXM").bf16_tflops == 624 / 2
    assert find_gpu("L40S").fp8_tflops == 1466 / 2
    assert find_gpu("A6000").fp16_tflops == pytest.approx(309.7 / 2, abs=0.06)
    # No FP8 before Ada, no BF16 on Volta.
    for key in ("A100-40GB-PCIe", "A100-80GB-SXM", "RTX-3090", "A6000", "V100", "MI100"):
        assert find_gpu(key).fp8_tflops is None, key
    assert find_gpu("V100").bf16_tflops is None


def test_memory_is_binary_gib():
    assert find_gpu("A100-80GB-SXM").memory_bytes == 80 * 1024**3
    assert find_gpu("H200").memory_bytes == 141 * GIB
    assert find_gpu("RTX-4090").memory_bytes == 24 * GIB


def test_compute_capability_and_fp8_support():
    assert find_gpu("A100-80GB-SXM").cuda_capability == (8, 0)
    assert find_gpu("RTX-4090").cuda_capability == (8, 9)
    assert find_gpu("RTX-5090").cuda_capability == (12, 0)
    assert find_gpu("MI100").cuda_capability is None
    supports = {k: catalog()[k].supports_fp8 for k in CANONICAL_GPU_KEYS}
    assert {k for k, v in supports.items() if v} == {
        "RTX-4090", "RTX-5090", "RTX-6000-Ada", "L40", "L40S", "H100-PCIe", "H100-SXM",
        "H100-NVL", "H200",
    }


@pytest.mark.parametrize(
    ("nvml_name", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB-SXM"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB-SXM"),
        ("A100-SXM4-40GB", "A100-40GB-SXM"),  # older drivers drop the NVIDIA prefix
        ("NVIDIA A100-PCIE-40GB", "A100-40GB-PCIe"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIe"),
        ("NVIDIA GeForce RTX 4090", "RTX-4090"),
        ("GeForce RTX 3090", "RTX-3090"),
        ("NVIDIA GeForce RTX 5090", "RTX-5090"),
        ("NVIDIA RTX A6000", "A6000"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA H200", "H200"),
        ("Tesla V100-PCIE-16GB", "V100"),
    ],
)
def test_nvml_names_match_their_catalog_entry(nvml_name, key):
    spec = match_gpu_name(nvml_name)
    assert spec is not None and spec.key == key


@pytest.mark.parametrize(
    "other",
    ["NVIDIA GeForce RTX 4090 Laptop GPU", "Tesla V100-SXM2-16GB", "NVIDIA B100", "NVIDIA A2"],
)
def test_different_products_do_not_match(other):
    assert match_gpu_name(other) is None


def test_every_nvml_name_in_the_catalog_matches_its_own_entry():
    for key, g in catalog().items():
        for name in g.nvml_names:
            spec = match_gpu_name(name)
            assert spec is not None and spec.key == key, name


@pytest.mark.parametrize("text", ["RTX-4090", "rtx 4090", "RTX_4090", "rtx4090", "4090"])
def test_find_gpu_is_tolerant_of_case_spaces_dashes_underscores(text):
    assert find_gpu(text).key == "RTX-4090"


def test_find_gpu_aliases():
    assert find_gpu("H100-SXM5").key == "H100-SXM"
    assert find_gpu("a100_80gb_sxm").key == "A100-80GB-SXM"
    assert find_gpu("rtx 6000 ada").key == "RTX-6000-Ada"


def test_find_gpu_unknown_lists_known_keys():
    with pytest.raises(ValueError) as info:
        find_gpu("GTX-970")
    message = str(info.value)
    assert "GTX-970" in message
    assert "H100-SXM" in message and "RTX-4090" in message


def test_normalize_gpu_name():
    assert normalize_gpu_name("NVIDIA A100-SXM4-80GB") == "a100sxm480gb"
    assert normalize_gpu_name("a100_sxm4 80gb") == "a100sxm480gb"


def test_gpuspec_rejects_an_entry_missing_a_field():
    with pytest.raises(ValueError, match="memory_gib"):
        GpuSpec.from_dict("X", {"name": "x", "vendor": "NVIDIA", "architecture": "a",
                                "compute_capability": "8.0", "memory_bandwidth_gbps": 1,
                                "tdp_watts": 1, "nvlink": False})


class _FakeNvml:
    """Stands in for pynvml: the calls detect_gpus makes, nothing else."""

    class NVMLError(Exception):
        pass

    def __init__(self, devices, fail_init=False):
        self.devices = devices
        self.fail_init = fail_init
        self.shutdown_calls = 0

    def nvmlInit(self):
        if self.fail_init:
            raise self.NVMLError("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        self.shutdown_calls += 1

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return self.devices[h][0]

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=self.devices[h][1], used=0, free=self.devices[h][1])


def test_detect_gpus_matches_each_device():
    fake = _FakeNvml([(b"NVIDIA H100 80GB HBM3", 85520809984),
                      ("NVIDIA A10G", 24146608128), ("NVIDIA A2", 15642263552)])
    found = detect_gpus(fake)
    assert found == [
        DetectedGpu("NVIDIA H100 80GB HBM3", find_gpu("H100-SXM"), 85520809984),
        DetectedGpu("NVIDIA A10G", find_gpu("A10G"), 24146608128),
        DetectedGpu("NVIDIA A2", None, 15642263552),  # not in the catalog
    ]
    assert fake.shutdown_calls == 1


def test_detect_gpus_returns_empty_without_driver():
    assert detect_gpus(_FakeNvml([], fail_init=True)) == []


def test_detect_gpus_returns_empty_without_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    assert detect_gpus() == []


def test_one_gpu_key_list_derived_from_the_catalog():
    """The package lists GPU keys once, as the catalog's: no module spells out a list of them
    (a new GPU is its gpus.json entry, then a price row), and prices use the catalog's."""
    import ast

    from infer_prof.catalog import gpus as gpus_module
    from infer_prof.catalog import prices as prices_module

    keys = set(catalog())
    assert tuple(catalog()) == gpus_module.CANONICAL_GPU_KEYS
    assert prices_module.CANONICAL_GPU_KEYS is gpus_module.CANONICAL_GPU_KEYS
    package = Path(gpus_module.__file__).resolve().parents[1]
    lists = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                named = {e.value for e in node.elts if isinstance(e, ast.Constant)} & keys
                if len(named) >= 5:
                    lines = f"{path.relative_to(package)}:{node.lineno}"
                    lists.append(lines)
    assert lists == [], f"GPU keys listed by hand (derive them from the catalog): {lists}"


def test_family_names_mean_every_variant():
    from infer_prof.catalog.gpus import find_gpus, gpu_family

    assert [g.key for g in find_gpus("A100")] == [
        "A100-40GB-PCIe", "A100-80GB-PCIe", "A100-40GB-SXM", "A100-80GB-SXM"]
    assert [g.key for g in find_gpus("h100")] == ["H100-PCIe", "H100-SXM", "H100-NVL"]
    assert [g.key for g in find_gpus("MI300X")] == ["MI300X"]
    assert gpu_family("H100-SXM") == []  # a key names one GPU
    assert [g.key for g in find_gpus("H200")] == ["H200"]  # the key wins over its family
    with pytest.raises(ValueError, match="'H100' is a GPU family: H100-PCIe, H100-SXM, H100-NVL"):
        find_gpu("H100")


def test_the_gpus_clouds_rent_are_in_the_catalog():
    for key in ("B200", "B300", "GB200", "H20", "GH200", "MI300X", "MI325X", "MI355X", "L4", "L40S",
                "A10G", "A10", "T4", "A40", "A30", "RTX-PRO-6000"):
        g = catalog()[key]
        assert g.memory_gib > 0 and g.memory_bandwidth_gbps > 0, key
    assert find_gpu("NVIDIA B200").key == "B200"
    assert find_gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition").key == "RTX-PRO-6000"
    assert find_gpu("T4g").key == "T4"


def test_fp4_only_where_the_gpu_has_it():
    fp4 = {k for k, g in catalog().items() if g.supports_fp4}
    assert fp4 == {"RTX-5090", "B200", "B300", "GB200", "GB300", "MI355X", "RTX-PRO-6000"}
    # dense, as the other tensor figures: half the sparse headline
    assert find_gpu("B200").fp4_tflops == 18000 / 2
    assert find_gpu("RTX-5090").fp4_tflops == 3352 / 2
    assert find_gpu("B200").cuda_capability == (10, 0)


def test_bf16_and_fp8_support_follow_the_architecture_where_no_tflops_are_sourced():
    # RTX A4500: no tensor TFLOPS found, but Ampere runs BF16; every GPU of 8.9 or more runs FP8.
    assert find_gpu("A4500").bf16_tflops is None and find_gpu("A4500").supports_bf16
    assert find_gpu("RTX-2000-Ada").supports_fp8 and find_gpu("RTX-4000-Ada").supports_fp8
    assert not find_gpu("T4").supports_bf16 and not find_gpu("V100-32GB").supports_fp8
    # AMD: FP8 where the GPU has it (CDNA 3/4), not on CDNA 1
    assert find_gpu("MI300X").supports_fp8 and find_gpu("MI355X").supports_fp8
    assert not find_gpu("MI100").supports_fp8


def test_tensor_figures_of_the_rented_gpus_that_had_none():
    # dense, FP32 accumulate, each from the source its entry names (gpus.json)
    a10g = find_gpu("A10G")
    assert a10g.fp16_tflops == a10g.bf16_tflops == 70.0
    assert a10g.fp8_tflops is None  # Ampere: no FP8
    ada2 = find_gpu("RTX-2000-Ada")  # NVIDIA's 191.9 TFLOPS is FP8 with sparsity: /2, /4
    assert (ada2.fp8_tflops, ada2.fp16_tflops, ada2.bf16_tflops) == (95.95, 47.98, 47.98)
    ada4 = find_gpu("RTX-4000-Ada")
    assert (ada4.fp8_tflops, ada4.fp16_tflops, ada4.bf16_tflops) == (213.81, 106.91, 106.91)
    a16 = find_gpu("A16")  # one of the board's four GPUs
    assert a16.fp16_tflops == a16.bf16_tflops == 17.9 and a16.fp8_tflops is None
    assert find_gpu("A4500").fp16_tflops is None  # not found
