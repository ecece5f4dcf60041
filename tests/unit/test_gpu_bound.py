"""A published point its GPU did not bound (slower than a GPU it dominates, in the same source
and configuration) is found, and left out of the fit (infer_prof/estimate/gpu_bound.py)."""

from __future__ import annotations

import msgspec
import pytest

from infer_prof.catalog.gpus import catalog
from infer_prof.catalog.published_results import PublishedPoint, published_results
from infer_prof.estimate import gpu_bound, published_fit
from infer_prof.estimate.gpu_bound import dominates, inversions
from infer_prof.estimate.published_fit import Case, fit_cases, prepare


def _shipped(point_id: str) -> PublishedPoint:
    return next(p for p in published_results().points if p.id == point_id)


def _like(p: PublishedPoint, **changes: object) -> PublishedPoint:
    return msgspec.structs.replace(p, **changes)


def test_a_gpu_dominates_one_with_no_more_bandwidth_and_no_more_flops() -> None:
    gpus = catalog()
    assert dominates(gpus["B200"], gpus["H200"], "bf16")
    assert dominates(gpus["H200"], gpus["H100-SXM"], "bf16")  # more bandwidth, same FLOP/s
    assert dominates(gpus["H100-SXM"], gpus["H100-PCIe"], "fp8")
    assert not dominates(gpus["H200"], gpus["B200"], "bf16")
    assert not dominates(gpus["H100-SXM"], gpus["H100-SXM"], "bf16")
    # MI300X: more bandwidth than an H100 SXM, more 16-bit FLOP/s too; never the other way
    assert not dominates(gpus["H100-SXM"], gpus["MI300X"], "bf16")


def test_slower_than_a_dominated_gpu_in_the_same_source_and_configuration_is_found() -> None:
    h200 = _shipped("gpu-conc-gpt-oss-20b-h200-c8")
    b200 = _like(h200, id="b200-slow", gpu="B200", output_tok_s=1000.0,
                 output_tok_s_per_gpu=1000.0, output_len=h200.output_len - 40)
    found = inversions([h200, b200])
    assert set(found) == {"b200-slow"}
    assert found["b200-slow"].other_id == h200.id
    assert "not bound by the GPU" in found["b200-slow"].why()
    # faster, another source, another concurrency, or output lengths 20 % apart: nothing found
    faster = _like(b200, output_tok_s=2000.0, output_tok_s_per_gpu=2000.0)
    other_source = _like(b200, source=msgspec.structs.replace(h200.source, title="another"))
    other_load = _like(b200, concurrency=16)
    longer = _like(b200, output_len=int(h200.output_len * 1.25))
    for p in (faster, other_source, other_load, longer):
        assert inversions([h200, p]) == {}


def test_the_shipped_set_has_exactly_the_gpu_conc_b200_and_mi300x_inverted() -> None:
    pts = [p for p in published_results().points
           if p.engine == "vllm" and p.load == "closed-loop"]
    found = inversions(pts)
    # globaledgepathway's MI300X below its GH200 at 4-16 users (above it at one user: that
    # level compares and is not inverted, so the sweep's levels are judged one by one)
    geb = [f"geb-vllm0.27.1-mi300x-llama-3.1-8b-bf16-78-{o}-c{c}" for o, c in ((32, 4), (34, 8),
                                                                               (33, 16))]
    assert sorted(found) == sorted(
        [f"gpu-conc-gpt-oss-20b-{g}-c{c}" for g in ("b200", "mi300x") for c in (1, 4, 8, 16)]
        + ["gpu-conc-gpt-oss-20b-mi300x-c32"] + geb)  # no other GPU at 32 streams: its sweep's
    assert found["gpu-conc-gpt-oss-20b-mi300x-c32"].sweep_of == "gpu-conc-gpt-oss-20b-mi300x-c16"
    assert {found[i].other_gpu for i in geb} == {"GH200"}


def test_a_sweep_inverted_wherever_it_compares_is_left_out_whole() -> None:
    """A level with nothing to compare with shares its sweep's setup: out when every level that
    compares is inverted, kept when one of them is not."""
    h200 = _shipped("gpu-conc-gpt-oss-20b-h200-c8")
    slow = [_like(h200, id=f"b200-c{c}", gpu="B200", concurrency=c, output_tok_s=100.0 * c,
                  output_tok_s_per_gpu=100.0 * c) for c in (8, 64)]
    found = inversions([h200, *slow])
    assert set(found) == {"b200-c8", "b200-c64"}
    assert found["b200-c64"].sweep_of == "b200-c8" and "one setup" in found["b200-c64"].why()
    # another model, or another source, is another sweep: nothing carried over
    for other in (_like(slow[1], model="gpt-oss-120b"),
                  _like(slow[1], source=msgspec.structs.replace(h200.source, title="another"))):
        assert set(inversions([h200, slow[0], other])) == {"b200-c8"}
    # a sweep with a level that compares and is not inverted keeps the others
    h200_16 = _like(h200, id="h200-c16", concurrency=16, output_tok_s_per_gpu=1000.0)
    b200_16 = _like(slow[0], id="b200-c16", concurrency=16, output_tok_s_per_gpu=3000.0)
    assert set(inversions([h200, h200_16, *slow, b200_16])) == {"b200-c8"}


def _cases(*prefixes: str) -> list[Case]:
    out = []
    for p in published_results().points:
        if p.engine == "vllm" and p.load == "closed-loop" and p.id.startswith(prefixes):
            case = prepare(p)
            if isinstance(case, Case):
                out.append(case)
    return out


def test_the_fit_leaves_a_point_its_gpu_did_not_bound_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # Blackwell from two sources (InferenceMAX's B200 at TP1 and Vultr's 2x B200) and
    # sariekr/gpu_conc, whose B200 measured below its H200
    blackwell = [c for c in _cases("imax-vllm-gpt-oss-120b-b200-tp1-1024-1024", "vultr-")]
    gpu_conc = _cases("gpu-conc-")
    assert {c.point.gpu for c in gpu_conc} >= {"B200", "H200"} and blackwell
    without_b200 = [c for c in gpu_conc if c.point.gpu != "B200"]
    # Vultr's model is a hybrid, which no fit learns from: let it count here, so that Blackwell
    # has its two sources and the check is what this test sees
    monkeypatch.setattr(published_fit, "fitted_model", lambda arch: True)
    fit = fit_cases(blackwell + gpu_conc, "t", only=["Blackwell"])
    assert fit.families["Blackwell"] == fit_cases(blackwell + without_b200, "t",
                                                  only=["Blackwell"]).families["Blackwell"]
    # the same fit that did learn from them is another fit: the check is what kept them out
    monkeypatch.setattr(published_fit, "inversions", lambda points: {})
    assert gpu_bound.inversions is not published_fit.inversions
    assert fit_cases(blackwell + gpu_conc, "t2", only=["Blackwell"]).families["Blackwell"] \
        != fit.families["Blackwell"]
