"""The same load through the gateways a rented endpoint sits behind: direct, nginx well-set
(TLS, ``proxy_buffering off``, HTTP/1.1 upstream), nginx at its defaults (buffering on,
HTTP/1.0 upstream) and LiteLLM's proxy, each in front of the synthetic server. Prints one
Markdown row per path: TTFT p50, TPOT p50, req/s, how tokens arrived, and the verdict.

Needs nginx (scripts/install_nginx.sh) and LiteLLM (scripts/install_litellm.sh). Run it as
``flock /tmp/infer-prof-heavy.lock python benchmarks/gateways.py [-c 8 -n 200]``;
``--upstream http://127.0.0.1:8000 --model tiny-llama --served-model-name NAME`` measures in
front of a server already running there (vLLM) instead of the synthetic one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from infer_prof.run.calibrate import start_synthetic  # noqa: E402
from infer_prof.servers.certs import make_certs  # noqa: E402
from tests.integration.gateways import LITELLM_KEY, LiteLLM, Nginx  # noqa: E402


def run(url: str, out: Path, args: argparse.Namespace, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "infer_prof", "run", "--model", args.model, "--no-progress",
           "--endpoint", url, "-c", str(args.c), "-n", str(args.n), "--input-len", "128",
           "--output-len", "64", "--results-dir", str(out), *args.extra, *extra]
    subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    (path,) = [p for p in out.glob("*.json") if not p.name.endswith(".sweep.json")]
    return json.loads(path.read_text())


def row(name: str, r: dict) -> str:
    s, shape = r["summary"], r.get("stream") or {}
    p50 = lambda d: f"{d['p50']:.2f}" if d else "n/a"  # noqa: E731
    reasons = [x.split(":")[0] for x in r["validity"]["reasons"]]
    verdict = "valid" if r["validity"]["valid"] else "invalid: " + ", ".join(reasons)
    arrived = (f"{shape.get('events_per_request', {}).get('mean')} events/req, "
               f"{(shape.get('close_gap_share') or 0):.0%} close gaps, "
               f"{shape.get('bursts_per_request')} bursts/req, "
               f"{shape.get('first_token_unknown')} without TTFT")
    return (f"| {name} | {p50(s['ttft_ms'])} | {p50(s['tpot_ms'])} | "
            f"{s['request_throughput']:.2f} | {arrived} | {verdict} |")


class _Attached:
    """A server someone else started: nothing to stop."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def stop(self) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-c", type=int, default=8)
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--ttft-ms", type=float, default=9.0)
    ap.add_argument("--itl-ms", type=float, default=3.5)
    ap.add_argument("--upstream", help="a server already running (default: the synthetic one)")
    ap.add_argument("--model", default="llama-2-7b")
    ap.add_argument("--served-model-name", default="synthetic")
    ap.add_argument("--api", default="completions", choices=["completions", "chat"])
    ap.add_argument("--prompt", choices=["text", "token-ids"], help="passed to every run")
    args = ap.parse_args()
    args.extra = ["--api", args.api, *(["--prompt", args.prompt] if args.prompt else [])]
    tmp = Path(tempfile.mkdtemp(prefix="gateways-"))
    up = _Attached(args.upstream) if args.upstream else start_synthetic(args.ttft_ms,
                                                                        args.itl_ms, 64)
    port = int(up.url.rsplit(":", 1)[1])
    certs = make_certs(tmp / "certs")
    rows = []
    try:
        rows.append(row("direct", run(up.url, tmp / "direct", args)))
        well = Nginx(tmp / "well", port, tls=(certs.cert, certs.key), buffering=False,
                     http11=True, key=None)
        rows.append(row("nginx well-set (TLS)", run(well.url, tmp / "w", args, "--ca-bundle",
                                                    str(certs.ca))))
        well.stop()
        dflt = Nginx(tmp / "dflt", port, tls=None, buffering=True, http11=False, key=None)
        rows.append(row("nginx defaults", run(dflt.url, tmp / "d", args)))
        dflt.stop()
        lite = LiteLLM(tmp / "lite", up.url, args.served_model_name,
                       "openai" if args.api == "chat" else "text-completion-openai")
        rows.append(row("LiteLLM", run(lite.url, tmp / "l", args, "--api-key", LITELLM_KEY)))
        lite.stop()
    finally:
        up.stop()
    print("| path | TTFT p50 (ms) | TPOT p50 (ms) | req/s | tokens arrived | verdict |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
