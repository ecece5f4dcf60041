"""Perplexity and KL divergence from the log-probabilities a completions API returns.

Natural logarithms throughout (the OpenAI-compatible APIs return ``ln p``).

- Perplexity of a text: ``exp(-(1/N) Σ ln p(t_i | t_<i))`` over its ``N`` scored tokens (each
  prompt's first token has no context and is not scored).
- KL divergence at one position, from top-k log-probabilities: the reference ``P`` and the
  candidate ``Q`` are each known only on their top ``k`` tokens, so both are coarsened to the
  reference's top-k tokens plus one bucket "every other token":
  ``KL = Σ_{t ∈ topk(P)} p_t ln(p_t / q_t) + p_rest ln(p_rest / q_rest)`` with
  ``p_rest = 1 - Σ p_t``, ``q_rest = 1 - Σ q_t``. A token of the reference's top-k missing from
  the candidate's is given the candidate's smallest top-k log-probability (an upper bound on
  its ``q_t``). By the data-processing inequality the coarsened KL is at most the full one; with
  ``k`` covering nearly all of ``P``'s mass the two agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

#: Probabilities are floored here before a logarithm (a bucket that rounds to zero).
_FLOOR = 1e-12


def perplexity(logprobs: Sequence[float]) -> float:
    """``exp(-mean(logprobs))``: the perplexity of tokens with these natural-log probabilities.
    Needs at least one value."""
    if not logprobs:
        raise ValueError("perplexity needs at least one scored token")
    return math.exp(-sum(logprobs) / len(logprobs))


def kl_top_k(reference: Mapping[str, float], candidate: Mapping[str, float]) -> float:
    """The KL divergence ``KL(P || Q)`` in nats at one position, from the reference's and the
    candidate's top-k log-probabilities (token -> ln p), coarsened as the module says.
    Both mappings must be non-empty."""
    if not reference or not candidate:
        raise ValueError("KL needs both top-k lists")
    q_missing = min(candidate.values())
    kl = 0.0
    p_in = q_in = 0.0
    for token, lp in reference.items():
        lq = candidate.get(token, q_missing)
        p = math.exp(lp)
        p_in += p
        q_in += math.exp(lq)
        kl += p * (lp - lq)
    p_rest = max(_FLOOR, 1.0 - p_in)
    q_rest = max(_FLOOR, 1.0 - q_in)
    if p_in < 1.0 - _FLOOR:
        kl += p_rest * math.log(p_rest / q_rest)
    return max(0.0, kl)


def mean_kl(
    reference: Sequence[Mapping[str, float]], candidate: Sequence[Mapping[str, float]]
) -> float:
    """The mean of :func:`kl_top_k` over positions paired by index (two equally long lists of
    top-k mappings of the same tokens)."""
    if len(reference) != len(candidate) or not reference:
        raise ValueError(f"need equally long non-empty lists, got {len(reference)} and "
                         f"{len(candidate)}")
    return sum(kl_top_k(p, q) for p, q in zip(reference, candidate, strict=True)) / len(reference)
