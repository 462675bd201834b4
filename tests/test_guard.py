"""The control API is for the user, not for any web page: every `/_streamtap/` endpoint refuses a
foreign Host (DNS rebinding), a cross-site Origin, a non-JSON write (what a page can send without
a preflight) and non-loopback peers; deep JSON gets a 400. Forwarding refuses `..` segments and
never passes Proxy-Authorization on."""

from __future__ import annotations

import re
import socket

import httpx
import pytest

from tests import proxyproc
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream

RULE = {"name": "web-page", "action": "http_error", "status": 503, "times": 0}


def listed(proxy) -> list:
    return httpx.get(proxy.url("_streamtap/faults"), timeout=5).json()["faults"]


def test_a_page_posting_text_plain_arms_nothing(proxy):
    import json

    response = httpx.post(proxy.url("_streamtap/faults"), content=json.dumps(RULE),
                          headers={"content-type": "text/plain"}, timeout=5)
    assert response.status_code == 415
    assert "Content-Type: application/json" in response.json()["error"]["message"]
    assert listed(proxy) == []


@pytest.mark.parametrize("path", ["faults", "health", "metrics", "nothing-here"])
def test_a_foreign_host_is_refused_on_every_control_endpoint(proxy, path):
    response = httpx.get(proxy.url(f"_streamtap/{path}"), headers={"host": "evil.example"},
                         timeout=5)
    assert response.status_code == 403
    assert "DNS-rebinding" in response.json()["error"]["message"]
    for host in (f"localhost:{proxy.port}", f"127.0.0.1:{proxy.port}"):
        ok = httpx.get(proxy.url("_streamtap/health"), headers={"host": host}, timeout=5)
        assert ok.status_code == 200
    wrong_port = httpx.get(proxy.url("_streamtap/health"), headers={"host": "localhost:1"},
                           timeout=5)
    assert wrong_port.status_code == 403


def test_a_cross_site_origin_is_refused_and_streamtaps_own_is_not(proxy):
    refused = httpx.post(proxy.url("_streamtap/faults"), json=RULE, timeout=5,
                         headers={"origin": "https://evil.example"})
    assert refused.status_code == 403 and "cross-site" in refused.json()["error"]["message"]
    null = httpx.get(proxy.url("_streamtap/faults"), headers={"origin": "null"}, timeout=5)
    assert null.status_code == 403
    assert listed(proxy) == []
    own = httpx.post(proxy.url("_streamtap/faults"), json={**RULE, "name": "own"}, timeout=5,
                     headers={"origin": f"http://127.0.0.1:{proxy.port}"})
    assert own.status_code == 201
    assert httpx.delete(proxy.url("_streamtap/faults/own"), timeout=5).status_code == 200


def test_deeply_nested_json_gets_a_400_that_says_so(proxy):
    deep = b"[" * 100_000 + b"]" * 100_000
    response = httpx.post(proxy.url("_streamtap/faults"), content=deep, timeout=10,
                          headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert "nests deeper than" in response.json()["error"]["message"]
    assert "Traceback" not in proxy.log()


def non_loopback_address() -> str | None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a local address
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


def test_health_and_faults_answer_loopback_peers_only(fake, tmp_path, monkeypatch):
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect from")
    monkeypatch.setattr(proxyproc, "_LISTENING", re.compile(r"listening on http://0\.0\.0\.0:(\d+)"))
    exposed = ProxyProcess(tmp_path, {"fake": fake.url}, "--host", "0.0.0.0")
    try:
        for path in ("health", "faults", "metrics"):
            response = httpx.get(f"http://{address}:{exposed.port}/_streamtap/{path}", timeout=5)
            assert response.status_code == 403
            assert "loopback clients only" in response.json()["error"]["message"]
        local = httpx.get(f"http://127.0.0.1:{exposed.port}/_streamtap/health", timeout=5)
        assert local.status_code == 200
    finally:
        exposed.stop()


def raw_request(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(request)
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    return received


@pytest.mark.parametrize("dots", ["..", "%2e%2E", ".%2e"])
def test_dot_dot_segments_are_refused_and_recorded(fake, proxy, dots):
    prefix = fake.add(Scenario(chat_text_stream(1)))
    session = new_session()
    answer = raw_request(proxy.port, (
        f"GET /fake{prefix}/v1/{dots}/{dots}/{dots}/admin HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"x-streamtap-session: {session}\r\nConnection: close\r\n\r\n").encode())
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert b"streamtap_bad_path" in answer
    assert fake.seen[prefix.rsplit("/", 1)[-1]] == []  # nothing reached the upstream
    outcome = proxy.record(session)["outcome"]
    assert outcome["boundary"] == "proxy"
    assert "path_dot_segments_refused" in outcome["evidence"]
    assert "`..` segment" in outcome["summary"] and outcome["retryable"] is False


def test_proxy_authorization_is_never_forwarded(fake, proxy):
    prefix = fake.add(Scenario(chat_text_stream(1)))
    response = httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions", json={},
                          headers={"proxy-authorization": "Basic c2VjcmV0OnBhc3M=",
                                   "authorization": "Bearer sk-test"}, timeout=5)
    assert response.status_code == 200
    forwarded = {name.lower() for name, _ in fake.last(prefix).headers}
    assert "proxy-authorization" not in forwarded and "authorization" in forwarded
