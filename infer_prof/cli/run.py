"""``infer-prof run``: profile a model on vLLM (started here) or on a running endpoint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console

from infer_prof.catalog.gpus import detect_gpus
from infer_prof.catalog.models import TINY_LLAMA
from infer_prof.cli.common import fail, parse_labels, parse_size, parse_warmup
from infer_prof.cli.run_exit import finish_run, print_outcome
from infer_prof.cli.run_prices import check_instance
from infer_prof.core.sweep import SweepError, parse_concurrency_list, parse_rate_list
from infer_prof.run.config import ConfigError, RunConfig
from infer_prof.run.default_model import choose_default


def run_command(
    model: str = typer.Option(
        None,
        "--model",
        "-m",
        help="A known alias (`infer-prof models` lists them: tiny-llama, llama-2-7b, ...), a "
        "local model directory, or a hub id (org/name). Default: tiny-llama without a GPU; "
        "on a GPU llama-2-7b with random weights at 128 streams when it fits.",
    ),
    endpoint: list[str] = typer.Option(
        None,
        "--endpoint",
        help="Profile a server that is already running (http://host:port or https://host/v1); "
        "nothing is started. --model then names whose tokenizer/config builds the prompts. "
        "Repeat it to profile several in turn (one table at the end); --gpu, --gpus, "
        "--price-per-hour and --endpoint-label then pair with each, in order.",
    ),
    endpoints_file: str = typer.Option(
        None,
        "--endpoints",
        help="TOML file of endpoints to profile in turn, one endpoint table each: url, gpu, "
        "gpu_count, price_per_hour, label, served_model_name, api_key_env (see README).",
    ),
    endpoint_label: list[str] = typer.Option(
        None, "--endpoint-label", help="Name of each --endpoint (its row and result files)."
    ),
    served_model_name: str = typer.Option(
        None, "--served-model-name", help="Model name to send; default: read from /v1/models."
    ),
    api_key: str = typer.Option(
        None, "--api-key", envvar="OPENAI_API_KEY", help="Bearer token for --endpoint."
    ),
    api: str = typer.Option(
        None,
        "--api",
        help="completions (default, or the workload's api): POST /v1/completions; chat: POST "
        "/v1/chat/completions with the prompt as one user message (text prompts; a dataset's "
        "messages as they are).",
    ),
    ca_bundle: str = typer.Option(
        None, "--ca-bundle", help="https --endpoint: PEM file of the CA(s) to trust (private CA)."
    ),
    insecure: bool = typer.Option(
        False, "--insecure", help="https --endpoint: do not verify the certificate (recorded)."
    ),
    workload: str = typer.Option(
        None,
        "--workload",
        "-w",
        help="Workload file or name (see workloads/): length distributions, request count, "
        "arrival, SLOs. Options given on the command line override its fields.",
    ),
    suite: str = typer.Option(
        None,
        "--suite",
        help="A suite of workloads and load points (e.g. nightly), all in one server launch.",
    ),
    scale: str = typer.Option(
        None, "--scale", help="A suite's named scale, e.g. tiny for the CPU model in CI."
    ),
    concurrency: str = typer.Option(
        None,
        "--concurrency",
        "-c",
        help="Closed loop: concurrent streams, or a list to sweep in one server launch "
        "(1,8,32,128). Default 16 (or the workload's).",
    ),
    rate: str = typer.Option(
        None,
        "--rate",
        help="Open loop: requests/s with Poisson arrivals, or a list to sweep (1,2,4,inf).",
    ),
    burstiness: float = typer.Option(
        None,
        "--burstiness",
        help="Open loop: gamma arrivals with this shape (1 = Poisson, < 1 burstier).",
    ),
    max_concurrency: int = typer.Option(
        None,
        "--max-concurrency",
        help="Open loop: cap on requests in flight; time waiting for a slot is reported.",
    ),
    slo: str = typer.Option(
        None,
        "--slo",
        help="Latency targets in ms, e.g. ttft_p99=2000,tpot_p99=200: reports goodput and "
        "whether each point meets them.",
    ),
    find_max: bool = typer.Option(
        False,
        "--find-max",
        help="Search the highest concurrency (or rate) that meets the --slo targets.",
    ),
    min_requests: int = typer.Option(
        None, "--min-requests", help="Fewer completed requests marks the run invalid (10)."
    ),
    min_duration: float = typer.Option(
        None, "--min-duration", help="A shorter measured window marks the run invalid (5 s)."
    ),
    num_requests: int = typer.Option(
        None,
        "--num-requests",
        "-n",
        help="Measured requests (after warm-up). Default 200, or unbounded with --duration.",
    ),
    duration: float = typer.Option(
        None, "--duration", help="Stop sending new requests after this many seconds."
    ),
    warmup: str = typer.Option(
        None,
        "--warmup",
        help="auto (default): the load itself at the measured concurrency until every stream "
        "has finished one request (steady state), then measure without a pause; N: N requests "
        "first, all finished before measuring; 30s: the load itself for 30 s; none.",
    ),
    warmup_requests: int = typer.Option(
        None, "--warmup-requests", help="Same as --warmup N: N requests first, left out."
    ),
    warmup_stagger: bool = typer.Option(
        True,
        "--warmup-stagger/--no-warmup-stagger",
        help="A warm-up under the load (auto, 30s) gives each stream's first request a "
        "different output length, so streams of equal-length requests run out of phase as "
        "independent users do, not in lock-step waves. --no-warmup-stagger keeps them in "
        "phase (as `vllm bench serve` starts them).",
    ),
    input_len: int = typer.Option(None, "--input-len", help="Prompt length in tokens (exact)."),
    output_len: int = typer.Option(
        None, "--output-len", help="Output length in tokens (exact: EOS is ignored)."
    ),
    timeout: float = typer.Option(
        300.0, "--timeout", help="Per-request timeout in seconds; a stream past it fails."
    ),
    seed: int = typer.Option(None, "--seed", help="Seed for prompt token IDs."),
    prompt: str = typer.Option(
        None,
        "--prompt",
        help="token-ids (default): random token IDs of the exact length; text: random words "
        "whose token count under the model's tokenizer (BOS included) is exactly the length. "
        "With --dataset the default is its text.",
    ),
    dataset: str = typer.Option(
        None,
        "--dataset",
        help="Prompts from a file: JSONL of {\"prompt\"} or of OpenAI {\"messages\"}, or "
        "ShareGPT JSON; lengths as tokenized, outputs from the data unless --output-len.",
    ),
    dataset_sample: int = typer.Option(
        None, "--dataset-sample", help="Take N dataset entries at random (with --seed)."
    ),
    trace: str = typer.Option(
        None,
        "--trace",
        help="Replay a trace's arrival times and exact lengths (open loop): Azure CSV "
        "(TIMESTAMP,ContextTokens,GeneratedTokens) or Mooncake JSONL (timestamp ms, "
        "input_length, output_length).",
    ),
    time_scale: float = typer.Option(
        1.0, "--time-scale", help="Trace gaps times this (0.5 replays twice as fast)."
    ),
    trace_window: str = typer.Option(
        None, "--trace-window", help="START:END seconds of the trace to replay (e.g. 60:120)."
    ),
    turns: int = typer.Option(
        None,
        "--turns",
        help="Multi-turn sessions of K turns: each turn resends the conversation so far (prefix "
        "cache hits); --concurrency is the concurrent sessions, --num-requests counts turns "
        "(rounded up to whole sessions). Synthetic, or a ShareGPT --dataset's conversations.",
    ),
    think_time: float = typer.Option(
        0.0, "--think-time", help="Seconds a session waits between an answer and its next turn."
    ),
    client_processes: str = typer.Option(
        "auto",
        "--client-processes",
        help="Load-generator processes: a positive integer, or auto (one per ~80k expected "
        "token events/s with the C reader, ~40k with the Python one, assuming 10 ms between "
        "tokens; at most the CPU cores and the streams).",
    ),
    dtype: str = typer.Option(None, "--dtype", help="vLLM --dtype (auto, bfloat16, float16)."),
    max_model_len: int = typer.Option(None, "--max-model-len", help="vLLM --max-model-len."),
    gpu_memory_utilization: float = typer.Option(
        None, "--gpu-memory-utilization", help="vLLM --gpu-memory-utilization (0-1]."
    ),
    tensor_parallel_size: int = typer.Option(
        None, "--tensor-parallel-size", "--tp", help="vLLM --tensor-parallel-size."
    ),
    enforce_eager: bool = typer.Option(
        False, "--enforce-eager", help="vLLM --enforce-eager (no CUDA graphs)."
    ),
    load_format: str = typer.Option(
        None,
        "--load-format",
        help="vLLM --load-format; 'dummy' profiles an alias's real shapes with random weights. "
        "Default: real weights when a local folder, the Hugging Face cache or the hub has them, "
        "else dummy (said on the console and recorded in the result).",
    ),
    require_weights: bool = typer.Option(
        False,
        "--require-weights",
        help="Fail (exit 2) instead of profiling with random weights when no real ones are "
        "at hand.",
    ),
    yes: bool = typer.Option(
        False,
        "--yes",
        help="Go ahead even when the run is estimated to take more than an hour.",
    ),
    quantization: str = typer.Option(
        "auto",
        "--quantization",
        "-q",
        help="auto: the planner picks the best precision that fits the GPU memory and the load "
        "(bf16 > fp8 > int8 > bitsandbytes 4-bit); or force one (bf16, fp8, bitsandbytes, awq, "
        "gptq), or any vLLM quantization name verbatim.",
    ),
    kv_cache_dtype: str = typer.Option(
        None,
        "--kv-cache-dtype",
        help="vLLM --kv-cache-dtype: auto, or fp8 (half the KV bytes). Without it the planner "
        "uses fp8 only when no precision holds one sequence with a 16-bit KV cache.",
    ),
    memory_budget: str = typer.Option(
        None,
        "--memory-budget",
        help="Memory the engine may use (e.g. 512MiB, 24GiB): plans precision and KV cache for "
        "it, on CPU or GPU.",
    ),
    gpu: list[str] = typer.Option(
        None,
        "--gpu",
        help="GPU to plan and price for (catalog key, e.g. H100-SXM); default: the detected one. "
        "Give it for --endpoint runs on a remote GPU.",
    ),
    gpus: list[int] = typer.Option(
        None, "--gpus", help="Number of GPUs (default: detected, or --tp)."
    ),
    price_per_hour: list[float] = typer.Option(
        None, "--price-per-hour", help="USD per GPU-hour; overrides the price catalog."
    ),
    provider: str = typer.Option(
        None, "--provider", help="Price from this provider's catalog row."
    ),
    prices: str = typer.Option(None, "--prices", help="Price catalog CSV to use instead."),
    spot: bool = typer.Option(False, "--spot", help="Use spot prices where known."),
    # instance market (infer_prof.catalog.market; docs/prices.md)
    instance: str = typer.Option(
        None, "--instance", help="Price as this rented instance: CLOUD:TYPE[:REGION], e.g. "
        "aws:p5.48xlarge:us-east-1 (see infer-prof prices); its GPU if --gpu is not given.",
    ),
    prices_from: str = typer.Option(
        None, "--prices-from", help="Folder of SkyPilot catalogs to price from (default: "
        "~/.sky/catalogs, else the shipped snapshot).",
    ),
    purchase_price: float = typer.Option(
        None,
        "--purchase-price",
        help="Owned hardware: USD per GPU; adds amortized cost and break-even hours.",
    ),
    amortize_years: float = typer.Option(
        3.0, "--amortize-years", help="Owned hardware: years to amortize over."
    ),
    usd_per_kwh: float = typer.Option(
        0.12, "--usd-per-kwh", help="Owned hardware: electricity price."
    ),
    no_history: bool = typer.Option(
        False, "--no-history", help="Do not record the run in the history."
    ),
    history_db: str = typer.Option(
        None,
        "--history",
        "--history-db",
        help="Record the run in this history: sqlite:///PATH (or a path) or "
        "postgresql://USER@HOST:PORT/DB (password: PGPASSWORD or ~/.pgpass). Default: "
        "$INFER_PROF_HISTORY, else <results dir>/history.sqlite.",
    ),
    kv_cache_memory: str = typer.Option(
        None,
        "--kv-cache-memory",
        help="KV-cache size for vLLM (e.g. 2GiB). On CPU it defaults to what the load needs.",
    ),
    engine_arg: list[str] = typer.Option(
        None,
        "--engine-arg",
        help="Any other vLLM argument, verbatim; repeat it (e.g. --engine-arg=--seed=1).",
    ),
    server: str = typer.Option(
        "vllm", "--server", help="The server to start: vllm, or synthetic (the built-in one: "
        "known delays, no model; --engine-arg gives its options). Ignored with --endpoint.",
    ),
    server_timeout: float = typer.Option(
        900.0, "--server-timeout", help="Seconds to wait for the server to become healthy."
    ),
    output: str = typer.Option(
        None,
        "--output",
        "-o",
        help="Result file path (default: <results dir>/<run name>.json, a new name if taken); "
        "one that exists is refused unless --overwrite.",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace the --output file if it exists."
    ),
    results_dir: str = typer.Option(
        "results", "--results-dir", envvar="INFER_PROF_RESULTS_DIR", help="Folder for result files."
    ),
    label: list[str] = typer.Option(
        None, "--label", help="KEY=VALUE label stored with the result; repeatable."
    ),
    json_output: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No live progress display."),
    # --- the cost-interactivity frontier (docs/frontier.md): keep these together
    frontier: bool = typer.Option(
        False, "--frontier", help="Double the load (1, 2, 4, ... streams; a --concurrency or "
        "--rate list overrides) until throughput plateaus, an --slo breaks or "
        "--max-concurrency; each point measured until precise (±2 %, 95 %).",
    ),
    target_interactivity: float = typer.Option(
        None, "--target-interactivity", help="--frontier: tokens/s/user to read throughput "
        "per GPU and $/1M tokens at (interpolated along the front, never extrapolated).",
    ),
    engine_sweep: str = typer.Option(
        None, "--engine-sweep", help="--frontier per engine configuration: a TOML file of "
        "named configurations, or one setting's values (max-num-seqs=64,128,256).",
    ),
) -> None:
    """Profile a model: start vLLM, drive concurrent streams, report latency, throughput."""
    from infer_prof.cli.run_endpoints import endpoint_targets, run_many

    instance_gpu = check_instance(instance, prices_from, gpu[0] if gpu else None)
    if instance_gpu and not gpu:
        gpu = [instance_gpu]
    targets = endpoint_targets(
        endpoint, gpu, gpus, price_per_hour, endpoint_label, endpoints_file
    )
    one_endpoint = targets[0].url if targets else endpoint[0] if endpoint else None
    if model is None:
        model, concurrency, load_format = _default_model(
            one_endpoint, concurrency, load_format, rate is None and workload is None and not suite
        )
    engine_args: list[str] = []
    for a in engine_arg or []:
        engine_args += a.split(" ", 1) if a.startswith("--") and " " in a else [a]
    warmup_mode, warmup_count = parse_warmup(warmup) if warmup else (None, None)
    if warmup_requests is not None:
        if warmup is not None:
            fail("give --warmup or --warmup-requests, not both")
        warmup_mode, warmup_count = "requests", warmup_requests
    cfg = RunConfig(
        model=model,
        server=server,
        endpoint=one_endpoint,
        served_model_name=served_model_name,
        api_key=api_key,
        api=api,
        ca_bundle=ca_bundle,
        insecure=insecure,
        workload=workload,
        suite=suite,
        scale=scale,
        concurrency=_levels(concurrency, "--concurrency", parse_concurrency_list),
        rates=_levels(rate, "--rate", parse_rate_list),
        burstiness=burstiness,
        max_concurrency=max_concurrency,
        slo=slo,
        find_max=find_max,
        min_requests=min_requests,
        min_duration_s=min_duration,
        num_requests=num_requests,
        duration_s=duration,
        warmup_requests=warmup_count,
        warmup=warmup_mode,
        warmup_stagger=warmup_stagger,
        input_len=input_len,
        output_len=output_len,
        timeout_s=timeout,
        seed=seed,
        prompt=prompt,
        dataset=dataset,
        dataset_sample=dataset_sample,
        trace=trace,
        time_scale=time_scale,
        trace_window=trace_window,
        turns=turns,
        think_time_s=think_time,
        client_processes=client_processes,
        dtype=dtype,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        tensor_parallel_size=tensor_parallel_size,
        enforce_eager=enforce_eager,
        load_format=load_format,
        require_weights=require_weights,
        yes=yes,
        quantization=quantization,
        kv_cache_memory_bytes=parse_size(kv_cache_memory, "--kv-cache-memory")
        if kv_cache_memory
        else None,
        memory_budget_bytes=parse_size(memory_budget, "--memory-budget") if memory_budget else None,
        kv_cache_dtype=kv_cache_dtype,
        gpu=(gpu or [None])[0],
        gpus=(gpus or [None])[0],
        price_per_hour=(price_per_hour or [None])[0],
        provider=provider,
        prices_file=prices,
        spot=spot,
        instance=instance,
        prices_from=prices_from,
        purchase_usd=purchase_price,
        amortize_years=amortize_years,
        usd_per_kwh=usd_per_kwh,
        history=not no_history,
        history_db=history_db,
        engine_args=engine_args,
        server_timeout_s=server_timeout,
        output=output,
        overwrite=overwrite,
        results_dir=results_dir,
        labels=parse_labels(label),
        progress=not no_progress,
        frontier=frontier,
        target_interactivity=target_interactivity,
        engine_sweep=engine_sweep,
    )
    if targets:
        run_many(cfg, targets, json_output)
        return
    # imported here, not at the top: `infer-prof --help` must not pay for the engine side
    from infer_prof.run.runner import execute
    from infer_prof.servers.base import ServerStartError

    try:
        outcome = execute(cfg)
    except ConfigError as exc:
        fail(str(exc))
    except ServerStartError as exc:  # a refused key: the exit code of a run that measured nothing
        fail(str(exc), code=getattr(exc, "exit_code", 1))
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP before any load was sent
        fail(f"{exc or 'interrupted'} before any load was sent: nothing measured", code=3)
    print_outcome(outcome, json_output, Console(stderr=False))
    finish_run(outcome, Console(stderr=True))


def _default_model(
    endpoint: str | None, concurrency: str | None, load_format: str | None, may_set_load: bool
) -> tuple[str, str | None, str | None]:
    """No --model: tiny-llama, or on a GPU where it fits llama-2-7b with random weights at 128
    streams (:func:`infer_prof.run.default_model.choose_default`); says which and why."""
    if endpoint:
        return TINY_LLAMA, concurrency, load_format  # only names the tokenizer/config
    choice = choose_default(detect_gpus())
    typer.echo(choice.why, err=True)
    if choice.concurrency and concurrency is None and may_set_load:
        concurrency = str(choice.concurrency)
    return choice.model, concurrency, load_format or choice.load_format


def _levels(text: str | None, flag: str, parse: Callable[[str, str], list[Any]]) -> Any:
    if text is None:
        return None
    try:
        return parse(text, flag)
    except SweepError as exc:
        fail(str(exc))
