"""What HTTPS costs the client: handshake CPU per connection, decryption per read, and the whole
client's CPU per read at N streams over plain HTTP and over TLS.

    python benchmarks/tls_cost.py [--streams 128] [--requests-per-stream 4] [--repeat 2]

Against the built-in synthetic server (50 ms to the first token, a token every 15 ms, 128
tokens), which over TLS uses a certificate from a throwaway CA made now; the client verifies it
as it would a real endpoint's. "CPU per read" is the client's process CPU time over the reads it
made (``recvmsg`` calls that returned data), with the connections' handshakes counted apart.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import ssl
import statistics
import tempfile
import time
from pathlib import Path

from infer_prof.loadgen.endpoint import Endpoint, StreamConnection, resolve
from infer_prof.loadgen.tls import TlsSession, TlsSettings, client_context
from infer_prof.run.calibrate import CalibrationLoad, drive, start_synthetic
from infer_prof.servers.certs import CertFiles, make_certs


def handshake_cpu_ms(certs: CertFiles, n: int) -> float:
    """Client CPU ms per TLS handshake (``n`` connections opened one after another)."""
    server = start_synthetic(50.0, 15.0, 8, tls=certs)

    async def go() -> float:
        ep = Endpoint.from_url(server.url, ca_bundle=str(certs.ca))
        assert ep.tls is not None
        client_context(ep.tls)  # the CA file is loaded once per process, not per handshake
        family, addr = await resolve(ep)
        conns = [StreamConnection(addr, family, ep) for _ in range(n)]
        t0 = time.process_time()
        for c in conns:
            await c.ensure_open()
        spent = time.process_time() - t0
        for c in conns:
            c.close()
        return spent * 1000.0 / n

    try:
        return asyncio.run(go())
    finally:
        server.stop()


def decrypt_us(certs: CertFiles, records: int = 20000) -> float:
    """Microseconds per ~270-byte record through the reader's decrypter (in memory)."""
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(certs.cert, certs.key)
    a, b = socket.socketpair()
    try:
        sess = TlsSession(client_context(TlsSettings(str(certs.ca))), a, "127.0.0.1", 0)
        si, so = ssl.MemoryBIO(), ssl.MemoryBIO()
        srv = sctx.wrap_bio(si, so, server_side=True)
        for _ in range(8):  # handshake in memory
            for obj, out, inc in ((sess.obj, sess.outgoing, si), (srv, so, sess.incoming)):
                with contextlib.suppress(ssl.SSLWantReadError):
                    obj.do_handshake()
                if out.pending:
                    inc.write(out.read())
        dec = sess.decrypter(lambda kind, detail: None)
        dec(b"")  # consume the session tickets already in the BIO
        payload = b"f0\r\n" + b"x" * 240 + b"\r\n"
        best = float("inf")
        for _ in range(3):
            recs = []
            for _ in range(records):
                srv.write(payload)
                recs.append(so.read())
            t0 = time.perf_counter()
            for r in recs:
                dec(r)
            best = min(best, (time.perf_counter() - t0) / records * 1e6)
        return best
    finally:
        a.close()
        b.close()


def client_cpu_per_read_us(streams: int, per_stream: int, certs: CertFiles | None,
                           handshake_ms: float) -> tuple[float, float]:
    """(client CPU us per read, the same without the handshakes) for one closed-loop load."""
    server = start_synthetic(50.0, 15.0, 128, tls=certs)
    try:
        health: dict = {}
        load = CalibrationLoad(streams, streams * per_stream, 32, 128, warmup=min(streams, 64))
        drive(server.url, load, "b-", health=health,
              ca_bundle=str(certs.ca) if certs else None)
    finally:
        server.stop()
    cpu_s, reads = health["cpu_s"], health["reads"]
    handshakes_s = streams * handshake_ms / 1000.0 if certs else 0.0
    return cpu_s / reads * 1e6, (cpu_s - handshakes_s) / reads * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=128)
    ap.add_argument("--requests-per-stream", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        certs = make_certs(Path(tmp))
        hs = statistics.median(handshake_cpu_ms(certs, 64) for _ in range(args.repeat))
        print(f"TLS handshake: {hs:.2f} ms client CPU per connection (median of {args.repeat})")
        print(f"decrypt: {decrypt_us(certs):.2f} us per 270-byte record (best of 3)")
        for _ in range(args.repeat):
            plain, _ = client_cpu_per_read_us(args.streams, args.requests_per_stream, None, hs)
            tls, tls_no_hs = client_cpu_per_read_us(
                args.streams, args.requests_per_stream, certs, hs
            )
            print(f"{args.streams} streams: client CPU per read: HTTP {plain:.1f} us, HTTPS "
                  f"{tls:.1f} us ({tls_no_hs:.1f} us without the handshakes)")


if __name__ == "__main__":
    main()
