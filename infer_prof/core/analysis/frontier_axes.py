"""The frontier's axes on one load point, read off its result document.

Pure. Every run point carries, in its ``summary`` (issue 23 §1; names are part of the result
format, scripts read them):

==============================  ====================================================  =========
key                             formula                                               unit
==============================  ====================================================  =========
interactivity_tok_s_user        1000 / TPOT p50 (ms)                                  tok/s/user
interactivity_p90_tok_s_user    1000 / TPOT p90 (ms): the slower users                tok/s/user
output_tok_s_per_gpu            output_throughput / GPUs used                          tok/s/GPU
input_tok_s_per_gpu             (total_throughput - output_throughput) / GPUs used     tok/s/GPU
total_tok_s_per_gpu             total_throughput / GPUs used                           tok/s/GPU
usd_per_million_output_tokens   $/GPU-hour / (output_tok_s_per_gpu x 3600 / 1e6)      $
usd_per_million_input_tokens    $/GPU-hour / (input_tok_s_per_gpu x 3600 / 1e6)       $
usd_per_million_total_tokens    $/GPU-hour / (total_tok_s_per_gpu x 3600 / 1e6)       $
joules_per_output_token         energy / output tokens (see below)                    J
joules_per_total_token          energy / (prompt + output) tokens                     J
==============================  ====================================================  =========

**GPUs used** are those the engine ran on: tensor x pipeline x data parallel size, read from
the vLLM command line infer-prof started (``server.command``: ``--tensor-parallel-size``/``-tp``,
``--pipeline-parallel-size``/``-pp``, ``--data-parallel-size``/``-dp``; each 1 when absent); for
an ``--endpoint`` (infer-prof cannot see its engine) ``--gpus N``, default 1. The price is the
per-GPU hourly price the point was run with (``cost.usd_per_gpu_hour``), so the three costs
are what that many GPUs cost per million tokens of each kind; each divides the whole price by
one kind of token, so they do not add up. Energy is the NVML reading over the measured window
(``energy.energy_j``); in a closed loop whose rates are over the streams' mean span, J/token is
the window's mean power over the token rate, as ``energy.joules_per_output_token`` is.

With ``--interactivity-of answer`` (``config.interactivity_of``) the two interactivities read
the answer-only TPOT (``answer_tpot_ms``: a reasoning model's answer tokens) instead of TPOT,
where the point measured one; throughput and cost keep every output token (a user pays for the
reasoning tokens too).

Anything that cannot be known (no TPOT, no throughput, no price, no NVML) is None, never 0.
An older result file without these keys gets them derived by :func:`result_axes` from what it
did record (the same formulas; None where the inputs are missing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infer_prof.core.analysis.frontier import FrontierPoint, interactivity, usd_per_million
from infer_prof.core.measurement.timeseries import joules_per_token, joules_per_token_at_rate

#: The per-point axes, in the order tables show them.
AXIS_KEYS = (
    "interactivity_tok_s_user",
    "interactivity_p90_tok_s_user",
    "output_tok_s_per_gpu",
    "input_tok_s_per_gpu",
    "total_tok_s_per_gpu",
    "usd_per_million_output_tokens",
    "usd_per_million_input_tokens",
    "usd_per_million_total_tokens",
    "joules_per_output_token",
    "joules_per_total_token",
)

_PARALLEL_FLAGS = (
    ("--tensor-parallel-size", "-tp"),
    ("--pipeline-parallel-size", "-pp"),
    ("--data-parallel-size", "-dp"),
)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def flag_value(argv: Sequence[str], names: Sequence[str]) -> str | None:
    """The value of the last of ``names`` in ``argv`` (``--flag V`` or ``--flag=V``; the last
    wins, as argparse does), None when absent."""
    found = None
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                found = argv[i + 1]
            elif arg.startswith(name + "="):
                found = arg.split("=", 1)[1]
    return found


def engine_gpus(argv: Sequence[str]) -> int:
    """GPUs a vLLM command line uses: tensor x pipeline x data parallel size (each 1 when
    absent or unreadable)."""
    total = 1
    for names in _PARALLEL_FLAGS:
        raw = flag_value(argv, names)
        try:
            n = int(raw) if raw is not None else 1
        except ValueError:
            n = 1
        total *= max(1, n)
    return total


def gpus_used(result: Mapping[str, Any]) -> tuple[int, str]:
    """The GPUs a run point's engine used, and how that was known (module docstring):
    ``--endpoint`` -> ``--gpus`` (default 1); a started server -> its command line; else the
    configured / planned tensor parallel size (older files without a recorded command)."""
    config = _map(result.get("config"))
    if config.get("endpoint"):
        n = config.get("gpus")
        return (int(n), "--gpus") if isinstance(n, int) and n >= 1 else (1, "endpoint default 1")
    command = _map(result.get("server")).get("command")
    if isinstance(command, list) and command:
        return engine_gpus([str(a) for a in command]), "server command (tp x pp x dp)"
    args = [str(a) for a in config.get("engine_args") or []]
    if flag_value(args, _PARALLEL_FLAGS[0]) is None:
        planned = _map(_map(result.get("plan")).get("engine_args"))
        tp = config.get("tensor_parallel_size") or planned.get("tensor_parallel_size") or 1
        args = ["--tensor-parallel-size", str(tp), *args]
    return engine_gpus(args), "configuration (tp x pp x dp)"


def point_axes(
    summary: Mapping[str, Any],
    gpus: int,
    usd_per_gpu_hour: float | None,
    energy_j: float | None,
    interactivity_of: str = "all",
) -> dict[str, float | None]:
    """The :data:`AXIS_KEYS` of one point from its summary (``tpot_ms``, ``output_throughput``,
    ``total_throughput``, token counts, rate window), the GPUs used, the price per GPU-hour and
    the measured energy (J; None without NVML). ``interactivity_of`` ``answer``: interactivity
    from ``answer_tpot_ms`` where the point has one (else TPOT: every token was answer)."""
    if gpus < 1:
        raise ValueError(f"gpus must be at least 1, got {gpus}")
    tpot = _map(summary.get("tpot_ms"))
    if interactivity_of == "answer" and _map(summary.get("answer_tpot_ms")).get("p50") is not None:
        tpot = _map(summary.get("answer_tpot_ms"))
    out_tps, tot_tps = _num(summary.get("output_throughput")), _num(summary.get("total_throughput"))
    in_tps = tot_tps - out_tps if out_tps is not None and tot_tps is not None else None

    def gpu_share(tps: float | None) -> float | None:
        return None if tps is None else tps / gpus

    def cost(tps: float | None) -> float | None:
        return None if tps is None else usd_per_million(usd_per_gpu_hour, tps / gpus)

    def joules(tps: float | None, tokens: float | None) -> float | None:
        if summary.get("rate_basis") == "stream_spans":
            return joules_per_token_at_rate(energy_j, _num(summary.get("duration_s")), tps)
        return joules_per_token(energy_j, tokens)

    out_tokens = _num(summary.get("total_output_tokens"))
    prompt_tokens = _num(summary.get("total_prompt_tokens"))
    all_tokens = (out_tokens + prompt_tokens
                  if out_tokens is not None and prompt_tokens is not None else None)
    return {
        "interactivity_tok_s_user": interactivity(_num(tpot.get("p50"))),
        "interactivity_p90_tok_s_user": interactivity(_num(tpot.get("p90"))),
        "output_tok_s_per_gpu": gpu_share(out_tps),
        "input_tok_s_per_gpu": gpu_share(in_tps),
        "total_tok_s_per_gpu": gpu_share(tot_tps),
        "usd_per_million_output_tokens": cost(out_tps),
        "usd_per_million_input_tokens": cost(in_tps),
        "usd_per_million_total_tokens": cost(tot_tps),
        "joules_per_output_token": joules(out_tps, out_tokens),
        "joules_per_total_token": joules(tot_tps, all_tokens),
    }


def run_price(result: Mapping[str, Any]) -> float | None:
    """The per-GPU hourly price the point ran with (``cost.usd_per_gpu_hour`` of an available
    cost block), None without one."""
    cost = _map(result.get("cost"))
    if cost.get("available") is False:
        return None
    return _num(cost.get("usd_per_gpu_hour"))


def result_axes(result: Mapping[str, Any]) -> dict[str, float | None]:
    """:func:`point_axes` of a result document: its summary, :func:`gpus_used`,
    :func:`run_price` and ``energy.energy_j``."""
    gpus, _ = gpus_used(result)
    return point_axes(_map(result.get("summary")), gpus, run_price(result),
                      _num(_map(result.get("energy")).get("energy_j")),
                      str(_map(result.get("config")).get("interactivity_of") or "all"))


def summary_with_axes(result: Mapping[str, Any]) -> dict[str, Any]:
    """The result's summary with every :data:`AXIS_KEYS` present: those it recorded kept,
    the missing ones derived (:func:`result_axes`; None where they cannot be)."""
    summary = dict(_map(result.get("summary")))
    if all(k in summary for k in AXIS_KEYS):
        return summary
    derived = result_axes(result)
    for k in AXIS_KEYS:
        summary.setdefault(k, derived[k])
    return summary


def point_from_result(
    result: Mapping[str, Any], concurrency: float | None = None,
) -> FrontierPoint | None:
    """A :class:`FrontierPoint` from one run point's result (axes recorded or derived); its
    concurrency the closed loop's streams or the open loop's rate unless given. None when the
    point has no throughput (nothing to place)."""
    s = summary_with_axes(result)
    if concurrency is None:
        load = _map(result.get("load"))
        config = _map(result.get("config"))
        c = load.get("concurrency") if load.get("mode") != "open" else load.get("rate")
        concurrency = _num(c if c is not None else config.get("concurrency"))
    out, inp, tot = (_num(s.get(k)) for k in (
        "output_tok_s_per_gpu", "input_tok_s_per_gpu", "total_tok_s_per_gpu"))
    if out is None or inp is None or tot is None or concurrency is None:
        return None
    return FrontierPoint(
        concurrency=concurrency,
        interactivity=_num(s.get("interactivity_tok_s_user")),
        interactivity_p90=_num(s.get("interactivity_p90_tok_s_user")),
        output_tok_s_per_gpu=out,
        input_tok_s_per_gpu=inp,
        total_tok_s_per_gpu=tot,
        usd_per_million_output_tokens=_num(s.get("usd_per_million_output_tokens")),
        usd_per_million_input_tokens=_num(s.get("usd_per_million_input_tokens")),
        usd_per_million_total_tokens=_num(s.get("usd_per_million_total_tokens")),
    )
