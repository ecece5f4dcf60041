"""A point's server-state sections (:mod:`infer_prof.results.serving_sections`): the prefix
cache's state and hit rate, and speculative decoding's acceptance, from what was done before
the point (:class:`infer_prof.run.prefix_cache.CacheSetup`), the measured requests' records and
the server's /metrics over the window (the scraper's summary)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.core.measurement.prefix_hits import usage_hits
from infer_prof.core.measurement.speculative import acceptance, request_acceptance
from infer_prof.core.measurement.stats import summary_dict
from infer_prof.results.document_base import Distribution
from infer_prof.results.serving_sections import PrefixCacheSection, SpeculativeSection
from infer_prof.run.prefix_cache import CacheSetup


def prefix_cache_section(
    cache: CacheSetup | None,
    records: Sequence[RequestRecord],
    metrics_summary: Mapping[str, Any],
    scraped: bool,
) -> PrefixCacheSection:
    """The point's ``prefix_cache``: its state (``cache``; None: not controlled), the hit rate
    from the measured requests' usage where the server sent cached tokens, else from its
    counters (``metrics_summary``, the scraper's; ``scraped``: a scrape succeeded)."""
    usage = usage_hits(records)
    hits = metrics_summary.get("prefix_cache_hits")
    queries = metrics_summary.get("prefix_cache_queries")
    counter_rate = metrics_summary.get("prefix_cache_hit_rate")
    if usage.hit_rate is not None:
        rate, source, reason = usage.hit_rate, "usage", None
    elif counter_rate is not None:
        rate, source, reason = counter_rate, "counters", None
    else:
        rate, source = None, None
        why = (metrics_summary.get("prefix_cache_hit_rate_reason")
               or "the server's counters gave no rate") if scraped \
            else "no /metrics scrape succeeded"
        reason = f"the responses' usage carried no cached_tokens, and {why}"
    return PrefixCacheSection(
        asked=cache.asked if cache else None,
        state=cache.state if cache else None,  # type: ignore[arg-type]
        detail=cache.detail if cache else None,
        primed_prefixes=cache.primed_prefixes if cache else None,
        primed_tokens=cache.primed_tokens if cache else None,
        hit_rate=rate,
        hit_rate_source=source,  # type: ignore[arg-type]
        hit_rate_reason=reason,
        usage_requests=usage.requests,
        usage_cached_tokens=usage.cached_tokens if usage.requests else None,
        usage_prompt_tokens=usage.prompt_tokens if usage.requests else None,
        usage_hit_rate=usage.hit_rate,
        counter_hits=hits,
        counter_queries=queries,
        counter_hit_rate=counter_rate,
    )


def speculative_section(
    config: str | None,
    records: Sequence[RequestRecord],
    metrics_summary: Mapping[str, Any],
) -> SpeculativeSection | None:
    """The point's ``speculative``: the configuration (``--speculative-config``'s JSON) and
    the acceptance from the counters' increases over the window and from each request's
    report; None when no configuration was given and the server reported no drafts (an
    endpoint running speculative decoding is reported from its counters)."""
    drafts = metrics_summary.get("spec_decode_drafts")
    per_request = request_acceptance(records)
    if config is None and not drafts and not per_request.requests:
        return None
    acc = acceptance(drafts, metrics_summary.get("spec_decode_draft_tokens"),
                     metrics_summary.get("spec_decode_accepted_tokens"),
                     metrics_summary.get("spec_decode_accepted_per_position"))
    settings = _settings(config)
    method, k = settings.get("method"), settings.get("num_speculative_tokens")
    return SpeculativeSection(
        config=config,
        method=str(method) if method is not None else None,
        num_speculative_tokens=k if isinstance(k, int) and not isinstance(k, bool) else None,
        drafts=acc.drafts,
        draft_tokens=acc.draft_tokens,
        accepted_tokens=acc.accepted_tokens,
        acceptance_rate=acc.acceptance_rate,
        acceptance_length=acc.acceptance_length,
        acceptance_per_position=acc.per_position,
        reason=acc.reason,
        requests_reporting=per_request.requests,
        request_acceptance_rate=_distribution(per_request.rates),
        request_acceptance_length=_distribution(per_request.lengths),
    )


def _settings(config: str | None) -> Mapping[str, object]:
    """The speculative configuration's JSON object ({} without one)."""
    try:
        value = json.loads(config) if config else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _distribution(values: list[float]) -> Distribution | None:
    """The values' distribution (None without any)."""
    d = summary_dict(values, 1.0)
    return msgspec.convert(d, Distribution) if d else None
