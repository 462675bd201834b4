"""Nothing secret is kept: credentials, cookies, account ids, prompts, tool arguments and results,
model output and query values sent through the proxy appear nowhere under the trace directory,
byte for byte, while the allowlisted facts do. Then the side doors, through the real proxy
subprocess: exception text, malformed requests logged by aiohttp, a name that does not resolve,
plain-text SSE, and hostile structure (event names, SSE comments, JSON keys). No canary may reach
a trace file or the proxy's stderr."""

import json
import socket
import threading

import anthropic
import httpx
import openai
import pytest

from tests.clients import all_files, find_record
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import CANARY_ARG, CANARY_OUTPUT, anthropic_text_stream, chat_text_stream, \
    chat_tool_stream


# Every canary contains "canary" (any case), so a sweep for that word alone also catches a
# truncated or re-cased copy. None looks like a key the scrubber knows, except where a test says
# so: these must be kept out by the allowlist and by never recording content at all.
OPENAI_KEY = "canary-openai-key-1a2b"
ANTHROPIC_BEARER = "canary-anthropic-bearer-3c4d"
ANTHROPIC_KEY = "canary-x-api-key-5e6f"
GOOGLE_KEY = "canary-goog-key-7a8b"
COOKIE = "canary-cookie-9c0d"
SET_COOKIE = "canary-set-cookie-1e2f"
OPENAI_ORG = "org-canary-3a4b"
OPENAI_PROJECT = "proj_canary_5c6d"
ANTHROPIC_ORG = "canary-anthropic-org-7e8f"
PROMPT = "CANARY-PROMPT-9a0b please summarise"
SYSTEM = "CANARY-SYSTEM-1c2d"
REQUEST_ARG = "CANARY-REQUEST-ARG-3e4f"
TOOL_RESULT = "CANARY-TOOL-RESULT-5a6b"
TOOL_DESCRIPTION = "CANARY-TOOL-DESCRIPTION-7c8d"
QUERY_VALUE = "canary-query-key-9e0f"
STREAMED = (CANARY_OUTPUT, CANARY_ARG)  # model output and a tool argument, in the streams
CANARIES = (OPENAI_KEY, ANTHROPIC_BEARER, ANTHROPIC_KEY, GOOGLE_KEY, COOKIE, SET_COOKIE, OPENAI_ORG,
            OPENAI_PROJECT, ANTHROPIC_ORG, PROMPT, SYSTEM, REQUEST_ARG, TOOL_RESULT,
            TOOL_DESCRIPTION, QUERY_VALUE, *STREAMED)
# Allowlisted values that must survive: they prove the sweep reads what the proxy wrote.
VISIBLE_BETA = "visible-beta-2024"
VISIBLE_REQUEST_ID = "req_visible_42"


@pytest.fixture(scope="module")
def private_proxy(fake, tmp_path_factory):
    """A proxy of these tests' own, so the sweep covers every file it ever wrote."""
    process = ProxyProcess(tmp_path_factory.mktemp("redaction"), {"fake": fake.url})
    yield process
    process.stop()


def sweep(trace_dir, canaries=CANARIES) -> list[str]:
    """Every (file, canary) pair where a canary occurs, byte for byte."""
    files = all_files(trace_dir)
    assert files, f"nothing was written under {trace_dir}"
    found = []
    for path in files:
        data = path.read_bytes()
        for canary in canaries:
            if canary.encode() in data:
                found.append(f"{path.relative_to(trace_dir)}: {canary}")
        if b"canary" in data.lower():
            found.append(f"{path.relative_to(trace_dir)}: some canary")
    return found


def test_canaries_appear_nowhere_under_the_trace_dir(fake, private_proxy):
    proxy = private_proxy
    trace_dir = proxy.trace_dir
    provider_headers = [("Set-Cookie", f"sid={SET_COOKIE}; HttpOnly"),
                        ("openai-organization", OPENAI_ORG), ("openai-project", OPENAI_PROJECT),
                        ("anthropic-organization-id", ANTHROPIC_ORG),
                        ("x-request-id", VISIBLE_REQUEST_ID)]

    # 1. openai SDK: key in Authorization, a cookie, a ?key= query value, a prompt, a system
    # message, a tool argument and a tool result in the request; output and arguments streamed.
    stream = chat_text_stream(2, done=False)[:-1] + chat_tool_stream(5)
    prefix = fake.add(Scenario(stream, headers=provider_headers))
    client = openai.OpenAI(
        base_url=proxy.url("fake") + prefix + "/v1", api_key=OPENAI_KEY, max_retries=0,
        timeout=10, default_query={"key": QUERY_VALUE},
        default_headers={"x-streamtap-session": "redact", "x-streamtap-message": "m-openai",
                         "cookie": f"session={COOKIE}", "openai-beta": VISIBLE_BETA})
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_prev", "type": "function",
            "function": {"name": "apply_patch", "arguments": json.dumps({"p": REQUEST_ARG})}}]},
        {"role": "tool", "tool_call_id": "call_prev", "content": TOOL_RESULT},
    ]
    tools = [{"type": "function", "function": {"name": "apply_patch",
                                               "description": TOOL_DESCRIPTION,
                                               "parameters": {"type": "object"}}}]
    got = ""
    for chunk in client.chat.completions.create(model="gpt-test", messages=messages, tools=tools,
                                                stream=True):
        delta = chunk.choices[0].delta
        got += delta.content or ""
        for call in delta.tool_calls or ():
            got += call.function.arguments or ""
    assert CANARY_OUTPUT in got and CANARY_ARG in got  # the client got the content
    seen = fake.last(prefix)
    assert f"key={QUERY_VALUE}" in seen.raw_path  # ... and the provider the secrets
    assert dict((k.lower(), v) for k, v in seen.headers)["authorization"] == f"Bearer {OPENAI_KEY}"

    # 2. anthropic SDK: a bearer key, a key in x-api-key, a prompt; output streamed.
    prefix = fake.add(Scenario(anthropic_text_stream(3), headers=provider_headers))
    client = anthropic.Anthropic(
        base_url=proxy.url("fake") + prefix, api_key=ANTHROPIC_BEARER, max_retries=0, timeout=10,
        default_headers={"x-api-key": ANTHROPIC_KEY, "x-streamtap-session": "redact",
                         "x-streamtap-message": "m-anthropic"})
    with client.messages.stream(model="claude-test", max_tokens=64, system=SYSTEM,
                                messages=[{"role": "user", "content": PROMPT}]) as reply:
        assert CANARY_OUTPUT in "".join(reply.text_stream)
    assert dict((k.lower(), v) for k, v in fake.last(prefix).headers)["x-api-key"] == ANTHROPIC_KEY

    # 3. raw httpx, Gemini style: the key in the query and in x-goog-api-key.
    prefix = fake.add(Scenario(chat_text_stream(2)))
    url = (proxy.url("fake") + prefix +
           f"/v1beta/models/gemini-test:streamGenerateContent?alt=sse&key={QUERY_VALUE}")
    body = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]}
    resp = httpx.post(url, json=body, timeout=10,
                      headers={"x-goog-api-key": GOOGLE_KEY, "x-streamtap-session": "redact",
                               "x-streamtap-message": "m-gemini"})
    assert resp.status_code == 200 and CANARY_OUTPUT in resp.text

    records = {mid: find_record(trace_dir, mid, "redact")[1]
               for mid in ("m-openai", "m-anthropic", "m-gemini")}
    # The facts that are allowed are there ...
    openai_record = records["m-openai"]
    assert openai_record["request"]["headers"]["openai-beta"] == VISIBLE_BETA
    assert openai_record["request"]["query_keys"] == ["key"]
    assert openai_record["request"]["tool_names"] == ["apply_patch"]
    assert openai_record["request"]["message_count"] == 4
    assert openai_record["correlation"]["request_id"] == VISIBLE_REQUEST_ID
    assert openai_record["stream"]["tool_calls"][0]["arg_bytes"] > 0
    assert records["m-gemini"]["request"]["query_keys"] == ["alt", "key"]
    assert records["m-gemini"]["request"]["model"] == "gemini-test"
    index = (trace_dir / "redact" / "index.jsonl").read_bytes()
    assert index.count(b"\n") == 3
    # ... and no canary is, in any file (records, index, anything else).
    assert sweep(trace_dir) == []
    # Nor in the proxy's log.
    assert not [c for c in CANARIES if c in proxy.log()]
    assert "canary" not in proxy.log().lower()


def test_provider_error_echoing_a_key_is_scrubbed(fake, private_proxy):
    """A 401 whose message echoes the key: the record keeps the error, not the key."""
    proxy = private_proxy
    echoed = "sk-proj-abc123DEF456ghi789JKL0"
    masked = "sk-proj-********************L0mn"
    message = (f"Incorrect API key provided: {echoed}. Also seen as {masked}. You can find your "
               "API key at https://platform.openai.com/account/api-keys.")
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                 "param": None, "code": "invalid_api_key"}}).encode()
    prefix = fake.add(Scenario([body], status=401, content_type="application/json",
                               headers=[("www-authenticate", f"Bearer {echoed}")]))
    client = openai.OpenAI(base_url=proxy.url("fake") + prefix + "/v1", api_key=echoed,
                           max_retries=0, timeout=10,
                           default_headers={"x-streamtap-session": "redact-401",
                                            "x-streamtap-message": "m-401"})
    with pytest.raises(openai.AuthenticationError) as raised:
        client.chat.completions.create(model="gpt-test", stream=True,
                                       messages=[{"role": "user", "content": "hi"}])
    assert echoed in str(raised.value)  # the client got the provider's message untouched
    _, record = find_record(proxy.trace_dir, "m-401", "redact-401")
    error = record["error"]
    assert error["status"] == 401
    assert error["error_type"] == "invalid_request_error"
    assert error["error_code"] == "invalid_api_key"
    # one short sentence is kept, the key removed; the rest of a provider message can echo input
    assert error["error_message"] == "Incorrect API key provided: [REDACTED]."
    assert record["outcome"]["boundary"] == "provider_error"
    assert record["outcome"]["retryable"] is False
    for path in all_files(proxy.trace_dir / "redact-401"):
        data = path.read_bytes()
        assert echoed.encode() not in data and masked.encode() not in data, path
        assert b"abc123DEF456" not in data and b"L0mn" not in data, path


# -- the side doors: exception text, hostile structure, unresolvable names ------------------------
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
    assert line["boundary"] == "proxy" and line["downstream_status"] == 400, line


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
