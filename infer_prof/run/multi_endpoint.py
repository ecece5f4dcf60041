"""Several endpoints in one command: the same workload against each, in turn, then one table.

The endpoints come from repeated ``--endpoint URL`` options (paired in order with ``--gpu``,
``--gpus``, ``--price-per-hour`` and ``--endpoint-label``) or from a TOML file (``--endpoints
FILE``)::

    [[endpoint]]
    url = "http://10.0.0.5:8000"
    gpu = "A100-80GB-SXM"      # optional: catalog key, prices the run
    gpu_count = 1              # optional, default 1
    price_per_hour = 1.89      # optional: USD per GPU-hour, overrides the catalog
    label = "a100-spot"        # optional: names the row and the result files
    served_model_name = "m"    # optional: default read from /v1/models
    api_key_env = "RUNPOD_KEY" # optional: the environment variable holding its key
                               # (default: --api-key / OPENAI_API_KEY); never written anywhere
    ca_bundle = "ca.pem"       # optional, https: PEM file of a private CA (default --ca-bundle)
    insecure = false           # optional, https: skip certificate checks (default --insecure)

Each endpoint's run is an ordinary run (:func:`infer_prof.run.runner.execute`): its result files
carry the endpoint's label in their name (``<stamp>-<model>-<label>-<load>.json``) and in the
result's labels (``endpoint=<label>``), so ``compare``, ``report`` and ``history`` read them as
usual. An endpoint that fails (does not answer, bad answer, dies mid-run) is a row with its
reason and the next endpoint still runs. The table (rows read from the typed results by
:mod:`infer_prof.results.endpoint_rows`; columns, cheapest marks and file forms by
:mod:`infer_prof.core.analysis.endpoint_table`) is written beside the results as
``<stamp>-endpoints.json`` and ``.csv``.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infer_prof.core.analysis.endpoint_table import table_csv_rows, table_document
from infer_prof.results.endpoint_rows import EndpointRun, endpoint_rows
from infer_prof.results.store import write_file, write_result
from infer_prof.run.config import ConfigError, RunConfig

TOML_KEYS = (
    "url",
    "gpu",
    "gpu_count",
    "price_per_hour",
    "label",
    "served_model_name",
    "api_key_env",
    "ca_bundle",
    "insecure",
)


@dataclass(frozen=True)
class EndpointTarget:
    """One endpoint to profile: URL, the GPU it runs on (catalog key, for cost and roofline),
    how many, the USD per GPU-hour (None: the price catalog's), its label, the model name, and
    the name of the environment variable that holds its API key (None: the shared key)."""

    url: str
    gpu: str | None = None
    gpu_count: int | None = None
    price_per_hour: float | None = None
    label: str | None = None
    served_model_name: str | None = None
    api_key_env: str | None = None
    ca_bundle: str | None = None  # https: this endpoint's private CA (None: --ca-bundle)
    insecure: bool | None = None  # https: skip verification (None: --insecure)


def pair_targets(
    urls: Sequence[str],
    gpus: Sequence[str],
    counts: Sequence[int],
    prices: Sequence[float],
    labels: Sequence[str],
) -> list[EndpointTarget]:
    """Endpoints from repeated options, paired in order: each of ``--gpu``, ``--gpus``,
    ``--price-per-hour`` and ``--endpoint-label`` is given once per ``--endpoint`` or not at
    all; ``--gpu none`` for an endpoint whose GPU is not named (a TOML file leaves any key out).
    Raises ConfigError on a count mismatch."""
    n = len(urls)
    for flag, values in (
        ("--gpu", gpus),
        ("--gpus", counts),
        ("--price-per-hour", prices),
        ("--endpoint-label", labels),
    ):
        if values and len(values) != n:
            raise ConfigError(
                f"{len(values)} {flag} for {n} --endpoint: give {flag} once per --endpoint "
                "(in the same order) or not at all"
            )
    return with_labels(
        [
            EndpointTarget(
                url=u,
                gpu=gpus[i] if gpus and gpus[i].strip().lower() not in ("none", "-") else None,
                gpu_count=counts[i] if counts else None,
                price_per_hour=prices[i] if prices else None,
                label=labels[i] if labels else None,
            )
            for i, u in enumerate(urls)
        ]
    )


def parse_endpoints_toml(text: str, source: str = "endpoints file") -> list[EndpointTarget]:
    """Endpoints from TOML text (``[[endpoint]]`` tables, keys :data:`TOML_KEYS`). Raises
    ConfigError naming the file, the entry and the fix."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML ({exc})") from None
    except RecursionError:
        raise ConfigError(f"{source}: not valid TOML (nested too deeply)") from None
    extra = sorted(set(doc) - {"endpoint"})
    if extra:
        raise ConfigError(
            f"{source}: unknown top-level key {extra[0]!r}; list endpoints as [[endpoint]] tables"
        )
    entries = doc.get("endpoint")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(
            f"{source}: no endpoints; add [[endpoint]] tables with url = \"http://host:port\""
        )
    out = []
    for i, entry in enumerate(entries, 1):
        where = f"{source}: endpoint {i}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} is not a table; write it as [[endpoint]]")
        unknown = sorted(set(entry) - set(TOML_KEYS))
        if unknown:
            raise ConfigError(
                f"{where}: unknown key {unknown[0]!r}; known keys: {', '.join(TOML_KEYS)}"
            )
        url = entry.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ConfigError(f"{where} has no url; add url = \"http://host:port\"")
        for key in ("gpu", "label", "served_model_name", "api_key_env", "ca_bundle"):
            if key in entry and (not isinstance(entry[key], str) or not entry[key].strip()):
                raise ConfigError(f"{where}: {key} must be a non-empty string")
        insecure = entry.get("insecure")
        if insecure is not None and not isinstance(insecure, bool):
            raise ConfigError(f"{where}: insecure must be true or false, got {insecure!r}")
        count = entry.get("gpu_count")
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or count < 1
        ):
            raise ConfigError(f"{where}: gpu_count must be a positive integer, got {count!r}")
        price = entry.get("price_per_hour")
        if price is not None and (
            isinstance(price, bool) or not isinstance(price, (int, float)) or not price > 0
        ):
            raise ConfigError(
                f"{where}: price_per_hour must be positive USD per GPU-hour, got {price!r}"
            )
        out.append(
            EndpointTarget(
                url=url.strip(),
                gpu=entry.get("gpu"),
                gpu_count=count,
                price_per_hour=float(price) if price is not None else None,
                label=entry.get("label"),
                served_model_name=entry.get("served_model_name"),
                api_key_env=entry.get("api_key_env"),
                ca_bundle=entry.get("ca_bundle"),
                insecure=insecure,
            )
        )
    return with_labels(out, source)


def load_endpoints_file(path: str) -> list[EndpointTarget]:
    """:func:`parse_endpoints_toml` of a file; a missing file is a ConfigError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--endpoints {path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"--endpoints {path}: not UTF-8 text ({exc.reason} at byte {exc.start}); an "
            "endpoints file is TOML"
        ) from None
    return parse_endpoints_toml(text, f"--endpoints {path}")


def with_labels(
    targets: list[EndpointTarget], source: str = "--endpoint-label"
) -> list[EndpointTarget]:
    """Every target labelled: a given label must be unique; a missing one is the GPU key, else
    ``host_port``, with ``-2``, ``-3`` ... when taken."""
    given = [t.label for t in targets if t.label]
    dupes = sorted({x for x in given if given.count(x) > 1})
    if dupes:
        raise ConfigError(f"{source}: label {dupes[0]!r} is given twice; labels must be unique")
    taken = set(given)
    out = []
    for t in targets:
        if t.label:
            out.append(t)
            continue
        base = t.gpu or re.sub(r"^[a-z]+://", "", t.url).split("/")[0].replace(":", "_")
        label, n = base, 1
        while label in taken:
            n += 1
            label = f"{base}-{n}"
        taken.add(label)
        out.append(replace(t, label=label))
    return out


def target_config(cfg: RunConfig, t: EndpointTarget) -> RunConfig:
    """The run configuration of one endpoint: the shared one with the endpoint's URL, GPU,
    count, price, model name, API key and label (``labels.endpoint``; the run id carries it
    too). Raises ConfigError when the endpoint's ``api_key_env`` is not set."""
    label = t.label or t.url
    api_key = cfg.engine.api_key
    if t.api_key_env:
        api_key = os.environ.get(t.api_key_env)
        if not api_key:
            raise ConfigError(
                f"endpoint {label}: api_key_env names {t.api_key_env}, which is not set; "
                f"export {t.api_key_env}=<key>"
            )
    return cfg.with_options(
        endpoint=t.url,
        gpu=t.gpu,
        gpus=t.gpu_count,
        price_per_hour=t.price_per_hour
        if t.price_per_hour is not None
        else cfg.cost.price_per_hour,
        served_model_name=t.served_model_name or cfg.engine.served_model_name,
        api_key=api_key,
        ca_bundle=t.ca_bundle or cfg.engine.ca_bundle,
        insecure=cfg.engine.insecure if t.insecure is None else t.insecure,
        labels={**cfg.results.labels, "endpoint": label},
        run_tag=re.sub(r"[^A-Za-z0-9._-]+", "_", label)[:40],
        output=None,
    )


def check_targets(cfg: RunConfig, targets: Sequence[EndpointTarget]) -> None:
    """Every endpoint's URL and GPU checked before any load is sent (raises ConfigError)."""
    from infer_prof.run.config import validate
    from infer_prof.run.engine_setup import resolve_gpu  # not at import: keeps --help fast

    if cfg.results.output:
        raise ConfigError(
            "--output names one result file; with several endpoints use --results-dir (each "
            "endpoint's files carry its label)"
        )
    for t in targets:
        try:
            one = target_config(cfg, t)
            validate(one)
            if t.gpu:
                resolve_gpu(one.engine)
        except ConfigError as exc:
            text = str(exc)
            raise ConfigError(
                text if text.startswith("endpoint ") else f"endpoint {t.label}: {text}"
            ) from None
    if cfg.cost.max_cost is not None:  # the limit holds for all the endpoints together
        from infer_prof.run.run_cost import check_total_cost

        check_total_cost([(str(t.label), target_config(cfg, t)) for t in targets],
                         cfg.cost.max_cost, "endpoints")


@dataclass
class MultiOutcome:
    """What :func:`run_endpoints` produced: each endpoint's run, the table rows, where the
    table was written, and whether the user interrupted it (the rest were not run)."""

    runs: list[EndpointRun]
    rows: list[dict[str, Any]]
    json_path: Path
    csv_path: Path
    interrupted: bool = False
    history_errors: list[str] | None = None
    sweep_paths: list[Path] | None = None  # each endpoint's sweep summary (several points)

    @property
    def succeeded(self) -> int:
        """Endpoints with at least one complete load point."""
        return sum(1 for r in self.runs if any(res.complete for res, _ in r.results))


def run_endpoints(
    cfg: RunConfig,
    targets: Sequence[EndpointTarget],
    announce: Callable[[int, EndpointTarget], None] = lambda i, t: None,
) -> MultiOutcome:
    """Profile each endpoint in turn with ``cfg``'s workload (see the module docstring) and
    write the table. An endpoint's failure (any error but Ctrl-C) is its row's reason; Ctrl-C
    during an endpoint ends it as usual (its result kept, marked interrupted) and skips the
    rest. Raises ConfigError (no table) when every endpoint was refused with the same bad-input
    error (e.g. a workload longer than the model's context)."""
    from infer_prof.run.runner import execute  # not at import: keeps --help fast
    from infer_prof.run.stopping import stop_signals

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    runs: list[EndpointRun] = []
    history_errors: list[str] = []
    sweep_paths: list[Path] = []
    bad_input: list[str] = []
    interrupted = False
    # Ctrl-C, SIGTERM, SIGHUP: one handler for all the endpoints (also between two of them);
    # shielded, so that a signal is acted on where it is safe (the load, the next endpoint)
    with stop_signals() as stopper, stopper.shielded():
        for i, t in enumerate(targets):
            run = EndpointRun(str(t.label), t.url, t.gpu, t.gpu_count or 1)
            runs.append(run)
            interrupted = interrupted or stopper.requested
            if interrupted:
                run.skipped = "interrupted"
                continue
            announce(i, t)
            try:
                outcome = execute(target_config(cfg, t))
            except KeyboardInterrupt:
                run.error = "interrupted before any load was sent"
                interrupted = True
                continue
            except ConfigError as exc:  # bad input found before this endpoint was sent anything
                run.error = _one_line(exc)
                bad_input.append(run.error)
                continue
            except Exception as exc:  # noqa: BLE001 -- any failure is this endpoint's row
                run.error = _one_line(exc)
                continue
            run.results = [(p.document, str(p.result_path)) for p in outcome.points]
            history_errors += outcome.history_errors
            if outcome.sweep_path:
                sweep_paths.append(outcome.sweep_path)
            if any(p.document.incomplete_reason == "interrupted" for p in outcome.points):
                interrupted = True
            if not outcome.points and stopper.requested:
                run.error = "interrupted before any load was sent"
    if len(bad_input) == len(runs) and len(set(bad_input)) == 1:
        raise ConfigError(bad_input[0])  # the same bad input for all: nothing to tabulate
    rows = endpoint_rows(runs)
    json_path, csv_path = write_table(rows, Path(cfg.results.results_dir), stamp)
    return MultiOutcome(runs, rows, json_path, csv_path, interrupted, history_errors, sweep_paths)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def write_table(rows: list[dict[str, Any]], folder: Path, stamp: str) -> tuple[Path, Path]:
    """Write the table as ``<stamp>-endpoints.json`` and ``.csv`` in ``folder``."""
    from infer_prof.results.schema import SCHEMA_VERSION

    json_path = folder / f"{stamp}-endpoints.json"
    csv_path = folder / f"{stamp}-endpoints.csv"
    write_result(json_path, table_document(rows, SCHEMA_VERSION))
    buf = io.StringIO()
    csv.writer(buf).writerows(table_csv_rows(rows))
    write_file(csv_path, buf.getvalue())
    return json_path, csv_path
