"""benchmarks/run_spread.py: the spread and the host watch beside each run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))  # it imports peer_vllm from there
    spec = importlib.util.spec_from_file_location(
        "run_spread", ROOT / "benchmarks" / "run_spread.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bench = _script()


def test_spread_is_range_over_mean_in_percent():
    assert bench.spread_pct([95.0, 100.0, 105.0]) == pytest.approx(10.0)
    assert bench.spread_pct([0.0, 0.0]) == 0.0


def test_steal_is_the_stolen_share_of_the_ticks_between_two_readings():
    assert bench.steal_pct((10, 1000), (30, 1400)) == pytest.approx(5.0)
    assert bench.steal_pct((10, 1000), (10, 1000)) == 0.0


def test_the_machine_counters_and_the_probe_read_real_values():
    steal, total = bench.cpu_ticks()
    assert 0 <= steal <= total and total > 0
    later = bench.cpu_ticks()
    assert later[1] >= total and later[0] >= steal
    assert 0.0 < bench.host_probe_ms(loops=20_000, tries=2) < 5_000
