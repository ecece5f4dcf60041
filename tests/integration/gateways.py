"""Real gateways in front of a local server, for the gateway tests: Debian's nginx (run as a
non-daemon child with a configuration in the test's folder, on 127.0.0.1) and LiteLLM's proxy
server from PyPI (in its own virtual environment, ``.venv-litellm``, made by
scripts/install_litellm.sh). Each is skipped, saying why, when it is not installed."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-gateway-test"
#: LiteLLM refuses to start without a master key, or with a weak one
LITELLM_KEY = "sk-" + "5f3a9c2e7b1d4086" * 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx")
                                      else None)
    if not found:
        pytest.skip("nginx is not installed (scripts/install_nginx.sh installs Debian's)")
    return found


def _key_check(on: bool) -> str:
    check = 'if ($http_authorization != "Bearer ' + KEY + '") { return 401; }'
    return check if on else ""


def nginx_config(folder: Path, port: int, upstream: int, *, tls: tuple[Path, Path] | None,
                 buffering: bool, http11: bool, key: str | None) -> str:
    """An nginx.conf: ``buffering`` and ``http11`` (to the upstream) as named; ``key``: None,
    ``"all"`` (every path needs the key) or ``"inference"`` (``/v1/models`` open)."""
    proxy = ["proxy_pass http://up;"]
    if http11:
        proxy += ["proxy_http_version 1.1;", 'proxy_set_header Connection "";']
    if not buffering:
        proxy += ["proxy_buffering off;"]
    body = " ".join(proxy)
    ssl = (f"ssl_certificate {tls[0]}; ssl_certificate_key {tls[1]};" if tls else "")
    listen = f"listen 127.0.0.1:{port}{' ssl' if tls else ''};"
    models = (f"location /v1/models {{ {_key_check(key == 'all')} {body} }}"
              if key == "inference" else "")
    temp = " ".join(f"{k}_temp_path {folder}/{k};"
                    for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""
daemon off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  {temp}
  upstream up {{ server 127.0.0.1:{upstream}; {"keepalive 64;" if http11 else ""} }}
  server {{
    {listen} {ssl}
    {models}
    location / {{ {_key_check(key is not None)} {body} }}
  }}
}}
"""


class Nginx:
    """One nginx, started on a free port in front of ``upstream``; ``stop()`` ends it."""

    def __init__(self, folder: Path, upstream: int, **options: object) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.tls = options.get("tls") is not None
        conf = folder / "nginx.conf"
        conf.write_text(nginx_config(folder, self.port, upstream, **options))  # type: ignore[arg-type]
        self.proc = subprocess.Popen([nginx_binary(), "-e", "stderr", "-p", str(folder),
                                      "-c", str(conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        wait_port(self.port, self.proc, "nginx")

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_port(port: int, proc: subprocess.Popen, what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            raise RuntimeError(f"{what} exited ({proc.returncode}): {err[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{what} did not listen on {port} within {timeout_s:g} s")


def litellm_binary() -> Path:
    """LiteLLM's executable in ``$LITELLM_VENV`` (the Makefile passes ``.venv-litellm``,
    relative to the repository, where pytest runs), as an absolute path: the proxy is started
    in its own folder, where a relative one names nothing."""
    venv = Path(os.environ.get("LITELLM_VENV", REPO / ".venv-litellm")).absolute()
    exe = venv / "bin" / "litellm"
    if not exe.exists():
        pytest.skip(f"LiteLLM is not installed in {venv} (scripts/install_litellm.sh makes it)")
    return exe


class LiteLLM:
    """LiteLLM's proxy server on a free port, routing model ``name`` to ``upstream_url``
    (``provider``: ``text-completion-openai`` for /v1/completions, ``openai`` for chat)."""

    def __init__(self, folder: Path, upstream_url: str, name: str, provider: str,
                 master_key: str = LITELLM_KEY, timeout_s: float = 120.0) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = folder / "litellm.yaml"
        general = f"general_settings:\n  master_key: {master_key}\n"
        conf.write_text(
            "model_list:\n"
            f"  - model_name: {name}\n"
            "    litellm_params:\n"
            f"      model: {provider}/{name}\n"
            f"      api_base: {upstream_url}/v1\n"
            "      api_key: none\n" + general
        )
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_DOCS": "True",
               "LITELLM_LOG": "ERROR"}
        self.log = folder / "litellm.log"
        self.proc = subprocess.Popen(
            [str(litellm_binary()), "--config", str(conf), "--host", "127.0.0.1",
             "--port", str(self.port), "--num_workers", "1"],
            stdout=self.log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=folder,
        )
        try:
            wait_port(self.port, self.proc, "litellm", timeout_s)
        except RuntimeError as exc:
            self.stop()
            raise RuntimeError(f"{exc}; log: {self.log.read_text()[-2000:]}") from None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
