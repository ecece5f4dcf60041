"""HTTPS endpoints against real local TLS servers with certificates made at test time.

The stream client does TLS itself on its raw socket (``infer_prof.loadgen.tls``): checked here
for both readers (C and pure Python) against scripted TLS servers, and through
``infer-prof run --endpoint https://...`` against the synthetic server in TLS mode: a trusted
private CA, verification switched off, a wrong host name, an expired certificate, and a server
speaking plain HTTP on the port.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest

from infer_prof.core.measurement.metrics import RequestRecord
from infer_prof.loadgen import stamped_reader
from infer_prof.loadgen.client import stream_request
from infer_prof.loadgen.endpoint import Endpoint, StreamConnection, resolve
from infer_prof.loadgen.openai_requests import build_completion_request
from infer_prof.loadgen.tls import TlsSettings
from infer_prof.run.calibrate import start_synthetic
from infer_prof.servers.certs import CertFiles, make_certs

from .conftest import cli
from .test_stream_client import chunk, full_stream, token_event

pytestmark = pytest.mark.integration

BASE = ("run", "--model", "llama-2-7b", "--no-progress", "-c", "2", "-n", "4", "--input-len",
        "8", "--output-len", "8", "--warmup-requests", "0")


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("tls-good"))


@pytest.fixture
def tls_server():
    started = []

    def start(files: CertFiles, tokens: int = 8):
        s = start_synthetic(20.0, 5.0, tokens, tls=files)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


# --- the stream client over TLS, both readers ---------------------------------------------------


class ScriptedTlsServer:
    """One connection, TLS by hand (SSLObject over MemoryBIOs on a blocking socket) so that the
    test decides how ciphertext is cut into TCP segments: each write is one TLS record sent as
    one segment; ``split`` = {write index: seconds} sends that record in two segments that far
    apart. Serves requests on the connection until it closes (keep-alive)."""

    def __init__(self, files: CertFiles, writes: list[bytes], gap_s: float = 0.003,
                 split: dict[int, float] | None = None) -> None:
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(files.cert, files.key)
        self.sni: list[str | None] = []
        self.heads: list[bytes] = []
        self.ctx.sni_callback = lambda _obj, name, _ctx: self.sni.append(name)
        self.writes, self.gap_s, self.split = writes, gap_s, split or {}
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(1)
        self.port = self.lsock.getsockname()[1]
        self.handshakes = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.lsock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = self.ctx.wrap_bio(inc, out, server_side=True)
        with conn:
            while True:  # handshake
                try:
                    obj.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    if out.pending:
                        conn.sendall(out.read())
                    data = conn.recv(65536)
                    if not data:
                        return
                    inc.write(data)
            self.handshakes += 1
            if out.pending:
                conn.sendall(out.read())
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:  # one request
                    try:
                        buf += obj.read(65536)
                        continue
                    except ssl.SSLWantReadError:
                        pass
                    except ssl.SSLError:
                        return
                    data = conn.recv(65536)
                    if not data:
                        return
                    inc.write(data)
                head, _, buf = buf.partition(b"\r\n\r\n")
                self.heads.append(head)
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                while len(buf) < length:
                    try:
                        buf += obj.read(65536)
                    except ssl.SSLWantReadError:
                        inc.write(conn.recv(65536))
                buf = buf[length:]
                for i, w in enumerate(self.writes):
                    obj.write(w)
                    ct = out.read()
                    if i in self.split:
                        conn.sendall(ct[:20])
                        time.sleep(self.split[i])
                        conn.sendall(ct[20:])
                    else:
                        conn.sendall(ct)
                    time.sleep(self.gap_s)

    def close(self) -> None:
        self.lsock.close()


async def tls_requests(files: CertFiles, writes: list[bytes], n: int = 1,
                       split: dict[int, float] | None = None) -> list[RequestRecord]:
    """``n`` requests, one after another, on one kept-alive TLS connection."""
    server = ScriptedTlsServer(files, writes, split=split)
    endpoint = Endpoint.from_url(f"https://127.0.0.1:{server.port}", ca_bundle=str(files.ca))
    family, addr = await resolve(endpoint)
    conn = StreamConnection(addr, family, endpoint)
    records = []
    try:
        for i in range(n):
            record = RequestRecord(index=i, input_len=7, max_tokens=8)
            await stream_request(conn, build_completion_request(endpoint, "m", [1] * 7, 8),
                                 record, 5.0)
            records.append(record)
            session = conn.session
            assert session is not None and session.obj.version() == "TLSv1.3"
    finally:
        conn.close()
        server.close()
    assert server.handshakes == 1  # keep-alive: one TLS session for every request
    return records


def same(a: RequestRecord, b: RequestRecord) -> None:
    for f in ("chunk_tokens", "output_tokens", "prompt_tokens", "finish_reason", "error",
              "token_count_source", "timestamp_source"):
        assert getattr(a, f) == getattr(b, f), f


@pytest.mark.parametrize("compact", [True, False])
def test_c_and_python_readers_agree_over_tls_and_with_plain_http(certs, monkeypatch, compact):
    got = {}
    for impl in ("c", "python"):
        if impl == "c":
            assert stamped_reader.READER == "c", "the C reader was not built"
        monkeypatch.setenv("INFER_PROF_READER", impl)
        got[impl] = asyncio.run(tls_requests(certs, full_stream(8, compact=compact), n=2))
    for impl, (first, second) in got.items():
        assert first.error is None, (impl, first.error_detail)
        assert first.chunk_tokens == [1] * 8 and first.output_tokens == 8
        assert first.finish_reason == "length" and first.timestamp_source == "kernel"
        same(first, second)  # the kept-alive connection's second request
        gaps = [b - a for a, b in zip(first.chunk_ns, first.chunk_ns[1:], strict=False)]
        # one token per 3 ms write, each stamped when it arrived: the stamps move forward and
        # most gaps are the writes' (two writes the server's scheduler delayed can land in one
        # read and share a stamp, gap 0: seen once on a loaded 2-core CI machine)
        assert all(g >= 0 for g in gaps), gaps
        assert sorted(gaps)[len(gaps) // 2] > 1_000_000, gaps
    same(got["c"][0], got["python"][0])
    # and plain HTTP with the same script gives the same record (test_stream_client's server)
    from .test_stream_client import one_request

    plain, _ = asyncio.run(one_request(full_stream(8, compact=compact)))
    same(plain, got["c"][0])


def test_a_record_split_over_segments_is_timed_by_its_last_segment(certs, monkeypatch):
    writes = full_stream(6, compact=True)  # writes[3] carries token 3
    for impl in ("c", "python"):
        monkeypatch.setenv("INFER_PROF_READER", impl)
        (rec,) = asyncio.run(tls_requests(certs, writes, split={3: 0.05}))
        assert rec.error is None and rec.chunk_tokens == [1] * 6, impl
        gap_ms = (rec.chunk_ns[2] - rec.chunk_ns[1]) / 1e6  # token 2 -> token 3
        assert gap_ms >= 50.0, (impl, gap_ms)


def test_two_events_in_one_record_are_two_chunks_with_one_time(certs, monkeypatch):
    writes = full_stream(4, compact=True)
    writes[1:3] = [writes[1] + writes[2]]  # one record: tokens 1 and 2
    for impl in ("c", "python"):
        monkeypatch.setenv("INFER_PROF_READER", impl)
        (rec,) = asyncio.run(tls_requests(certs, writes))
        assert rec.chunk_tokens == [1, 1, 1, 1], impl
        assert rec.chunk_ns[0] == rec.chunk_ns[1] < rec.chunk_ns[2]


def test_a_big_record_chunk_carrying_two_tokens(certs, monkeypatch):
    writes = full_stream(4, compact=True)
    writes[2] = chunk(token_event(3, compact=True))  # the count jumps from 1 to 3
    for impl in ("c", "python"):
        monkeypatch.setenv("INFER_PROF_READER", impl)
        (rec,) = asyncio.run(tls_requests(certs, writes))
        assert rec.chunk_tokens == [1, 2, 1] and rec.output_tokens == 4, impl


# --- infer-prof run --endpoint https://... -------------------------------------------------------


def run_https(url: str, tmp_path: Path, *extra: str):
    out = tmp_path / "r.json"
    p = cli(*BASE, "--endpoint", url, "--json", "--output", str(out), *extra)
    return p, out


def error_line(p) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("error: "), p.stderr
    assert not any(ln.startswith("error: ") for ln in lines[:-1]), p.stderr
    return lines[-1]


def test_verified_with_a_private_ca(certs, tls_server, tmp_path):
    server = tls_server(certs)
    assert server.url.startswith("https://")
    p, out = run_https(server.url + "/v1", tmp_path, "--ca-bundle", str(certs.ca))
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["requests_completed"] == 4 and summary["requests_failed"] == 0
    assert 19.0 < summary["ttft_ms"]["p50"] < 40.0
    assert 4.5 < summary["itl_ms"]["p50"] < 8.0
    result = json.loads(out.read_text())
    assert result["server"]["tls"]["verified"] is True
    assert result["server"]["tls"]["version"] == "TLSv1.3"
    assert result["config"]["ca_bundle"] == str(certs.ca) and result["config"]["insecure"] is False
    assert result["client"]["timestamp_source"] == "kernel"
    assert "insecure" not in p.stderr


def test_untrusted_certificate_is_one_line_exit_2_before_load(certs, tls_server, tmp_path):
    server = tls_server(certs)
    p, out = run_https(server.url, tmp_path)  # the system store does not know our CA
    assert p.returncode == 2, p.stderr
    line = error_line(p)
    assert "TLS certificate of 127.0.0.1 not trusted" in line, line
    assert "--ca-bundle" in line and "--insecure" in line
    assert not out.exists()


def test_insecure_skips_verification_warns_and_is_recorded(certs, tls_server, tmp_path):
    server = tls_server(certs)
    p, out = run_https(server.url, tmp_path, "--insecure")
    assert p.returncode == 0, p.stderr
    assert "warning: --insecure" in p.stderr
    result = json.loads(out.read_text())
    assert result["config"]["insecure"] is True
    assert result["server"]["tls"]["verified"] is False
    assert json.loads(p.stdout)["requests_completed"] == 4


def test_wrong_host_name_is_exit_2(tls_server, tmp_path):
    files = make_certs(tmp_path / "certs", hosts=["other.example"])
    server = tls_server(files)
    p, _ = run_https(server.url, tmp_path, "--ca-bundle", str(files.ca))
    assert p.returncode == 2, p.stderr
    line = error_line(p)
    assert "127.0.0.1" in line and "not valid for that name" in line, line


def test_expired_certificate_is_exit_2(tls_server, tmp_path):
    files = make_certs(tmp_path / "certs", expired=True)
    server = tls_server(files)
    p, _ = run_https(server.url, tmp_path, "--ca-bundle", str(files.ca))
    assert p.returncode == 2, p.stderr
    line = error_line(p)
    assert "TLS certificate of 127.0.0.1 not trusted" in line and "expired" in line, line


def test_plain_http_on_the_tls_port_is_a_clear_error(tmp_path):
    """A plain-HTTP server (answers garbage with 400, as nginx and uvicorn do) at an https URL."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    port = lsock.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = lsock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n"
                             b"connection: close\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    try:
        p, _ = run_https(f"https://127.0.0.1:{port}", tmp_path)
    finally:
        lsock.close()
    assert p.returncode == 2, p.stderr
    line = error_line(p)
    assert "plain HTTP" in line and f"http://127.0.0.1:{port}" in line, line


# --- accuracy over TLS --------------------------------------------------------------------------


def test_accuracy_over_tls_against_the_servers_truth(certs):
    """The synthetic server over TLS stamps arrivals and sends as over plain HTTP; the client's
    numbers must match that truth within the issue's targets (32 streams: light for 2 cores)."""
    from infer_prof.run.calibrate import calibrate_point

    server = start_synthetic(50.0, 15.0, 64, tls=certs)
    try:
        rep = calibrate_point(server, concurrency=32, num_requests=64, input_len=16, output_len=64)
    finally:
        server.stop()
    assert rep.failed == 0 and rep.matched_requests == 64
    # the server's timers may fire up to ~1 ms early under uvloop (its clock counts whole ms)
    assert 49.0 <= rep.ttft.p50_truth_ms <= 55.0
    assert abs(rep.ttft.p50_error_ms) <= 1.0
    assert abs(rep.ttft.p99_error_ms) <= 3.0
    assert abs(rep.itl.p50_error_ms) <= 0.5
    assert abs(rep.itl.p99_error_ms) <= 1.0
    assert abs(rep.request_throughput.error_pct) <= 1.0


def test_calibrate_tls_makes_its_own_certificate_and_says_https():
    p = cli("calibrate", "--tls", "-c", "2", "--ttft-ms", "5", "--itl-ms", "2", "--output-len",
            "6", "--requests-per-stream", "2", "--json", timeout=120)
    assert p.returncode == 0, p.stderr
    (level,) = json.loads(p.stdout)
    assert level["tls"] is True and level["failed"] == 0 and level["matched_requests"] == 4


@pytest.mark.parametrize("impl", ["c", "python"])
def test_finished_tls_requests_leave_no_reference_cycles(certs, monkeypatch, impl):
    """As over plain HTTP (test_stream_client): the decrypter handed to the reader must not
    tie a request's objects into a cycle that only the paused garbage collector could free."""
    import gc

    from infer_prof.loadgen.client_health import ReadStats
    from infer_prof.loadgen.pacing import SendPacer

    monkeypatch.setenv("INFER_PROF_READER", impl)
    server = start_synthetic(1.0, 0.2, 8, tls=certs)

    async def requests(n: int) -> None:
        endpoint = Endpoint.from_url(server.url, ca_bundle=str(certs.ca))
        family, addr = await resolve(endpoint)
        conn = StreamConnection(addr, family, endpoint)
        pacer = SendPacer()
        request = build_completion_request(endpoint, "synthetic", [1] * 4, 8)
        for i in range(n):
            rec = RequestRecord(index=i, input_len=4, max_tokens=8)
            await stream_request(conn, request, rec, 5.0, None, ReadStats(), pacer)
            assert rec.ok and rec.output_tokens == 8, rec.error_detail
        conn.close()

    try:
        asyncio.run(requests(3))
        gc.collect()
        gc.disable()
        try:
            asyncio.run(requests(50))
            unreachable = gc.collect()
        finally:
            gc.enable()
    finally:
        server.stop()
    assert unreachable <= 5


def test_sni_and_host_header_carry_the_host_name(tmp_path, monkeypatch):
    """A name (not an IP) is sent as SNI, checked against the certificate, and is the Host
    header (with the port, as it is not 443)."""
    files = make_certs(tmp_path / "certs", hosts=["sni.example"])
    server = ScriptedTlsServer(files, full_stream(3, compact=True))

    async def go() -> RequestRecord:
        ep = Endpoint("sni.example", server.port, scheme="https", tls=TlsSettings(str(files.ca)))
        conn = StreamConnection(("127.0.0.1", server.port), socket.AF_INET, ep)
        rec = RequestRecord(index=0, input_len=7, max_tokens=3)
        try:
            await stream_request(conn, build_completion_request(ep, "m", [1] * 7, 3), rec, 5.0)
        finally:
            conn.close()
        return rec

    try:
        rec = asyncio.run(go())
    finally:
        server.close()
    assert rec.error is None and rec.output_tokens == 3, rec.error_detail
    assert server.sni == ["sni.example"]
    assert f"\r\nHost: sni.example:{server.port}\r\n".encode() in server.heads[0]
