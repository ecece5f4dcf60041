"""Turning ``--turns`` / ``--think-time`` into a session run's plan (infer_prof.loadgen.sessions)
and the load points it applies to.

``--concurrency`` is the number of concurrent sessions (each closed-loop stream runs one session
at a time, a new one starting when one ends), so sweeps and ``--find-max`` work unchanged;
``--num-requests`` counts turns and is rounded up to whole sessions.
"""

from __future__ import annotations

from pathlib import Path

from infer_prof.catalog.models import ResolvedModel
from infer_prof.core.workload.distributions import Empirical
from infer_prof.core.workload.sessions import SessionSettings
from infer_prof.core.workload.workload_fields import WorkloadError
from infer_prof.core.workload.workloads import Workload
from infer_prof.loadgen.datasets import DatasetError
from infer_prof.loadgen.sessions import SessionPlan, load_sharegpt_sessions
from infer_prof.loadgen.text_prompts import load_tokenizer, server_token_counter
from infer_prof.run.config import Api, ConfigError, RunConfig


def attach_sessions(
    cfg: RunConfig, model: ResolvedModel, engine_path: str, points: list[Workload],
    api: Api | None = None,
) -> tuple[SessionPlan | None, list[Workload]]:
    """The session plan of ``--turns K`` (None without it) and the points with ``num_requests``
    rounded up to whole sessions (and, from a ShareGPT ``--dataset``, its per-turn lengths).
    Raises ConfigError on a combination that does not apply or a bad file. ``api``: the run's
    resolved API (default: the one given, ``cfg.engine.api``)."""
    if cfg.prompts.turns is None:  # (--think-time without --turns: refused by validate)
        return None, points
    clash: list[str] = []  # (--suite, --rate, --trace: refused by validate, run/config.py)
    if any(w.arrival.mode != "closed" for w in points):
        clash.append("an open-loop workload")
    if str(cfg.load.client_processes).strip().lower() not in ("auto", "1"):
        clash.append("--client-processes above 1")
    if any(w.shared_prefix.fraction > 0 for w in points):
        clash.append("the workload's shared_prefix")
    if clash:
        raise ConfigError(f"--turns runs closed-loop sessions in one client process; drop "
                          f"{clash[0]}")
    context = cfg.engine.max_model_len or (
        model.spec.max_position_embeddings if model.spec else None
    )
    path = cfg.prompts.dataset or points[0].dataset
    dataset = None
    as_ids = None
    prompt: str  # token-ids, text, or (chat) messages
    chat = (
        api or cfg.engine.api
    ) == "chat"  # turns go as chat messages: user, assistant, ..., user
    if path:
        try:
            tok = load_tokenizer(engine_path)
        except OSError as exc:
            raise ConfigError(f"--dataset: {exc}") from None
        try:
            dataset = load_sharegpt_sessions(
                Path(str(path)).expanduser(),
                server_token_counter(tok),
                turns=cfg.prompts.turns,
                context=context,
                output_len=cfg.prompts.output_len,
                sample=cfg.prompts.dataset_sample,
                seed=points[0].seed,
                chat=chat,
            )
        except DatasetError as exc:
            raise ConfigError(str(exc)) from None
        dataset.path = str(path)
        prompt = cfg.prompts.prompt or "text"
        if prompt == "token-ids":
            as_ids = lambda text: list(tok.encode(text, add_special_tokens=True).ids)  # noqa: E731
    else:
        prompt = cfg.prompts.prompt or "token-ids"
    if chat:
        prompt = "messages"  # --prompt token-ids with --api chat was refused (check_api)
    settings = SessionSettings(
        cfg.prompts.turns,
        cfg.prompts.think_time_s,
        "sharegpt" if dataset else "synthetic",
        None,
        prompt,
    )
    plan = SessionPlan(settings, dataset, as_ids)
    out = []
    try:
        for w in points:
            if dataset is not None:
                turns = [t for c in dataset.conversations for t in c]
                w = w.with_overrides(
                    input_len=_histogram([t[1] for t in turns]),
                    output_len=_histogram([t[2] for t in turns]),
                )
            n = plan.sessions_for(w.num_requests)
            out.append(w.with_overrides(num_requests=plan.turns_for(n)) if n else w)
    except WorkloadError as exc:
        raise ConfigError(str(exc)) from None
    if dataset is None:
        w = out[0]
        longest = plan.longest(w.input_len, w.output_len)
        if context is not None and longest > context:
            raise ConfigError(
                f"{cfg.prompts.turns} turns of up to {w.input_len.support()[1]} input and "
                f"{w.output_len.support()[1]} output tokens reach {longest} tokens, more than "
                f"the model's context of {context}; use fewer --turns, shorter lengths or a "
                "larger --max-model-len"
            )
    plan.settings = SessionSettings(
        cfg.prompts.turns,
        cfg.prompts.think_time_s,
        settings.source,
        plan.sessions_for(out[0].num_requests),
        prompt,
    )
    return plan, out


def _histogram(values: list[int]) -> Empirical:
    counts: dict[int, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return Empirical(tuple((v, v, float(c)) for v, c in sorted(counts.items())))
