"""`run --lora-mix` against a real local server that serves LoRA adapters (the synthetic one with
``--lora NAME=TTFT_MS``: each adapter listed at /v1/models, its requests' first token after its
own delay): each request asks for its adapter, the figures per adapter are those of the
adapter's requests, an adapter the server does not list stops the run before any load, and
compare shows the adapters beside the whole."""

import csv
import io
import json
import urllib.request

import pytest

from infer_prof.core.workload.adapter_mix import parse_mix
from infer_prof.results.schema import load_typed_result
from infer_prof.results.store import read_requests

from .conftest import cli

pytestmark = pytest.mark.integration

BASE = ("run", "--model", "llama-2-7b", "--no-progress", "--no-history")
MIX = "a1=0.5,a2=0.3,base=0.2"


def _run(url: str, out, *extra: str):
    return cli(*BASE, "--endpoint", url, "-c", "4", "-n", "40", "--input-len", "8",
               "--output-len", "8", "--warmup-requests", "4", "--seed", "3",
               "--output", str(out), *extra)


def test_requests_spread_over_adapters_with_their_own_figures(synthetic, tmp_path):
    # a1's first token comes after 80 ms, a2's and the base model's after 20 ms
    server = synthetic("--lora", "a1=80", "--lora", "a2=20", ttft_ms=20.0, itl_ms=4.0,
                       tokens=8)
    out = tmp_path / "r.json"
    p = _run(server.url, out, "--lora-mix", MIX, "--json")
    assert p.returncode == 0, p.stderr
    recs = [r for r in read_requests(tmp_path / "r.requests.jsonl") if not r.warmup]
    assert len(recs) == 40 and all(r.ok for r in recs)
    # each request's adapter is the mix's pick of its index (seed 3): reproducible
    mix = parse_mix(MIX, ["a1", "a2"], seed=3)
    assert [r.adapter or "base" for r in recs] == [mix.pick(r.index) for r in recs]
    counts = mix.counts(range(40))
    for name, share in zip(mix.names, mix.shares, strict=True):
        assert abs(counts[name] - 40 * share) <= 2  # the low-discrepancy spread
    result = load_typed_result(out)
    lora = result.lora
    assert lora is not None and lora.mix == MIX and lora.seed == 3
    assert lora.listed == ["synthetic", "a1", "a2"] and lora.max_loras is None
    rows = {f.adapter: f for f in lora.per_adapter}
    assert list(rows) == ["a1", "a2", "base"]
    for name, f in rows.items():
        assert f.requests_completed == counts[name]
        assert f.share_asked == pytest.approx(mix.share_of(name))
        assert f.ttft_ms is not None and f.tpot_ms is not None
    assert 78 < rows["a1"].ttft_ms.p50 < 120  # the adapter's own delay, not the mix's
    assert 18 < rows["a2"].ttft_ms.p50 < 60 and 18 < rows["base"].ttft_ms.p50 < 60
    # the adapters' rates are over the run's window: they add up to the whole
    total = sum(f.output_throughput or 0 for f in rows.values())
    assert total == pytest.approx(result.summary.output_throughput, rel=1e-9)
    public = json.loads(p.stdout)
    assert [f["adapter"] for f in public["lora"]["per_adapter"]] == ["a1", "a2", "base"]

    # compare: the adapters' figures beside the runs'
    c = cli("compare", str(out), "--format", "json")
    assert c.returncode == 0, c.stderr
    adapters = json.loads(c.stdout)["adapters"]
    assert [a["adapter"] for a in adapters] == ["a1", "a2", "base"]
    assert adapters[0]["ttft_p50_ms"] == pytest.approx(rows["a1"].ttft_ms.p50)
    ac = cli("compare", str(out), "--format", "adapters-csv")
    assert ac.returncode == 0, ac.stderr
    lines = list(csv.DictReader(io.StringIO(ac.stdout)))
    assert [x["adapter"] for x in lines] == ["a1", "a2", "base"]
    assert float(lines[0]["ttft_p50_ms"]) == pytest.approx(rows["a1"].ttft_ms.p50)
    assert {x["path"] for x in lines} == {str(out)}
    t = cli("compare", str(out))
    assert t.returncode == 0 and "per LoRA adapter" in t.stdout
    md = cli("compare", str(out), "--format", "markdown")
    assert md.returncode == 0 and "Per LoRA adapter:" in md.stdout
    assert [ln.split("|")[2].strip() for ln in md.stdout.splitlines()
            if ln.startswith("| ") and ln.count("|") == 11][1:] == ["a1", "a2", "base"]

    # the HTML report: a row per adapter
    html_path = tmp_path / "report.html"
    h = cli("report", str(out), "-o", str(html_path))
    assert h.returncode == 0, h.stderr
    html = html_path.read_text()
    section = html[html.index('<section id="lora-adapters">'):]
    section = section[:section.index("</section>")]
    assert "--lora-mix a1=0.5,a2=0.3,base=0.2" in section
    assert [f"<td>{a}</td>" in section for a in ("a1", "a2", "base")] == [True] * 3

    # uniform over what the endpoint lists (the adapters with a parent)
    out2 = tmp_path / "u.json"
    p = _run(server.url, out2, "--lora-mix", "uniform")
    assert p.returncode == 0, p.stderr
    u = load_typed_result(out2).lora
    assert u is not None and u.shares == {"a1": 0.5, "a2": 0.5}
    assert "per LoRA adapter (--lora-mix uniform)" in p.stdout


def test_an_adapter_the_server_does_not_list_stops_the_run_before_load(synthetic, tmp_path):
    server = synthetic("--lora", "a1=20", ttft_ms=20.0, itl_ms=4.0, tokens=8)
    out = tmp_path / "r.json"
    p = _run(server.url, out, "--lora-mix", "a1=0.5,zz=0.5")
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "zz" in lines[0] and "/v1/models lists synthetic, a1" in lines[0]
    assert not out.exists()
    truth = json.loads(urllib.request.urlopen(f"{server.url}/truth").read())
    assert truth["requests"] == []  # nothing was sent


def test_a_multi_turn_session_stays_on_one_adapter(synthetic, tmp_path):
    server = synthetic("--lora", "a1=5", ttft_ms=5.0, itl_ms=1.0, tokens=4)
    out = tmp_path / "s.json"
    p = cli(*BASE, "--endpoint", server.url, "-c", "2", "-n", "24", "--turns", "3",
            "--input-len", "8", "--output-len", "4", "--lora-mix", "a1=0.5,base=0.5",
            "--output", str(out))
    assert p.returncode == 0, p.stderr
    recs = sorted((r for r in read_requests(tmp_path / "s.requests.jsonl") if not r.warmup),
                  key=lambda r: r.index)
    assert len(recs) == 24 and all(r.ok for r in recs)
    mix = parse_mix("a1=0.5,base=0.5", ["a1"], seed=0)
    for s in range(8):  # session s's three turns ask for the adapter the mix picks for s
        turns = recs[3 * s: 3 * s + 3]
        assert {r.adapter or "base" for r in turns} == {mix.pick(s)}
    lora = load_typed_result(out).lora
    assert lora is not None
    done = {f.adapter: f.requests_completed for f in lora.per_adapter}
    assert done == {"a1": 3 * mix.counts(range(8))["a1"], "base": 3 * mix.counts(range(8))["base"]}


def test_a_launched_server_serves_the_adapters_again_after_a_relaunch(tmp_path):
    """``--server synthetic`` started with the run's adapters (listed from --lora-modules), two
    repeats each on a fresh launch: each launch is checked and each repeat spread over them."""
    folder = tmp_path / "ad"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 4}))
    (folder / "adapter_model.safetensors").write_bytes(b"x")
    p = cli(*BASE, "--server", "synthetic", "--engine-arg=--ttft-ms=5",
            "--engine-arg=--itl-ms=1", "--lora-modules", f"a1={folder}", "--lora-mix",
            "a1=0.5,base=0.5", "--repeat", "2", "--repeat-relaunch", "-c", "2", "-n", "8",
            "--input-len", "8", "--output-len", "4", "--results-dir", str(tmp_path / "res"))
    assert p.returncode == 0, p.stderr
    results = [load_typed_result(f) for f in sorted((tmp_path / "res").glob("*.json"))
               if not f.name.endswith((".sweep.json", ".requests.json"))]
    assert len(results) == 2
    mix = parse_mix("a1=0.5,base=0.5", ["a1"], seed=0)
    for r in results:
        assert r.lora is not None and r.lora.listed == ["synthetic", "a1"]
        assert (r.lora.max_lora_rank, r.lora.max_loras) == (8, 1)
        done = {f.adapter: f.requests_completed for f in r.lora.per_adapter}
        assert done == mix.counts(range(8))
