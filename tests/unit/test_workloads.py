"""Workload files: shipped ones load, bad ones fail naming file and field, overrides, sampling,
suites and their tiny scale."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from infer_prof.catalog.workloads import (
    WorkloadNotFoundError,
    expand_suite,
    list_workloads,
    load_suite,
    load_workload,
    repo_workloads_dir,
)
from infer_prof.core.workload.distributions import Fixed, LogNormal, Uniform
from infer_prof.core.workload.workload_fields import WorkloadError
from infer_prof.core.workload.workload_sampling import sample_requests, send_offsets
from infer_prof.core.workload.workloads import (
    Arrival,
    SharedPrefix,
    Workload,
)

REPO = Path(__file__).resolve().parents[2]
CANON = REPO / "workloads"
SHIPPED = REPO / "infer_prof" / "catalog" / "data" / "workloads"
WORKLOADS = ["chat", "codegen", "fixed-512-128", "rag"]

BASE = """
name = "t"
num_requests = 10
input_len = { kind = "uniform", min = 10, max = 20 }
output_len = 8
"""


def write(tmp_path: Path, text: str, name: str = "bad.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ----------------------------------------------------------------------------- shipped files


@pytest.mark.parametrize("name", WORKLOADS)
def test_every_shipped_workload_loads_by_name_and_from_package_copy(name):
    w = load_workload(name)
    assert w.name == name
    assert w.num_requests is not None and w.num_requests >= 1
    assert load_workload(str(SHIPPED / f"{name}.toml")) == w


def test_shipped_copies_match_canonical_files():
    canon = sorted(p.name for p in CANON.glob("*.toml"))
    assert canon == sorted(p.name for p in SHIPPED.glob("*.toml"))
    for name in canon:
        assert (CANON / name).read_bytes() == (SHIPPED / name).read_bytes(), (
            f"{name} differs: run python -m infer_prof.catalog.workloads --sync")


def test_one_workload_folder_shipped_as_package_data():
    """The workloads live in one folder: ``workloads/`` of a checkout is the package's own
    (a link), and every file in it matches pyproject's package-data, so the wheel ships it."""
    import tomllib

    assert CANON.resolve() == SHIPPED.resolve()
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["package-data"]["infer_prof.catalog"]
    package = REPO / "infer_prof" / "catalog"
    shipped = {p for pattern in patterns for p in package.glob(pattern)}
    assert sorted(SHIPPED.glob("*.toml")) and set(SHIPPED.glob("*.toml")) <= shipped


def test_workload_by_name_from_an_installed_copy(tmp_path):
    """``--workload NAME`` from a copy of the package outside any checkout (as installed in
    site-packages: no ``workloads/`` beside it, none in the current folder)."""
    import shutil
    import subprocess
    import sys

    site = tmp_path / "site"
    shutil.copytree(REPO / "infer_prof", site / "infer_prof",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    code = ("from infer_prof.catalog.workloads import load_workload, list_workloads; "
            "print(load_workload('chat').name, "
            "sorted({i.origin for i in list_workloads()}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
                         check=True)
    assert out.stdout.split(None, 1) == ["chat", "['shipped']\n"]


def test_repo_dir_found():
    assert repo_workloads_dir() == CANON


def test_list_workloads_kinds():
    infos = {i.name: i for i in list_workloads()}
    assert set(WORKLOADS) | {"nightly"} <= set(infos)
    assert infos["nightly"].kind == "suite"
    assert all(infos[n].kind == "workload" for n in WORKLOADS)
    assert all(infos[n].description for n in [*WORKLOADS, "nightly"])


def test_shipped_means_stated_in_files():
    assert load_workload("fixed-512-128").input_len == Fixed(512)
    assert load_workload("codegen").output_len.mean() == pytest.approx(588.35)
    chat = load_workload("chat")
    assert chat.input_len == LogNormal(256, 1.0, 4, 4096)
    assert chat.input_len.mean() == pytest.approx(417.36, abs=0.01)
    assert load_workload("rag").input_len.mean() == pytest.approx(3072, abs=1e-6)


def test_nightly_full_and_tiny():
    full = expand_suite("nightly")
    assert [(r.workload.name, r.concurrency, r.rate) for r in full] == [
        ("fixed-512-128", (1, 8, 32, 128), ()),
        ("chat", (1, 16, 64), ()),
        ("chat", (), (2.0, 8.0, math.inf)),
        ("rag", (4, 16), ()),
        ("codegen", (4, 16), ()),
    ]
    assert sum(len(r.points()) for r in full) == 14
    tiny = expand_suite("nightly", "tiny")
    points = [p for r in tiny for p in r.points()]
    assert len(points) == 10
    assert sum(p.total_requests() or 0 for p in points) == 180
    for p in points:
        assert p.input_len.support()[1] <= 256 and p.output_len.support()[1] <= 128
        assert p.num_requests == 16 and p.warmup_requests == 2 and p.min_requests == 8
    assert tiny[0].workload.input_len == Fixed(32) and tiny[0].workload.output_len == Fixed(8)
    assert [(p.arrival.mode, p.arrival.rate) for p in tiny[2].points()] == [
        ("open", 4.0), ("open", math.inf)]
    with pytest.raises(WorkloadError, match="no scale 'huge'; known: tiny"):
        expand_suite("nightly", "huge")


# --------------------------------------------------------------------------------- bad files


@pytest.mark.parametrize("text, field, words", [
    (BASE + "inptu_len = 5\n", "inptu_len", "unknown field; allowed: kind, name"),
    (BASE.replace("output_len = 8", "output_len = -3"), "output_len.value", ">= 1 token"),
    (BASE.replace("min = 10, max = 20", "min = 30, max = 20"), "input_len.max",
     "must be >= min (30), got 20"),
    (BASE.replace('"uniform"', '"zipf"'), "input_len.kind",
     "unknown distribution 'zipf'; allowed: fixed, uniform, normal, lognormal, empirical"),
    (BASE.replace("num_requests = 10", 'num_requests = "10"'), "num_requests",
     "must be a whole number >= 1, got string '10'"),
    (BASE.replace("min = 10", "min = -1"), "input_len.min", "must be >= 1, got -1"),
    (BASE + "duration_s = 5\n", "duration_s", "not both"),
    (BASE.replace("num_requests = 10\n", ""), "num_requests", "missing"),
    (BASE + "[arrival]\nmode = 'open'\nrate = 2\nconcurrency = 4\n", "arrival.concurrency",
     "only for mode = 'closed'"),
    (BASE + "[arrival]\nconcurrency = 4\nburstiness = 0.5\n", "arrival.burstiness",
     "only for mode = 'open'"),
    (BASE + "[arrival]\nrate = 2\nprocess = 'poisson'\nburstiness = 0.5\n",
     "arrival.burstiness", "must be 1 for process 'poisson'"),
    (BASE + "[arrival]\nrate = -2\n", "arrival.rate", "must be a number > 0 (or inf)"),
    (BASE + "[arrival]\nmode = 'half'\n", "arrival.mode", "must be 'closed' or 'open'"),
    (BASE + "[shared_prefix]\nfraction = 0.5\nlength = 10\n", "shared_prefix.length",
     "below input_len's smallest value (10)"),
    (BASE + "[shared_prefix]\nfraction = 1.5\nlength = 2\n", "shared_prefix.fraction",
     "between 0 and 1"),
    (BASE + "[slo]\nttft_p100 = 5\n", "slo.ttft_p100", "unknown SLO"),
    (BASE + "[slo]\nlatency = 5\n", "slo.latency",
     "metric one of ttft, ttfo, tpot, answer_tpot, itl, e2e"),
    (BASE + "[slo]\nttft_p99 = 0\n", "slo.ttft_p99", "must be a number > 0"),
    (BASE + "seed = true\n", "seed", "got boolean True"),
    (BASE.replace('name = "t"', 'name = "a b"'), "name", "letters, digits"),
])
def test_bad_file_names_file_and_field(tmp_path, text, field, words):
    path = write(tmp_path, text)
    with pytest.raises(WorkloadError) as info:
        load_workload(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: field '{field}': ")
    assert words in msg
    assert info.value.field == field


def test_toml_syntax_error_names_file_and_line(tmp_path):
    path = write(tmp_path, BASE + "seed = = 3\n")
    with pytest.raises(WorkloadError, match=r"bad\.toml: not valid TOML: .*line 6"):
        load_workload(path)


def test_infinite_rate_needs_a_count(tmp_path):
    assert load_workload(write(tmp_path, BASE + "[arrival]\nrate = inf\n")).arrival.rate == \
        math.inf
    text = BASE.replace("num_requests = 10", "duration_s = 30") + "[arrival]\nrate = inf\n"
    with pytest.raises(WorkloadError, match="'arrival.rate': an infinite rate"):
        load_workload(write(tmp_path, text))


def test_name_defaults_to_stem_and_unknown_name_lists_known(tmp_path):
    path = write(tmp_path, BASE.replace('name = "t"\n', ""), "my-load.toml")
    assert load_workload(path).name == "my-load"
    with pytest.raises(WorkloadNotFoundError, match="unknown workload 'chatt'; known: chat, "):
        load_workload("chatt")
    with pytest.raises(WorkloadNotFoundError, match="does not exist"):
        load_workload(str(tmp_path / "missing.toml"))


def test_suite_and_workload_loaders_refuse_each_other():
    with pytest.raises(WorkloadError, match="is a suite"):
        load_workload("nightly")
    with pytest.raises(WorkloadError, match="single workload"):
        load_suite("chat")


def test_env_folder_shadows_shipped(tmp_path, monkeypatch):
    write(tmp_path, BASE.replace('name = "t"', 'name = "chat"'), "chat.toml")
    monkeypatch.setenv("INFER_PROF_WORKLOADS", str(tmp_path))
    assert load_workload("chat").input_len == Uniform(10, 20)
    assert next(i for i in list_workloads() if i.name == "chat").origin == "INFER_PROF_WORKLOADS"


def test_suite_member_resolved_next_to_suite_and_bad_member(tmp_path):
    write(tmp_path, BASE, "local.toml")
    suite = write(tmp_path, 'kind = "suite"\n[[members]]\nworkload = "local"\n'
                            'concurrency = [2, 3]\n', "s.toml")
    [run] = expand_suite(suite)
    assert run.workload.input_len == Uniform(10, 20)
    assert [p.arrival.concurrency for p in run.points()] == [2, 3]
    bad = write(tmp_path, 'kind = "suite"\n[[members]]\nworkload = "x"\nconcurrency = [1]\n'
                          'rate = [1.0]\n', "s2.toml")
    with pytest.raises(WorkloadError, match=r"s2\.toml: field 'members\[0\]\.rate': .*not both"):
        load_suite(bad)
    bad = write(tmp_path, 'kind = "suite"\n[[members]]\nworkload = "x"\n'
                          '[scales.tiny]\nlength_factor = 0\n', "s3.toml")
    with pytest.raises(WorkloadError, match="'scales.tiny.length_factor': must be a number > 0"):
        load_suite(bad)


# -------------------------------------------------------------------------------- overrides


def wl(**kw: Any) -> Workload:
    base: dict[str, Any] = dict(name="w", input_len=Uniform(10, 20), output_len=Fixed(8),
                                num_requests=10)
    base.update(kw)
    return Workload(**base)


def test_overrides_none_keeps_and_values_replace():
    w = wl()
    assert w.with_overrides(concurrency=None, rate=None) is w
    w2 = w.with_overrides(concurrency=32, num_requests=50, input_len=100, seed=3)
    assert w2.arrival == Arrival.closed(32)
    assert (w2.num_requests, w2.input_len, w2.seed) == (50, Fixed(100), 3)
    assert w.arrival == Arrival.closed(1)  # original untouched


def test_override_rate_makes_open_loop_and_burstiness_gamma():
    w = wl().with_overrides(rate=4.0)
    assert w.arrival == Arrival("open", None, 4.0, 1.0, "poisson", None)
    w = w.with_overrides(burstiness=0.25, max_concurrency=64)
    assert (w.arrival.process, w.arrival.burstiness, w.arrival.max_concurrency) == \
        ("gamma", 0.25, 64)
    w = w.with_overrides(rate=8.0)  # keeps burstiness and cap of an open loop
    assert (w.arrival.rate, w.arrival.process, w.arrival.max_concurrency) == (8.0, "gamma", 64)
    assert w.with_overrides(concurrency=4).arrival == Arrival.closed(4)


def test_override_errors_name_the_override():
    with pytest.raises(WorkloadError, match="concurrency .*or rate .*not both"):
        wl().with_overrides(concurrency=4, rate=2.0)
    with pytest.raises(WorkloadError, match=r"'arrival.rate \(override rate=-1\)': must be"):
        wl().with_overrides(rate=-1)
    with pytest.raises(WorkloadError, match=r"'arrival.burstiness \(override burstiness=0.5\)'"):
        wl().with_overrides(burstiness=0.5)  # closed loop
    with pytest.raises(TypeError, match="unknown override"):
        wl().with_overrides(concurency=4)


def test_override_num_requests_and_duration_exclude_each_other():
    w = wl().with_overrides(duration_s=60)
    assert (w.num_requests, w.duration_s) == (None, 60.0)
    w = w.with_overrides(num_requests=5)
    assert (w.num_requests, w.duration_s) == (5, None)


def test_direct_construction_is_validated():
    with pytest.raises(WorkloadError, match="shared_prefix.length"):
        wl(shared_prefix=SharedPrefix(0.5, 10, 1))
    with pytest.raises(WorkloadError, match="num_requests"):
        wl(num_requests=None)


def test_to_dict_round_trip():
    w = load_workload("chat").with_overrides(rate=2.0, burstiness=0.5, max_concurrency=8,
                                             prefix_fraction=0.5, prefix_length=3)
    assert Workload.from_dict(w.to_dict()) == w


# ---------------------------------------------------------------------------------- drawing


def test_sample_requests_reproducible_and_default_count():
    w = wl(warmup_requests=3, seed=5)
    reqs = sample_requests(w)
    assert len(reqs) == 13
    assert reqs == sample_requests(w)
    assert all(10 <= i <= 20 and o == 8 and g is None for i, o, g in reqs)
    assert [i for i, _, _ in sample_requests(wl(seed=6))] != [i for i, _, _ in reqs[:10]]
    with pytest.raises(ValueError, match="duration_s"):
        sample_requests(wl(num_requests=None, duration_s=10.0))
    assert len(sample_requests(wl(num_requests=None, duration_s=10.0), 4)) == 4


def test_streams_are_independent():
    a = sample_requests(wl(seed=1), 50)
    b = sample_requests(wl(seed=1, output_len=Uniform(1, 500),
                           shared_prefix=SharedPrefix(0.5, 4, 2)), 50)
    assert [i for i, _, _ in a] == [i for i, _, _ in b]


def test_shared_prefix_count_and_round_robin_groups():
    reqs = sample_requests(wl(shared_prefix=SharedPrefix(0.25, 5, 2)), 10)
    groups = [g for _, _, g in reqs if g is not None]
    assert len(groups) == 3  # round_half_up(0.25 * 10) = 3
    assert groups == [0, 1, 0]
    assert all(i > 5 for i, _, g in reqs if g is not None)


def test_send_offsets():
    assert send_offsets(wl(), 5) is None
    offs = send_offsets(wl(arrival=Arrival.open(10.0)), 5)
    assert offs is not None and len(offs) == 5 and offs[0] == 0.0
    assert offs == sorted(offs)
    assert send_offsets(wl(arrival=Arrival.open(2.0, process="constant")), 3) == [0.0, 0.5, 1.0]


def test_scaled_workload_keeps_prefix_below_inputs():
    w = wl(input_len=Uniform(64, 128), shared_prefix=SharedPrefix(0.5, 48, 1)).scaled(0.0625)
    assert w.input_len == Uniform(4, 8)
    assert w.shared_prefix.length == 3
    w = wl(input_len=Uniform(10, 128), shared_prefix=SharedPrefix(0.5, 8, 1)).scaled(0.0625)
    assert w.shared_prefix == SharedPrefix()  # no room left for a prefix
