"""The side doors, through the real proxy subprocess: exception text, malformed requests logged by
aiohttp, a name that does not resolve, plain-text SSE, and hostile structure (event names, SSE
comments, JSON keys). No canary may reach a trace file or the proxy's stderr."""

import json
import socket
import threading

import httpx
import openai
import pytest

from tests.clients import all_files, find_record
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import CANARY_OUTPUT, chat_text_stream

QUERY_CANARY = "canary-query-1a2b"
HEADER_CANARY = "canary-header-3c4d"
KEY_CANARY = "canary-x-api-key-5e6f"
WORDS = ("Canaryalpha", "Canarybeta", "Canarygamma")


def canaries_in(trace_dir, *canaries) -> list[str]:
    found = []
    for path in all_files(trace_dir):
        data = path.read_bytes()
        found += [f"{path.name}: {c}" for c in canaries if c.encode() in data]
        if b"canary" in data.lower():
            found.append(f"{path.name}: some canary")
    return found


class BadUpstream:
    """A raw TCP upstream that answers every request with a header line aiohttp cannot parse, one
    that quotes a canary (aiohttp's error repeats the line, and the request URL)."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                 b"X-Leak " + HEADER_CANARY.encode() + b"\r\n\r\ndata: x\n\n")
                except OSError:
                    pass

    def close(self):
        self.sock.close()


@pytest.fixture(scope="module")
def bad_upstream():
    upstream = BadUpstream()
    yield upstream
    upstream.close()


@pytest.fixture(scope="module")
def side_proxy(fake, bad_upstream, tmp_path_factory):
    """A proxy of these tests' own: its whole stderr and trace dir are swept."""
    process = ProxyProcess(tmp_path_factory.mktemp("side-doors"), {
        "fake": fake.url, "nowhere": "http://nonexistent.invalid",
        "bad": f"http://127.0.0.1:{bad_upstream.port}"})
    yield process
    process.stop()


def test_a_name_that_does_not_resolve_is_said_in_words(side_proxy):
    session = new_session()
    resp = httpx.post(side_proxy.url("nowhere") + f"/v1/chat/completions?api_key={QUERY_CANARY}",
                      json={"model": "m", "stream": True}, timeout=20,
                      headers={"x-streamtap-session": session, "x-streamtap-message": "dns"})
    assert resp.status_code == 502
    error = resp.json()["error"]
    assert "the name nonexistent.invalid could not be resolved (EAI_NONAME)" in error["message"]
    assert QUERY_CANARY not in resp.text
    _, record = find_record(side_proxy.trace_dir, "dns", session)
    assert record["error"]["code"] == "EAI_NONAME"
    assert record["outcome"]["summary"] == (
        "streamtap could not connect to nowhere: the name nonexistent.invalid could not be "
        "resolved (EAI_NONAME); nothing was streamed. Check the host in the route's URL and this "
        "machine's DNS.")
    assert "-2" not in json.dumps(record["error"])
    assert canaries_in(side_proxy.trace_dir / session, QUERY_CANARY) == []


def test_exception_text_quoting_the_url_and_a_header_line_is_never_recorded(side_proxy):
    session = new_session()
    resp = httpx.post(side_proxy.url("bad") + f"/v1/chat/completions?api_key={QUERY_CANARY}",
                      json={"model": "m", "stream": True}, timeout=20,
                      headers={"x-streamtap-session": session, "x-streamtap-message": "bad"})
    assert resp.status_code == 502
    _, record = find_record(side_proxy.trace_dir, "bad", session)
    assert record["error"]["where"] == "upstream_response"
    assert record["error"]["message"] == "the upstream's response could not be parsed"
    assert record["outcome"]["boundary"] == "transport"
    assert QUERY_CANARY not in resp.text and HEADER_CANARY not in resp.text
    assert canaries_in(side_proxy.trace_dir / session, QUERY_CANARY, HEADER_CANARY) == []
    assert HEADER_CANARY not in side_proxy.log() and QUERY_CANARY not in side_proxy.log()


@pytest.mark.parametrize("request_bytes", [
    # a control character in the key's value
    b"POST /fake/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"x-api-key: " + KEY_CANARY.encode() + b"\x01\r\n\r\n",
    # a header line without a colon
    b"POST /fake/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"x-api-key " + KEY_CANARY.encode() + b"\r\n\r\n",
], ids=["control-char", "no-colon"])
def test_a_malformed_request_is_one_scrubbed_log_line(side_proxy, request_bytes):
    before = side_proxy.log()
    with socket.create_connection(("127.0.0.1", side_proxy.port), timeout=5) as conn:
        conn.sendall(request_bytes)
        conn.recv(4096)  # aiohttp's 400
    deadline_lines = []
    for _ in range(100):
        deadline_lines = side_proxy.log()[len(before):].splitlines()
        if deadline_lines:
            break
        threading.Event().wait(0.05)
    new = side_proxy.log()[len(before):]
    assert KEY_CANARY not in new and "canary" not in new.lower()
    assert "Traceback" not in new
    lines = new.splitlines()
    assert len(lines) == 1, new  # one line, in streamtap's JSON format (--log-format json)
    line = json.loads(lines[0])
    # streamtap answers and records it itself (proxy/serve/refusals.py): the request's one log
    # line, boundary `proxy`, naming why and quoting nothing
    assert line["event"] == "request", line
    assert line["boundary"] == "proxy" and line["status"] == 400, line


def _stream_record(fake, side_proxy, chunks: list[bytes], path: str) -> dict:
    session = new_session()
    prefix = fake.add(Scenario(chunks))
    resp = httpx.post(side_proxy.url("fake") + prefix + path, json={"model": "m"}, timeout=20,
                      headers={"x-streamtap-session": session, "x-streamtap-message": "s"})
    assert resp.status_code == 200 and resp.content == b"".join(chunks)  # forwarded as is
    _, record = find_record(side_proxy.trace_dir, "s", session)
    return record


def test_plain_text_sse_words_are_not_kept_as_shapes(fake, side_proxy):
    chunks = [f"data: {word}\n\n".encode() for word in WORDS] + [b"data: [DONE]\n\n"]
    record = _stream_record(fake, side_proxy, chunks, "/v1/plain-text")
    assert record["dialect"] == "sse"
    data = [shape.get("data") for shape in record["shapes"]]
    assert "$text" in data and "[DONE]" in data  # the marker stays: it is protocol
    assert not [word for word in WORDS if word in json.dumps(record)]


def test_hostile_event_names_comments_and_json_keys_are_capped(fake, side_proxy):
    chunks = [
        b":Canarycomment is a sentence of the reply\n\n",  # no space: a signature of its own
        b": ping\n\n",
        b"event: Canaryevent/x:y\ndata: {}\n\n",
        b"event: " + b"e" * 65 + b"\ndata: {}\n\n",
        b"event: message_start\ndata: {\"AKIAIOSFODNN7EXAMPLE\": 1, \"ok\": 2}\n\n",
        b"event: message_stop\ndata: {\"type\": \"sk-proj-Canaryabc123\"}\n\n",
    ]
    record = _stream_record(fake, side_proxy, chunks, "/v1/hostile")
    shapes = record["shapes"]
    dumped = json.dumps(record)
    assert "canary" not in dumped.lower() and "AKIAIOSFODNN7EXAMPLE" not in dumped
    assert "e" * 65 not in dumped
    assert {"comment": "ping"} in shapes  # a keepalive marker is structure and stays
    assert {"comment": "$str"} in shapes
    assert {"event": "$str", "json": {}} in shapes
    assert {"event": "message_start", "json": "$obj"} in shapes
    assert {"event": "message_stop", "json": {"type": "$str"}} in shapes


def test_an_azure_deployment_path_is_recorded_and_read_as_chat(fake, side_proxy):
    """The openai SDK's Azure client: a long deployment path with `?api-version=`; the path is not
    a secret, so the dialect and the path survive (they were `sse` and `[REDACTED]`)."""
    session = new_session()
    prefix = fake.add(Scenario(chat_text_stream(3)))
    deployment = "gpt-4o-prod-eastus2-global-standard"
    client = openai.AzureOpenAI(
        azure_endpoint=side_proxy.url("fake") + prefix, api_version="2024-10-21",
        api_key="canary-azure-key-7a8b", azure_deployment=deployment, max_retries=0, timeout=10,
        default_headers={"x-streamtap-session": session, "x-streamtap-message": "azure"})
    got = "".join(chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(
        model=deployment, messages=[{"role": "user", "content": "hi"}], stream=True)
        if chunk.choices)
    assert CANARY_OUTPUT in got
    _, record = find_record(side_proxy.trace_dir, "azure", session)
    assert record["request"]["path"] == (f"{prefix}/openai/deployments/{deployment}"
                                         "/chat/completions")
    assert record["request"]["query_keys"] == ["api-version"]
    assert record["dialect"] == "openai-chat"
    assert record["stream"]["event_counts"]["text_delta"] == 3
    assert record["outcome"]["ok"] is True
    assert canaries_in(side_proxy.trace_dir / session, "canary-azure-key-7a8b") == []


def test_a_long_session_id_in_the_readme_charset_names_its_folder(fake, side_proxy):
    session = "ses_3kZ9xQ2LmZ8vB3nK7pR4tW6yH1jD5sG0cA9"  # 40 characters: kept, not hashed
    prefix = fake.add(Scenario(chat_text_stream(1)))
    resp = httpx.post(side_proxy.url("fake") + prefix + "/v1/chat/completions",
                      json={"model": "m", "stream": True}, timeout=20,
                      headers={"x-session-id": session, "x-streamtap-message": "long"})
    assert resp.status_code == 200
    path, record = find_record(side_proxy.trace_dir, "long", session)
    assert record["session_id"] == session and path.parent.name == session
