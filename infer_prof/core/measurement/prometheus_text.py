"""Parser for the Prometheus text exposition format (0.0.4), as vLLM's ``/metrics`` serves it.

Pure: no I/O. Reference: https://prometheus.io/docs/instrumenting/exposition_formats/
"""

from __future__ import annotations

import math

Labels = dict[str, str]
Samples = dict[str, list[tuple[Labels, float]]]

_NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:")
_NAME_CHARS = _NAME_START | set("0123456789")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


class PrometheusParseError(ValueError):
    """A line of the exposition text is malformed; the message names the line number."""


def parse_prometheus_text(text: str) -> Samples:
    """Parse exposition text into ``{metric_name: [(labels, value), ...]}`` in text order.

    - ``# HELP``/``# TYPE``/other ``#`` lines and blank lines are skipped.
    - Label values may contain escaped ``\\\\``, ``\\"`` and ``\\n``; a trailing comma is allowed.
    - Values ``+Inf``, ``-Inf``, ``NaN`` become ``math.inf``, ``-math.inf``, ``math.nan``.
    - An optional trailing timestamp (integer ms) is accepted and dropped; so is an OpenMetrics
      exemplar (`` # {...} value``).
    - Histograms and summaries are not regrouped: ``x_bucket{le="0.5"}``, ``x_sum``, ``x_count``
      are plain samples under their own names.

    Raises ``PrometheusParseError`` (a ``ValueError``) naming the line for a malformed line.
    """
    out: Samples = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            name, labels, value = _parse_sample(line)
        except PrometheusParseError as exc:
            raise PrometheusParseError(f"line {lineno}: {exc}: {raw!r}") from None
        out.setdefault(name, []).append((labels, value))
    return out


def _parse_sample(line: str) -> tuple[str, Labels, float]:
    n = len(line)
    i = 0
    if line[0] not in _NAME_START:
        raise PrometheusParseError("metric name expected")
    while i < n and line[i] in _NAME_CHARS:
        i += 1
    name = line[:i]
    labels: Labels = {}
    j = i
    while j < n and line[j] in " \t":
        j += 1
    if j < n and line[j] == "{":
        labels, i = _parse_labels(line, j + 1)
    rest = line[i:]
    if rest and rest[0] not in " \t":
        raise PrometheusParseError("space expected before the value")
    # Drop an OpenMetrics exemplar ("value # {labels} value").
    hash_at = rest.find("#")
    if hash_at >= 0:
        rest = rest[:hash_at]
    fields = rest.split()
    if not fields or len(fields) > 2:
        raise PrometheusParseError("expected a value and an optional timestamp")
    return name, labels, _parse_value(fields[0])


def _parse_labels(line: str, i: int) -> tuple[Labels, int]:
    labels: Labels = {}
    n = len(line)
    while True:
        while i < n and line[i] in " \t":
            i += 1
        if i >= n:
            raise PrometheusParseError("unterminated label set")
        if line[i] == "}":
            return labels, i + 1
        start = i
        if line[i] not in _NAME_START:
            raise PrometheusParseError("label name expected")
        while i < n and line[i] in _NAME_CHARS:
            i += 1
        key = line[start:i]
        while i < n and line[i] in " \t":
            i += 1
        if i >= n or line[i] != "=":
            raise PrometheusParseError(f"'=' expected after label {key!r}")
        i += 1
        while i < n and line[i] in " \t":
            i += 1
        if i >= n or line[i] != '"':
            raise PrometheusParseError(f"quoted value expected for label {key!r}")
        i += 1
        chars: list[str] = []
        while True:
            if i >= n:
                raise PrometheusParseError(f"unterminated value of label {key!r}")
            c = line[i]
            if c == "\\":
                if i + 1 >= n:
                    raise PrometheusParseError(f"dangling escape in label {key!r}")
                nxt = line[i + 1]
                # Unknown escapes are kept verbatim, as Prometheus itself does.
                chars.append(_ESCAPES.get(nxt, "\\" + nxt))
                i += 2
                continue
            if c == '"':
                i += 1
                break
            chars.append(c)
            i += 1
        labels[key] = "".join(chars)
        while i < n and line[i] in " \t":
            i += 1
        if i < n and line[i] == ",":
            i += 1
        elif i < n and line[i] != "}":
            raise PrometheusParseError("',' or '}' expected in label set")


def _parse_value(token: str) -> float:
    low = token.lower()
    if low in ("+inf", "inf"):
        return math.inf
    if low == "-inf":
        return -math.inf
    if low == "nan":
        return math.nan
    try:
        return float(token)
    except ValueError:
        raise PrometheusParseError(f"bad sample value {token!r}") from None


def sum_samples(samples: Samples, name: str) -> float | None:
    """Sum of every sample of ``name`` over all its label sets, NaN samples left out.

    ``None`` when the metric is absent or has only NaN samples (not measured, not 0).
    """
    vals = [v for _, v in samples.get(name, []) if not math.isnan(v)]
    return sum(vals) if vals else None


def sum_by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    """``{label value: sum of the samples of name with it}`` (over the other labels: engines),
    NaN samples and samples without ``label`` left out; {} when the metric is absent. vLLM's
    ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"}`` by ``position``."""
    out: dict[str, float] = {}
    for labels, v in samples.get(name, []):
        key = labels.get(label)
        if key is not None and not math.isnan(v):
            out[key] = out.get(key, 0.0) + v
    return out


def max_samples(samples: Samples, name: str) -> float | None:
    """Largest sample of ``name`` over all its label sets; ``None`` when absent or all NaN."""
    vals = [v for _, v in samples.get(name, []) if not math.isnan(v)]
    return max(vals) if vals else None
