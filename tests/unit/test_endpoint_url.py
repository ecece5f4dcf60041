"""Endpoint URLs: schemes, default ports, the Host header, TLS settings."""

import pytest

from infer_prof.loadgen.endpoint import Endpoint
from infer_prof.loadgen.openai_requests import build_completion_request
from infer_prof.loadgen.tls import TlsSettings


def test_https_defaults_to_port_443_and_gets_tls_settings():
    e = Endpoint.from_url("https://api.example.com/v1")
    assert (e.scheme, e.host, e.port, e.base_path) == ("https", "api.example.com", 443, "")
    assert e.tls == TlsSettings(None, False)
    assert e.url == "https://api.example.com:443"
    assert e.host_header == "api.example.com"


def test_http_keeps_port_80_and_no_tls():
    e = Endpoint.from_url("http://10.0.0.1/prefix/v1/")
    assert (e.scheme, e.port, e.base_path, e.tls) == ("http", 80, "/prefix", None)
    assert e.host_header == "10.0.0.1"
    assert Endpoint.from_url("127.0.0.1:8000").url == "http://127.0.0.1:8000"  # no scheme: http


def test_explicit_port_is_in_the_host_header_and_the_request():
    e = Endpoint.from_url("https://h.example:8443/v1")
    assert e.port == 8443 and e.host_header == "h.example:8443"
    req = build_completion_request(e, "m", [1, 2], 4)
    assert b"\r\nHost: h.example:8443\r\n" in req
    req = build_completion_request(Endpoint.from_url("https://h.example"), "m", [1], 4)
    assert b"\r\nHost: h.example\r\n" in req


def test_ca_bundle_and_insecure_are_carried_for_https_only(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    e = Endpoint.from_url("https://h", ca_bundle=str(ca), insecure=True)
    assert e.tls == TlsSettings(str(ca), True)
    assert Endpoint.from_url("http://h", ca_bundle=str(ca), insecure=True).tls is None


@pytest.mark.parametrize(
    ("url", "kwargs", "says"),
    [
        ("ftp://h", {}, "http:// or https://"),
        ("https://", {}, "no host"),
        ("https://h:notaport", {}, "port"),
        ("https://h", {"ca_bundle": "/nonexistent/ca.pem"}, "--ca-bundle /nonexistent/ca.pem"),
    ],
)
def test_bad_urls_are_refused_with_one_line(url, kwargs, says):
    with pytest.raises(ValueError) as info:
        Endpoint.from_url(url, **kwargs)
    assert says in str(info.value) and "\n" not in str(info.value)
