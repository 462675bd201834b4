"""The Python API: streamtap.Proxy and streamtap.FakeProvider, with real clients (httpx, the
openai and anthropic SDKs) on loopback. Scripted streams are checked the way a user sees them:
through the proxy, whose record reads each one with the dialect's own decoder."""

import json
import subprocess
import sys

import anthropic
import httpx
import openai
import pytest

from streamtap import FakeProvider, Proxy, ScriptError
from streamtap.proxy.config import ConfigError
from streamtap.diagnostics.faults.rules import FaultError

WEATHER = {"name": "get_weather", "arguments": {"city": "Paris"}}
PATHS = {"openai-chat": ("openai", "/v1/chat/completions"),
         "openai-responses": ("openai", "/v1/responses"),
         "anthropic-messages": ("anthropic", "/v1/messages"),
         "gemini": ("gemini", "/v1beta/models/streamtap-fake:streamGenerateContent?alt=sse"),
         "ollama-ndjson": ("ollama", "/api/chat")}
# Dialects that stream a call's arguments in pieces (Gemini and Ollama send a call whole).
PIECES = ("openai-chat", "openai-responses", "anthropic-messages")


def post(proxy: Proxy, dialect: str, body: dict | None = None, headers: dict | None = None):
    """One request through the proxy; (status, body bytes, exception name or None)."""
    route, path = PATHS[dialect]
    if dialect == "gemini" and body is not None and body.get("stream") is False:
        path = path.replace(":streamGenerateContent?alt=sse", ":generateContent")
    data, error, status = b"", None, None
    try:
        with httpx.stream("POST", proxy.url(route) + path, json=body or {"stream": True},
                          headers=headers, timeout=10) as response:
            status = response.status_code
            for chunk in response.iter_raw():
                data += chunk
    except httpx.HTTPError as exc:
        error = type(exc).__name__
    return status, data, error


@pytest.mark.parametrize("dialect", list(PATHS))
@pytest.mark.e2e
def test_a_scripted_stream_is_a_valid_stream_of_its_dialect(dialect):
    script = FakeProvider.stream(dialect, text="hello streamtap world",
                                 reasoning="thinking it over", tool_calls=[WEATHER])
    with FakeProvider(script) as fake, Proxy(routes={PATHS[dialect][0]: fake}) as proxy:
        # the request defines the tool: a record keeps only tool names the request defined
        status, data, error = post(proxy, dialect, {"stream": True, "tools": [
            {"type": "function", "function": {"name": "get_weather"}}]})
        record = proxy.last_record()
    assert (status, error) == (200, None)
    assert record.dialect == dialect
    assert (record.outcome.boundary, record.outcome.phase) == ("none", "complete")
    counts = record.stream.event_counts
    assert counts["text_delta"] == 3 and counts["reasoning_delta"] == 3
    assert counts["tool_call"] == 1
    (call,) = record.stream.tool_calls
    assert call.name == "get_weather" and call.completed
    if dialect in PIECES:
        assert counts["tool_input_delta"] >= 8  # so at=event:tool_input_delta:5 can fire
    assert b"hello " in data  # the text itself, not filler
    if dialect not in PIECES:
        assert b'"Paris"' in data  # a whole call carries its arguments as an object


@pytest.mark.parametrize("dialect", list(PATHS))
@pytest.mark.e2e
def test_requests_without_a_script_get_a_default_answer_in_their_dialect(dialect):
    tools = {"anthropic-messages": [{"name": "lookup", "input_schema": {
                 "type": "object", "properties": {"q": {"type": "string"}}}}],
             "openai-responses": [{"type": "function", "name": "lookup", "parameters": {
                 "type": "object", "properties": {"q": {"type": "string"}}}}],
             "gemini": [{"functionDeclarations": [{"name": "lookup", "parameters": {
                 "type": "object", "properties": {"q": {"type": "string"}}}}]}]}.get(
        dialect, [{"type": "function", "function": {"name": "lookup", "parameters": {
            "type": "object", "properties": {"q": {"type": "string"}}}}}])
    with FakeProvider() as fake, Proxy(routes={PATHS[dialect][0]: fake}) as proxy:
        post(proxy, dialect, {"stream": True, "model": "m"})
        text = proxy.last_record()
        post(proxy, dialect, {"stream": True, "model": "m", "tools": tools})
        tool = proxy.last_record()
        status, whole, _ = post(proxy, dialect, {"stream": False, "model": "m"})
        body = proxy.last_record()
    assert text.stream.event_counts["text_delta"] >= 10
    assert text.outcome.phase == "complete" and tool.outcome.phase == "complete"
    assert [call.name for call in tool.stream.tool_calls] == ["lookup"]
    if dialect in PIECES:
        assert tool.stream.event_counts["tool_input_delta"] >= 8
    assert status == 200 and body.dialect == "json" and body.outcome.boundary == "none"
    assert b"lorem ipsum" in whole and json.loads(whole)


@pytest.mark.e2e
def test_scripted_endings_happen_where_at_says():
    streams = [FakeProvider.stream("openai-chat", tool_calls=[WEATHER], ending="reset",
                                   at="event:tool_input_delta:5"),
               FakeProvider.stream("openai-chat", text="a b c d e", ending="truncated",
                                   at="event:text_delta:2"),
               FakeProvider.stream("openai-chat", text="a b c", ending="clean_close"),
               FakeProvider.stream("openai-chat", ending="http_error", status=529,
                                   headers={"retry-after": "3"}),
               FakeProvider.stream("openai-chat", ending="no_response"),
               FakeProvider.stream("openai-chat", text="a b c", ending="stalled",
                                   at="first_progress")]
    with FakeProvider(*streams) as fake, Proxy(routes={"openai": fake},
                                               idle_timeout_ms=300) as proxy:
        seen = [post(proxy, "openai-chat") for _ in streams]
        records = proxy.records()
        after = post(proxy, "openai-chat")  # the scripts are used up: the default answer
    reset, truncated, closed, overloaded, refused, stalled = records
    assert seen[0][2] is not None and "upstream_reset" in reset.outcome.evidence
    assert (reset.outcome.phase, reset.stream.event_counts["tool_input_delta"]) == \
        ("tool_input", 5)
    assert "upstream_truncated" in truncated.outcome.evidence
    assert truncated.stream.event_counts["text_delta"] == 2
    assert closed.outcome.boundary == "provider_close" and seen[2][2] is None
    assert overloaded.response.status == 529 and overloaded.outcome.boundary == "provider_error"
    assert overloaded.response.headers["retry-after"] == "3"
    assert refused.response is None and refused.outcome.phase == "before_response"
    assert stalled.outcome.boundary == "watchdog"
    assert stalled.stream.event_counts["text_delta"] == 1
    assert after[:2] == (200, after[1]) and b"[DONE]" in after[1]
    assert [served.ending for served in fake.served] == [
        "reset", "truncated", "clean_close", "http_error", "no_response", "stalled", "terminal"]


def test_a_bad_script_says_what_to_change():
    with pytest.raises(ScriptError, match=r"never fires in this stream: it has .*"
                                          r"'tool_input_delta': 8"):
        FakeProvider.stream("openai-chat", tool_calls=[WEATHER], ending="reset",
                            at="event:tool_input_delta:9")
    with pytest.raises(ScriptError, match="give an ending too"):
        FakeProvider.stream("openai-chat", at="event:text_delta:2")
    with pytest.raises(ScriptError, match="unknown dialect 'openai'; expected one of"):
        FakeProvider.stream("openai")
    with pytest.raises(ScriptError, match="unknown ending 'rest'"):
        FakeProvider.stream("openai-chat", ending="rest")


@pytest.mark.e2e
def test_sdks_read_scripted_and_default_answers():
    script = FakeProvider.stream("anthropic-messages", text="the weather", tool_calls=[WEATHER])
    with FakeProvider(script) as fake, Proxy(routes={"anthropic": fake, "openai": fake}) as proxy:
        claude = anthropic.Anthropic(base_url=proxy.url("anthropic"), api_key="sk-ant-test",
                                     max_retries=0)
        with claude.messages.stream(model="claude-test", max_tokens=64, messages=[
                {"role": "user", "content": "hi"}]) as stream:
            message = stream.get_final_message()
        assert message.content[0].text == "the weather"
        assert message.content[1].input == {"city": "Paris"}
        assert message.stop_reason == "tool_use"
        gpt = openai.OpenAI(base_url=proxy.url("openai") + "/v1", api_key="sk-test",
                            max_retries=0)
        events = list(gpt.responses.create(model="gpt-test", input="hi", stream=True, tools=[
            {"type": "function", "name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]}}]))
        done = events[-1]
        assert done.type == "response.completed"
        assert json.loads(done.response.output[0].arguments) == {"city": "lorem ipsum dolor sit amet"}
        reply = gpt.chat.completions.create(model="gpt-test", messages=[])
        assert reply.choices[0].message.content.startswith("lorem ipsum")


@pytest.mark.e2e
def test_a_sample_is_served_when_a_request_names_it():
    with FakeProvider() as fake, Proxy(routes={"openai": fake}) as proxy:
        _, _, error = post(proxy, "openai-chat", {"stream": True},
                           {"x-streamtap-sample": "openai__openai-chat__reset__1"})
        assert error is not None
        assert "upstream_reset" in proxy.last_record().outcome.evidence
        post(proxy, "openai-chat", {"stream": True, "model": "openai__openai-chat__http_error__1"})
        assert proxy.last_record().response.status == 429
    with pytest.raises(ValueError, match="neither a folder nor a sample file"):
        FakeProvider(samples="/nonexistent/samples")


@pytest.mark.e2e
async def test_async_context_managers():
    async with FakeProvider(FakeProvider.stream("openai-chat", text="async hi")) as fake, \
            Proxy(routes={"openai": fake}) as proxy:
        async with httpx.AsyncClient() as client:
            response = await client.post(proxy.url("openai") + "/v1/chat/completions",
                                         json={"stream": True})
        assert b"async " in response.content
        record = proxy.last_record()
    assert record.outcome.boundary == "none"
    assert [r.trace_id for r in proxy.records()] == [record.trace_id]  # kept after exit


@pytest.mark.e2e
def test_faults_by_string_or_fields_and_their_handles():
    with FakeProvider() as fake, Proxy(routes={"openai": fake}) as proxy:
        first = proxy.fault(action="reset", at="event:text_delta:2", match={"route": "openai"})
        second = proxy.fault("close; at=event:text_delta:4")
        assert (first.name, second.name) == ("reset-1", "close-2")  # never one replacing another
        post(proxy, "openai-chat")
        record = proxy.last_record()
        assert (record.fault.name, record.outcome.boundary) == ("reset-1", "injected")
        assert first.chosen == 1
        second.remove()
        post(proxy, "openai-chat")
        assert proxy.last_record().outcome.boundary == "none"  # removed, and reset-1 is spent
        with pytest.raises(FaultError, match="did you mean `reset`"):
            proxy.fault("rest")
        with pytest.raises(FaultError, match="unknown event kind `text_deltas`"):
            proxy.fault(action="reset", at="event:text_deltas:2")
    with pytest.raises(ConfigError, match="did you mean `capture_bodies`"):
        Proxy(capture_body=True)


@pytest.mark.e2e
def test_proxy_faults_are_armed_at_start_and_records_wait_for_the_writer():
    with FakeProvider() as fake, Proxy(routes={"openai": fake},
                                       faults=["reset; at=event:tool_input_delta:5"]) as proxy:
        gpt = openai.OpenAI(base_url=proxy.url("openai") + "/v1", api_key="sk-test",
                            max_retries=0)
        with pytest.raises(openai.APIConnectionError):
            list(gpt.chat.completions.create(model="gpt-test", messages=[], stream=True, tools=[
                {"type": "function", "function": {"name": "apply_patch"}}]))
        record = proxy.last_record()  # no sleep: it waits for the record to be written
        assert (record.outcome.boundary, record.outcome.phase) == ("injected", "tool_input")
        assert record.stream.event_counts["tool_input_delta"] == 5


@pytest.mark.e2e
def test_importing_streamtap_is_cheap():
    probe = subprocess.run([sys.executable, "-c", "import sys, streamtap; print(sorted("
                            "m for m in sys.modules if m.startswith(('streamtap', 'aiohttp'))))"],
                           capture_output=True, text=True, timeout=60, check=True)
    assert probe.stdout.strip() == "['streamtap']"
