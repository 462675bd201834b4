"""Requests streamtap answers itself get a record and a log line like any other (boundary
`proxy`, evidence naming why); routes explain themselves (`/v1/v1/` is warned about); and a
`stream: true` request answered with one JSON body is not "completed normally"."""

import json
import socket
import time

import httpx
import openai
import pytest

from streamtap.proxy.config import Config, parse_route_flag
from streamtap.proxy.serve.run import banner
from tests.clients import log_events
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream


def wait_for(check, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    return check()


def test_unknown_route_gets_a_record_and_a_log_line(proxy):
    session = new_session()
    resp = httpx.post(proxy.url("opneai") + "/v1/chat/completions", json={"model": "gpt-test"},
                      headers={"x-streamtap-session": session})
    assert resp.status_code == 404 and resp.json()["error"]["type"] == "streamtap_unknown_route"
    record = proxy.record(session)
    outcome = record["outcome"]
    assert record["route"] == "opneai" and record["request"]["path"] == "/v1/chat/completions"
    assert (outcome["boundary"], outcome["evidence"]) == ("proxy", ["unknown_route"])
    assert "No route `opneai` is configured" in outcome["summary"]
    lines = wait_for(lambda: [entry for entry in log_events(proxy.log(), "request")
                              if entry.get("session_id") == session])
    # the client's 404, as the index line says; no upstream answered (`status`)
    assert [(entry["route"], entry["status"], entry["downstream_status"], entry["boundary"])
            for entry in lines] == [("opneai", None, 404, "proxy")]


def test_bad_fault_header_and_too_large_are_recorded_as_proxy_answers(fake, proxy):
    prefix = fake.add(Scenario(chat_text_stream(1)))
    session = new_session()
    resp = httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions", json={},
                      headers={"x-streamtap-session": session,
                               "x-streamtap-fault": "reset; at=soon"})
    assert resp.status_code == 400
    record = proxy.record(session)
    assert (record["outcome"]["boundary"], record["outcome"]["evidence"]) == (
        "proxy", ["bad_fault_header"])


def raw_request(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk


def test_a_header_longer_than_max_header_bytes_gets_json_no_echo_no_traceback_and_a_record(
        proxy):
    before = len(list((proxy.trace_dir / "default").glob("*.json"))) \
        if (proxy.trace_dir / "default").is_dir() else 0
    secretish = b"Z" * 70_000  # over the 65536 default
    answer = raw_request(proxy.port, b"POST /fake/v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                     b"x-session-id: " + secretish + b"\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431") or head.startswith(b"HTTP/1.0 431")
    assert b"application/json" in head
    error = json.loads(body)["error"]
    assert error["type"] == "streamtap_header_too_long" and "max_header_bytes" in error["message"]
    assert b"ZZZZ" not in answer
    records = proxy.records("default", before + 1)
    record = next(r for r in records if r["outcome"]["evidence"] == ["header_too_long"])
    assert record["outcome"]["boundary"] == "proxy" and record["downstream"]["status"] == 431
    assert wait_for(lambda: [entry for entry in log_events(proxy.log(), "request")
                             if entry.get("trace_id") == record["trace_id"]
                             and entry["downstream_status"] == 431])
    log = proxy.log()
    assert "Traceback" not in log and "ZZZZ" not in log


def test_banner_separates_route_url_and_client_base_url():
    config = Config(routes={**Config().routes,
                            "openai": parse_route_flag("openai=http://127.0.0.1:8788/v1"),
                            "replay": parse_route_flag("replay=http://127.0.0.1:8788")})
    lines = banner(config, 8787).splitlines()
    row = next(line.split() for line in lines if line.split()[:1] == ["openai"])
    # the name, the URL exactly as given, and the base URL a client needs: /v1 is already there
    assert row == ["openai", "http://127.0.0.1:8788/v1", "http://127.0.0.1:8787/openai"]
    default = next(line.split() for line in banner(Config(), 8787).splitlines()
                   if line.split()[:1] == ["openai"])
    assert default == ["openai", "https://api.openai.com", "http://127.0.0.1:8787/openai/v1"]
    assert any("/NAME/rest goes to UPSTREAM_URL/rest" in line for line in lines)


@pytest.fixture(scope="module")
def v1_proxy(fake, tmp_path_factory):
    process = ProxyProcess(tmp_path_factory.mktemp("v1"), {"fakev1": fake.url + "/s/v1route"})
    yield process
    process.stop()


def test_a_path_that_repeats_the_route_prefix_is_warned_once_and_recorded(fake, v1_proxy):
    fake.add(Scenario(chat_text_stream(1)), name="v1route")
    session = new_session()
    # the route URL ends in /s/v1route; the client's base URL adds it again
    url = v1_proxy.url("fakev1") + "/s/v1route/chat/completions"
    for _ in range(2):
        httpx.post(url, json={"stream": True}, headers={"x-streamtap-session": session})
    records = v1_proxy.records(session, 2)
    for record in records:
        assert "path_repeats_route_prefix" in record["outcome"]["evidence"]
        assert "repeats the route URL's own path prefix" in record["outcome"]["summary"]
    warnings = wait_for(lambda: log_events(v1_proxy.log(), "path_repeats_route_prefix"))
    time.sleep(0.2)
    assert len(log_events(v1_proxy.log(), "path_repeats_route_prefix")) == 1
    assert warnings[0]["route"] == "fakev1"
    ok = new_session()
    httpx.post(v1_proxy.url("fakev1") + "/chat/completions", json={"stream": True},
               headers={"x-streamtap-session": ok})
    assert "path_repeats_route_prefix" not in v1_proxy.record(ok)["outcome"]["evidence"]


def test_stream_true_answered_with_json_is_not_completed_normally(fake, proxy):
    body = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
                       "choices": [{"index": 0, "message": {"role": "assistant",
                                                            "content": "hi"},
                                    "finish_reason": "stop"}]}).encode()
    prefix = fake.add(Scenario([body], content_type="application/json"))
    session = new_session()
    client = openai.OpenAI(base_url=proxy.url("fake") + prefix + "/v1", api_key="sk-test",
                           max_retries=0, default_headers={"x-streamtap-session": session})
    events = list(client.chat.completions.create(model="gpt-test", messages=[], stream=True))
    assert events == []  # the "empty reply": no event, no error
    outcome = proxy.record(session)["outcome"]
    assert outcome["ok"] is False and outcome["boundary"] == "protocol"
    assert "stream_requested_json_answered" in outcome["evidence"]
    assert "asked for a stream (`stream: true`)" in outcome["summary"]
    assert "completed normally" not in outcome["summary"]


def test_a_key_pasted_as_a_route_name_is_never_recorded_logged_or_echoed(proxy):
    key = "sk-proj-routepaste0123456789abcdefXYZ"
    session = new_session()
    resp = httpx.post(proxy.url(key) + "/v1/chat/completions", json={},
                      headers={"x-streamtap-session": session})
    assert resp.status_code == 404 and key not in resp.text
    record = proxy.record(session)
    assert record["outcome"]["evidence"] == ["unknown_route"]
    assert key not in json.dumps(record) and record["route"].startswith("h-")
    assert wait_for(lambda: [entry for entry in log_events(proxy.log(), "request")
                             if entry.get("session_id") == session])
    assert key not in proxy.log()
