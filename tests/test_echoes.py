"""A provider that quotes the request back must not get it into the record (issue 21, item 1).

The fuzz: a few hundred requests through a real proxy, each carrying fresh random canaries in
every position of the request (prompt, system, tool arguments and results, a tool description,
a schema key, a stop word, and every credential header, in short and long shapes, with and
without a known key prefix). The fake provider answers each with an error that echoes one of
them (whole, or a piece of it) in every form an error takes: a 4xx body, a wrapped error chunk
and an error event of every dialect. Then the trace dir, the index and the proxy's log are
searched: no canary, and no run of 8 characters of one, may be anywhere. A provider message that
repeats nothing of the request keeps its words.

Then the by-value layer (redaction/echoes.py) through the Recorder, in the test process:
credentials of the request removed from every string of its record, runs of 8 the provider
echoed from the body replaced by `[echo]`, a body too large to check dropping the message, and
what it must not eat (model and tool names, the API's own field names, runs shorter than 8,
route and dialect names).
"""

from __future__ import annotations

import base64
import json
import os
import random
import string

import anthropic
import httpx
import openai
import pytest

from streamtap.diagnostics.record.schema import record_as_dict
from streamtap.diagnostics.redaction.echoes import (ECHO, MESSAGE_DROPPED, TEXT_BUDGET,
                                                 RequestEchoes, credential_values)
from streamtap.diagnostics.record.recorder import Ending, Recorder
from streamtap.diagnostics.redaction.secrets import REDACTED
from tests.clients import all_files, find_record, log_events
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess
from tests.streams import sse


SEED = int(os.environ.get("STREAMTAP_ECHO_SEED", "2101"))  # a failure names its seed
SESSION = "echo-fuzz"
MODEL = "fuzz-model-1"
TOOL = "lookup_thing"
RUN = 8  # the by-value rule: no run this long of a request string may reach the record
BODY_POSITIONS = ("prompt", "system", "tool_arguments", "tool_result", "tool_description",
                  "schema_key", "stop")
HEADER_POSITIONS = ("authorization_bearer", "authorization_basic", "x-api-key", "api-key",
                    "x-goog-api-key", "proxy-authorization", "cookie", "query_key")
ECHOED = (*BODY_POSITIONS, *HEADER_POSITIONS, None)  # None: the message repeats nothing
# Provider messages that repeat nothing of the request, and the sentence the record keeps.
PLAIN = [("The server had an error while processing your request. Sorry about that!",
          "The server had an error while processing your request."),
         ("Overloaded", "Overloaded"),
         ("Model is currently loading, please retry shortly", "Model is currently loading, "
                                                              "please retry shortly")]
# How a provider's message carries the echo: unquoted, at the start, in the middle, at the end.
TEMPLATES = ["Invalid value for field: {} is not allowed here",
             "{} was rejected by the content filter",
             "Incorrect API key provided: {}. You can find your API key in your account.",
             "Bad request (expected a string, got {} instead)",
             "Unknown stop sequence {}"]


def random_core(rng: random.Random, low: int, high: int) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits)
                   for _ in range(rng.randint(low, high)))


def canary(rng: random.Random, credential: bool) -> str:
    """One canary: short or long, random or prose-like, with or without a known key prefix."""
    shape = rng.choice(["short", "long", "prefixed", "words"])
    if shape == "short":  # no known prefix, under 32 characters: what patterns cannot catch
        return random_core(rng, 8, 20)
    if shape == "long":
        return random_core(rng, 32, 64)
    if shape == "prefixed":
        return rng.choice(["sk-proj-", "sk-ant-api03-", "AIza", "gsk_", "xai-"]) + \
            random_core(rng, 24, 40)
    words = ["amber", "quokka", "lantern", "velvet", "orbit", "meadow", "cobalt", "thistle"]
    text = " ".join(rng.sample(words, 3)) + f" {rng.randint(10, 99)}{random_core(rng, 3, 5)}"
    return text.replace(" ", "-") if credential else text


def request_for(dialect: str, c: dict[str, str]) -> tuple[str, dict]:
    """The path and body of a request of `dialect` with canary `c[position]` in each position."""
    schema = {"type": "object", "properties": {c["schema_key"]: {"type": "string"}}}
    arguments = {c["schema_key"]: c["tool_arguments"]}
    if dialect == "anthropic":
        return "/v1/messages", {
            "model": MODEL, "max_tokens": 64, "stream": True, "system": c["system"],
            "stop_sequences": [c["stop"]],
            "tools": [{"name": TOOL, "description": c["tool_description"],
                       "input_schema": schema}],
            "messages": [{"role": "user", "content": c["prompt"]},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                                            "name": TOOL, "input": arguments}]},
                         {"role": "user", "content": [{"type": "tool_result",
                                                       "tool_use_id": "toolu_1",
                                                       "content": c["tool_result"]}]}]}
    if dialect == "gemini":
        return f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse", {
            "systemInstruction": {"parts": [{"text": c["system"]}]},
            "generationConfig": {"stopSequences": [c["stop"]]},
            "tools": [{"functionDeclarations": [{"name": TOOL, "parameters": schema,
                                                 "description": c["tool_description"]}]}],
            "contents": [{"role": "user", "parts": [{"text": c["prompt"]}]},
                         {"role": "model", "parts": [{"functionCall": {"name": TOOL,
                                                                       "args": arguments}}]},
                         {"role": "user", "parts": [{"functionResponse": {
                             "name": TOOL, "response": {"result": c["tool_result"]}}}]}]}
    if dialect == "openai-responses":
        return "/v1/responses", {
            "model": MODEL, "stream": True, "instructions": c["system"],
            "text": {"stop": [c["stop"]]},
            "tools": [{"type": "function", "name": TOOL, "description": c["tool_description"],
                       "parameters": schema}],
            "input": [{"role": "user", "content": c["prompt"]},
                      {"type": "function_call", "call_id": "call_1", "name": TOOL,
                       "arguments": json.dumps(arguments)},
                      {"type": "function_call_output", "call_id": "call_1",
                       "output": c["tool_result"]}]}
    tool = {"type": "function", "function": {"name": TOOL, "description": c["tool_description"],
                                             "parameters": schema}}
    call = {"id": "call_1", "type": "function",
            "function": {"name": TOOL, "arguments": (json.dumps(arguments)
                                                     if dialect == "openai-chat" else arguments)}}
    body = {"model": MODEL, "stream": True, "tools": [tool],
            "messages": [{"role": "system", "content": c["system"]},
                         {"role": "user", "content": c["prompt"]},
                         {"role": "assistant", "content": "", "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": "call_1", "content": c["tool_result"]}]}
    if dialect == "ollama":
        return "/api/chat", {**body, "options": {"stop": [c["stop"]]}}
    return "/v1/chat/completions", {**body, "stop": [c["stop"]]}


def credential_headers(c: dict[str, str]) -> dict[str, str]:
    """Every credential header; `Authorization` is Bearer or Basic, whichever canary `c` has."""
    if "authorization_basic" in c:
        basic = base64.b64encode(f"fuzz-user:{c['authorization_basic']}".encode()).decode()
        authorization = f"Basic {basic}"
    else:
        authorization = f"Bearer {c['authorization_bearer']}"
    return {"authorization": authorization, "x-api-key": c["x-api-key"], "api-key": c["api-key"],
            "x-goog-api-key": c["x-goog-api-key"],
            "proxy-authorization": f"Bearer {c['proxy-authorization']}",
            "cookie": f"theme=dark; session={c['cookie']}"}


# -- the forms an error takes, every dialect's: (name, dialect, scenario for a message) ----------
def _openai_body(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                 "param": "messages", "code": None}}).encode()


def _status(body: bytes, status: int = 400) -> Scenario:
    return Scenario([body], status=status, content_type="application/json")


FORMS = {
    "openai-chat 400": ("openai-chat", lambda m: _status(_openai_body(m))),
    "openai-chat wrapped chunk": ("openai-chat", lambda m: Scenario([
        sse({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
        sse({"error": {"message": m, "type": "server_error"}})])),
    "openai-chat finish_reason error": ("openai-chat", lambda m: Scenario([sse(
        {"id": "gen-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "error"}],
         "error": {"code": 502, "message": m}})])),
    "openai-chat 200 json error": ("openai-chat", lambda m: _status(_openai_body(m), 200)),
    "openai-responses 400": ("openai-responses", lambda m: _status(_openai_body(m))),
    "openai-responses error event": ("openai-responses", lambda m: Scenario([sse(
        {"type": "error", "code": "server_error", "message": m, "sequence_number": 0},
        "error")])),
    "openai-responses response.failed": ("openai-responses", lambda m: Scenario([sse(
        {"type": "response.failed", "sequence_number": 0, "response": {
            "id": "resp_1", "object": "response", "status": "failed",
            "error": {"code": "server_error", "message": m}}}, "response.failed")])),
    "anthropic 400": ("anthropic", lambda m: _status(json.dumps({
        "type": "error", "error": {"type": "invalid_request_error", "message": m}}).encode())),
    "anthropic error event": ("anthropic", lambda m: Scenario([sse(
        {"type": "error", "error": {"type": "overloaded_error", "message": m}}, "error")])),
    "anthropic wrapped chunk": ("anthropic", lambda m: Scenario([sse(
        {"error": {"type": "api_error", "message": m}})])),
    "gemini 400": ("gemini", lambda m: _status(json.dumps({"error": {
        "code": 400, "message": m, "status": "INVALID_ARGUMENT"}}).encode())),
    "gemini wrapped chunk": ("gemini", lambda m: Scenario([sse({"error": {
        "code": 503, "message": m, "status": "UNAVAILABLE"}})])),
    "ollama 400": ("ollama", lambda m: _status(json.dumps({"error": m}).encode())),
    "ollama error line": ("ollama", lambda m: Scenario(
        [json.dumps({"model": MODEL, "message": {"role": "assistant", "content": ""},
                     "done": False}).encode() + b"\n", json.dumps({"error": m}).encode() + b"\n"],
        content_type="application/x-ndjson")),
}


def recorded_messages(record: dict) -> list[str | None]:
    """Every provider message a record keeps: the HTTP error's and each stream error's."""
    messages = [error.get("message") for error in record["stream"]["errors"]]
    if record.get("error") and "error_message" in record["error"]:
        messages.append(record["error"]["error_message"])
    return messages


def runs(text: str) -> set[str]:
    return {text[i:i + RUN] for i in range(len(text) - RUN + 1)}


@pytest.fixture(scope="module")
def echo_proxy(fake, tmp_path_factory):
    """A proxy of these tests' own, so the sweep covers every file and log line it wrote."""
    process = ProxyProcess(tmp_path_factory.mktemp("echoes"), {"fake": fake.url})
    yield process
    process.stop()


def test_no_request_canary_reaches_the_record_index_or_log(fake, echo_proxy):
    rng = random.Random(SEED)
    proxy = echo_proxy
    sent: dict[str, dict] = {}  # message id -> canaries, echoed position, expected plain message
    combos = [(form, position) for position in ECHOED for form in FORMS]
    with httpx.Client(timeout=10) as client:
        for number, (form, position) in enumerate(combos):
            c = {name: canary(rng, name in HEADER_POSITIONS)
                 for name in (*BODY_POSITIONS, *HEADER_POSITIONS)}
            # one request has one Authorization header: Basic when that is the echo, else either
            basic = position == "authorization_basic" or (
                position != "authorization_bearer" and rng.random() < 0.5)
            del c["authorization_bearer" if basic else "authorization_basic"]
            dialect, scenario_for = FORMS[form]
            if position is None:
                message, kept = PLAIN[number % len(PLAIN)]
            else:
                echo = c[position]
                if number % 3 == 2 and len(echo) >= 2 * RUN:  # a piece of it, not all of it
                    start = rng.randint(0, len(echo) - RUN - 4)
                    echo = echo[start:start + rng.randint(RUN + 2, len(echo) - start)]
                message, kept = TEMPLATES[number % len(TEMPLATES)].format(echo), None
            path, body = request_for(dialect, c)
            joiner = "&" if "?" in path else "?"
            path += f"{joiner}key={c['query_key']}"
            prefix = fake.add(scenario_for(message))
            message_id = f"m-{number}"
            raw = json.dumps(body).encode()
            response = client.post(
                proxy.url("fake") + prefix + path, content=raw,
                headers={**credential_headers(c), "content-type": "application/json",
                         "x-streamtap-session": SESSION, "x-streamtap-message": message_id})
            # bytes pass through untouched, both ways: the provider got the request, the client
            # got the provider's message, echo and all
            assert fake.last(prefix).body == raw
            assert message.encode() in response.content or \
                json.dumps(message).encode() in response.content
            sent[message_id] = {"canaries": c, "position": position, "form": form, "kept": kept}

    records = {record["message_id"]: record
               for record in proxy.records(SESSION, count=len(sent), timeout=30)}
    index = [json.loads(line) for line in
             (proxy.trace_dir / SESSION / "index.jsonl").read_text().splitlines()]
    log_lines = {entry["trace_id"]: json.dumps(entry)
                 for entry in log_events(proxy.log(), "request")}
    assert len(records) == len(index) == len(sent)

    failures = []
    for message_id, facts in sent.items():
        record = records[message_id]
        where = f"{message_id} ({facts['form']}, echoing {facts['position']}, seed {SEED})"
        messages = [m for m in recorded_messages(record) if m]
        if facts["kept"] is not None:
            # a message that repeats nothing of the request keeps its words
            if facts["kept"] not in messages:
                failures.append(f"{where}: lost its words: {messages}")
        elif not any("[echo]" in m or "[REDACTED]" in m for m in messages):
            failures.append(f"{where}: no message marks the echo: {messages}")
        # the record, its index line and its log line: no canary, and no run of 8 of one
        texts = {"record": json.dumps(record),
                 "index": json.dumps(next(line for line in index
                                          if line["message_id"] == message_id)),
                 "log": log_lines.get(record["trace_id"], "")}
        assert texts["log"], f"{where}: no log line"
        for value in facts["canaries"].values():
            pieces = runs(value)
            for name, text in texts.items():
                leaked = sorted(piece for piece in pieces if piece in text
                                or json.dumps(piece)[1:-1] in text)
                if leaked:
                    failures.append(f"{where}: {name} holds {leaked[:3]} of {value!r}")
    assert failures == [], "\n".join(failures[:40]) + f"\n({len(failures)} in all)"

    # and every canary, whole, is nowhere under the trace dir or in the log
    everything = b"".join(path.read_bytes() for path in all_files(proxy.trace_dir))
    everything += proxy.log().encode()
    whole = [value for facts in sent.values() for value in facts["canaries"].values()
             if value.encode() in everything]
    assert whole == []


def test_real_sdks_get_the_echo_and_the_record_does_not(fake, echo_proxy):
    """The official SDKs see the provider's message as sent (the proxy touches no byte); the
    record keeps its words and not the echoed prompt, system text or key."""
    rng = random.Random(SEED + 1)
    key, prompt, system = random_core(rng, 10, 14), canary(rng, False), canary(rng, False)
    message = f"Invalid value for messages: {prompt} is not a valid input for key {key}"
    prefix = fake.add(_status(_openai_body(message)))
    client = openai.OpenAI(base_url=echo_proxy.url("fake") + prefix + "/v1", api_key=key,
                           max_retries=0, timeout=10,
                           default_headers={"x-streamtap-session": "echo-sdk",
                                            "x-streamtap-message": "m-openai"})
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}])
    assert message in str(raised.value)

    event = {"type": "error", "error": {"type": "overloaded_error",
                                        "message": f"Overloaded while reading {system}"}}
    prefix = fake.add(Scenario([sse(event, "error")]))
    client = anthropic.Anthropic(base_url=echo_proxy.url("fake") + prefix, api_key=key,
                                 max_retries=0, timeout=10,
                                 default_headers={"x-streamtap-session": "echo-sdk",
                                                  "x-streamtap-message": "m-anthropic"})
    with pytest.raises(anthropic.APIStatusError) as raised:
        with client.messages.stream(model=MODEL, max_tokens=16, system=system,
                                    messages=[{"role": "user", "content": "hi"}]) as stream:
            list(stream.text_stream)
    assert system in str(raised.value)

    _, chat = find_record(echo_proxy.trace_dir, "m-openai", "echo-sdk")
    _, messages = find_record(echo_proxy.trace_dir, "m-anthropic", "echo-sdk")
    assert chat["error"]["error_message"] == (
        "Invalid value for messages: [echo] is not a valid input for key [REDACTED]")
    assert messages["stream"]["errors"][0]["message"] == "Overloaded while reading [echo]"
    everything = b"".join(path.read_bytes() for path in all_files(echo_proxy.trace_dir))
    everything += echo_proxy.log().encode()
    assert [value for value in (key, prompt, system) if value.encode() in everything] == []


def test_a_request_too_large_to_check_keeps_type_and_code_and_says_why(fake, echo_proxy):
    """Over 1 MiB of request text the echo check does not run: the message is not kept."""
    rng = random.Random(SEED + 2)
    prompt = canary(rng, False)
    filler = "lorem ipsum " * (1024 * 1024 // 12 + 100)  # past the check's 1 MiB budget
    body = json.dumps({"model": MODEL, "stream": True,
                       "messages": [{"role": "user", "content": filler + prompt}]}).encode()
    prefix = fake.add(_status(json.dumps({"error": {
        "message": f"Could not read {prompt}", "type": "invalid_request_error",
        "code": "bad_input"}}).encode()))
    response = httpx.post(echo_proxy.url("fake") + prefix + "/v1/chat/completions", content=body,
                          headers={"content-type": "application/json",
                                   "x-streamtap-session": "echo-large",
                                   "x-streamtap-message": "m-large"}, timeout=10)
    assert response.status_code == 400 and prompt in response.text
    _, record = find_record(echo_proxy.trace_dir, "m-large", "echo-large")
    error = record["error"]
    assert (error["error_type"], error["error_code"]) == ("invalid_request_error", "bad_input")
    assert error["error_message"] is None
    assert error["message_dropped"] == "request_too_large_to_check"
    assert prompt.encode() not in b"".join(p.read_bytes() for p in all_files(echo_proxy.trace_dir))


# -- the by-value layer through the Recorder, in the test process ---------------------------------
SHORT_KEY = "Zq81kfJ2"  # no known prefix, 8 characters: the pattern scrubber keeps it
PROMPT = "tell the quartermaster about the violet heron"


def record_of(answer: list[bytes], *, status: int = 200, body: dict | bytes | None = None,
              headers: list | None = None, path: str = "/v1/chat/completions",
              response_headers: list | None = None, complete: bool = True,
              route: str = "openai") -> dict:
    recorder = Recorder(trace_id="t", session_id="s", message_id=None, started_at="now",
                        route=route, provider=route)
    if body is None:
        body = {"model": "gpt-test-mini", "stream": True,
                "messages": [{"role": "user", "content": PROMPT}]}
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    recorder.on_request("POST", path, [("content-type", "application/json"), *(headers or [])],
                        raw, complete)
    content_type = "application/json" if status >= 400 else "text/event-stream"
    recorder.on_response(status, [("content-type", content_type), *(response_headers or [])],
                         2.0)
    for chunk in answer:
        recorder.feed(chunk, 3.0)
    return record_as_dict(recorder.finish(Ending(upstream="complete", downstream_status=status,
                                  upstream_end_ms=4.0), 4.0))


def http_error(message: str, **fields) -> list[bytes]:
    return [json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                  **fields}}).encode()]


def test_an_unquoted_echo_of_the_prompt_becomes_echo():
    record = record_of(http_error(f"Could not process {PROMPT} as given"), status=400)
    assert record["error"]["error_message"] == f"Could not process {ECHO} as given"
    assert "quartermaster" not in json.dumps(record)


def test_an_echo_inside_a_stream_error_becomes_echo():
    record = record_of([sse({"error": {"message": f"stopped at: {PROMPT[:25]}",
                                       "type": "server_error"}})])
    assert record["stream"]["errors"][0]["message"] == f"stopped at: {ECHO}"


def test_a_short_unusual_key_is_removed_from_every_string_of_the_record():
    """By value, whatever its shape: in the message, in an error code, in a response header the
    allowlist keeps, in a path segment."""
    record = record_of(
        [json.dumps({"error": {"message": f"key {SHORT_KEY[:4]}-{SHORT_KEY} rejected",
                               "type": "invalid_request_error", "code": SHORT_KEY}}).encode()],
        status=401, headers=[("x-api-key", SHORT_KEY)],
        response_headers=[("x-request-id", f"req-{SHORT_KEY}")],
        path=f"/keys/{SHORT_KEY}/v1/chat/completions")
    text = json.dumps(record)
    assert SHORT_KEY not in text
    assert record["error"]["error_code"] == REDACTED
    assert record["response"]["headers"]["x-request-id"] == f"req-{REDACTED}"
    assert record["request"]["path"] == f"/keys/{REDACTED}/v1/chat/completions"


def test_credential_values_of_every_header_and_scheme():
    basic = base64.b64encode(b"someuser:hunter2hunter2").decode()
    values = credential_values([
        ("Authorization", "Bearer tok-aaaa1111"), ("x-api-key", "xak-bbbb2222"),
        ("api-key", "azk-cccc3333"), ("x-goog-api-key", "ggk-dddd4444"),
        ("Proxy-Authorization", f"Basic {basic}"), ("Cookie", "a=1; session=cookie-eeee5555"),
        ("user-agent", "not-a-credential-at-all")], "alt=sse&key=qry-ffff6666")
    for value in ("tok-aaaa1111", "xak-bbbb2222", "azk-cccc3333", "ggk-dddd4444", basic,
                  "hunter2hunter2", "cookie-eeee5555", "qry-ffff6666"):
        assert value in values
    assert "not-a-credential-at-all" not in values and "sse" not in values


def test_a_placeholder_key_is_not_removed_from_route_or_dialect_names():
    """`ollama` as the API key (what local servers document) is no secret: shorter than 8."""
    record = record_of(http_error("model not found"), status=404, route="ollama",
                       headers=[("authorization", "Bearer ollama")], path="/api/chat")
    assert record["route"] == "ollama" and record["provider"] == "ollama"


def test_a_message_that_repeats_nothing_keeps_its_words():
    message = "The server had an error while processing your request."
    assert record_of(http_error(message), status=500)["error"]["error_message"] == message


def test_what_the_record_keeps_anyway_and_the_apis_own_words_stay_readable():
    """The model and tool names are in the record already; `max_tokens` and `messages` are the
    API's field names, not the user's words; a shared run shorter than 8 is chance."""
    body = {"model": "gpt-test-mini", "max_tokens": 100000,
            "messages": [{"role": "assistant", "content": "the heron flew"}],
            "tools": [{"type": "function", "function": {"name": "lookup_weather",
                                                        "parameters": {"type": "object"}}}]}
    message = ("max_tokens: 100000 > 8192 for gpt-test-mini; messages: the final assistant "
               "turn calls lookup_weather with a heron")
    record = record_of(http_error(message), status=400, body=body)
    assert record["error"]["error_message"] == message


def test_non_ascii_echoes_are_found_by_characters():
    prompt = "東京の天気を詳しく教えてください"
    record = record_of(http_error(f"入力 {prompt[2:12]} は無効です"), status=400,
                       body={"model": "m", "messages": [{"role": "user", "content": prompt}]})
    assert record["error"]["error_message"] == f"入力 {ECHO} は無効です"


def test_a_body_too_large_to_check_drops_the_message_and_says_so():
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * (TEXT_BUDGET + 10)}]}
    record = record_of(http_error("nothing from the request here", code="too_big"), status=400,
                       body=big)
    error = record["error"]
    assert error["error_type"] == "invalid_request_error" and error["error_code"] == "too_big"
    assert error["error_message"] is None
    assert error["message_dropped"] == MESSAGE_DROPPED
    # a body streamed upstream, never held whole, cannot be checked either
    streamed = record_of([sse({"error": {"message": "boom", "type": "server_error"}})],
                         body=b'{"model": "m", "messages": [', complete=False)
    assert streamed["stream"]["errors"][0]["message"] is None
    assert streamed["stream"]["errors"][0]["message_dropped"] == MESSAGE_DROPPED


def test_a_body_that_is_not_json_is_looked_up_as_text():
    echoes = RequestEchoes(body=b"plain prompt text here")
    assert echoes.clean("you sent plain prompt text") == f"you sent {ECHO}"


def test_no_exchange_holds_its_request_body_while_the_record_waits():
    """Records wait in the store's queue when the disk is slow (up to its limit): every
    exchange lets its request body go at its end, one with a message to check after looking
    the message up, and the record still says what was echoed."""
    def exchange(status: int, answer: list[bytes]) -> Recorder:
        recorder = Recorder(trace_id="t", session_id="s", message_id=None, started_at="now",
                            route="openai", provider="openai")
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": PROMPT}]})
        recorder.on_request("POST", "/v1/chat/completions", [], body.encode())
        kind = "application/json" if status >= 400 else "text/event-stream"
        recorder.on_response(status, [("content-type", kind)], 1.0)
        for chunk in answer:
            recorder.feed(chunk, 2.0)
        recorder.on_exchange_end(Ending(upstream="complete", upstream_end_ms=3.0), 3.0)
        return recorder

    done = exchange(200, [sse({"choices": [{"index": 0, "delta": {"content": "hi"},
                                            "finish_reason": "stop"}]}), b"data: [DONE]\n\n"])
    assert not done.echoes.holds_body
    failed = exchange(400, http_error(f"bad input: {PROMPT}"))
    assert not failed.echoes.holds_body  # looked up already: the queue holds no request body
    record = record_as_dict(failed.finish(Ending(upstream="complete", upstream_end_ms=3.0), 3.0))
    assert record["error"]["error_message"] == f"bad input: {ECHO}"


def test_a_message_not_looked_up_at_the_exchange_end_is_dropped_not_kept_unchecked():
    echoes = RequestEchoes.from_request([], "", json.dumps({"messages": [PROMPT]}).encode(), True)
    echoes.check_early([f"bad input: {PROMPT}"])
    assert not echoes.holds_body
    assert echoes.clean_all([f"bad input: {PROMPT}", f"another quote of {PROMPT}"]) == \
        [f"bad input: {ECHO}", None]
