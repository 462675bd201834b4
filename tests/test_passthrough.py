"""Through the proxy, the client gets exactly what the provider sent, and the provider gets
exactly what the client sent."""

import hashlib
import json
import socket

import httpx

from tests.fakeprovider import Scenario
from tests.proxyproc import new_session
from tests.streams import chat_text_stream


def raw_body(url: str, headers: dict | None = None) -> tuple[httpx.Response, bytes]:
    with httpx.Client(timeout=10) as client:
        with client.stream("POST", url, content=b'{"stream": true}', headers=headers) as resp:
            return resp, b"".join(resp.iter_raw())


def test_body_is_byte_identical_plain_and_gzip(fake, proxy):
    for gzip in (False, True):
        prefix = fake.add(Scenario(chat_text_stream(20), gzip=gzip, delay_s=0.001))
        session = new_session()
        direct_resp, direct = raw_body(fake.url + prefix + "/v1/chat/completions")
        proxied_resp, proxied = raw_body(proxy.url("fake") + prefix + "/v1/chat/completions",
                                         {"x-streamtap-session": session})
        assert hashlib.sha256(proxied).digest() == hashlib.sha256(direct).digest()
        assert proxied_resp.headers.get("content-encoding") == ("gzip" if gzip else None)
        record = proxy.record(session)
        assert record["stream"]["bytes"] == len(direct)
        assert record["response"]["content_encoding"] == ("gzip" if gzip else None)
        # the decoded copy was analysed: 20 words plus role, finish and [DONE] frames
        assert record["stream"]["frame_count"] == 23
        assert record["stream"]["terminal"] == "[DONE]"
        assert record["outcome"]["boundary"] == "none"


def _raw_exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_proxy_adds_and_changes_nothing(fake, proxy):
    prefix = fake.add(Scenario([b"plain body"], content_type=None,
                               headers=[("X-Custom", "A b"), ("x-request-id", "req_123")],
                               content_length=True))
    path = f"/fake{prefix}/v1/odd%2Fpath/%7Euser?key=secret%2Fvalue&b=1+2&empty="
    request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trace-Me: keep\r\n"
               "x-streamtap-session: pt-1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
               ).encode()
    reply = _raw_exchange(proxy.port, request)
    seen = fake.last(prefix)
    assert seen.raw_path == path[len("/fake"):]
    assert seen.body == b"hello"
    names = [name.lower() for name, _ in seen.headers]
    # nothing of the proxy's own: no Accept, User-Agent, Content-Type, Accept-Encoding
    assert sorted(names) == sorted(["host", "x-trace-me", "content-length"])
    head, _, body = reply.partition(b"\r\n\r\n")
    head_lines = head.decode().split("\r\n")
    assert head_lines[0] == "HTTP/1.1 200 OK"
    response_names = [line.split(":", 1)[0].lower() for line in head_lines[1:]]
    assert "content-type" not in response_names and "server" not in response_names
    assert "X-Custom: A b" in head_lines and "Content-Length: 10" in head_lines
    assert body == b"plain body"
    # Every response header is the upstream's, in its order: no `Via`, nothing added. (Names
    # are compared without case: aiohttp writes some names it knows in its own spelling.)
    fake_port = int(fake.url.rsplit(":", 1)[1].split("/")[0])
    direct = _raw_exchange(fake_port, request.replace(b"POST /fake", b"POST "))
    direct_lines = direct.partition(b"\r\n\r\n")[0].decode().split("\r\n")
    assert _header_pairs(head_lines) == _header_pairs(direct_lines)
    record = proxy.record("pt-1")
    assert record["request"]["query_keys"] == ["key", "b", "empty"]
    assert record["correlation"]["request_id"] == "req_123"
    assert "secret" not in json.dumps(record)


def _header_pairs(head_lines: list[str]) -> list[tuple[str, str]]:
    """A response head as (lowercased name, value) pairs, Date left out (it moves)."""
    pairs = [tuple(line.split(": ", 1)) for line in head_lines[1:]]
    return [(name.lower(), value) for name, value in pairs if name.lower() != "date"]


def test_unknown_route_is_404_and_never_forwarded(proxy):
    resp = httpx.get(proxy.url("nowhere") + "/v1/models")
    assert resp.status_code == 404
    assert resp.json()["error"]["type"] == "streamtap_unknown_route"
    absolute = _raw_exchange(proxy.port, b"GET http://example.com/ HTTP/1.1\r\nHost: example.com"
                                         b"\r\nConnection: close\r\n\r\n")
    assert absolute.startswith(b"HTTP/1.1 404")


def test_health_is_not_forwarded(proxy):
    resp = httpx.get(proxy.url("_streamtap/health"))
    assert resp.status_code == 200 and resp.json()["status"] == "ok"
