"""core/analysis/engine_sweep and run/engine_sweep: the configurations parsed (flag and TOML),
applied to a run, and the upper envelope against a brute-force definition."""

import random

import pytest

from infer_prof.core.analysis.engine_sweep import (
    EngineConfig,
    EngineSweepError,
    envelope,
    parse_document,
    parse_flag,
)
from infer_prof.run.config import ConfigError, RunConfig
from infer_prof.run.engine_sweep import check, configured, engine_configs


def test_flag_form():
    cs = parse_flag("max-num-seqs=64,128,256")
    assert [c.name for c in cs] == ["max-num-seqs=64", "max-num-seqs=128", "max-num-seqs=256"]
    assert cs[1].settings == {"max-num-seqs": 128}
    assert parse_flag("enforce_eager=true,false")[1].settings == {"enforce-eager": False}
    for bad, words in (("max-seqs=4", "unknown engine setting 'max-seqs'"),
                       ("max-num-seqs=0", "positive"), ("max-num-seqs=x", "not a int"),
                       ("max-num-seqs", "SETTING=V1,V2"), ("max-num-seqs=4,4", "twice")):
        with pytest.raises(EngineSweepError, match=words):
            parse_flag(bad)


def test_toml_document():
    doc = {"config": [{"name": "bf16-128", "quantization": "bf16", "max_num_seqs": 128},
                      {"name": "fp8", "quantization": "fp8", "kv-cache-dtype": "fp8"}]}
    cs = parse_document(doc, "s.toml")
    assert cs[0] == EngineConfig("bf16-128", {"quantization": "bf16", "max-num-seqs": 128})
    with pytest.raises(EngineSweepError, match="unknown engine setting 'tp'"):
        parse_document({"config": [{"name": "a", "tp": 2}]}, "s.toml")
    with pytest.raises(EngineSweepError, match="name"):
        parse_document({"config": [{"quantization": "fp8"}]}, "s.toml")
    with pytest.raises(EngineSweepError, match=r"no \[\[config\]\]"):
        parse_document({}, "s.toml")


def test_file_and_configured_run(tmp_path):
    f = tmp_path / "sweep.toml"
    f.write_text('[[config]]\nname = "a"\nmax-num-seqs = 8\ntensor-parallel-size = 2\n')
    (ec,) = engine_configs(str(f))
    cfg = configured(RunConfig(frontier=True, engine_args=["--max-num-seqs=99", "--seed=1"]), ec)
    assert cfg.engine.engine_args == ["--seed=1", "--max-num-seqs=8"]
    assert (
        cfg.engine.tensor_parallel_size == 2
        and cfg.results.run_tag == "a"
        and cfg.load.engine_sweep is None
    )
    assert cfg.results.labels["engine_config"] == "a"
    (tmp_path / "bad.toml").write_text("[[config]\n")
    with pytest.raises(ConfigError, match="bad.toml"):
        engine_configs(str(tmp_path / "bad.toml"))


def test_check_needs_frontier_and_no_endpoint():
    with pytest.raises(ConfigError, match="add --frontier"):
        check(RunConfig(engine_sweep="max-num-seqs=4"))
    with pytest.raises(ConfigError, match="--endpoint"):
        check(
            RunConfig(frontier=True, engine_sweep="max-num-seqs=4", endpoint="http://127.0.0.1:9")
        )


def _brute(rows):
    def beaten(i):
        xi, yi = rows[i]
        return any(
            xj >= xi and yj >= yi and (xj > xi or yj > yi)
            for j, (xj, yj) in enumerate(rows)
            if j != i
        )

    return {i for i in range(len(rows)) if not beaten(i)}


def test_envelope_matches_brute_force_on_random_sets():
    rng = random.Random(7)
    for _ in range(200):
        frontiers = []
        for name in ("a", "b", "c")[: rng.randint(1, 3)]:
            pts = [
                {
                    "concurrency": float(2**k),
                    "interactivity": rng.choice([None, *range(1, 9)]),
                    "total_tok_s_per_gpu": float(rng.randint(1, 9)),
                }
                for k in range(rng.randint(0, 5))
            ]
            frontiers.append((name, pts))
        env = envelope(frontiers)
        flat = [(n, p) for n, pts in frontiers for p in pts]
        known = [(n, p) for n, p in flat if p["interactivity"] is not None]
        best = _brute([(p["interactivity"], p["total_tok_s_per_gpu"]) for _, p in known])
        want = sorted((known[i][0], known[i][1]["concurrency"]) for i in best)
        got = sorted((r["config"], r["concurrency"]) for r in env if r["envelope"])
        assert got == want
        assert len(env) == len(flat)


def test_output_names_the_engine_sweep_and_each_frontier_beside_it(tmp_path):
    out = tmp_path / "sweep.json"
    (a, _), (b, _) = [(configured(RunConfig(frontier=True, output=str(out)), ec), ec)
                      for ec in engine_configs("max-num-seqs=4,8")]
    assert a.results.output == str(tmp_path / "sweep-max-num-seqs_4.json")
    assert b.results.output == str(tmp_path / "sweep-max-num-seqs_8.json")


def test_max_cost_counts_every_configuration_before_any_starts(capsys):
    cfg = RunConfig(model="tiny-llama", frontier=True, engine_sweep="max-num-seqs=4,8",
                    concurrency=[1, 2], num_requests=8, price_per_hour=1.0, max_cost=1e-6)
    with pytest.raises(ConfigError, match=r"above --max-cost 1e-06"):
        check(cfg)
    said = capsys.readouterr().err
    assert "2 engine configurations: expected rented time" in said
    assert "4 points" in said  # two launches of two points each
