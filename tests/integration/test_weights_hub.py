"""The weights decision against a fake hub and a fake Hugging Face cache.

The hub is a real HTTP server on 127.0.0.1 (``HF_ENDPOINT`` points at it) answering as the
Hugging Face hub does: 200 for an open repository, 401 with ``X-Error-Code: GatedRepo`` for a
gated one without access, 404 ``RepoNotFound``; "unreachable" is a closed port, "silent" a server
that accepts and never answers. The cache is a folder laid out as huggingface_hub lays it out
(``models--org--name/refs/main`` and ``snapshots/<commit>/``), with or without weight files.
The CLI cases run ``infer-prof run`` as a subprocess; a malformed ``--slo`` stops them
with exit 2 right after the weights decision, so no engine starts on any machine.
"""

from __future__ import annotations

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

from infer_prof.catalog.models import registry, resolve_model
from infer_prof.catalog.weights import cached_folders, choose_weights, folder_weights, probe_hub

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
HUB_ID = "meta-llama/Llama-2-7b-hf"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub(http.server.ThreadingHTTPServer):
    mode = "open"
    seen_auth: list[str | None]


class HubHandler(http.server.BaseHTTPRequestHandler):
    server: FakeHub

    def do_HEAD(self) -> None:  # noqa: N802
        self.server.seen_auth.append(self.headers.get("Authorization"))
        mode = self.server.mode
        if not self.path.endswith("/resolve/main/config.json"):
            self.send_response(400)
        elif mode == "open":
            self.send_response(200)
        elif mode == "redirect":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:9/blob")
        elif mode == "gated" and self.headers.get("Authorization") == "Bearer good":
            self.send_response(200)
        elif mode == "gated":
            self.send_response(401 if not self.headers.get("Authorization") else 403)
            self.send_header("X-Error-Code", "GatedRepo")
        else:
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    srv = FakeHub(("127.0.0.1", 0), HubHandler)
    srv.seen_auth = []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def url(srv: FakeHub) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


def make_cache(root: Path, with_weights: bool) -> Path:
    """A Hugging Face cache holding HUB_ID's config.json (and one weight file if asked)."""
    repo = root / "models--meta-llama--Llama-2-7b-hf"
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    (snap / "config.json").write_text('{"model_type": "llama"}')
    if with_weights:
        (snap / "model.safetensors").write_bytes(b"\0" * 64)
    return snap


@pytest.mark.parametrize(
    ("mode", "token", "state", "detail"),
    [
        ("open", None, "ok", "HTTP 200"),
        ("redirect", None, "ok", "HTTP 302"),
        ("gated", None, "gated", "HTTP 401"),
        ("gated", "bad", "gated", "HTTP 403"),
        ("gated", "good", "ok", "HTTP 200"),
        ("missing", None, "not_found", "HTTP 404"),
    ],
)
def test_probe_reads_the_hubs_answer(hub, mode, token, state, detail):
    hub.mode = mode
    status = probe_hub(HUB_ID, endpoint=url(hub), token=token, timeout_s=2)
    assert (status.state, status.detail, status.token) == (state, detail, token is not None)
    assert hub.seen_auth == [f"Bearer {token}" if token else None]


def test_probe_of_an_unreachable_or_silent_hub_ends_within_its_timeout():
    t0 = time.monotonic()
    refused = probe_hub(HUB_ID, endpoint=f"http://127.0.0.1:{closed_port()}", timeout_s=2)
    assert (refused.state, refused.detail) == ("unreachable", "connection refused")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts (the kernel does) and never answers
    try:
        t1 = time.monotonic()
        status = probe_hub(
            HUB_ID, endpoint=f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=1
        )
        assert status.state == "unreachable" and "no answer within 1 s" in status.detail
        assert 0.9 < time.monotonic() - t1 < 2.5
    finally:
        silent.close()
    assert time.monotonic() - t0 < 5


def test_cache_lookup_tells_weights_from_a_config_alone(tmp_path):
    assert cached_folders(HUB_ID, tmp_path) == (None, None)
    snap = make_cache(tmp_path / "with", with_weights=True)
    assert cached_folders(HUB_ID, tmp_path / "with") == (str(snap), str(snap))
    bare = make_cache(tmp_path / "bare", with_weights=False)
    assert cached_folders(HUB_ID, tmp_path / "bare") == (None, str(bare))


def test_a_sharded_checkpoint_with_a_missing_shard_has_no_weights(tmp_path):
    (tmp_path / "model-1.safetensors").write_bytes(b"x")
    (tmp_path / "model.safetensors.index.json").write_text(
        '{"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}}'
    )
    assert folder_weights(tmp_path) == ()
    (tmp_path / "model-2.safetensors").write_bytes(b"x")
    assert folder_weights(tmp_path) == ("model-1.safetensors", "model-2.safetensors")


@pytest.fixture
def hf_env(tmp_path, hub, monkeypatch):
    """HF_* variables pointing at the fake hub and an empty cache; no token anywhere."""
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_ENDPOINT", url(hub))
    monkeypatch.setenv("INFER_PROF_CACHE", str(tmp_path / "ip-cache"))
    return tmp_path


def test_decision_follows_cache_then_hub_then_random(hf_env, hub, monkeypatch):
    model = resolve_model("llama-2-7b")
    hub.mode = "gated"
    d = choose_weights(model, None)
    assert (d.weights, d.load_format) == ("random", "dummy")
    assert "gated on the hub, no token (HF_TOKEN), not cached" in d.reason
    monkeypatch.setenv("HF_TOKEN", "good")  # the user's token opens it
    assert choose_weights(model, None).origin == "hub"
    assert hub.seen_auth[-1] == "Bearer good"
    snap = make_cache(hf_env / "hf-cache", with_weights=True)
    asked = len(hub.seen_auth)
    d = choose_weights(model, None)
    assert (d.weights, d.origin, d.engine_path) == ("real", "hf-cache", str(snap))
    assert len(hub.seen_auth) == asked  # cached weights: the hub is not asked
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_env / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    d = choose_weights(model, None)
    assert d.weights == "random" and "HF_HUB_OFFLINE is set" in d.reason
    assert len(hub.seen_auth) == asked + 0  # offline: not asked either
    assert choose_weights(model, "dummy").origin == "as-given"


def cli(*args: str, env: dict[str, str]) -> tuple[int, str, float]:
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "infer_prof", "run", "--no-progress", "--no-history", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return p.returncode, p.stderr, time.monotonic() - t0


STOP = ("--slo", "fastest")  # exit 2 right after the weights decision: nothing starts


@pytest.mark.parametrize(
    ("mode", "cache", "expect"),
    [
        (
            "gated",
            None,
            "llama-2-7b: no weights available (gated on the hub, no token (HF_TOKEN), not "
            "cached): profiling its architecture with random weights; speed is the same, outputs "
            "are meaningless",
        ),
        (
            "unreachable",
            None,
            "llama-2-7b: no weights available (hub unreachable: connection refused",
        ),
        ("open", None, "llama-2-7b: real weights from the hub (meta-llama/Llama-2-7b-hf)"),
        ("gated", "weights", "llama-2-7b: real weights from the Hugging Face cache ("),
        ("gated", "config", "llama-2-7b: no weights available (gated on the hub"),
    ],
)
def test_cli_says_which_weights_before_anything_starts(hf_env, hub, mode, cache, expect, tmp_path):
    env = {**os.environ}
    if mode == "unreachable":
        env["HF_ENDPOINT"] = f"http://127.0.0.1:{closed_port()}"
    hub.mode = mode
    if cache:
        make_cache(hf_env / "hf-cache", with_weights=cache == "weights")
    code, err, took = cli("--model", "llama-2-7b", "--results-dir", str(tmp_path), *STOP, env=env)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert lines[0].startswith(expect), err
    assert lines[1].startswith("error: ") and "fastest" in lines[1], err
    assert len(lines) == 2 and "Traceback" not in err
    assert took < 30


def test_cli_names_a_malformed_config_in_one_line(hf_env, tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    code, err, _ = cli("--model", str(tmp_path), env={**os.environ})
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "lacks the field 'num_attention_heads'" in lines[0]


def test_cli_require_weights_fails_in_one_line(hf_env, hub, tmp_path):
    hub.mode = "gated"
    code, err, _ = cli(
        "--model", "llama-2-7b", "--require-weights", "--results-dir", str(tmp_path),
        env={**os.environ},
    )
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("error: llama-2-7b: no weights available (gated on the hub")
    assert "--require-weights" in lines[0]


def test_cli_names_a_local_folder_without_weight_files(hf_env, tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(registry()["llama-2-7b"]["config"]))
    code, err, took = cli(
        "--model", str(folder), "--results-dir", str(tmp_path), env={**os.environ}
    )
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0] == (
        f"error: model folder {folder.resolve()} has no weight files (*.safetensors, *.bin, "
        "*.pt, *.pth, *.gguf): add them, or give --load-format dummy to profile its "
        "architecture with random weights"
    )
    assert took < 30
