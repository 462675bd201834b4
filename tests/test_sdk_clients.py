"""The official `openai` and `anthropic` Python SDKs stream through the proxy exactly as they would
directly, and the record describes the exchange: status, a content-free request summary, the SDK's
allowlisted headers (the retry count among them), the response id and a clean outcome."""

import json

import anthropic
import openai
import pytest

from streamtap.diagnostics.redaction.redact import REQUEST_HEADERS_KEPT
from tests.clients import RESPONSE_ID, responses_text_stream
from tests.fakeprovider import Scenario
from tests.proxyproc import new_session
from tests.streams import CANARY_ARG, CANARY_OUTPUT, anthropic_text_stream, chat_text_stream, \
    chat_tool_stream

STAINLESS_KEPT = ("x-stainless-lang", "x-stainless-package-version", "x-stainless-runtime",
                  "x-stainless-runtime-version", "x-stainless-retry-count")
CHAT_TOOLS = [
    {"type": "function", "function": {"name": "apply_patch", "description": "edit files",
                                      "parameters": {"type": "object", "properties": {
                                          "patch": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "read_file", "description": "read a file",
                                      "parameters": {"type": "object", "properties": {}}}},
]


def openai_client(proxy, prefix: str, session: str, **extra) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url("fake") + prefix + "/v1", api_key="sk-test-openai",
                         default_headers={"x-streamtap-session": session}, max_retries=0,
                         timeout=10, **extra)


def anthropic_client(proxy, prefix: str, session: str) -> anthropic.Anthropic:
    # The SDK appends /v1/messages itself.
    return anthropic.Anthropic(base_url=proxy.url("fake") + prefix, api_key="sk-ant-test",
                               default_headers={"x-streamtap-session": session}, max_retries=0,
                               timeout=10)


def sent_headers(fake, prefix: str) -> dict[str, str]:
    return {name.lower(): value for name, value in fake.last(prefix).headers}


def assert_sdk_headers(record: dict, sent: dict[str, str]) -> None:
    """The SDK's allowlisted headers are kept with the values it sent; the rest are dropped."""
    kept = record["request"]["headers"]
    assert set(kept) <= REQUEST_HEADERS_KEPT
    for name in STAINLESS_KEPT:
        assert kept.get(name) == sent[name], name
    assert kept["x-stainless-retry-count"] == "0"
    assert kept["user-agent"] == sent["user-agent"]
    # sent by the SDK but not on the allowlist: never recorded
    for name in ("x-stainless-os", "x-stainless-arch", "authorization"):
        assert name in sent and name not in kept, name


def assert_clean(record: dict, closes_at_done: bool = False) -> None:
    assert record["response"]["status"] == 200
    assert record["downstream"]["status"] == 200
    assert record["downstream"]["bytes"] == record["stream"]["bytes"]  # every byte passed on
    if closes_at_done and record["downstream"]["ended"] == "client_gone":
        # openai-python closes the connection as soon as it has read `[DONE]`, at times before
        # the proxy has written the end of the chunked body (then that write fails): still a
        # complete stream (see test_openai_sdk_closing_at_done_is_a_complete_stream).
        assert record["stream"]["terminal"] == "[DONE]"
        assert record["error"] is None or record["error"]["where"] == "downstream_write"
        assert record["outcome"]["ok"] is True and record["outcome"]["boundary"] == "none"
        return
    assert record["error"] is None
    assert record["downstream"]["ended"] == "complete"
    assert record["outcome"]["ok"] is True
    assert record["outcome"]["boundary"] == "none"
    assert record["outcome"]["phase"] == "complete"


def test_openai_chat_completions_stream(fake, proxy):
    stream = chat_text_stream(4)
    prefix = fake.add(Scenario(stream, delay_s=0.002))
    session = new_session()
    client = openai_client(proxy, prefix, session)
    text = ""
    ids = set()
    for chunk in client.chat.completions.create(
            model="gpt-test", stream=True, temperature=0.5,
            messages=[{"role": "system", "content": "be brief"},
                      {"role": "user", "content": "say hi"}]):
        ids.add(chunk.id)
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
    assert text == "".join(f"{CANARY_OUTPUT} w{i} " for i in range(4))
    record = proxy.record(session)
    assert_clean(record, closes_at_done=True)
    request = record["request"]
    assert request["method"] == "POST" and request["path"] == prefix + "/v1/chat/completions"
    assert (request["model"], request["stream"], request["message_count"]) == ("gpt-test", True, 2)
    assert request["temperature"] == 0.5
    assert request["tool_count"] is None
    assert_sdk_headers(record, sent_headers(fake, prefix))
    assert record["stream"]["bytes"] == sum(map(len, stream))
    assert record["stream"]["terminal"] == "[DONE]"
    assert record["correlation"]["response_id"] == ids.pop() == "chatcmpl-e2e1"
    assert record["dialect"] == "openai-chat"
    assert record["stream"]["event_counts"]["text_delta"] == 4
    assert record["stream"]["finish_reason"] == "stop"


def test_openai_chat_tool_call_stream(fake, proxy):
    prefix = fake.add(Scenario(chat_tool_stream(5)))
    session = new_session()
    client = openai_client(proxy, prefix, session)
    name, arguments, finish = None, "", None
    for chunk in client.chat.completions.create(
            model="gpt-test", stream=True, tools=CHAT_TOOLS, tool_choice="auto",
            messages=[{"role": "user", "content": "patch it"}]):
        choice = chunk.choices[0]
        for call in choice.delta.tool_calls or ():
            name = call.function.name or name
            arguments += call.function.arguments or ""
        finish = choice.finish_reason or finish
    assert (name, finish) == ("apply_patch", "tool_calls")
    assert json.loads(arguments) == {"patch": f"{CANARY_ARG} more text"}
    record = proxy.record(session)
    assert_clean(record, closes_at_done=True)
    request = record["request"]
    assert request["tool_count"] == 2
    assert request["tool_names"] == ["apply_patch", "read_file"]
    assert request["tool_choice"] == "auto"
    assert record["stream"]["finish_reason"] == "tool_calls"
    [call] = record["stream"]["tool_calls"]
    assert call["name"] == "apply_patch" and call["completed"] is True
    assert call["arg_bytes"] == len(arguments)
    assert record["stream"]["event_counts"]["tool_input_delta"] == 5


def test_openai_sdk_closing_at_done_is_a_complete_stream(fake, proxy):
    """openai-python stops reading at `data: [DONE]` and closes the connection. Here the upstream
    keeps its connection open after `[DONE]`, so the SDK always leaves before the body ends (in
    real traffic that is a race the SDK wins now and then)."""
    stream = chat_text_stream(3)
    prefix = fake.add(Scenario(stream, ending="stall", stall_s=5))
    session = new_session()
    client = openai_client(proxy, prefix, session)
    text = ""
    for chunk in client.chat.completions.create(model="gpt-test", stream=True, messages=[]):
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
    assert text == "".join(f"{CANARY_OUTPUT} w{i} " for i in range(3))  # the SDK got it all
    assert fake.last(prefix).client_left.wait(5)  # and the proxy let the upstream go
    record = proxy.record(session)
    assert record["downstream"]["ended"] == "client_gone"  # the fact stays in the record ...
    assert record["downstream"]["bytes"] == sum(map(len, stream))
    assert record["stream"]["terminal"] == "[DONE]"
    assert record["outcome"]["ok"] is True  # ... but the stream was complete
    assert record["outcome"]["boundary"] == "none"
    assert record["outcome"]["phase"] == "complete"


def test_openai_responses_stream(fake, proxy):
    stream = responses_text_stream(3, call_name="apply_patch")
    prefix = fake.add(Scenario(stream))
    session = new_session()
    client = openai_client(proxy, prefix, session)
    text, arguments, kinds, completed_id = "", "", [], None
    for event in client.responses.create(
            model="gpt-test", stream=True, input=[{"role": "user", "content": "patch it"}],
            tools=[{"type": "function", "name": "apply_patch", "parameters": {},
                    "strict": False}]):
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            text += event.delta
        elif event.type == "response.function_call_arguments.delta":
            arguments += event.delta
        elif event.type == "response.completed":
            completed_id = event.response.id
    assert text == "".join(f"{CANARY_OUTPUT} {i} " for i in range(3))
    assert json.loads(arguments) == {"patch": CANARY_ARG}
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert completed_id == RESPONSE_ID
    record = proxy.record(session)
    assert_clean(record)
    request = record["request"]
    assert request["path"] == prefix + "/v1/responses"
    assert (request["model"], request["stream"], request["message_count"]) == ("gpt-test", True, 1)
    assert (request["tool_count"], request["tool_names"]) == (1, ["apply_patch"])
    assert_sdk_headers(record, sent_headers(fake, prefix))
    assert record["stream"]["frame_count"] == len(stream)
    assert record["dialect"] == "openai-responses"
    assert record["correlation"]["response_id"] == RESPONSE_ID
    assert record["stream"]["terminal"] == "response.completed"
    assert record["stream"]["event_counts"]["text_delta"] == 3
    assert record["stream"]["event_counts"]["tool_input_delta"] == 3
    [call] = record["stream"]["tool_calls"]
    assert call["name"] == "apply_patch" and call["completed"] is True


@pytest.mark.parametrize("style", ["stream_helper", "create_stream"])
def test_anthropic_messages_stream(fake, proxy, style):
    stream = anthropic_text_stream(3)
    prefix = fake.add(Scenario(stream, delay_s=0.002))
    session = new_session()
    client = anthropic_client(proxy, prefix, session)
    kwargs = dict(model="claude-test", max_tokens=256,
                  messages=[{"role": "user", "content": "say hi"},
                            {"role": "assistant", "content": "hi"},
                            {"role": "user", "content": "again"}],
                  tools=[{"name": "get_weather", "description": "weather",
                          "input_schema": {"type": "object", "properties": {}}}])
    if style == "stream_helper":
        with client.messages.stream(**kwargs) as messages:
            text = "".join(messages.text_stream)
            final = messages.get_final_message()
        message_id, stop_reason = final.id, final.stop_reason
    else:
        text, message_id, stop_reason = "", None, None
        for event in client.messages.create(stream=True, **kwargs):
            if event.type == "message_start":
                message_id = event.message.id
            elif event.type == "content_block_delta":
                text += event.delta.text
            elif event.type == "message_delta":
                stop_reason = event.delta.stop_reason
    assert text == "".join(f"{CANARY_OUTPUT} {i} " for i in range(3))
    assert (message_id, stop_reason) == ("msg_e2e1", "end_turn")
    assert fake.last(prefix).raw_path == prefix + "/v1/messages"
    record = proxy.record(session)
    assert_clean(record)
    request = record["request"]
    assert (request["model"], request["stream"], request["message_count"]) == (
        "claude-test", True, 3)
    assert request["max_tokens"] == 256
    assert (request["tool_count"], request["tool_names"]) == (1, ["get_weather"])
    sent = sent_headers(fake, prefix)
    assert_sdk_headers(record, sent)
    assert record["request"]["headers"]["anthropic-version"] == sent["anthropic-version"]
    assert record["stream"]["frame_count"] == len(stream)
    assert record["dialect"] == "anthropic-messages"
    assert record["correlation"]["response_id"] == "msg_e2e1"
    assert record["stream"]["terminal"] == "message_stop"
    assert record["stream"]["finish_reason"] == "end_turn"
    assert record["stream"]["event_counts"]["text_delta"] == 3
    assert record["stream"]["event_counts"]["keepalive"] == 1  # the ping


RATE_LIMIT_BODY = json.dumps({"error": {"message": "Rate limit reached", "type": "requests",
                                        "param": None, "code": "rate_limit_exceeded"}}).encode()


def rate_limited(fake, body_delay_s: float = 0.0) -> str:
    chunks = [RATE_LIMIT_BODY[:20], RATE_LIMIT_BODY[20:]] if body_delay_s else [RATE_LIMIT_BODY]
    return fake.add(Scenario(chunks, status=429, content_type="application/json",
                             delay_s=body_delay_s,
                             headers=[("retry-after-ms", "10"), ("x-request-id", "req_rl1")]))


def retry_once(proxy, prefix: str, session: str) -> None:
    client = openai_client(proxy, prefix, session).with_options(max_retries=1)
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="gpt-test", stream=True,
                                       messages=[{"role": "user", "content": "hi"}])


def test_sdk_retries_show_in_the_retry_count(fake, proxy):
    """A 429 the SDK retries: one record per attempt, each with the SDK's retry count."""
    prefix = rate_limited(fake)
    session = new_session()
    retry_once(proxy, prefix, session)
    assert len(fake.seen[prefix.rsplit("/", 1)[-1]]) == 2
    records = proxy.records(session, 2)
    by_count = {r["request"]["headers"]["x-stainless-retry-count"]: r for r in records}
    assert sorted(by_count) == ["0", "1"]
    for record in records:
        assert record["response"]["status"] == record["downstream"]["status"] == 429
        assert record["response"]["headers"]["retry-after-ms"] == "10"
        assert record["correlation"]["request_id"] == "req_rl1"
        assert record["error"]["status"] == 429
        assert record["outcome"]["ok"] is False
    last = by_count["1"]  # the SDK read this error body to raise RateLimitError
    assert last["error"]["error_code"] == "rate_limit_exceeded"
    assert last["error"]["error_message"] == "Rate limit reached"
    assert last["outcome"]["boundary"] == "provider_error"
    assert "http_429" in last["outcome"]["evidence"]
    assert last["outcome"]["retryable"] is True


def test_error_response_abandoned_before_its_body_is_still_a_provider_error(fake, proxy):
    """Before retrying, the SDK closes the 429 response without reading its body. The exchange
    failed because of the 429; the client leaving afterwards is a consequence, not the cause."""
    prefix = rate_limited(fake, body_delay_s=0.3)  # the body is still on its way when it leaves
    session = new_session()
    retry_once(proxy, prefix, session)
    records = proxy.records(session, 2)
    first = next(r for r in records if r["request"]["headers"]["x-stainless-retry-count"] == "0")
    assert first["response"]["status"] == 429
    assert first["downstream"]["ended"] == "client_gone"  # the fact is kept ...
    assert first["outcome"]["boundary"] == "provider_error"  # ... but the 429 decides
    assert "http_429" in first["outcome"]["evidence"]
