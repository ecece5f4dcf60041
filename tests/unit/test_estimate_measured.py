"""The pure part of ``estimate --calibrate-from`` / ``--measured``: which runs match a row, the
refit's arithmetic (which factors move, that it recovers factors that made the measurements),
the source it states, and which factors each family gets (:mod:`infer_prof.estimate.calibrated`).
"""

from __future__ import annotations

from dataclasses import replace

import msgspec
import pytest

from infer_prof.catalog.estimate_factors import factors_for
from infer_prof.catalog.gpus import find_gpu
from infer_prof.catalog.models import resolve_model
from infer_prof.core.estimate.calibration import FITTED
from infer_prof.core.estimate.factors import HOPPER_FIT, StepFactors
from infer_prof.core.estimate.measured import (
    FEW_RUNS_FITTED,
    FULL_FIT_RUNS,
    MeasuredRun,
    date_range,
    distinct,
    error_pct,
    predict_run,
    refit,
    same_configuration,
    same_model,
)
from infer_prof.estimate.calibrated import calibrate
from infer_prof.estimate.measured_runs import MeasuredSet

H100, H200, B200 = find_gpu("H100-SXM"), find_gpu("H200"), find_gpu("B200")
LLAMA = resolve_model("llama-2-7b").spec
assert LLAMA is not None
SLOW = msgspec.structs.replace(HOPPER_FIT, mbu=0.4, step_overhead_ms=3.0)
"""The factors that 'measured' the runs below: a slower H100 than the Hopper default."""


def _run(concurrency: int, measured: float = 1.0, day: str = "2026-11-20", **kw: object
         ) -> MeasuredRun:
    base: dict[str, object] = dict(
        source=f"r{concurrency}.json", run_id=f"id{concurrency}", started_at=f"{day}T10:00:00Z",
        arch=LLAMA, gpu=H100, family="Hopper", gpu_count=1, precision="bf16", input_len=512,
        output_len=128, concurrency=concurrency, output_tok_s_per_gpu=measured)
    base.update(kw)
    return MeasuredRun(**base)  # type: ignore[arg-type]


def _measured_by(factors: StepFactors, concurrencies: list[int]) -> list[MeasuredRun]:
    """Runs whose measured figure is what ``factors`` predict (a known answer to recover)."""
    return [_run(c, predict_run(factors, _run(c))) for c in concurrencies]


def test_few_runs_move_only_mbu_and_step_overhead_and_recover_them() -> None:
    runs = _measured_by(SLOW, [1, 8])
    result = refit(runs, HOPPER_FIT, "results/")
    f = result.factors
    for name in FITTED:
        if name not in FEW_RUNS_FITTED:
            assert getattr(f, name) == getattr(HOPPER_FIT, name), name
    assert result.median_abs_error_pct_before > 30
    assert result.median_abs_error_pct_after < 2
    for r in runs:  # the refit predicts the runs it was fitted on
        assert predict_run(f, r) == pytest.approx(r.output_tok_s_per_gpu, rel=0.03)
    assert f.family == "Hopper"


def test_enough_runs_move_every_factor_and_the_source_says_which() -> None:
    runs = _measured_by(SLOW, [1, 2, 4, 8, 16, 32, 64][:FULL_FIT_RUNS])
    few = refit(runs[:2], HOPPER_FIT, "results/").factors
    full = refit(runs, HOPPER_FIT, "results/").factors
    assert "moved mbu, step_overhead_ms from" in few.source
    assert f"moved {', '.join(FITTED)} from" in full.source
    assert full.source.startswith(f"refitted on {FULL_FIT_RUNS} runs from results/, 2026-11-20 "
                                  "(H100-SXM;")
    assert HOPPER_FIT.source in full.source


def test_refit_of_no_runs_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        refit([], HOPPER_FIT, "results/")


def test_date_range_and_error_pct() -> None:
    assert date_range([_run(1, day="2026-11-27"), _run(2, day="2026-11-20")]) == (
        "2026-11-20 to 2026-11-27")
    assert date_range([_run(1), _run(2)]) == "2026-11-20"
    assert date_range([_run(1, started_at=None)]) == "dates not recorded"
    assert error_pct(120.0, 100.0) == pytest.approx(20.0)
    assert error_pct(50.0, 100.0) == pytest.approx(-50.0)


@pytest.mark.parametrize(("field", "value"), [
    ("gpu", H200), ("gpu_count", 2), ("precision", "fp8"), ("input_len", 256),
    ("output_len", 64), ("arch", resolve_model("llama-3.1-8b").spec)])
def test_same_configuration_needs_every_field(field: str, value: object) -> None:
    want = dict(model=LLAMA, gpu="H100-SXM", gpu_count=1, precision="bf16",
                lengths=(512, 128))
    assert same_configuration(_run(4), **want)  # type: ignore[arg-type]
    assert not same_configuration(_run(4, **{field: value}), **want)  # type: ignore[arg-type]


def test_an_alias_and_its_hub_id_are_one_model() -> None:
    hub = resolve_model("llama-2-7b").spec
    assert hub is not None and hub.hub_id
    other = replace(hub, name=hub.hub_id)  # the same model resolved from its hub id
    assert same_model(other, hub)
    assert not same_model(replace(other, hub_id="org/other"), hub)


def test_refitted_factors_serve_the_family_and_others_keep_the_shipped() -> None:
    runs = tuple(_measured_by(SLOW, [1, 8]))
    source = MeasuredSet("results/", runs, read=5, unusable={"CPU run": 3})
    cal = calibrate(source, None, [H100, H200, B200])
    assert cal.factors_for(H100) is cal.factors_for(H200)  # one refit per family
    assert cal.factors_for(H100).source.startswith("refitted on 2 runs from results/")
    assert cal.factors_for(B200) == factors_for(B200)
    hopper, blackwell = cal.families([H100, H200, B200])
    assert (hopper.family, hopper.origin, hopper.runs) == ("Hopper", "refitted", 2)
    assert blackwell.origin == "shipped"
    assert "no usable Blackwell run in results/" in blackwell.says
    stated = cal.fit_source()
    assert stated is not None and (stated.read, stated.used) == (5, 2)
    assert cal.runs_to_compare() == runs  # --calibrate-from's runs are set beside the rows


def test_runs_of_a_family_not_estimated_are_not_fitted_and_counted() -> None:
    runs = tuple(_measured_by(SLOW, [1, 8]))
    cal = calibrate(MeasuredSet("results/", runs, read=2), None, [B200])
    assert cal.fits == {}
    stated = cal.fit_source()
    assert stated is not None and stated.used == 0
    assert stated.unusable == {"on a GPU family not estimated here": 2}


def test_runs_repeated_alike_are_one_sample_at_their_median() -> None:
    runs = [_run(4, 100.0), _run(4, 130.0, source="b.json"), _run(4, 110.0, source="c.json"),
            _run(8, 200.0)]
    samples = distinct(runs)
    assert [(s.concurrency, s.output_tok_s_per_gpu) for s in samples] == [(4, 110.0), (8, 200.0)]
    # counted as 4 runs, fitted as 2 samples: few, so only mbu and the step overhead move
    assert refit(runs, HOPPER_FIT, "h").factors.source.startswith("refitted on 4 runs from h")
    assert "moved mbu, step_overhead_ms from" in refit(runs, HOPPER_FIT, "h").factors.source
