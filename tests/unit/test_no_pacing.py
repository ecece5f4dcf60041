import socket
from pathlib import Path

import pytest

from infer_prof.loadgen.endpoint import no_pacing

ALLOWED = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")


@pytest.mark.skipif(
    not hasattr(socket, "TCP_CONGESTION")
    or not ALLOWED.exists()
    or not {"cubic", "reno"} & set(ALLOWED.read_text().split()),
    reason="needs Linux with cubic or reno allowed",
)
def test_sockets_leave_bbr_for_a_control_that_does_not_pace():
    with socket.socket() as s:
        got = no_pacing(s)
        now = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
    assert got == now
    assert now in ("cubic", "reno")
