"""``--model org/name`` fetched from a hub: a real HTTP server on 127.0.0.1 answering the hub's
file API (``HF_ENDPOINT`` points at it): ``HEAD``/``GET /{repo}/resolve/main/{file}`` with the
headers huggingface_hub reads (``X-Repo-Commit``, ``ETag``, ``Content-Length``), 404 with
``X-Error-Code: EntryNotFound`` for a file the repository lacks, ``RepoNotFound`` for no
repository, 401 ``GatedRepo`` for a gated one without the right ``Authorization: Bearer``.
``infer-prof plan`` runs as a subprocess, as a user's shell would start it."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infer_prof.catalog.models import registry

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
CONFIG = json.dumps(registry()["qwen2.5-7b"]["config"]).encode()
TOKENIZER = json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {}}}).encode()
REPOS: dict[str, dict[str, bytes]] = {
    "acme/open-7b": {"config.json": CONFIG, "tokenizer.json": TOKENIZER,
                     "tokenizer_config.json": b"{}", "generation_config.json": b"{\"a\": 1}"},
    "acme/sentencepiece-7b": {"config.json": CONFIG, "tokenizer.model": b"\x0a\x01spm"},
    "acme/gated-7b": {"config.json": CONFIG, "tokenizer.json": TOKENIZER},
}


class FakeHub(http.server.ThreadingHTTPServer):
    seen: list[tuple[str, str, str | None]]


class HubHandler(http.server.BaseHTTPRequestHandler):
    server: FakeHub

    def _answer(self, body: bool) -> None:
        auth = self.headers.get("Authorization")
        if "/resolve/" in self.path:  # (huggingface_hub also asks /api/ for its user agent)
            self.server.seen.append((self.command, self.path, auth))
        repo, _, rest = self.path.lstrip("/").partition("/resolve/")
        revision, _, name = rest.partition("/")
        files = REPOS.get(repo)
        data = files.get(name) if files else None
        if files is None:
            self._status(404, {"X-Error-Code": "RepoNotFound"})
        elif repo == "acme/gated-7b" and auth != "Bearer good":
            self._status(401 if auth is None else 403, {"X-Error-Code": "GatedRepo"})
        elif revision != "main" or data is None:
            self._status(404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": COMMIT})
        else:
            self.send_response(200)
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)

    def _status(self, code: int, headers: dict[str, str]) -> None:
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(body=True)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    srv = FakeHub(("127.0.0.1", 0), HubHandler)
    srv.seen = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def env(tmp_path, hub) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items()
           if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE",
                        "TRANSFORMERS_OFFLINE")}
    out.update(HF_HOME=str(tmp_path / "hf-home"), HF_HUB_CACHE=str(tmp_path / "hf-cache"),
               HF_ENDPOINT=f"http://127.0.0.1:{hub.server_address[1]}",
               INFER_PROF_CACHE=str(tmp_path / "ip-cache"), PYTHONPATH=str(REPO))
    return out


def plan(model: str, env: dict[str, str]) -> tuple[int, str, str]:
    p = subprocess.run(
        [sys.executable, "-m", "infer_prof", "plan", "--model", model, "--gpu", "H100-SXM",
         "--json"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def test_a_hub_id_is_fetched_into_the_cache_then_read_offline(hub, env, tmp_path):
    code, out, err = plan("acme/open-7b", env)
    assert code == 0, err
    assert json.loads(out)["model"] == "acme/open-7b"
    snap = tmp_path / "hf-cache" / "models--acme--open-7b" / "snapshots" / COMMIT
    assert (tmp_path / "hf-cache/models--acme--open-7b/refs/main").read_text() == COMMIT
    assert {p.name for p in snap.iterdir()} == {
        "config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"}
    assert (snap / "config.json").read_bytes() == CONFIG
    got = {p.rsplit("/", 1)[1] for m, p, _ in hub.seen if m == "GET"}
    assert got == {"config.json", "tokenizer.json", "tokenizer_config.json",
                   "generation_config.json"}  # no tokenizer.model: tokenizer.json was there
    # huggingface_hub's own lookup (vLLM's and transformers') finds the same file, no network
    from huggingface_hub import try_to_load_from_cache

    hit = try_to_load_from_cache("acme/open-7b", "config.json",
                                 cache_dir=str(tmp_path / "hf-cache"))
    assert hit == str(snap / "config.json")
    asked = len(hub.seen)
    code, out, err = plan("acme/open-7b", {**env, "HF_HUB_OFFLINE": "1"})
    assert code == 0, err
    code, out, err = plan("acme/open-7b", env)  # cached: the hub is not asked again
    assert code == 0 and len(hub.seen) == asked, hub.seen[asked:]


def test_a_sentencepiece_tokenizer_is_fetched(hub, env, tmp_path):
    code, _, err = plan("acme/sentencepiece-7b", env)
    assert code == 0, err
    snap = tmp_path / "hf-cache" / "models--acme--sentencepiece-7b" / "snapshots" / COMMIT
    assert {p.name for p in snap.iterdir()} == {"config.json", "tokenizer.model"}


def test_a_gated_repo_names_hf_token_and_the_token_opens_it(hub, env):
    code, out, err = plan("acme/gated-7b", env)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "gated or private" in lines[0] and "set HF_TOKEN" in lines[0]
    code, _, err = plan("acme/gated-7b", {**env, "HF_TOKEN": "bad"})
    assert code == 2 and "the token in HF_TOKEN has no access" in err, err
    code, out, err = plan("acme/gated-7b", {**env, "HF_TOKEN": "good"})
    assert code == 0, err
    assert ("GET", "/acme/gated-7b/resolve/main/config.json", "Bearer good") in hub.seen


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


def test_offline_or_unreachable_says_how_to_give_a_local_folder(hub, env):
    code, _, err = plan("acme/open-7b", {**env, "HF_HUB_OFFLINE": "1"})
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "HF_HUB_OFFLINE is set" in lines[0] and "local folder" in lines[0]
    assert hub.seen == []
    t0 = time.monotonic()
    unreachable = f"http://127.0.0.1:{closed_port()}"
    code, _, err = plan("acme/open-7b", {**env, "HF_ENDPOINT": unreachable})
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "cannot be reached (connection refused)" in lines[0] and "local folder" in lines[0]
    assert time.monotonic() - t0 < 20  # no back-off retries


def test_no_such_repository_in_one_line(hub, env):
    code, _, err = plan("acme/nothing-here", env)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "no such model repository" in lines[0]
