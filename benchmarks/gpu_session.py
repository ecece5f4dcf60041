"""The lent GPU's session: issue 35's cases, one after another, inside a time budget.

    source .gpu/s/env.sh && python3 benchmarks/gpu_session.py --out "$OUT" --budget-s 540
    .venv/bin/python benchmarks/gpu_session.py --out /tmp/s --cases benchmarks/gpu_session_cpu.toml

(``benchmarks/gpu_session.sh`` is the device call: it installs the carried MoE kernels, then runs
this.) The cases come from a TOML file (default ``benchmarks/gpu_session_cases.toml``), in
priority order; each is an ``infer-prof`` command line. For each case this:

1. skips it, with the reason, when the budget left is below its ``min_s`` (the seconds it needs
   to give a usable number: start-up plus a measured load) or a file it ``needs`` is missing;
2. runs ``python -m infer_prof <args> --results-dir WORK/<name> --no-history --no-progress``,
   its console written to ``WORK/<name>/console.txt`` as it prints (the result files, the
   server's log and each frontier point land there as infer-prof writes them);
3. stops it at ``min(max_s, budget left - 10 s)``: SIGINT first (infer-prof's Ctrl-C: it stops
   the server and keeps what it measured), then SIGKILL to its process group after 45 s;
4. packs ``WORK/<name>`` into ``OUT/<name>.tar.xz`` (the device machine sends back at most 8
   files from ``$OUT``: one archive a case, and the session file);
5. after it, on a GPU, kills any process still holding the GPU (a server that outlived its
   client would take the next case's memory);
6. rewrites ``OUT/session.json`` (the GPU, vLLM's version, each case's status, exit code,
   seconds and command), so a session cut short still says what ran.

``benchmarks/gpu_session_report.py OUT`` turns the folder into issue 35's table and CSV.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CASES = REPO / "benchmarks" / "gpu_session_cases.toml"
END_MARGIN_S = 10.0
"""Seconds kept back at the end of the budget to write the session file and hand back."""
SIGINT_GRACE_S = 45.0
"""Seconds a case has after SIGINT to stop its server and write what it measured."""


@dataclass(frozen=True)
class Case:
    """One command of the session: ``name`` (its folder), ``args`` (after ``python -m
    infer_prof``), ``min_s`` (seconds it needs to give a usable number; less left: skipped),
    ``max_s`` (seconds it may take at most), ``needs`` (paths relative to the vllm package that
    must exist, e.g. the MoE kernels) and ``what`` (one line for the table)."""

    name: str
    args: tuple[str, ...]
    min_s: float
    max_s: float
    what: str = ""
    needs: tuple[str, ...] = ()


@dataclass
class CaseOutcome:
    """How one case ended: ``status`` ok (exit 0), exit (another code), stopped (at its time
    limit), skipped (with ``reason``) or error (could not start)."""

    name: str
    what: str
    command: list[str]
    status: str
    reason: str | None = None
    rc: int | None = None
    seconds: float | None = None
    limit_s: float | None = None
    archive: str | None = None


@dataclass
class Session:
    """The session file's content (``OUT/session.json``)."""

    budget_s: float
    started_at: str
    cases_file: str
    gpu: str | None = None
    vllm: str | None = None
    nvidia_smi: str | None = None
    outcomes: list[CaseOutcome] = field(default_factory=list)
    elapsed_s: float | None = None


def read_cases(path: Path) -> list[Case]:
    """The ``[[case]]`` tables of a TOML file, in order. Raises ValueError naming a bad one."""
    doc = tomllib.loads(path.read_text())
    cases = []
    for i, t in enumerate(doc.get("case", [])):
        try:
            cases.append(Case(name=t["name"], args=tuple(t["args"]), min_s=float(t["min_s"]),
                              max_s=float(t["max_s"]), what=t.get("what", ""),
                              needs=tuple(t.get("needs", ()))))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"{path}: case {i + 1}: needs name, args, min_s, max_s ({exc})") from None
    if not cases:
        raise ValueError(f"{path}: no [[case]] tables")
    return cases


def _nvidia_smi(*args: str) -> str | None:
    """What ``nvidia-smi ARGS`` prints (None without one)."""
    if shutil.which("nvidia-smi") is None:
        return None
    p = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True)
    return p.stdout.strip() or None


def _vllm_install() -> tuple[Path | None, str | None]:
    """The installed vllm package's folder and version (None, None: not importable). Read from
    marked lines: importing vLLM may log to standard output."""
    p = subprocess.run([sys.executable, "-c", "import os, vllm; print('@vllm-dir=' + os.path."
                        "dirname(vllm.__file__)); print('@vllm-version=' + vllm.__version__)"],
                       capture_output=True, text=True)
    found = dict(line[1:].split("=", 1) for line in p.stdout.splitlines()
                 if line.startswith("@vllm-") and "=" in line)
    if p.returncode != 0 or "vllm-dir" not in found:
        return None, None
    return Path(found["vllm-dir"]), found.get("vllm-version")


def missing_need(case: Case, vllm_dir: Path | None) -> str | None:
    """The first of ``case.needs`` not found in the vllm package, as a reason; None: all there."""
    for need in case.needs:
        if vllm_dir is None or not any(vllm_dir.glob(need)):
            return (f"vllm/{need} is not installed (carry it: benchmarks/gpu_carry_moe.sh "
                    f"builds .gpu/c4; gpu_session.sh installs it)")
    return None


def _kill_gpu_leftovers() -> None:
    """Kill every Python process still holding an NVIDIA GPU (none on a machine without one):
    a vLLM server that outlived its client would take the next case's memory."""
    if shutil.which("nvidia-smi") is None:
        return
    p = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                       capture_output=True, text=True)
    for pid in p.stdout.split():
        cmdline = Path(f"/proc/{pid}/cmdline")
        # nvidia-smi may show PIDs of another namespace: only this machine's Python processes
        if (pid.isdigit() and int(pid) != os.getpid() and cmdline.exists()
                and b"python" in cmdline.read_bytes()):
            try:
                os.kill(int(pid), signal.SIGKILL)
                print(f"  killed pid {pid}, still on the GPU after the case", flush=True)
            except OSError:
                pass
    time.sleep(1.0)


def pack(folder: Path, archive: Path) -> None:
    """``folder`` as ``archive`` (tar, xz), written whole through a temporary name."""
    tmp = archive.with_name(archive.name + ".tmp")
    with tarfile.open(tmp, "w:xz", preset=6) as tar:
        tar.add(folder, arcname=folder.name)
    tmp.replace(archive)


def run_case(case: Case, work: Path, limit_s: float) -> CaseOutcome:
    """Run one case for at most ``limit_s`` seconds (module docstring, steps 2-3)."""
    folder = work / case.name
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "infer_prof", *case.args, "--results-dir", str(folder),
           "--no-history", "--no-progress"]
    shown = ["infer-prof", *case.args]
    outcome = CaseOutcome(name=case.name, what=case.what, command=shown, status="error",
                          limit_s=round(limit_s, 1))
    t0 = time.monotonic()
    with open(folder / "console.txt", "wb") as console:
        try:
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=console, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        except OSError as exc:
            outcome.reason = f"could not start: {exc}"
            return outcome
        try:
            outcome.rc = proc.wait(timeout=limit_s)
            outcome.status = "ok" if outcome.rc == 0 else "exit"
        except subprocess.TimeoutExpired:
            outcome.status = "stopped"
            outcome.reason = f"time limit {limit_s:.0f} s: SIGINT (what was measured is kept)"
            proc.send_signal(signal.SIGINT)
            try:
                outcome.rc = proc.wait(timeout=SIGINT_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                outcome.rc = proc.wait()
                outcome.reason += f"; no exit {SIGINT_GRACE_S:.0f} s later: SIGKILL"
    outcome.seconds = round(time.monotonic() - t0, 1)
    return outcome


def write_session(out: Path, session: Session) -> None:
    """``OUT/session.json``, written whole through a temporary file."""
    tmp = out / "session.json.tmp"
    tmp.write_text(json.dumps(asdict(session), indent=2) + "\n")
    tmp.replace(out / "session.json")


def run_session(cases: list[Case], out: Path, work: Path, budget_s: float,
                cases_file: str) -> Session:
    """Every case in order inside ``budget_s`` seconds (module docstring); the session file
    after each."""
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    vllm_dir, vllm_version = _vllm_install()
    session = Session(budget_s=budget_s, cases_file=cases_file,
                      started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                      gpu=_nvidia_smi("--query-gpu=name,memory.total,power.limit,"
                                      "driver_version", "--format=csv,noheader"),
                      vllm=vllm_version, nvidia_smi=_nvidia_smi("-q"))
    print(f"GPU: {session.gpu or 'none'}; vLLM {session.vllm or 'not importable'}; "
          f"budget {budget_s:.0f} s", flush=True)
    write_session(out, session)
    for case in cases:
        left = budget_s - (time.monotonic() - t0) - END_MARGIN_S
        reason = missing_need(case, vllm_dir)
        if reason is None and left < case.min_s:
            reason = f"{left:.0f} s left, the case needs {case.min_s:.0f} s"
        if reason is not None:
            print(f"[{case.name}] skipped: {reason}", flush=True)
            session.outcomes.append(CaseOutcome(name=case.name, what=case.what,
                                                command=["infer-prof", *case.args],
                                                status="skipped", reason=reason))
        else:
            limit = min(case.max_s, left)
            print(f"[{case.name}] infer-prof {' '.join(case.args)}  (limit {limit:.0f} s)",
                  flush=True)
            outcome = run_case(case, work, limit)
            archive = out / f"{case.name}.tar.xz"
            pack(work / case.name, archive)
            outcome.archive = archive.name
            print(f"[{case.name}] {outcome.status} rc={outcome.rc} in {outcome.seconds} s"
                  + (f": {outcome.reason}" if outcome.reason else ""), flush=True)
            session.outcomes.append(outcome)
            _kill_gpu_leftovers()
        session.elapsed_s = round(time.monotonic() - t0, 1)
        write_session(out, session)
    return session


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-session")),
                    help="folder for every result (default: $OUT)")
    ap.add_argument("--work", type=Path, default=None,
                    help="folder infer-prof writes into (default: a new temporary folder)")
    ap.add_argument("--budget-s", type=float, default=540.0,
                    help="seconds for all cases together (default 540)")
    ap.add_argument("--cases", type=Path, default=DEFAULT_CASES, help="TOML file of [[case]]")
    ap.add_argument("--only", default=None, help="comma-separated case names to run")
    a = ap.parse_args(argv)
    try:
        cases = read_cases(a.cases)
    except (OSError, ValueError) as exc:
        print(f"gpu_session: {exc}", file=sys.stderr)
        return 2
    if a.only:
        names = set(a.only.split(","))
        cases = [c for c in cases if c.name in names]
    work = a.work or Path(tempfile.mkdtemp(prefix="gpu-session-"))
    session = run_session(cases, a.out, work, a.budget_s, str(a.cases))
    ran = sum(o.status in ("ok", "exit", "stopped") for o in session.outcomes)
    print(f"{ran} of {len(cases)} cases ran in {session.elapsed_s} s; results in {a.out}")
    return 0 if ran else 1


if __name__ == "__main__":
    sys.exit(main())
