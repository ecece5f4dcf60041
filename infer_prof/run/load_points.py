"""The load points of a run: its workload (file or command line), sweep or suite points,
and the requests each point sends (token-ID prompts of exactly the drawn lengths)."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infer_prof.catalog.models import ResolvedModel
from infer_prof.catalog.workloads import WorkloadNotFoundError, expand_suite, load_workload
from infer_prof.config.run_groups import EngineConfig, LoadConfig
from infer_prof.core.measurement.warmup import staggered_output_len
from infer_prof.core.workload.distributions import Empirical, Fixed
from infer_prof.core.workload.workload_fields import WorkloadError
from infer_prof.core.workload.workload_sampling import sample_requests
from infer_prof.core.workload.workloads import (
    Arrival,
    Workload,
)
from infer_prof.loadgen.closed_loop import (
    Prompt,
    RequestSpec,
)
from infer_prof.loadgen.datasets import (
    Dataset,
    DatasetError,
    chat_template_renderer,
    load_dataset,
)
from infer_prof.loadgen.prompts import TokenPool, make_prompt
from infer_prof.loadgen.text_prompts import TextPromptMaker, load_tokenizer, server_token_counter
from infer_prof.loadgen.traces import Trace, TraceError, load_trace, parse_window
from infer_prof.loadgen.workers import (
    TLS_READ_COST_FACTOR,
    choose_processes,
    expected_events_per_s,
)
from infer_prof.run.config import Api, ConfigError, RunConfig
from infer_prof.run.point_prompts import group_prefix, hashed_prompt
from infer_prof.run.warmup import DURATION_DRAWS, continuous_warmup, warmup_pool_size


def _shape_overrides(cfg: RunConfig) -> dict[str, Any]:
    """The command-line values that replace a workload's fields (None keeps the field)."""
    return {
        "input_len": cfg.prompts.input_len,
        "output_len": cfg.prompts.output_len,
        "num_requests": cfg.load.num_requests,
        "duration_s": cfg.load.duration_s,
        "warmup_requests": cfg.load.warmup_requests,
        "warmup": cfg.load.warmup,
        "seed": cfg.prompts.seed,
        "min_requests": cfg.load.min_requests,
        "min_duration_s": cfg.load.min_duration_s,
    }


def base_workload(cfg: RunConfig) -> Workload:
    """The workload file (``--workload``) or the built-in default, with the command line's
    values replacing its fields."""
    if cfg.load.workload:
        try:
            wl = load_workload(cfg.load.workload)
        except (WorkloadError, WorkloadNotFoundError) as exc:
            raise ConfigError(str(exc)) from None
    else:
        wl = Workload(
            name="custom",
            input_len=Fixed(128),
            output_len=Fixed(128),
            num_requests=200,
            arrival=Arrival.closed(16),
            seed=0,
            source="command line",
        )
    try:
        return wl.with_overrides(**_shape_overrides(cfg))
    except WorkloadError as exc:
        raise ConfigError(str(exc)) from None


def load_points(load: LoadConfig, wl: Workload) -> list[Workload]:
    """One workload per load point: ``--concurrency a,b,c`` (closed loop), ``--rate x,y``
    (open loop), or the workload's own arrival."""
    extra = {"burstiness": load.burstiness, "max_concurrency": load.max_concurrency}
    try:
        if load.rates:
            return [wl.with_overrides(rate=r, **extra) for r in load.rates]
        if load.concurrency:
            return [wl.with_overrides(concurrency=c) for c in load.concurrency]
        return [wl.with_overrides(**extra)]
    except WorkloadError as exc:
        raise ConfigError(str(exc)) from None


def suite_points(cfg: RunConfig) -> list[Workload]:
    """Every load point of a suite (``--suite``, scaled by ``--scale``), with the command
    line's request-count, seed and validity overrides applied to each (--workload,
    --concurrency and --rate with --suite are refused by validate, run/config.py)."""
    try:
        runs = expand_suite(cfg.load.suite or "", cfg.load.scale)
        overrides = _shape_overrides(cfg)
        return [p.with_overrides(**overrides) for r in runs for p in r.points()]
    except (WorkloadError, WorkloadNotFoundError) as exc:
        raise ConfigError(str(exc)) from None


def check_context(points: list[Workload], engine: EngineConfig, model: ResolvedModel) -> int:
    """The longest sequence the points can ask for (input + output, tokens); raises
    ConfigError when it exceeds the model's context."""
    longest = max(w.input_len.support()[1] + w.output_len.support()[1] for w in points)
    context = engine.max_model_len or (
        model.spec.max_position_embeddings if model.spec else None)
    if context is not None and longest > context:
        w = points[0]
        raise ConfigError(
            f"input ({w.input_len.support()[1]}) + output ({w.output_len.support()[1]}) = "
            f"{longest} tokens exceeds the model's context of {context}; shorten "
            "--input-len/--output-len or raise --max-model-len"
        )
    return longest


def point_concurrency(w: Workload) -> int:
    """Streams a point can have in flight, for planning (open loop without a cap: 64)."""
    a = w.arrival
    return (a.concurrency or 1) if a.mode == "closed" else (a.max_concurrency or 64)


def client_processes(
    setting: str | int, w: Workload, cores: int | None = None, tls: bool = False
) -> int:
    """Client processes for load point ``w``: ``setting`` is ``--client-processes`` (a positive
    integer, or "auto"); ``tls``: the endpoint is https.

    auto: :func:`~infer_prof.loadgen.workers.choose_processes` on the point's expected token
    events/s (:func:`~infer_prof.loadgen.workers.expected_events_per_s`: closed loop
    concurrency / 10 ms; open loop rate x mean output tokens, or max_concurrency / 10 ms at an
    infinite rate), one process per ``EVENTS_PER_PROCESS`` events/s (80k with the C reader,
    40k with the Python one; over TLS each event counts ``TLS_READ_COST_FACTOR`` times), at most
    ``cores``. Either way, never more
    processes than the point can have streams: its concurrency (closed loop), its
    max_concurrency, else its request count (open loop).
    """
    a = w.arrival
    if a.mode == "closed":
        streams = a.concurrency or 1
    else:
        streams = a.max_concurrency or w.num_requests or 1_000_000
    if str(setting).strip().lower() != "auto":
        return max(1, min(int(setting), streams))
    events = expected_events_per_s(
        a.mode, a.concurrency, a.rate, w.output_len.mean(), a.max_concurrency
    )
    if tls:
        events *= TLS_READ_COST_FACTOR
    return choose_processes(streams, events, cores)


def point_label(w: Workload) -> str:
    a = w.arrival
    if a.mode == "closed":
        return f"c{a.concurrency}"
    rate = "inf" if a.rate is None or a.rate == float("inf") else f"{a.rate:g}"
    return f"r{rate}"


def token_pool(model: ResolvedModel, engine_path: str) -> TokenPool:
    if model.has_tokenizer:
        with contextlib.suppress(Exception):
            return TokenPool.from_tokenizer_dir(engine_path)
    vocab = model.spec.vocab_size if model.spec else 32000
    return TokenPool.from_vocab_size(vocab)


def prompt_mode(cfg: RunConfig, dataset: Dataset | None, api: Api | None = None) -> str:
    """What prompts are sent as: ``--prompt``, else text for the chat API or a dataset, else
    token IDs. ``api``: the run's resolved API (:attr:`infer_prof.run.planning.RunPlan.api`;
    default: the one given, ``cfg.engine.api``)."""
    chat = (api or cfg.engine.api) == "chat"
    return cfg.prompts.prompt or ("text" if dataset is not None or chat else "token-ids")


def text_maker(
    cfg: RunConfig, engine_path: str, dataset: Dataset | None, api: Api | None = None
) -> TextPromptMaker | None:
    """The exact-length text prompt builder for ``--prompt text`` without a dataset (None
    otherwise); raises ConfigError when the model has no ``tokenizer.json``. ``api``: as for
    :func:`prompt_mode`."""
    api = api or cfg.engine.api
    if prompt_mode(cfg, dataset, api) != "text" or dataset is not None:
        return None
    try:
        return TextPromptMaker.from_tokenizer_dir(engine_path)
    except (OSError, ValueError) as exc:
        if api == "chat":
            raise ConfigError(
                f"--api chat needs text prompts: {exc}; give a --model with a "
                "tokenizer, or use --api completions"
            ) from None
        raise ConfigError(f"--prompt text: {exc}; use --prompt token-ids") from None


def check_chat_template(engine: EngineConfig, engine_path: str, api: Api | None = None) -> None:
    """``--api chat`` on a server infer-prof starts needs a model with a chat template (vLLM
    refuses chat requests without one): raises ConfigError when the model folder has none and
    no ``--chat-template`` engine argument gives one. An ``--endpoint`` brings its own.
    ``api``: as for :func:`prompt_mode`."""
    if (api or engine.api) != "chat" or engine.endpoint:
        return
    if any(a.startswith("--chat-template") for a in engine.engine_args):
        return
    if chat_template_renderer(engine_path) is None:
        raise ConfigError(
            f"--api chat: the model at {engine_path} has no chat template "
            "(tokenizer_config.json chat_template or chat_template.jinja); give "
            "--engine-arg=--chat-template=FILE or use --api completions"
        )


def dataset_ids(
    cfg: RunConfig, engine_path: str, dataset: Dataset | None, api: Api | None = None
) -> Callable[[str], list[int]] | None:
    """With a dataset and ``--prompt token-ids``: text -> the token IDs the server would make
    of it (special tokens included, so the count is the same); else None (text is sent)."""
    if dataset is None or prompt_mode(cfg, dataset, api) != "token-ids":
        return None
    tok = load_tokenizer(engine_path)
    return lambda text: list(tok.encode(text, add_special_tokens=True).ids)


def attach_dataset(
    cfg: RunConfig, model: ResolvedModel, engine_path: str, points: list[Workload]
) -> tuple[Dataset | None, list[Workload]]:
    """Load the dataset ``--dataset`` (or the workload's ``dataset``) names, if any, and give
    each point the dataset's length distributions (an empirical histogram of its entries), so
    that planning, the duration estimate and the result see the lengths actually sent.
    Raises ConfigError on a bad file (one line naming file, line and field)."""
    names = {cfg.prompts.dataset or w.dataset for w in points}
    if names == {None}:
        return None, points
    if len(names) > 1 or cfg.load.suite:
        raise ConfigError(
            "a dataset applies to one workload: give --dataset with --workload or "
            "the command line, not with --suite"
        )
    path = str(next(iter(names)))
    if any(w.shared_prefix.fraction > 0 for w in points):
        raise ConfigError(
            "shared_prefix does not apply to a dataset's prompts; remove it from "
            "the workload or drop --dataset"
        )
    try:
        tok = load_tokenizer(engine_path)
    except OSError as exc:
        raise ConfigError(f"--dataset: {exc}") from None
    wl = points[0]
    out_dist = wl.output_len
    context = cfg.engine.max_model_len or (
        model.spec.max_position_embeddings if model.spec else None
    )
    try:
        ds = load_dataset(
            Path(path).expanduser(),
            server_token_counter(tok),
            chat=chat_template_renderer(engine_path),
            context=context,
            output_len=cfg.prompts.output_len,
            default_output=lambda rng: out_dist.sample(rng, 1)[0],
            sample=cfg.prompts.dataset_sample,
            seed=wl.seed,
        )
    except DatasetError as exc:
        raise ConfigError(str(exc)) from None
    ds.path = path
    inp = _histogram([e.input_len for e in ds.entries])
    out = _histogram([e.output_len for e in ds.entries])
    try:
        return ds, [w.with_overrides(input_len=inp, output_len=out) for w in points]
    except WorkloadError as exc:
        raise ConfigError(str(exc)) from None


def attach_trace(
    cfg: RunConfig, model: ResolvedModel, points: list[Workload]
) -> tuple[Trace | None, list[Workload]]:
    """Load ``--trace`` (if given) and make the point an open loop that replays it: one
    request per trace entry (``--num-requests`` keeps the first N), its exact lengths, no
    warm-up unless asked. Raises ConfigError on a bad file or a combination that does not
    apply (another load shape, lengths, a dataset, a suite)."""
    if not cfg.prompts.trace:
        return None, points
    if points[0].dataset:  # (the options that clash with --trace: refused by validate)
        raise ConfigError("--trace sets the arrivals and lengths itself; drop --dataset")
    context = cfg.engine.max_model_len or (
        model.spec.max_position_embeddings if model.spec else None
    )
    try:
        window = parse_window(cfg.prompts.trace_window)
        trace = load_trace(
            Path(cfg.prompts.trace).expanduser(),
            window=window,
            time_scale=cfg.prompts.time_scale,
            context=context,
        )
    except (TraceError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    if cfg.load.num_requests is not None and cfg.load.num_requests < len(trace.offsets):
        n = cfg.load.num_requests
        trace.offsets, trace.input_lens = trace.offsets[:n], trace.input_lens[:n]
        trace.output_lens = trace.output_lens[:n]
        if trace.hash_ids is not None:
            trace.hash_ids = trace.hash_ids[:n]
    rate = trace.scheduled_rate() or 1.0
    warm = 0 if cfg.load.warmup is None and cfg.load.warmup_requests is None else None
    try:
        return trace, [
            w.with_overrides(
                rate=rate,
                num_requests=len(trace.offsets),
                warmup_requests=warm,
                input_len=_histogram(trace.input_lens),
                output_len=_histogram(trace.output_lens),
                prefix_fraction=0.0 if w.shared_prefix.fraction else None,
            )
            for w in points
        ]
    except WorkloadError as exc:
        raise ConfigError(str(exc)) from None


def _histogram(values: list[int]) -> Empirical:
    counts: dict[int, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return Empirical(tuple((v, v, float(c)) for v, c in sorted(counts.items())))


@dataclass(frozen=True)
class SpecOptions:
    """How :func:`build_specs` makes a point's requests beyond its workload: ``stagger`` the
    warm-up's output lengths, and the ``salt`` of its prompts' seeds."""

    stagger: bool = True
    salt: str = ""


def build_specs(
    wl: Workload,
    pool: TokenPool,
    text: TextPromptMaker | None = None,
    dataset: Dataset | None = None,
    as_ids: Callable[[str], list[int]] | None = None,
    trace: Trace | None = None,
    chat: bool = False,
    options: SpecOptions = SpecOptions(),
) -> tuple[Iterator[RequestSpec] | list[RequestSpec], Iterator[RequestSpec], int | None]:
    """Warm-up specs (a list for a counted warm-up, a lazy iterator for a continuous one, see
    :func:`continuous_warmup`), a lazy iterator of measured specs, and how many measured there
    are (None when bound by duration). Lengths come from the workload's seeded draws; prompts
    are token IDs of exactly the drawn length (or, with ``text``, text of exactly that many
    tokens), with a group's shared prefix where asked. With a ``dataset``, request ``k``
    (warm-up first) is entry ``k mod entries``: its text (or ``as_ids(text)``, token IDs) and
    lengths (``chat``: a messages entry's messages). With a ``trace``, the measured requests
    are its entries in order (exact lengths), a warm-up cycles through its first ones.

    ``options.stagger`` (a warm-up under the load itself only, see :func:`continuous_warmup`; the
    caller turns it off for multi-turn sessions, whose warm-up ends before they start): the
    first ``concurrency`` warm-up requests ask spread output lengths
    (:func:`~infer_prof.core.measurement.warmup.staggered_output_len`), so the streams leave the
    warm-up out of phase instead of locked in waves.

    ``options.salt`` (:func:`~infer_prof.run.point_prompts.point_salt`) goes into every seed
    of the point's prompts, so that the points of one launch (a sweep, a frontier, repeats)
    never send each other's prompts: none can find another's in the prefix cache. The
    warm-up's shared prefixes are its own
    (:func:`~infer_prof.run.point_prompts.group_prefix`), so a warm-up never primes the cache
    for the measured requests: only ``--prefix-cache warm`` does."""
    n_measured = wl.num_requests
    n_warm = warmup_pool_size(wl)
    salt = options.salt
    streams = (wl.arrival.concurrency or 1) if options.stagger and continuous_warmup(wl) else 0
    if dataset is not None:
        return _dataset_specs(wl, dataset, n_warm, as_ids, chat, streams)
    if trace is not None:
        pairs = list(zip(trace.input_lens, trace.output_lens, strict=True))
        order = [pairs[k % len(pairs)] for k in range(n_warm)] + pairs
        shapes: list[tuple[int, int, int | None]] = [(i, o, None) for i, o in order]
    else:
        total = n_warm + (n_measured if n_measured is not None else DURATION_DRAWS)
        shapes = sample_requests(wl, total)
    prefixes: dict[tuple[int, bool], Any] = {}
    sp = wl.shared_prefix

    def prompt(i: int, length: int, group: int | None) -> list[int] | str:
        rng = random.Random(f"{wl.seed}{salt}/prompt/{i}")
        head: Any = "" if text is not None else []
        if group is not None and sp.length:
            key = (group, i < 0)  # (a warm-up request's index is negative)
            if key not in prefixes:
                prefixes[key] = group_prefix(wl, pool, text, group, salt, warmup=i < 0)
            head = prefixes[key]
        if text is not None:
            return text.make(length, rng, head)
        return make_prompt(pool, length, rng, head)

    def warm_specs() -> Iterator[RequestSpec]:
        for i, (inp, out, grp) in enumerate(shapes[:n_warm]):
            out = staggered_output_len(out, i, streams)
            yield RequestSpec(-1 - i, prompt(-1 - i, inp, grp), inp, out, warmup=True)

    hashed = trace.hash_ids if trace is not None else None
    blocks: dict[int, Any] = {}

    def measured() -> Iterator[RequestSpec]:
        for i, (inp, out, grp) in enumerate(shapes[n_warm:]):
            ids = hashed[i] if hashed is not None else None
            p = (
                hashed_prompt(ids, inp, f"{wl.seed}{salt}", i, pool, text, trace.block_tokens,
                              blocks)
                if ids and trace is not None
                else prompt(i, inp, grp)
            )
            yield RequestSpec(i, p, inp, out)

    warm = warm_specs() if continuous_warmup(wl) else list(warm_specs())
    return warm, measured(), n_measured


def _dataset_specs(
    wl: Workload,
    ds: Dataset,
    n_warm: int,
    as_ids: Callable[[str], list[int]] | None,
    chat: bool = False,
    streams: int = 0,
) -> tuple[Iterator[RequestSpec] | list[RequestSpec], Iterator[RequestSpec], int | None]:
    entries = ds.entries

    def spec(k: int, index: int, warmup: bool) -> RequestSpec:
        e = entries[k % len(entries)]
        prompt: Prompt = as_ids(e.text) if as_ids is not None else e.text
        if chat and e.messages is not None:
            prompt = e.messages  # the chat API takes the messages as they are
        out = staggered_output_len(e.output_len, k, streams) if warmup else e.output_len
        return RequestSpec(index, prompt, e.input_len, out, warmup=warmup)

    def warm_specs() -> Iterator[RequestSpec]:
        for i in range(n_warm):
            yield spec(i, -1 - i, True)

    def measured() -> Iterator[RequestSpec]:
        n = wl.num_requests
        i = 0
        while n is None or i < n:
            yield spec(n_warm + i, i, False)
            i += 1

    warm = warm_specs() if continuous_warmup(wl) else list(warm_specs())
    return warm, measured(), wl.num_requests
