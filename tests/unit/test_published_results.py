"""The shipped data set of published serving results: it parses into declared types, every point
names its source and a GPU the catalog knows, its arithmetic holds, both splits are used, and the
project's own H100 points agree with the measurement file they were copied from."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from infer_prof.catalog.gpus import known_gpu_keys
from infer_prof.catalog.models import known_aliases
from infer_prof.catalog.published_results import (
    PublishedPoint,
    parse_published_results,
    published_results,
)
from tests.benchmark_scripts import load_benchmark

REPO = Path(__file__).resolve().parents[2]
POINTS = published_results().points


def test_the_data_set_parses_into_declared_points() -> None:
    assert len(POINTS) >= 40
    assert all(isinstance(p, PublishedPoint) for p in POINTS)
    assert len({p.id for p in POINTS}) == len(POINTS), "point ids are unique"


def test_every_point_names_its_source() -> None:
    for p in POINTS:
        s = p.source
        assert s.title, p.id
        assert s.url or s.path, f"{p.id}: a URL or a path"
        if s.repo:
            assert s.path and s.commit and len(s.commit) == 40, f"{p.id}: repo, path and commit"
        assert s.cite(), p.id


def test_every_gpu_is_a_catalog_key_and_every_model_an_alias_or_hub_id() -> None:
    gpus, aliases = set(known_gpu_keys()), set(known_aliases())
    for p in POINTS:
        assert p.gpu in gpus, f"{p.id}: {p.gpu}"
        assert p.model in aliases or "/" in p.model, f"{p.id}: {p.model}"


def test_per_gpu_throughput_and_load_fields_agree() -> None:
    for p in POINTS:
        assert p.output_tok_s_per_gpu > 0
        assert p.output_tok_s == pytest.approx(p.output_tok_s_per_gpu * p.gpu_count, rel=1e-3), p.id
        if p.load == "offline-max":
            assert p.concurrency is None, p.id
        else:
            assert p.concurrency and p.concurrency >= 1, p.id
        if p.ttft_ms is not None or p.tpot_ms is not None:
            assert p.latency_stat in ("p50", "mean", "unspecified"), p.id
        assert p.tensor_parallel is None or p.gpu_count % p.tensor_parallel == 0, p.id


def test_both_splits_are_used_for_vllm_and_a_compared_pair_is_never_split() -> None:
    data = published_results()
    assert data.by_split("fit") and data.by_split("holdout")
    vllm = [p for p in POINTS if p.engine == "vllm"]
    assert {p.split for p in vllm} == {"fit", "holdout"}
    groups: dict[tuple[object, ...], set[str]] = {}
    for p in POINTS:
        key = (p.source.title, p.model, p.input_len, p.output_len, p.tensor_parallel,
               p.concurrency, p.precision)
        groups.setdefault(key, set()).add(p.split)
    assert all(len(s) == 1 for s in groups.values())


def test_a_malformed_point_is_named_in_the_error() -> None:
    text = json.dumps({"points": [{"id": "bad-one", "engine": "vllm"}]})
    with pytest.raises(ValueError, match="bad-one"):
        parse_published_results(text)


def _shared_csv() -> Path | None:
    for base in (REPO.parent, REPO.parent.parent):
        path = base / "shared" / "measurements" / "h100-2026-11-23.csv"
        if path.exists():
            return path
    return None


@pytest.mark.skipif(_shared_csv() is None, reason="../shared/measurements is not checked out here")
def test_the_projects_own_points_match_the_measurement_file() -> None:
    path = _shared_csv()
    assert path is not None
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
    rows = list(csv.DictReader(lines))
    own = [p for p in POINTS if p.source.path and p.source.path.endswith("h100-2026-11-23.csv")]
    assert len(own) == len(rows)
    for p, row in zip(own, rows, strict=True):
        assert (p.model, p.precision, p.concurrency) == (
            row["model"], row["precision"], int(row["concurrency"]))
        assert p.output_tok_s == pytest.approx(float(row["output_tok_s"]))
        assert p.ttft_ms == pytest.approx(float(row["ttft_p50_ms"]))
        assert p.tpot_ms == pytest.approx(float(row["tpot_p50_ms"]))


def test_one_repository_is_one_source_in_the_held_out_computation() -> None:
    """benchmarks/estimate_loso.py holds a source out by its key (``source_key``: the title):
    the vLLM points of one repository carry one key, so that its GPUs are held out together (a
    key per GPU would let the other GPUs' points of the same harness fit the held-out one). The
    vLLM recipes are the one repository of separate publications (each guide by its own vendor
    and date)."""
    source_key = load_benchmark("estimate_loso").source_key
    titles: dict[str, set[str]] = {}
    for p in published_results().points:
        if p.engine == "vllm" and p.source.repo and p.source.repo != "vllm-project/recipes":
            titles.setdefault(p.source.repo, set()).add(source_key(p))
    assert {repo: t for repo, t in titles.items() if len(t) > 1} == {}
    assert len(titles["globaledgepathway/voice-inference-benchmark"]) == 1
