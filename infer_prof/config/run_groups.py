"""The options of a run in five groups, one typed sub-config each (the groups ``run --help``
shows): :class:`EngineConfig`, :class:`LoadConfig`, :class:`PromptsConfig`,
:class:`CostConfig`, :class:`ResultsConfig`. Each option is declared once, on its field
(``Annotated[type, Opt(...)]``, :mod:`infer_prof.config.options`): flag(s), help, the type the user
types and the parse function to the field's type, the allowed range or choices.
:class:`infer_prof.run.config.RunConfig` holds one of each.

To add an option to ``infer-prof run``: add the field to its group's class here
(docs/development.md, "Adding a run option").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Literal

from infer_prof.catalog.lora_adapters import parse_lora_modules
from infer_prof.config.options import (
    COST,
    LOAD,
    OUTPUT,
    POSITIVE_INT,
    POSITIVE_S,
    PROMPTS,
    SERVER,
    Internal,
    Opt,
    Range,
    parse_json_object,
    parse_labels,
    parse_reasoning_parser,
    parse_size,
    split_engine_args,
)
from infer_prof.core.analysis.sweep import parse_concurrency_list, parse_rate_list

Api = Literal["completions", "chat"]  # /v1/completions or /v1/chat/completions
#: The prefix cache's state at the start of each measured point (docs/measurement.md, "Prefix
#: cache"): emptied, primed with the point's shared prefixes, or left as it is.
PrefixCacheMode = Literal["cold", "warm", "as-is"]
PromptKind = Literal["text", "token-ids"]  # words of an exact token count, or token IDs


@dataclass(frozen=True)
class EngineConfig:
    """What is profiled and how its server is started: the model, an endpoint, the
    engine's settings and the server (``run --help``: "Server and engine")."""

    model: Annotated[str, Opt(
        ("--model", "-m"), "A known alias (`infer-prof models` lists them: tiny-llama, "
        "llama-2-7b, ...), a local model directory, or a hub id (org/name). Default: tiny-llama "
        "without a GPU; on a GPU llama-2-7b with random weights at 128 streams when it fits.",
        SERVER, typed=str, chosen_default=True)] = "tiny-llama"
    endpoint: Annotated[str | None, Opt(
        ("--endpoint",), "Profile a server that is already running (http://host:port or "
        "https://host/v1); nothing is started. --model then names whose tokenizer/config builds "
        "the prompts. Repeat it to profile several in turn (one table at the end); --gpu, --gpus, "
        "--price-per-hour and --endpoint-label then pair with each, in order.",
        SERVER, repeat=True)] = None
    served_model_name: Annotated[str | None, Opt(
        ("--served-model-name",), "Model name to send; default: read from /v1/models.",
        SERVER)] = None
    api_key: Annotated[str | None, Opt(
        ("--api-key",), "Bearer token for --endpoint.", SERVER, envvar="OPENAI_API_KEY")] = None
    # None: the workload's ``api``, else completions (see resolve_api)
    api: Annotated[Api | None, Opt(
        ("--api",), "completions (default, or the workload's api): POST /v1/completions; chat: "
        "POST /v1/chat/completions with the prompt as one user message (text prompts; a "
        "dataset's messages as they are).", SERVER)] = None
    ca_bundle: Annotated[str | None, Opt(
        ("--ca-bundle",), "https --endpoint: PEM file of the CA(s) to trust (private CA).",
        SERVER)] = None
    insecure: Annotated[bool, Opt(
        ("--insecure",), "https --endpoint: do not verify the certificate (recorded).",
        SERVER)] = False
    dtype: Annotated[str | None, Opt(
        ("--dtype",), "vLLM --dtype (auto, bfloat16, float16).", SERVER)] = None
    max_model_len: Annotated[int | None, Opt(
        ("--max-model-len",), "vLLM --max-model-len.", SERVER)] = None
    gpu_memory_utilization: Annotated[float | None, Opt(
        ("--gpu-memory-utilization",), "vLLM --gpu-memory-utilization (0-1].", SERVER,
        range=Range("within (0, 1]", low=0, low_open=True, high=1))] = None
    tensor_parallel_size: Annotated[int | None, Opt(
        ("--tensor-parallel-size", "--tp"), "vLLM --tensor-parallel-size.", SERVER)] = None
    enforce_eager: Annotated[bool, Opt(
        ("--enforce-eager",), "vLLM --enforce-eager (no CUDA graphs).", SERVER)] = False
    load_format: Annotated[str | None, Opt(
        ("--load-format",), "vLLM --load-format; 'dummy' profiles an alias's real shapes with "
        "random weights. Default: real weights when a local folder, the Hugging Face cache or the "
        "hub has them, else dummy (said on the console and recorded in the result).",
        SERVER)] = None
    require_weights: Annotated[bool, Opt(  # fail instead of profiling with random weights
        ("--require-weights",), "Fail (exit 2) instead of profiling with random weights when "
        "no real ones are at hand.", SERVER)] = False
    quantization: Annotated[str, Opt(
        ("--quantization", "-q"), "auto: the planner picks the best precision that fits the GPU "
        "memory and the load (bf16 > fp8 > int8 > bitsandbytes 4-bit); or force one (bf16, fp8, "
        "bitsandbytes, awq, gptq), or any vLLM quantization name verbatim.", SERVER)] = "auto"
    kv_cache_dtype: Annotated[str | None, Opt(
        ("--kv-cache-dtype",), "vLLM --kv-cache-dtype: auto, or fp8 (half the KV bytes). Without "
        "it the planner uses fp8 only when no precision holds one sequence with a 16-bit KV "
        "cache.", SERVER)] = None
    memory_budget_bytes: Annotated[int | None, Opt(
        ("--memory-budget",), "Memory the engine may use (e.g. 512MiB, 24GiB): plans precision "
        "and KV cache for it, on CPU or GPU.", SERVER, typed=str, parse=parse_size)] = None
    kv_cache_memory_bytes: Annotated[int | None, Opt(
        ("--kv-cache-memory",), "KV-cache size for vLLM (e.g. 2GiB). On CPU it defaults to what "
        "the load needs.", SERVER, typed=str, parse=parse_size)] = None
    gpu: Annotated[str | None, Opt(
        ("--gpu",), "GPU to plan and price for (catalog key, e.g. H100-SXM); default: the "
        "detected one. Give it for --endpoint runs on a remote GPU.", SERVER, repeat=True)] = None
    gpus: Annotated[int | None, Opt(
        ("--gpus",), "Number of GPUs (default: detected, or --tp).", SERVER, repeat=True)] = None
    engine_args: Annotated[list[str], Opt(
        ("--engine-arg",), "Any other vLLM argument, verbatim; repeat it (e.g. "
        "--engine-arg=--seed=1).", SERVER, typed=list[str], parse=split_engine_args)] = field(
        default_factory=list)
    prefix_cache: Annotated[PrefixCacheMode, Opt(
        ("--prefix-cache",), "The server's prefix cache before each measured point: cold "
        "(default: emptied through the server's /reset_prefix_cache; an endpoint that refuses "
        "is recorded as unknown), warm (emptied, then the point's shared prefixes sent once), "
        "as-is (left alone). The result records the state and the measured hit rate.",
        SERVER)] = "cold"
    speculative_config: Annotated[str | None, Opt(
        ("--speculative-config",), "Speculative decoding, as vLLM's --speculative-config JSON "
        "(e.g. '{\"method\":\"ngram\",\"num_speculative_tokens\":3,\"prompt_lookup_max\":4}'); "
        "recorded in the configuration; the result gives its acceptance.", SERVER,
        parse=parse_json_object)] = None
    reasoning_parser: Annotated[str, Opt(
        ("--reasoning-parser",), "The reasoning parser of the vLLM infer-prof starts: auto (the "
        "model family's, for a model known to reason: docs/measurement.md, Reasoning models), "
        "none, or a vLLM parser name (deepseek_r1, qwen3, openai_gptoss, ...). Ignored with "
        "--endpoint.", SERVER, parse=parse_reasoning_parser)] = "auto"
    lora_modules: Annotated[list[str], Opt(  # infer_prof.run.lora_setup
        ("--lora-modules",), "LoRA adapters for vLLM to serve beside the model: NAME=PATH (the "
        "folder peft wrote); repeat it or separate with commas. Starts vLLM with --enable-lora, "
        "--max-lora-rank (the adapters' largest, from adapter_config.json) and --max-loras (their "
        "number); requests go over them as --lora-mix says (default uniform).", SERVER,
        typed=list[str], parse=parse_lora_modules)] = field(default_factory=list)
    server: Annotated[str, Opt(
        ("--server",), "The server to start: vllm, or synthetic (the built-in one: known "
        "delays, no model; --engine-arg gives its options). Ignored with --endpoint.",
        SERVER)] = "vllm"
    server_timeout_s: Annotated[float, Opt(
        ("--server-timeout",), "Seconds to wait for the server to become healthy.",
        SERVER)] = 900.0


@dataclass(frozen=True)
class LoadConfig:
    """What load is sent and when a point ends: workloads, suites, load points, SLOs,
    request counts, warm-up, the client, the frontier (``run --help``: "Load")."""

    workload: Annotated[str | None, Opt(
        ("--workload", "-w"), "Workload file or name (see workloads/): length distributions, "
        "request count, arrival, SLOs. Options given on the command line override its fields.",
        LOAD)] = None
    suite: Annotated[str | None, Opt(  # a suite file (workloads/nightly.toml)
        ("--suite",), "A suite of workloads and load points (e.g. nightly), all in one server "
        "launch.", LOAD)] = None
    scale: Annotated[str | None, Opt(  # one of the suite's [scales.*]
        ("--scale",), "A suite's named scale, e.g. tiny for the CPU model in CI.", LOAD)] = None
    # None = the workload's value (or the built-in default: 16 streams, 200 requests after a
    # steady warm-up under the load itself, 128 tokens in and out)
    concurrency: Annotated[list[int] | None, Opt(
        ("--concurrency", "-c"), "Closed loop: concurrent streams, or a list to sweep in one "
        "server launch (1,8,32,128). Default 16 (or the workload's).", LOAD, typed=str,
        parse=parse_concurrency_list, range=Range("positive integers", low=1))] = None
    rates: Annotated[list[float] | None, Opt(
        ("--rate",), "Open loop: requests/s with Poisson arrivals, or a list to sweep "
        "(1,2,4,inf).", LOAD, typed=str, parse=parse_rate_list,
        range=Range("positive requests/s (or inf)", low=0, low_open=True))] = None
    burstiness: Annotated[float | None, Opt(
        ("--burstiness",), "Open loop: gamma arrivals with this shape (1 = Poisson, < 1 "
        "burstier).", LOAD)] = None
    max_concurrency: Annotated[int | None, Opt(
        ("--max-concurrency",), "Open loop: cap on requests in flight; time waiting for a slot "
        "is reported.", LOAD, range=POSITIVE_INT)] = None
    slo: Annotated[str | None, Opt(
        ("--slo",), "Latency targets in ms, e.g. ttft_p99=2000,tpot_p99=200: reports goodput and "
        "whether each point meets them.", LOAD)] = None
    find_max: Annotated[bool, Opt(
        ("--find-max",), "Search the highest concurrency (or rate) that meets the --slo "
        "targets.", LOAD)] = False
    min_requests: Annotated[int | None, Opt(
        ("--min-requests",), "Fewer completed requests marks the run invalid (10).", LOAD,
        range=POSITIVE_INT)] = None
    min_duration_s: Annotated[float | None, Opt(
        ("--min-duration",), "A shorter measured window marks the run invalid (5 s).",
        LOAD)] = None
    num_requests: Annotated[int | None, Opt(
        ("--num-requests", "-n"), "Measured requests (after warm-up). Default 200, or unbounded "
        "with --duration.", LOAD, range=POSITIVE_INT)] = None
    duration_s: Annotated[float | None, Opt(
        ("--duration",), "Stop sending new requests after this many seconds.", LOAD,
        range=POSITIVE_S)] = None
    # "steady" | "requests" | "<N>s" (None: the workload's); the user's text is combined with
    # --warmup-requests by combine_warmup
    warmup: Annotated[str | None, Opt(
        ("--warmup",), "auto (default): the load itself at the measured concurrency until every "
        "stream has finished one request (steady state), then measure without a pause; N: N "
        "requests first, all finished before measuring; 30s: the load itself for 30 s; none.",
        LOAD)] = None
    warmup_requests: Annotated[int | None, Opt(
        ("--warmup-requests",), "Same as --warmup N: N requests first, left out.", LOAD,
        range=Range("0 or more", low=0))] = None
    warmup_stagger: Annotated[bool, Opt(
        ("--warmup-stagger/--no-warmup-stagger",), "A warm-up under the load (auto, 30s) gives "
        "each stream's first request a different output length, so streams of equal-length "
        "requests run out of phase as independent users do, not in lock-step waves. "
        "--no-warmup-stagger keeps them in phase (as `vllm bench serve` starts them).",
        LOAD)] = True
    timeout_s: Annotated[float, Opt(
        ("--timeout",), "Per-request timeout in seconds; a stream past it fails.", LOAD,
        range=POSITIVE_S)] = 300.0
    # load-generator processes: a positive integer, or "auto" (by the point's expected token
    # events/s; see infer_prof.run.load_points.client_processes)
    client_processes: Annotated[str, Opt(
        ("--client-processes",), "Load-generator processes: a positive integer, or auto (one per "
        "~80k expected token events/s with the C reader, ~40k with the Python one, assuming 10 ms "
        "between tokens; at most the CPU cores and the streams).", LOAD)] = "auto"
    yes: Annotated[bool, Opt(  # go ahead even when the run is estimated above an hour
        ("--yes",), "Go ahead even when the run is estimated to take more than an hour.",
        LOAD)] = False
    # --frontier: double the load until throughput plateaus (infer_prof.run.frontier_run)
    frontier: Annotated[bool, Opt(
        ("--frontier",), "Double the load (1, 2, 4, ... streams; a --concurrency or --rate list "
        "overrides) until throughput plateaus, an --slo breaks or --max-concurrency; each point "
        "measured until precise (±2 %, 95 %).", LOAD)] = False
    target_interactivity: Annotated[float | None, Opt(
        ("--target-interactivity",), "--frontier: tokens/s/user to read throughput per GPU and "
        "$/1M tokens at (interpolated along the front, never extrapolated).", LOAD,
        range=Range("positive tokens/s/user", low=0, low_open=True, high=math.inf,
                    high_open=True))] = None
    interactivity_of: Annotated[Literal["all", "answer"], Opt(
        ("--interactivity-of",), "The tokens interactivity (tok/s/user = 1000 / TPOT p50) is "
        "read over: all (every output token, reasoning included) or answer (a reasoning model's "
        "answer tokens: 1000 / answer TPOT p50). Throughput and cost count every output token "
        "either way.", LOAD)] = "all"
    concurrency_from_estimate: Annotated[bool, Opt(  # infer_prof.run.frontier_estimate
        ("--concurrency-from-estimate",), "--frontier --target-interactivity: measure only the "
        "concurrencies around the target on the predicted curve (1, half, at, double the "
        "predicted one, the KV limit) instead of doubling from 1.", LOAD)] = False
    # run --repeat N (infer_prof.run.repeats): every point N times, each an ordinary result
    repeat: Annotated[int, Opt(
        ("--repeat",), "Measure each load point N times, each an ordinary result and run in the "
        "history; from the second on, a result holds each metric's mean, spread (SD, CV) and "
        "95 % interval across the repeats so far (the last: across all N). All in one server "
        "launch unless --repeat-relaunch.", LOAD, range=POSITIVE_INT)] = 1
    repeat_relaunch: Annotated[bool, Opt(
        ("--repeat-relaunch",), "With --repeat N: stop the server and start it afresh before "
        "each repeat, so the spread is between launches; with the history on, each metric's "
        "launch-to-launch CV is stored there for `regress` to judge against.", LOAD)] = False
    engine_sweep: Annotated[str | None, Opt(  # a TOML file or "setting=v1,v2"
        ("--engine-sweep",), "--frontier per engine configuration: a TOML file of named "
        "configurations, or one setting's values (max-num-seqs=64,128,256).", LOAD)] = None
    # --quality: the quality check after the load, on the same server (infer_prof.quality)
    lora_mix: Annotated[str | None, Opt(  # infer_prof.core.workload.adapter_mix
        ("--lora-mix",), "How requests spread over LoRA adapters (each request's model is its "
        "adapter's name): NAME=WEIGHT,... with base for the model itself (a=0.5,b=0.3,base=0.2), "
        "uniform, or zipf:ALPHA over the adapters in the order named; placed by --seed. With "
        "--endpoint, uniform and zipf take the adapters its /v1/models lists.", LOAD)] = None
    quality: Annotated[str | None, Opt(
        ("--quality",), "After the load, check the answers on the same server: addition (the "
        "set for tiny-adder), gsm8k (50 GSM8K problems, MIT) or "
        "tasks=FILE,text=FILE[,top_k=N,max_tokens=N]: task accuracy and perplexity, in the "
        "result's quality section (docs/quality.md).", LOAD)] = None
    quality_reference: Annotated[str | None, Opt(
        ("--quality-reference",), "--quality: a result of the same model at a higher precision "
        "to compare with (accuracy difference, perplexity ratio, KL).", LOAD)] = None
    min_quality: Annotated[float | None, Opt(
        ("--min-quality",), "--quality-reference: the share of the reference's accuracy required "
        "(0.99); a run under it is marked below the floor.", LOAD,
        range=Range("a share in (0, 1]", low=0, high=1, low_open=True))] = None


@dataclass(frozen=True)
class PromptsConfig:
    """What each request holds: lengths, prompt kind, a dataset or trace, multi-turn
    sessions (``run --help``: "Prompts")."""

    input_len: Annotated[int | None, Opt(
        ("--input-len",), "Prompt length in tokens (exact).", PROMPTS, range=POSITIVE_INT)] = None
    output_len: Annotated[int | None, Opt(
        ("--output-len",), "Output length in tokens (exact: EOS is ignored).", PROMPTS,
        range=POSITIVE_INT)] = None
    seed: Annotated[int | None, Opt(("--seed",), "Seed for prompt token IDs.", PROMPTS)] = None
    # prompts: "token-ids" | "text" (None: token IDs, or the dataset's text with --dataset)
    prompt: Annotated[PromptKind | None, Opt(
        ("--prompt",), "token-ids (default): random token IDs of the exact length; text: random "
        "words whose token count under the model's tokenizer (BOS included) is exactly the "
        "length. With --dataset the default is its text.", PROMPTS)] = None
    dataset: Annotated[str | None, Opt(  # infer_prof.loadgen.datasets; None: the workload's
        ("--dataset",), "Prompts from a file: JSONL of {\"prompt\"} or of OpenAI {\"messages\"}, "
        "or ShareGPT JSON; lengths as tokenized, outputs from the data unless --output-len.",
        PROMPTS)] = None
    dataset_sample: Annotated[int | None, Opt(
        ("--dataset-sample",), "Take N dataset entries at random (with --seed).", PROMPTS,
        range=POSITIVE_INT)] = None
    trace: Annotated[str | None, Opt(  # infer_prof.loadgen.traces
        ("--trace",), "Replay a trace's arrival times and exact lengths (open loop): Azure CSV "
        "(TIMESTAMP,ContextTokens,GeneratedTokens) or Mooncake JSONL (timestamp ms, "
        "input_length, output_length).", PROMPTS)] = None
    time_scale: Annotated[float, Opt(
        ("--time-scale",), "Trace gaps times this (0.5 replays twice as fast).", PROMPTS)] = 1.0
    trace_window: Annotated[str | None, Opt(
        ("--trace-window",), "START:END seconds of the trace to replay (e.g. 60:120).",
        PROMPTS)] = None
    turns: Annotated[int | None, Opt(  # infer_prof.loadgen.sessions
        ("--turns",), "Multi-turn sessions of K turns: each turn resends the conversation so far "
        "(prefix cache hits); --concurrency is the concurrent sessions, --num-requests counts "
        "turns (rounded up to whole sessions). Synthetic, or a ShareGPT --dataset's "
        "conversations.", PROMPTS, range=POSITIVE_INT)] = None
    think_time_s: Annotated[float, Opt(
        ("--think-time",), "Seconds a session waits between an answer and its next turn.",
        PROMPTS, range=Range("0 or more seconds", low=0))] = 0.0


@dataclass(frozen=True)
class CostConfig:
    """What an hour of the GPU costs: a given price, a provider, an instance, the
    catalogs, owning (``run --help``: "Cost")."""

    price_per_hour: Annotated[float | None, Opt(
        ("--price-per-hour",), "USD per GPU-hour; overrides the price catalog.", COST,
        repeat=True)] = None
    provider: Annotated[str | None, Opt(
        ("--provider",), "Price from this provider's catalog row.", COST)] = None
    prices_file: Annotated[str | None, Opt(
        ("--prices",), "Price catalog CSV to use instead.", COST)] = None
    spot: Annotated[bool, Opt(("--spot",), "Use spot prices where known.", COST)] = False
    # instance market (infer_prof.catalog.market; docs/prices.md)
    instance: Annotated[str | None, Opt(
        ("--instance",), "Price as this rented instance: CLOUD:TYPE[:REGION], e.g. "
        "aws:p5.48xlarge:us-east-1 (see infer-prof prices); its GPU if --gpu is not given.",
        COST)] = None
    prices_from: Annotated[str | None, Opt(
        ("--prices-from",), "Folder of SkyPilot catalogs to price from (default: "
        "~/.sky/catalogs, else the shipped snapshot).", COST)] = None
    max_cost: Annotated[float | None, Opt(  # infer_prof.run.run_cost
        ("--max-cost",), "Refuse to start (exit 2) when the rented time's expected cost is above "
        "USD, or cannot be known (no price, no duration estimate); the expected time and cost "
        "are said before a --frontier or a priced run starts.", COST,
        range=Range("positive USD", low=0, low_open=True, high=math.inf,
                    high_open=True))] = None
    purchase_usd: Annotated[float | None, Opt(
        ("--purchase-price",), "Owned hardware: USD per GPU; adds amortized cost and break-even "
        "hours.", COST)] = None
    amortize_years: Annotated[float, Opt(
        ("--amortize-years",), "Owned hardware: years to amortize over.", COST)] = 3.0
    usd_per_kwh: Annotated[float, Opt(
        ("--usd-per-kwh",), "Owned hardware: electricity price.", COST)] = 0.12


@dataclass(frozen=True)
class ResultsConfig:
    """Where the results go and what is recorded with them: files, history, labels,
    progress (``run --help``: "Output and history")."""

    history: Annotated[bool, Opt(
        ("--no-history",), "Do not record the run in the history.", OUTPUT, negate=True)] = True
    history_db: Annotated[str | None, Opt(
        ("--history", "--history-db"), "Record the run in this history: sqlite:///PATH (or a "
        "path) or postgresql://USER@HOST:PORT/DB (password: PGPASSWORD or ~/.pgpass). Default: "
        "$INFER_PROF_HISTORY, else <results dir>/history.sqlite.", OUTPUT)] = None
    output: Annotated[str | None, Opt(
        ("--output", "-o"), "Result file path (default: <results dir>/<run name>.json, a new "
        "name if taken); of several points (a sweep, --frontier) the sweep file, each point's "
        "result beside it as <stem>-<point>.json. One that exists is refused unless "
        "--overwrite.", OUTPUT)] = None
    overwrite: Annotated[bool, Opt(
        ("--overwrite",), "Replace the --output file if it exists.", OUTPUT)] = False
    results_dir: Annotated[str, Opt(
        ("--results-dir",), "Folder for result files.", OUTPUT,
        envvar="INFER_PROF_RESULTS_DIR")] = "results"
    labels: Annotated[dict[str, str], Opt(
        ("--label",), "KEY=VALUE label stored with the result; repeatable.", OUTPUT,
        typed=list[str], parse=parse_labels)] = field(default_factory=dict)
    progress: Annotated[bool, Opt(
        ("--no-progress",), "No live progress display.", OUTPUT, negate=True)] = True
    # put in the run id and file names before the load label (several endpoints in one
    # command: the endpoint's label, see infer_prof.run.multi_endpoint)
    run_tag: Annotated[str | None, Internal("the endpoint's or engine configuration's label, "
                                            "set by multi_endpoint and engine_sweep")] = None
    telemetry_interval_s: Annotated[float, Internal("NVML sampling period (s)")] = 0.5
    metrics_interval_s: Annotated[float, Internal("/metrics scrape period (s)")] = 0.5


#: The sub-configs by group name, in the order ``run --help`` shows them (a
#: :class:`~infer_prof.run.config.RunConfig` holds one of each; the result's ``config`` records
#: their fields, :mod:`infer_prof.results.config_record`).
SUB_CONFIGS: dict[str, type] = {
    "engine": EngineConfig, "load": LoadConfig, "prompts": PromptsConfig, "cost": CostConfig,
    "results": ResultsConfig,
}
