"""The result's ``lora`` section: the LoRA adapters a run served, how its requests were spread
over them (``run --lora-modules``, ``--lora-mix``) and the figures of each beside the whole.

Built by :mod:`infer_prof.run.lora_setup` (the adapters and the mix) and
:func:`infer_prof.core.measurement.adapter_figures.per_adapter` (the figures; their rates are
over the whole run's window, so the adapters' rates add up to the run's).
"""

from __future__ import annotations

from infer_prof.results.document_base import Distribution, Section


class AdapterServed(Section):
    """One adapter of the run: its ``name`` (what requests sent as ``model``), its folder
    (``path``, None for an adapter an endpoint serves), its ``rank`` and ``alpha`` as its
    ``adapter_config.json`` says, and the SHA-256 of its weight file (what the configuration
    fingerprint compares)."""

    name: str
    path: str | None = None
    rank: int | None = None
    alpha: float | None = None
    target_modules: list[str] = []
    sha256: str | None = None


class AdapterFigures(Section):
    """One adapter's figures (``base``: the served model itself): the share of requests the mix
    asked for it and the share of measured requests it got; requests completed and failed;
    TTFT, TPOT, ITL and E2E (milliseconds, as the run's summary defines them); requests/s and
    output and total tokens/s over the whole run's window (so the adapters' rates add up to the
    run's); output and prompt tokens."""

    adapter: str
    share_asked: float | None = None
    share_sent: float | None = None
    requests_completed: int | None = None
    requests_failed: int | None = None
    ttft_ms: Distribution | None = None
    tpot_ms: Distribution | None = None
    itl_ms: Distribution | None = None
    e2e_ms: Distribution | None = None
    request_throughput: float | None = None
    output_throughput: float | None = None
    total_throughput: float | None = None
    total_output_tokens: int | None = None
    total_prompt_tokens: int | None = None


class Lora(Section):
    """A run over LoRA adapters: the mix as given (``--lora-mix``; ``uniform`` when only
    ``--lora-modules`` was given), the seed that placed it, each name's share
    (``shares``: adapter name or ``base`` to a share, summing to 1), the adapters served, the
    engine's LoRA limits as launched (``max_lora_rank``, ``max_loras``: adapters one batch may
    hold; None on an endpoint), the adapters the server listed at ``/v1/models``, the most
    adapters vLLM ran at once over the window (its ``vllm:lora_requests_info``; None where the
    server does not say), and the figures per adapter (``per_adapter``, in the mix's order)."""

    mix: str
    seed: int | None = None
    shares: dict[str, float] = {}
    adapters: list[AdapterServed] = []
    max_lora_rank: int | None = None
    max_loras: int | None = None
    listed: list[str] = []
    adapters_running_max: float | None = None
    per_adapter: list[AdapterFigures] = []
