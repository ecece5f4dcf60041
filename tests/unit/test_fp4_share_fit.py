"""The FP4 weight-only share in the fit: moved only where points of that path are, pulled to
its start with the pooling weight of the sources that measured it (published_fit), and a
factor's own pull in the objective (calibration)."""

from __future__ import annotations

import math

import msgspec
import pytest

from infer_prof.catalog.published_results import published_results
from infer_prof.core.estimate.calibration import Search, objective
from infer_prof.core.estimate.factors import HOPPER_FIT
from infer_prof.estimate import published_fit
from infer_prof.estimate.published_fit import (
    FP4_SHARE,
    POOL_WEIGHT,
    Case,
    family_search,
    fp4_weight_only_sources,
    identifiable,
    prepare,
    runs_fp4_weight_only,
)


def _cases(*prefixes: str) -> list[Case]:
    out = [c for p in published_results().points
           if p.engine == "vllm" and p.load == "closed-loop" and p.id.startswith(prefixes)
           and isinstance(c := prepare(p), Case)]
    assert out
    return out


def test_only_fp4_on_a_gpu_without_fp4_math_runs_the_path() -> None:
    hopper = _cases("gpu-conc-gpt-oss-20b-h200", "gpu-conc-gpt-oss-20b-h100")
    b200 = _cases("gpu-conc-gpt-oss-20b-b200")
    dense = _cases("ree2raz")
    assert all(runs_fp4_weight_only(c) for c in hopper)
    assert not any(runs_fp4_weight_only(c) for c in b200 + dense)
    assert fp4_weight_only_sources(hopper + b200 + dense) == 1
    assert FP4_SHARE in identifiable(hopper) and FP4_SHARE not in identifiable(dense + b200)


def test_the_share_is_pulled_with_the_pooling_weight_of_its_sources() -> None:
    one = _cases("gpu-conc-gpt-oss-20b-h200")
    two = one + _cases("cove")
    assert fp4_weight_only_sources(two) == 2
    base = Search()
    assert family_search(base, _cases("ree2raz")) is base
    assert dict(family_search(base, one).pulls) == {FP4_SHARE: POOL_WEIGHT}
    assert dict(family_search(base, two).pulls) == {FP4_SHARE: POOL_WEIGHT / 2}
    assert family_search(base, two).prior_weight == base.prior_weight


def test_a_factors_own_pull_replaces_the_common_weight() -> None:
    start, moved = HOPPER_FIT, msgspec.structs.replace(HOPPER_FIT, fp4_weight_only_share=0.5)
    samples = [1.0]

    def predict(f, s):
        return s

    common = objective(moved, start, samples, predict, lambda s: s, 0.01, (FP4_SHARE, "mbu"))
    own = objective(moved, start, samples, predict, lambda s: s, 0.01, (FP4_SHARE, "mbu"),
                    pulls={FP4_SHARE: 2.0})
    assert common == pytest.approx(0.01 * math.log(0.5) ** 2)
    assert own == pytest.approx(2.0 * math.log(0.5) ** 2)


def test_the_full_fit_moves_the_share_on_hopper_only_from_its_points() -> None:
    """Fitted on every source, Hopper's share stays near 1 (int4 Marlin's rates: the pull of
    its five sources, and what InferenceMAX's H100 and H200 runs say); the families without
    such points carry it over unchanged."""
    fit = published_fit.fit_all("test")
    hopper = fit.families["Hopper"].fp4_weight_only_share
    assert 0.9 <= hopper <= 1.0
    for name, f in fit.families.items():
        if name != "Hopper":
            assert f.fp4_weight_only_share == pytest.approx(hopper)
