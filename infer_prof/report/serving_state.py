"""The server state that changes a run's numbers, in words: the prefix cache's state and hit
rate, and speculative decoding's acceptance (the result's ``prefix_cache`` and
``speculative`` sections). :func:`serving_rows` gives the console's rows
(:mod:`infer_prof.report.console`); :func:`serving_section` the HTML report's table, a row per
run (:mod:`infer_prof.report.html`)."""

from __future__ import annotations

from collections.abc import Sequence

from infer_prof.report.html_fragments import esc
from infer_prof.report.run_data import RunData
from infer_prof.results.document import Result
from infer_prof.results.identity import readable_name
from infer_prof.results.serving_sections import PrefixCacheSection, SpeculativeSection


def cache_text(pc: PrefixCacheSection | None) -> str:
    """``cold, 37.5% of prompt tokens cached (usage: 768 of 2,048)`` or why not known."""
    if pc is None:
        return "not recorded"
    state: str = pc.state or "not controlled"
    if pc.state == "warm" and pc.primed_prefixes:
        state += f" ({pc.primed_prefixes} shared prefixes sent first)"
    if pc.hit_rate is None:
        return f"{state}; hit rate n/a ({pc.hit_rate_reason})"
    if pc.hit_rate_source == "usage":
        where = f"usage: {pc.usage_cached_tokens:,} of {pc.usage_prompt_tokens:,} tokens"
    else:
        where = f"counters: {pc.counter_hits:,.0f} of {pc.counter_queries:,.0f} tokens"
    return f"{state}; {pc.hit_rate:.1%} of prompt tokens cached ({where})"


def acceptance_text(spec: SpeculativeSection) -> str:
    """``rate 37.3%, length 2.00 tokens/step, by position 54% / 36% / 9%`` or why not known."""
    if spec.acceptance_rate is None:
        return f"n/a ({spec.reason})"
    text = f"rate {spec.acceptance_rate:.1%}"
    if spec.acceptance_length is not None:
        text += f", length {spec.acceptance_length:.2f} tokens/step"
    per = spec.acceptance_per_position or []
    if per:
        text += ", by position " + " / ".join("n/a" if p is None else f"{p:.0%}" for p in per)
    return text


def draft_text(spec: SpeculativeSection) -> str:
    """``22 drafts, 59 draft tokens, 22 accepted`` over the window."""
    if spec.drafts is None:
        return "n/a"
    return (f"{spec.drafts:,.0f} drafts, {spec.draft_tokens or 0:,.0f} draft tokens, "
            f"{spec.accepted_tokens or 0:,.0f} accepted")


def per_request_text(spec: SpeculativeSection) -> str | None:
    """The requests' own acceptance (mean and p50 of rate and length), None when none sent
    it."""
    rate, length = spec.request_acceptance_rate, spec.request_acceptance_length
    if not spec.requests_reporting or rate is None or rate.mean is None:
        return None
    text = f"{spec.requests_reporting} requests: rate mean {rate.mean:.1%}"
    if length is not None and length.mean is not None:
        text += f", length mean {length.mean:.2f}"
    return text


def serving_rows(result: Result) -> list[tuple[str, str]]:
    """The console's rows: the prefix cache (always, when recorded) and, with speculative
    decoding, its configuration, acceptance, drafts and the requests' own figures."""
    rows: list[tuple[str, str]] = []
    if result.prefix_cache is not None:
        rows.append(("prefix cache", cache_text(result.prefix_cache)))
    spec = result.speculative
    if spec is not None:
        rows.append(("speculative decoding", spec.config or "the server's own"))
        rows.append(("  acceptance (server counters)", acceptance_text(spec)))
        rows.append(("  drafts", draft_text(spec)))
        own = per_request_text(spec)
        if own is not None:
            rows.append(("  acceptance (per request)", own))
    return rows


def serving_section(runs: Sequence[RunData], names: Sequence[str]) -> str:
    """The report's "Server state" section: a row per run with its prefix cache and, where any
    run used it, speculative decoding; empty when no run recorded either."""
    results = [run.result for run in runs]
    if all(r.prefix_cache is None and r.speculative is None for r in results):
        return ""
    spec_any = any(r.speculative is not None for r in results)
    head = "<tr><th>run</th><th>prefix cache</th>"
    head += "<th>speculative decoding</th><th>acceptance</th><th>drafts</th>" if spec_any else ""
    rows = []
    for r, name in zip(results, names, strict=True):
        cells = [esc(readable_name(r) or name), esc(cache_text(r.prefix_cache))]
        if spec_any:
            spec = r.speculative
            cells += ([esc(spec.config or "the server's own"), esc(acceptance_text(spec)),
                       esc(draft_text(spec))] if spec is not None else ["off", "", ""])
        rows.append("<tr>" + "".join(f'<td class="wrap">{c}</td>' for c in cells) + "</tr>")
    note = ("The prefix cache's state at each point's start (--prefix-cache) and the share of "
            "prompt tokens it held; speculative decoding's acceptance rate (accepted / draft "
            "tokens), mean acceptance length (1 + accepted / drafts) and acceptance by draft "
            "position, from the server's counters over the measured window.")
    return ('<section id="server-state"><h2>Server state</h2>'
            f'<p class="note">{esc(note)}</p>'
            f'<div class="table-wrap"><table><thead>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div></section>")
