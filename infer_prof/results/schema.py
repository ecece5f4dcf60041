"""The result file: one JSON document per run, versioned.

Its type is declared once, in :mod:`infer_prof.results.document` (``Result`` and a class per
section); the JSON Schema of each version is shipped beside it
(``infer_prof/results/schemas/result-v1.schema.json``). What the fields mean
(schema_version 1):

- ``schema_version``, ``kind`` ("infer-prof.run"), ``run_id`` (a UUIDv7, unique across
  processes and machines: the history's key), ``run_name`` (readable
  ``<time>-<model>-<load>``, not unique; absent in older results, whose ``run_id`` is that
  readable name: :mod:`infer_prof.results.run_ids`), ``started_at``/``finished_at``
  (ISO 8601 UTC wall clock: labels only, never used for timing)
- ``complete`` (bool) and ``incomplete_reason`` (why a run stopped early: interrupted,
  server_died, ...). An incomplete result still holds everything measured until then.
- ``config``: every option the run was given, and what the run resolved for the point (its
  API, load format, load, lengths, dataset, trace, sessions:
  :mod:`infer_prof.results.config_record`); ``model``: what was profiled, its architecture
  and ``weights`` (real or random, ``origin``: local/hf-cache/hub/random/as-given, ``reason``);
  ``server``: how it was started or attached, its log file and exit code; for a server infer-prof
  started, ``startup_s`` (seconds from launch to a healthy ``/health``) and ``startup``
  (``{total_s, phases: [{name, start_s, duration_s}], source}``: the start-up phases read from
  the server log, see :mod:`infer_prof.servers.vllm_startup`; absent in older results); when the
  server died during the run, ``log_tail`` and ``root_cause`` (lines, or null)
- ``environment``: versions, GPU/CPU model, host (see :mod:`infer_prof.run.environment`)
- ``summary``: the run's numbers (see :class:`infer_prof.core.measurement.metrics.RunSummary`), with
the
  frontier's axes of the point (``interactivity_tok_s_user``, ``output_tok_s_per_gpu``,
  ``usd_per_million_total_tokens``, ``joules_per_total_token``, ...: see
  :mod:`infer_prof.core.analysis.frontier_axes`). :func:`load_result` derives them for an older file
  that lacks them, from what it recorded (null where that cannot be known)
- ``client``: the load generator's own health (timestamp source, dispatch delay, read and
  event-loop lag, CPU, ``processes``; with more than one process, pooled figures and each
  worker's own under ``workers``)
- ``api``: the API used (``name`` completions/chat, ``path``), ``token_count_source`` (how
  output tokens were counted: usage, usage_total, chunks, mixed) and, for chat,
  ``chat_template_tokens`` (see :mod:`infer_prof.core.measurement.api_tokens`; absent in older
  results)
- ``plan``, ``cost``, ``telemetry``, ``roofline``: present when those parts ran; null otherwise
- ``duration_estimate``: the run's wall time estimated before it started
  (:mod:`infer_prof.core.planning.duration`); null for ``--endpoint`` runs
- ``requests_file``: per-request records, one JSON object per line, beside the result file
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import msgspec
from msgspec import ValidationError

from infer_prof.core.analysis.frontier_axes import AXIS_KEYS, summary_with_axes
from infer_prof.core.measurement.metric_table import latencies
from infer_prof.results.document import Result, Summary, decode_result
from infer_prof.results.document_base import Distribution

SCHEMA_VERSION = 1
RESULT_KIND: Final = "infer-prof.run"


class ResultFileError(ValueError):
    """A file that is not a readable infer-prof result."""


def load_result(path: str | Path) -> dict[str, Any]:
    """Read and check a result file; raises :class:`ResultFileError` naming the problem."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except OSError as exc:
        raise ResultFileError(f"cannot read result file {p}: {exc.strerror}") from None
    except ValueError as exc:
        raise ResultFileError(f"{p} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != RESULT_KIND:
        raise ResultFileError(f"{p} is not an infer-prof result (no kind {RESULT_KIND!r})")
    version = data.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ResultFileError(
            f"{p} has schema_version {version!r}; this infer-prof reads up to {SCHEMA_VERSION}: "
            "upgrade infer-prof"
        )
    for key in ("summary", "config"):
        if key not in data:
            raise ResultFileError(f"{p} lacks the field {key!r}")
    try:
        decode_result(data)  # every value of its declared type (results.document)
    except ValidationError as exc:
        raise ResultFileError(f"{p} does not match the result type: {exc}") from None
    if isinstance(data["summary"], dict):
        data["summary"] = summary_with_axes(data)  # older files: the axes derived, or null
    return data


def typed_document(data: dict[str, Any]) -> Result:
    """A result document already parsed (kept by the history, or held in memory) as
    :class:`infer_prof.results.document.Result`, its frontier axes derived where an older file
    lacks them (as :func:`load_result` does). Raises ``msgspec.ValidationError`` for a value of
    the wrong type."""
    if isinstance(data.get("summary"), dict):
        data = {**data, "summary": summary_with_axes(data)}
    return decode_result(data)


def load_typed_result(path: str | Path) -> Result:
    """:func:`load_result` as the typed :class:`infer_prof.results.document.Result`
    (attributes, not keys: ``r.summary.ttft_ms.p50``)."""
    return decode_result(load_result(path))


def public_summary(summary: Summary) -> dict[str, Any]:
    """The ``--json`` view of a summary: counts, throughputs, and the latency percentiles in ms."""
    keys = ("mean", "p50", "p90", "p99", "max")

    def dist(d: Distribution | None) -> dict[str, Any] | None:
        return None if d is None else {k: getattr(d, k) for k in keys}

    out: dict[str, Any] = {
        "requests_completed": summary.requests_completed,
        "requests_failed": summary.requests_failed,
        "failure_kinds": dict(summary.failure_kinds),
        "duration_s": summary.duration_s,
        "rate_window_s": summary.rate_window_s,
        "rate_basis": summary.rate_basis,
        "request_throughput": summary.request_throughput,
        "output_throughput": summary.output_throughput,
        "total_throughput": summary.total_throughput,
    }
    for m in latencies():  # every latency distribution of the metric table
        out[m.key] = dist(getattr(summary, m.key))
    out["prefill_tok_s_user"] = dist(summary.prefill_tok_s_user)  # prompt tokens / TTFT
    for name in AXIS_KEYS:  # the frontier's axes (null where not measured)
        out[name] = getattr(summary, name)
    return out


def public_result(result: Result) -> dict[str, Any]:
    """The ``--json`` view of a run: :func:`public_summary` plus cost, energy and efficiency
    next to the speeds (each null, with its reason, when it could not be known), the
    ``prefix_cache`` and ``speculative`` sections (null when not recorded), and with
    ``run --quality`` the ``quality`` section's figures (status, accuracy with its interval,
    perplexity, the reference's comparison and the floor; not the per-item and per-token
    records, which the result file holds); with ``--lora-mix`` the ``lora`` mix, seed, shares
    and figures per adapter."""
    out = public_summary(result.summary)
    cost, energy = result.cost, result.energy
    roof = msgspec.to_builtins(result.roofline) or {}
    out["cost"] = {
        "usd_per_hour": cost.usd_per_hour if cost else None,
        "usd_per_million_output_tokens": cost.usd_per_million_output_tokens if cost else None,
        "usd_per_million_total_tokens": cost.usd_per_million_total_tokens if cost else None,
        "output_tokens_per_usd": cost.output_tokens_per_usd if cost else None,
        "reason": None if cost is None or cost.available else cost.reason,
    }
    out["energy"] = {
        "energy_j": energy.energy_j if energy else None,
        "joules_per_output_token": energy.joules_per_output_token if energy else None,
        "reason": energy.reason if energy else None,
    }
    out["efficiency"] = {
        "mbu_pct": roof.get("mbu_pct"),  # window MBU
        "decode_step_mbu_pct": roof.get("decode_step_mbu_pct"),
        "mfu_pct": roof.get("mfu_pct"),
        "above_ceiling": roof.get("above_ceiling"),
        "reason": None if roof.get("available") else roof.get("reason"),
    }
    out["warmup"] = msgspec.to_builtins(result.warmup)
    # the server state that changes the numbers: the prefix cache (its state and hit rate) and
    # speculative decoding (its acceptance), null when not recorded
    out["prefix_cache"] = msgspec.to_builtins(result.prefix_cache)
    out["speculative"] = msgspec.to_builtins(result.speculative)
    if result.sessions:  # multi-turn runs: per-turn figures and the prefix-cache hit rate
        out["sessions"] = msgspec.to_builtins(result.sessions)
    if result.reasoning:  # a reasoning model: its thinking, the parser, or why none was seen
        out["reasoning"] = msgspec.to_builtins(result.reasoning)
    if result.repeats:  # run --repeat N: which repeat, and the statistics across them so far
        out["repeats"] = msgspec.to_builtins(result.repeats)
    if result.lora is not None:  # --lora-mix: the mix and the figures per adapter
        lora = msgspec.to_builtins(result.lora)
        out["lora"] = {k: lora[k] for k in ("mix", "seed", "shares", "per_adapter")}
    if result.quality is not None:  # run --quality: the check's figures, not its records
        q = msgspec.to_builtins(result.quality)
        out["quality"] = {k: v for k, v in q.items() if k not in ("outcomes", "passages")}
    out["valid"] = result.validity.valid if result.validity else None
    out["complete"] = result.complete
    return out
