"""Endings are mirrored: a client sees through the proxy the same kind of failure it would see
directly, and the record says who ended the stream."""

import json
import socket
import subprocess
from pathlib import Path

import httpx
import openai
import pytest

from tests.fakeprovider import Scenario
from tests.proxyproc import new_session
from tests.streams import chat_text_stream, chat_tool_stream

NODE_READER = Path(__file__).parent / "node" / "read_stream.mjs"
TOOLS_REQUEST = {"model": "gpt-test", "stream": True, "messages": [],
                 "tools": [{"type": "function", "function": {"name": "apply_patch"}}]}


def node_read(node: str, url: str, headers: dict | None = None) -> dict:
    out = subprocess.run([node, str(NODE_READER), url, json.dumps(headers or {})],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def httpx_read(url: str, headers: dict | None = None, body: dict | None = None):
    """Read a stream with httpx; return (bytes received, exception class or None)."""
    received = 0
    try:
        with httpx.Client(timeout=10) as client:
            with client.stream("POST", url, json=body or {"stream": True},
                               headers=headers) as resp:
                for chunk in resp.iter_raw():
                    received += len(chunk)
    except httpx.HTTPError as exc:
        return received, type(exc)
    return received, None


def test_midbody_reset_is_mirrored_for_node_fetch(fake, proxy, node):
    prefix = fake.add(Scenario(chat_tool_stream(5, finish=False), ending="reset"))
    path = prefix + "/v1/chat/completions"
    direct = node_read(node, fake.url + path)
    session = new_session()
    proxied = node_read(node, proxy.url("fake") + path, {"x-streamtap-session": session})
    assert direct["error"]["name"] == proxied["error"]["name"] == "TypeError"
    assert direct["error"]["message"] == proxied["error"]["message"] == "terminated"
    # undici reports a reset as ECONNRESET or, when the RST races its read, "other side closed"
    # (UND_ERR_SOCKET); either way, directly or through the proxy, fetch fails with `terminated`.
    assert direct["error"]["cause"]["code"] in ("ECONNRESET", "UND_ERR_SOCKET")
    assert proxied["error"]["cause"]["code"] in ("ECONNRESET", "UND_ERR_SOCKET")
    assert proxied["bytes"] == direct["bytes"] > 0  # every byte before the reset arrived
    record = proxy.record(session)
    assert record["outcome"]["boundary"] == "transport"
    assert "upstream_reset" in record["outcome"]["evidence"]
    assert record["downstream"]["ended"] == "aborted"


@pytest.mark.parametrize("ending, evidence", [("reset", "upstream_reset"),
                                              ("fin", "upstream_truncated")])
def test_midbody_failure_gives_httpx_the_same_exception(fake, proxy, ending, evidence):
    prefix = fake.add(Scenario(chat_text_stream(5, done=False), ending=ending))
    path = prefix + "/v1/chat/completions"
    direct_bytes, direct_error = httpx_read(fake.url + path)
    session = new_session()
    proxied_bytes, proxied_error = httpx_read(proxy.url("fake") + path,
                                              {"x-streamtap-session": session})
    assert direct_error is not None
    assert proxied_error is direct_error  # a reset stays a reset (ReadError), a FIN a FIN
    assert proxied_bytes == direct_bytes
    record = proxy.record(session)
    assert record["outcome"]["boundary"] == "transport"
    assert evidence in record["outcome"]["evidence"]
    assert record["error"]["where"] == "upstream_read"


def test_clean_early_close_stays_clean_for_the_client(fake, proxy, node):
    prefix = fake.add(Scenario(chat_text_stream(3, done=False)[:-1]))  # no finish, no [DONE]
    path = prefix + "/v1/chat/completions"
    session = new_session()
    proxied = node_read(node, proxy.url("fake") + path, {"x-streamtap-session": session})
    assert proxied["error"] is None and proxied["status"] == 200
    record = proxy.record(session)
    assert record["outcome"]["boundary"] == "provider_close"
    assert record["downstream"]["ended"] == "complete"


def test_client_disconnect_closes_upstream_and_is_recorded(fake, proxy):
    prefix = fake.add(Scenario(chat_text_stream(2, done=False)[:2], ending="stall"))
    session = new_session()
    with httpx.Client(timeout=10) as client:
        with client.stream("POST", proxy.url("fake") + prefix + "/v1/chat/completions",
                           json={"stream": True},
                           headers={"x-streamtap-session": session}) as resp:
            next(resp.iter_raw())
    seen = fake.last(prefix)
    assert seen.client_left.wait(5), "the provider never saw its connection close"
    record = proxy.record(session)
    assert record["outcome"]["boundary"] == "client_abort"
    assert record["downstream"]["ended"] == "client_gone"
    assert record["outcome"]["retryable"] is None


def test_unreachable_upstream_is_a_502_with_a_record(tmp_path, fake):
    from tests.proxyproc import ProxyProcess

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    proxy = ProxyProcess(tmp_path, {"dead": f"http://127.0.0.1:{dead_port}"})
    try:
        resp = httpx.post(proxy.url("dead") + "/v1/chat/completions", json={"stream": True},
                          headers={"x-streamtap-session": "dead-1"})
        assert resp.status_code == 502
        assert resp.headers["x-streamtap-error"] == "streamtap_upstream_error"
        assert resp.headers["connection"] == "close"
        assert resp.json()["error"]["type"] == "streamtap_upstream_error"
        record = proxy.record("dead-1")
        assert record["outcome"]["boundary"] == "transport"
        assert record["outcome"]["phase"] == "before_response"
        assert record["error"]["where"] == "upstream_connect"
        assert record["error"]["code"] == "ECONNREFUSED"
        assert record["downstream"]["status"] == 502
    finally:
        proxy.stop()


# -- an upstream that resets before any response byte -------------------------------------------
def test_reset_before_response_is_mirrored_for_node_fetch(fake, proxy, node):
    """Directly, fetch rejects (`fetch failed`, a reset underneath); through streamtap it must
    too, not resolve with a 502 response."""
    prefix = fake.add(Scenario([], ending="reset_before_response"))
    path = prefix + "/v1/chat/completions"
    direct = node_read(node, fake.url + path)
    session = new_session()
    proxied = node_read(node, proxy.url("fake") + path, {"x-streamtap-session": session})
    assert direct["status"] is None and proxied["status"] is None  # no response at all
    assert direct["error"]["name"] == proxied["error"]["name"] == "TypeError"
    assert direct["error"]["message"] == proxied["error"]["message"] == "fetch failed"
    assert direct["error"]["cause"]["code"] == "ECONNRESET"
    assert proxied["error"]["cause"]["code"] == direct["error"]["cause"]["code"]
    record = proxy.record(session)
    assert record["error"]["where"] == "upstream_response"
    assert record["error"]["code"] == "ECONNRESET"
    assert record["downstream"] == {"status": None, "ended": "aborted", "bytes": 0}
    assert record["outcome"]["boundary"] == "transport"
    assert record["outcome"]["phase"] == "before_response"
    assert "client_connection_reset" in record["outcome"]["evidence"]
    assert "reset the client's connection the same way" in record["outcome"]["summary"]


def test_reset_before_response_is_retried_by_the_openai_sdk_as_directly(fake, proxy):
    """The SDK retries a connection error (APIConnectionError after its retries); a 502 would be
    an InternalServerError instead. The fake provider counts the attempts either way."""
    prefix = fake.add(Scenario([], ending="reset_before_response"))
    name = prefix.rsplit("/", 1)[-1]

    def attempt(base_url: str, session: str) -> tuple[type, int]:
        before = len(fake.seen[name])
        client = openai.OpenAI(base_url=base_url + prefix + "/v1", api_key="sk-test",
                               max_retries=2, timeout=10,
                               default_headers={"x-streamtap-session": session})
        with pytest.raises(openai.APIError) as raised:
            client.chat.completions.create(model="gpt-test", messages=[], stream=True)
        return type(raised.value), len(fake.seen[name]) - before

    direct = attempt(fake.url, "direct")
    session = new_session()
    proxied = attempt(proxy.url("fake"), session)
    assert direct == (openai.APIConnectionError, 3)
    assert proxied == direct
    records = proxy.records(session, 3)
    assert sorted(r["request"]["headers"]["x-stainless-retry-count"] for r in records) == \
        ["0", "1", "2"]
    assert all(r["downstream"]["ended"] == "aborted" for r in records)


def test_the_502_answer_to_an_early_reset_is_kept_as_an_option(tmp_path, fake, node):
    from tests.proxyproc import ProxyProcess

    prefix = fake.add(Scenario([], ending="reset_before_response"))
    proxy = ProxyProcess(tmp_path, {"fake": fake.url}, "--answer-502-on-upstream-reset")
    try:
        session = new_session()
        proxied = node_read(node, proxy.url("fake") + prefix + "/v1/chat/completions",
                            {"x-streamtap-session": session})
        record = proxy.record(session)
    finally:
        proxy.stop()
    assert proxied["status"] == 502 and proxied["error"] is None
    assert record["downstream"]["status"] == 502
    assert record["error"]["code"] == "ECONNRESET"
    assert "client_connection_reset" not in record["outcome"]["evidence"]


def test_an_injected_bad_chunk_size_fails_fetch_and_httpx_in_their_http_parsers(fake, proxy, node):
    """`bad_chunk_size` reproduces a gateway's broken chunk framing: the client's own HTTP parser
    fails on it (undici HPE_INVALID_CHUNK_SIZE, httpx "illegal chunk header"), as the raw relay
    lets it fail when an upstream really sends one."""
    prefix = fake.add(Scenario(chat_text_stream(8)))
    url = proxy.url("fake") + prefix + "/v1/chat/completions"
    fault = {"x-streamtap-fault": "bad_chunk_size; at=event:text_delta:3"}
    session = new_session()
    proxied = node_read(node, url, {"x-streamtap-session": session, **fault})
    assert proxied["status"] == 200 and proxied["bytes"] > 0
    assert proxied["error"]["message"] == "terminated"
    assert proxied["error"]["cause"]["code"] == "HPE_INVALID_CHUNK_SIZE"
    record = proxy.record(session)
    assert record["outcome"]["evidence"][0] == "injected_bad_chunk_size"
    assert record["outcome"]["client_sees"] == "error"
    assert record["downstream"]["ended"] == "aborted"
    received, error = httpx_read(url, fault)
    assert received > 0 and error is httpx.RemoteProtocolError
