"""Issue 11, classes 2 to 5, end to end: real clients (the openai and anthropic SDKs, httpx)
through a streamtap subprocess to the fake provider; the written record says how each stream
really went, and carries none of its content."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from tests import traffic_streams as ts
from tests.fakeprovider import Scenario
from tests.proxyproc import new_session


def frames(data: bytes) -> list[bytes]:
    """One chunk per SSE frame (LF or CRLF separated), as a provider flushes them."""
    separator = b"\r\n\r\n" if b"\r\n\r\n" in data else b"\n\n"
    return [part + separator for part in data.split(separator) if part]


def httpx_stream(fake, proxy, data: bytes, path: str, ending: str = "clean",
                 method: str = "POST") -> tuple[bytes, type | None, dict]:
    prefix = fake.add(Scenario(frames(data), ending=ending, delay_s=0.001))
    session = new_session()
    received, failure = b"", None
    with httpx.Client(timeout=10) as client:
        try:
            with client.stream(method, proxy.url("fake") + prefix + path,
                               json={"model": "m", "stream": True} if method == "POST" else None,
                               headers={"x-streamtap-session": session,
                                        "authorization": "Bearer sk-CANARYKEY0123456789"}) as resp:
                for chunk in resp.iter_raw():
                    received += chunk
        except httpx.HTTPError as exc:
            failure = type(exc)
    record = proxy.record(session)
    assert "CANARY" not in json.dumps(record)
    return received, failure, record


def test_openai_sdk_resumes_a_background_response_and_the_record_completes(fake, proxy):
    """`responses.retrieve(id, stream=True, starting_after=N)` is a GET on
    `/v1/responses/{id}`; before, it was recorded as `sse` and judged `provider_close`."""
    prefix = fake.add(Scenario(frames(ts.responses_resumed(after=4)), delay_s=0.001))
    session = new_session()
    client = openai.OpenAI(base_url=proxy.url("fake") + prefix + "/v1", api_key="sk-test",
                           default_headers={"x-streamtap-session": session}, max_retries=0,
                           timeout=10)
    events = list(client.responses.retrieve("resp_bg1", stream=True, starting_after=4))
    assert [event.type for event in events][-1] == "response.completed"
    assert events[0].sequence_number == 5
    sent = fake.last(prefix)
    assert sent.method == "GET" and sent.raw_path.startswith(prefix + "/v1/responses/resp_bg1?")
    assert "starting_after=4" in sent.raw_path and "stream=true" in sent.raw_path
    record = proxy.record(session)
    assert record["request"]["method"] == "GET"
    assert (record["dialect"], record["dialect_source"]) == ("openai-responses", "path")
    assert record["outcome"]["boundary"] == "none" and record["outcome"]["phase"] == "complete"
    assert record["stream"]["terminal"] == "response.completed"
    assert "CANARY" not in json.dumps(record)


def test_anthropic_sdk_cut_while_the_provider_runs_its_web_search(fake, proxy):
    prefix = fake.add(Scenario(frames(ts.anthropic_web_search(cut="running")), ending="fin",
                               delay_s=0.001))
    session = new_session()
    client = anthropic.Anthropic(base_url=proxy.url("fake") + prefix + "/gateway/anthropic",
                                 api_key="sk-ant-test",
                                 default_headers={"x-streamtap-session": session},
                                 max_retries=0, timeout=10)
    # the SDK surfaces its HTTP client's error (httpx's RemoteProtocolError) as is mid-stream
    with pytest.raises(Exception, match="peer closed connection"):
        for _ in client.messages.create(model="claude-x", max_tokens=64, stream=True,
                                        messages=[{"role": "user", "content": "CANARY-PROMPT"}],
                                        tools=[{"type": "web_search_20250305",
                                                "name": "web_search"}]):
            pass
    record = proxy.record(session)
    assert record["dialect"] == "anthropic-messages"
    outcome = record["outcome"]
    assert (outcome["boundary"], outcome["phase"]) == ("transport", "server_tool")
    assert "while the provider was running its web search" in outcome["summary"]
    assert "no tool ran" not in outcome["summary"]
    assert record["stream"]["tool_calls"] == []
    assert record["stream"]["server_tools"][0]["type"] == "web_search"
    assert "CANARY" not in json.dumps(record)


def test_an_unknown_gateway_path_is_sniffed_and_provider_tools_counted(fake, proxy):
    data = ts.responses_server_tools()
    received, failure, record = httpx_stream(fake, proxy, data, "/relay/v2/stream")
    assert received == data and failure is None
    assert (record["dialect"], record["dialect_source"]) == ("openai-responses", "sniff")
    assert [tool["type"] for tool in record["stream"]["server_tools"]] == [
        "web_search", "file_search", "code_interpreter", "tool_search"]
    assert record["outcome"]["boundary"] == "none"


def test_mistral_cut_during_thinking_reads_as_reasoning(fake, proxy):
    data = ts.mistral_reasoning(cut_while_thinking=True)
    received, failure, record = httpx_stream(fake, proxy, data, "/v1/chat/completions",
                                             ending="fin")
    assert failure is httpx.RemoteProtocolError and received == data
    assert record["stream"]["delta_keys"] == ["content[].thinking"]
    outcome = record["outcome"]
    assert (outcome["boundary"], outcome["phase"]) == ("transport", "reasoning")
    assert "while the model was reasoning" in outcome["summary"]


def test_openrouter_error_chunk_usage_survives_the_proxy(fake, proxy):
    data = ts.openrouter_error_with_usage()
    received, failure, record = httpx_stream(fake, proxy, data, "/api/v1/chat/completions")
    assert received == data and failure is None
    assert record["stream"]["usage"] == {"input": 14, "output": 3}
    assert record["stream"]["finish_reason"] == "error"
    assert record["outcome"]["boundary"] == "provider_error"


def test_gemini_code_execution_on_a_vertex_path(fake, proxy):
    data = ts.gemini_code_execution()
    path = ("/v1/projects/my-project/locations/us-central1/publishers/google/models/"
            "gemini-2.5-pro:streamGenerateContent?alt=sse")
    received, failure, record = httpx_stream(fake, proxy, data, path)
    assert received == data and failure is None
    assert (record["dialect"], record["dialect_source"]) == ("gemini", "path")
    assert record["stream"]["server_tools"][0] == {
        "index": 0, "type": "code_execution", "started_ms": record["stream"]["server_tools"][0][
            "started_ms"], "completed": True}
    assert record["outcome"]["boundary"] == "none"
