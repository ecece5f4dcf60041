"""What ``infer-prof estimate --json`` writes, as declared types (msgspec Structs).

Every throughput is tokens/s per GPU, every time ms, every cost $ per 1M tokens, and every
figure predicted (``predicted: true``), never measured. Scripts read these names: ``rows[]``
with ``gpu``, ``gpu_count``, ``precision``, ``points[]`` (``concurrency``,
``output_tok_s_per_gpu``, ``interactivity``, ``ttft_ms_p50``, ``tpot_ms_p50``), ``at_target``
(the shape of a result file's ``frontier.at_target``), ``usd_per_million_output_tokens``,
``instance``, ``predicted``, ``expected_error_pct``. With ``--calibrate-from`` / ``--measured``:
``factors_used``, ``calibrated_from``, ``measured_from`` and ``rows[].measured`` (the user's
measured runs of the row's configuration beside the prediction: those figures are measured,
``predicted: false``).

The configuration search adds, per row: ``kv_cache_dtype``, ``dtype``, ``runs_as``,
``weight_only``, ``interconnect`` / ``interconnect_gbps``, ``lossy``, ``expected_error``
(:class:`ErrorBand`, None: unvalidated), ``validated``,
``usd_per_million_output_tokens_pessimistic``; per document: ``rank_by``, ``all_configs``,
``unsupported[]`` (what vLLM does not run, and why) and ``search`` (:class:`SearchSummary`).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from infer_prof.core.estimate.factors import StepFactors
from infer_prof.results.frontier_sections import AtTarget

ReadAt = Literal["target", "slo", "max-throughput"]
RankBy = Literal["pessimistic", "point"]
Interconnect = Literal["nvlink", "infinity-fabric", "pcie"]


class Point(msgspec.Struct, kw_only=True):
    """One predicted load point of a row's frontier (closed loop at ``concurrency`` streams)."""

    concurrency: int
    output_tok_s_per_gpu: float
    input_tok_s_per_gpu: float
    total_tok_s_per_gpu: float
    interactivity: float
    ttft_ms_p50: float
    tpot_ms_p50: float
    bound: Literal["memory", "compute"]
    predicted: bool = True


class Instance(msgspec.Struct, kw_only=True):
    """The rented instance a row is priced from: ``usd_per_gpu_hour`` = the instance's price /
    its GPUs; ``reason`` how it was chosen (cheapest on-demand per GPU-hour, or the one asked
    for), ``source`` and ``date`` where the price comes from."""

    cloud: str
    instance_type: str
    region: str
    instance_gpus: int
    tier: Literal["on-demand", "spot"]
    usd_per_gpu_hour: float
    instance_usd_per_hour: float
    source: str
    date: str | None
    reason: str


class MeasuredPoint(msgspec.Struct, kw_only=True):
    """One measured run of a row's configuration (same model, GPU, GPU count, precision, input
    and output lengths) beside the prediction at its concurrency: measured ``output_tok_s_per_
    gpu``, ``interactivity`` (tokens/s per user), ``ttft_ms_p50``, ``tpot_ms_p50`` (None when
    the run did not record one), the ``predicted_*`` figures with the row's factors, and
    ``error_pct`` = (predicted / measured - 1) x 100 of output tokens/s per GPU. ``source``:
    the result file, or ``history:<run_id>``."""

    concurrency: int
    output_tok_s_per_gpu: float
    interactivity: float | None
    ttft_ms_p50: float | None
    tpot_ms_p50: float | None
    source: str
    run_id: str
    predicted_output_tok_s_per_gpu: float
    predicted_interactivity: float
    predicted_ttft_ms_p50: float
    predicted_tpot_ms_p50: float
    error_pct: float
    predicted: bool = False


class ErrorBand(msgspec.Struct, kw_only=True):
    """How far a row's prediction is expected to be off
    (:meth:`infer_prof.estimate.expected_error.ExpectedError.interval`): the median and 90th
    percentile of |predicted / measured - 1| of output tokens/s per GPU, in %, over ``n``
    points each predicted with its source held out of the fit, in the group ``basis`` names
    (its GPU family + precision + TP + interconnect cell, or the worst of its groups).
    ``validated`` False when its family, precision, TP size or interconnect has no held-out
    point (``missing`` names them): the figures are then the overall ones, a floor."""

    median_abs_pct: float | None
    p90_abs_pct: float | None
    n: int
    validated: bool
    basis: str
    missing: list[str] = []


class Row(msgspec.Struct, kw_only=True):
    """One configuration: ``gpu_count`` x ``gpu`` (tensor parallel) at ``precision``, its
    predicted frontier (``points``, concurrency 1, 2, 4, ... up to ``max_concurrency``, what
    the KV cache holds), and the read at the target (``at_target``; None when the frontier
    does not reach it: ``reaches_target`` False, ``best_interactivity`` its highest).
    ``ttft_ms_p50`` / ``tpot_ms_p50`` are read at the same place; the ``usd_per_million_*``
    repeat ``at_target``'s. ``expected_error_pct``: the median |error| of predicted output
    tokens/s per GPU found by validation, None while not yet validated.

    The configuration: ``kv_cache_dtype`` (``auto``: the model's 16-bit; ``fp8``), ``dtype``
    the 16-bit math (``bfloat16``; ``float16`` where vLLM has no bf16: compute capability below
    8.0), ``runs_as`` how vLLM runs the precision there and ``weight_only`` (weights dequantized
    to 16-bit math: fp8 through Marlin on Ampere, 4-bit formats), ``interconnect`` what the
    all-reduce runs over and ``interconnect_gbps`` its bidirectional GB/s per GPU (None on one
    GPU), ``lossy`` what costs accuracy (4-bit weights, an fp8 KV cache). How sure:
    ``expected_error`` the held-out error of its kind of configuration (None: no validation
    shipped), ``validated`` whether that kind was validated,
    ``usd_per_million_output_tokens_pessimistic`` the cost at the slow end, ``usd x (1 +
    p90_abs_pct / 100)`` (None when unvalidated)."""

    gpu: str
    gpu_name: str
    gpu_count: int
    precision: str
    max_concurrency: int
    points: list[Point]
    at_target: AtTarget | None
    reaches_target: bool
    best_interactivity: float
    ttft_ms_p50: float | None
    tpot_ms_p50: float | None
    usd_per_million_output_tokens: float | None
    usd_per_million_input_tokens: float | None
    usd_per_million_total_tokens: float | None
    instance: Instance | None
    factors: StepFactors
    expected_error_pct: float | None
    notes: list[str] = []
    measured: list[MeasuredPoint] = []
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    dtype: Literal["bfloat16", "float16"] = "bfloat16"
    runs_as: str = ""
    weight_only: bool = False
    interconnect: Interconnect | None = None
    interconnect_gbps: float | None = None
    lossy: list[str] = []
    expected_error: ErrorBand | None = None
    validated: bool = False
    usd_per_million_output_tokens_pessimistic: float | None = None
    predicted: bool = True


class Unsupported(msgspec.Struct, kw_only=True):
    """What the released vLLM does not run, not ranked: the ``gpu`` itself (``precision``
    None), or one weight ``precision`` or ``kv_cache_dtype`` on it; ``why`` one line naming the
    support table's source (``infer_prof/catalog/data/vllm_support.json``)."""

    gpu: str
    why: str
    precision: str | None = None
    kv_cache_dtype: str | None = None


class SearchSummary(msgspec.Struct, kw_only=True):
    """What the configuration search looked at: per GPU the ``gpu_counts`` tried (the counts
    its instances are sold with), the weight ``precisions`` and ``kv_cache_dtypes`` searched,
    how many configurations were ``planned`` (GPU count x precision x KV dtype on a GPU vLLM
    runs), ``predicted`` (held at least one sequence and had a link figure), and
    ``kept_out`` reason -> count (too big for the count, no link figure, a count that does not
    split the heads, lossy under ``--min-quality``)."""

    gpu_counts: dict[str, list[int]]
    precisions: list[str]
    kv_cache_dtypes: list[str]
    planned: int
    predicted: int
    kept_out: dict[str, int] = {}


class Skipped(msgspec.Struct, kw_only=True):
    """A GPU the estimate has no row for, and why (nothing fits, no price, no FLOP/s figure)."""

    gpu: str
    why: str


class MeasuredSource(msgspec.Struct, kw_only=True):
    """A source of measured runs (``--calibrate-from`` or ``--measured``): ``where`` it is,
    how many results were ``read``, how many were ``used`` and the others by reason
    (``unusable``: reason -> count)."""

    where: str
    read: int
    used: int
    unusable: dict[str, int] = {}


class FamilyFactors(msgspec.Struct, kw_only=True):
    """The factors the estimate used for one architecture family and where they came from:
    ``origin`` ``refitted`` (on ``runs`` measured runs; ``median_abs_error_pct_before`` /
    ``_after``: median |predicted / measured - 1| x 100 of output tokens/s per GPU at those
    runs with the shipped and the refitted factors) or ``shipped``; ``says`` one line."""

    family: str
    origin: Literal["refitted", "shipped"]
    says: str
    runs: int = 0
    median_abs_error_pct_before: float | None = None
    median_abs_error_pct_after: float | None = None


class EstimateDocument(msgspec.Struct, kw_only=True):
    """The whole answer: the question (model, lengths, target or SLOs), where rows are read
    (``read_at``), the rows ranked (``rank_by``: ``pessimistic``, validated rows first by the
    cost at their interval's slow end, then unvalidated ones by their central cost; ``point``:
    every row by its central cost; rows that do not reach the target last), each GPU's best
    configuration (every configuration with ``all_configs``), the GPUs left out, what vLLM
    does not run (``unsupported``), the search, the price market and the validation's word on
    the error. ``moe_layer_fixed_ms``: for a mixture-of-experts model, the milliseconds a step
    its MoE layers take beside the factors (each ``MOE_LAYER_FIXED_US``, set from vLLM's kernel
    benchmark: :mod:`infer_prof.core.estimate.moe_layer`); None for a dense model."""

    kind: Literal["estimate"] = "estimate"
    model: str
    input_len: int
    output_len: int
    target_interactivity: float | None
    slo: str | None
    read_at: ReadAt
    rows: list[Row]
    skipped: list[Skipped]
    prices: str
    expected_error: str
    factors_used: list[FamilyFactors] = []
    calibrated_from: MeasuredSource | None = None
    measured_from: MeasuredSource | None = None
    rank_by: RankBy = "pessimistic"
    all_configs: bool = False
    unsupported: list[Unsupported] = []
    search: SearchSummary | None = None
    moe_layer_fixed_ms: float | None = None
    predicted: bool = True
