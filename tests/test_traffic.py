"""Issue 11, classes 2 to 5: real clients (the openai and anthropic SDKs, httpx) through a
streamtap subprocess to the fake provider, where the written record says how each stream really
went and carries none of its content; then the same classes through the Recorder (endpoints beyond
`.../responses` and sniffing with `dialect_source`, typed content lists, frames that carry several
facts, tools the provider runs itself), every stream fed whole, byte by byte and in random
chunkings."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.dialects import ENDPOINTS, choose, dialect_for_path
from tests import traffic_streams as ts
from tests.fakeprovider import Scenario
from tests.proxyproc import new_session
from tests.support import comparable, record_stream


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


# -- through the Recorder, in every chunking ------------------------------------------------------
SSE = "text/event-stream"


def outcome(record: dict) -> tuple:
    return record["outcome"]["boundary"], record["outcome"]["phase"]


def no_canary(record: dict) -> None:
    assert "CANARY" not in json.dumps(record)


# Every stream of this file: (name, bytes, path, content type). Chunking must never matter.
STREAMS = {
    "responses_resume": (ts.responses_resumed(),
                         "/v1/responses/resp_bg1?stream=true&starting_after=4", SSE),
    "responses_tools": (ts.responses_server_tools(), "/openai/v1/responses", SSE),
    "anthropic_web_search": (ts.anthropic_web_search(), "/gateway/anthropic/v1/messages", SSE),
    "anthropic_sniffed": (ts.anthropic_web_search(), "/relay/stream", SSE),
    "gemini_code": (ts.gemini_code_execution(),
                    "/v1/projects/my-project/locations/us-central1/publishers/google/models/"
                    "gemini-2.5-pro:streamGenerateContent?alt=sse", SSE),
    "mistral": (ts.mistral_reasoning(), "/v1/chat/completions", SSE),
    "openrouter_error": (ts.openrouter_error_with_usage(), "/api/v1/chat/completions", SSE),
}


def run(name: str, **kwargs) -> dict:
    data, path, content_type = STREAMS[name]
    return record_stream(data, path=path, content_type=content_type, **kwargs)


# -- class 2: the endpoint table ------------------------------------------------------------------
@pytest.mark.parametrize("path, dialect", [
    ("/v1/responses", "openai-responses"),
    ("/v1/responses/resp_68af4030592c81938ec0a5fbab4a3e9f?stream=true&starting_after=42",
     "openai-responses"),
    ("/openai/v1/responses?api-version=preview", "openai-responses"),
    ("/openai/responses?api-version=2025-04-01-preview", "openai-responses"),
    ("/openai/deployments/gpt-4o-prod-eastus2/chat/completions?api-version=2024-10-21",
     "openai-chat"),
    ("/api/v2/cortex/v1/chat/completions", "openai-chat"),
    ("/together/v3/openai/chat/completions", "openai-chat"),
    ("/compatible-mode/v1/chat/completions", "openai-chat"),
    ("/api/v1/chat/completions", "openai-chat"),
    ("/v1/projects/p/locations/us-central1/endpoints/openapi/chat/completions", "openai-chat"),
    ("/v1/messages?beta=true", "anthropic-messages"),
    ("/gateway/v1/acct/anthropic/v1/messages", "anthropic-messages"),
    ("/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/"
     "claude-sonnet-4@20250514:streamRawPredict", "anthropic-messages"),
    ("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini"),
    ("/v1/projects/my-project/locations/us-central1/publishers/google/models/"
     "gemini-2.5-pro:streamGenerateContent", "gemini"),
    ("/ollama/api/chat", "ollama-ndjson"),
    ("/api/generate/", "ollama-ndjson"),
    ("/v1/responses/resp_1/input_items", None),
    ("/v1/embeddings", None),
])
def test_the_endpoint_table_names_every_streaming_endpoint(path, dialect):
    assert dialect_for_path(path) == dialect


def test_every_dialect_with_a_path_has_a_row_that_says_what_it_covers():
    assert {row[1] for row in ENDPOINTS} == {"openai-chat", "openai-responses",
                                             "anthropic-messages", "gemini", "ollama-ndjson"}
    assert all(row[2] for row in ENDPOINTS)


@pytest.mark.parametrize("configured, path, content_type, expected", [
    ("anthropic-messages", "/anything", SSE, ("anthropic-messages", "route")),
    (None, "/v1/messages", SSE, ("anthropic-messages", "path")),
    (None, "/v1/messages", "application/json", ("json", "content-type")),
    (None, "/x/stream", "application/x-ndjson", ("ollama-ndjson", "content-type")),
    (None, "/x/stream", SSE, ("sse", "sniff")),
    (None, "/x/stream", "text/plain", ("unknown", "fallback")),
])
def test_choose_says_how_the_dialect_was_chosen(configured, path, content_type, expected):
    cls, source = choose(configured, path, content_type)
    assert (cls(None).name if cls.__name__ == "SniffingSse" else cls.name, source) == expected


def test_a_resumed_background_response_is_read_as_responses_and_completes():
    """Before: dialect `sse`, zero events, and a complete stream judged `provider_close`."""
    record = run("responses_resume")
    assert (record["dialect"], record["dialect_source"]) == ("openai-responses", "path")
    assert outcome(record) == ("none", "complete")
    assert record["stream"]["terminal"] == "response.completed"
    assert record["stream"]["event_counts"]["text_delta"] == 2
    assert record["stream"]["usage"] == {"input": 9, "output": 4}
    assert record["correlation"]["response_id"] == "resp_bg1"
    assert record["request"]["query_keys"] == ["stream", "starting_after"]
    no_canary(record)


def test_a_vertex_gemini_path_is_read_as_gemini():
    record = run("gemini_code")
    assert (record["dialect"], record["dialect_source"]) == ("gemini", "path")
    assert outcome(record) == ("none", "complete")


@pytest.mark.parametrize("stream, dialect, terminal", [
    (ts.anthropic_web_search(), "anthropic-messages", "message_stop"),
    (ts.responses_resumed(), "openai-responses", "response.completed"),
    (ts.mistral_reasoning(), "openai-chat", "[DONE]"),
    (ts.openrouter_error_with_usage(), "openai-chat", None),
    (ts.gemini_code_execution(), "gemini", "finishReason"),
])
def test_an_unknown_path_is_sniffed_from_the_first_frames(stream, dialect, terminal):
    record = record_stream(stream, path="/relay/v2/stream", content_type=SSE)
    assert (record["dialect"], record["dialect_source"]) == (dialect, "sniff")
    assert record["stream"]["terminal"] == terminal
    assert record["stream"]["frame_count"] > 0 and not record["stream"]["unknown_types"]
    no_canary(record)


def test_frames_that_prove_nothing_fall_back_to_plain_sse():
    data = b": hello\n\n" + ts.sse({"value": 1}) + ts.sse("[DONE]")
    record = record_stream(data, path="/relay/v2/stream", content_type=SSE)
    assert (record["dialect"], record["dialect_source"]) == ("sse", "fallback")
    assert record["stream"]["terminal"] == "[DONE]"


def test_sniffing_stops_after_a_few_undecided_frames():
    data = b"".join(ts.sse({"n": n}) for n in range(8)) + ts.anthropic_web_search()
    record = record_stream(data, path="/relay/v2/stream", content_type=SSE)
    assert (record["dialect"], record["dialect_source"]) == ("sse", "fallback")


# -- class 3: typed content lists -------------------------------------------------------------------
def test_mistral_thinking_chunks_are_reasoning_and_text_chunks_are_text():
    record = run("mistral")
    stream = record["stream"]
    assert stream["event_counts"]["reasoning_delta"] == 3
    assert stream["event_counts"]["text_delta"] == 2
    assert stream["event_counts"]["reasoning_start"] == stream["event_counts"]["text_start"] == 1
    assert stream["delta_keys"] == ["content[].thinking", "content[].text"]
    assert stream["unknown_types"] == []
    assert outcome(record) == ("none", "complete")
    no_canary(record)


@pytest.mark.parametrize("upstream", ["truncated", "reset"])
def test_a_cut_during_mistral_thinking_reads_as_reasoning(upstream):
    """Before: counted as text, so "while the model was writing its answer"."""
    record = record_stream(ts.mistral_reasoning(cut_while_thinking=True),
                           path="/v1/chat/completions", upstream=upstream)
    assert outcome(record) == ("transport", "reasoning")
    assert "while the model was reasoning" in record["outcome"]["summary"]
    assert record["stream"]["event_counts"].get("text_delta") is None


def test_typed_lists_in_every_compatible_field_count_by_type():
    chunk = {"id": "c1", "choices": [{"index": 0, "delta": {
        "reasoning_content": [{"type": "text", "text": "CANARY-R"}],
        "content": [{"type": "text", "text": "CANARY-T"},
                    {"type": "image_url", "image_url": {"url": "data:CANARY"}}],
        "refusal": [{"type": "refusal", "refusal": ""}]}, "finish_reason": None}]}
    record = record_stream(ts.sse(chunk), path="/v1/chat/completions")
    stream = record["stream"]
    assert stream["delta_keys"] == ["reasoning_content[].text", "content[].text"]
    assert stream["event_counts"]["reasoning_delta"] == stream["event_counts"]["text_delta"] == 1
    assert stream["unknown_types"] == ["content[].image_url"]
    no_canary(record)


# -- class 4: several facts in one frame ------------------------------------------------------------
def test_openrouter_error_chunk_keeps_its_usage():
    """Before: the error branch returned first and the usage was dropped."""
    record = run("openrouter_error")
    stream = record["stream"]
    assert stream["usage"] == {"input": 14, "output": 3}
    assert stream["finish_reason"] == "error"
    assert stream["errors"][0]["shape"] == "finish_reason_error"
    assert stream["errors"][0]["code"] == "502"
    assert record["correlation"]["response_id"] == "gen-or1"
    assert outcome(record) == ("provider_error", "text")


def test_gemini_error_chunk_keeps_its_id_and_usage():
    data = ts.gemini_chunk([{"text": "CANARY"}]) + ts.crlf_sse({
        "error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"},
        "responseId": "gem-err-1",
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2}})
    record = record_stream(data, path="/v1beta/models/g:streamGenerateContent")
    assert record["stream"]["usage"] == {"input": 5, "output": 2}
    assert record["stream"]["errors"][0]["type"] == "UNAVAILABLE"
    assert record["correlation"]["response_id"] == "gem-resp-1"


def test_a_wrapped_error_on_an_unknown_stream_keeps_its_usage_and_id():
    data = ts.sse({"error": {"type": "server_error", "message": "boom"}, "id": "gen-x1",
                   "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
    record = record_stream(data, path="/relay/v2/stream", dialect="sse")
    assert record["stream"]["usage"] == {"input": 3, "output": 1}
    assert record["correlation"]["response_id"] == "gen-x1"
    assert record["stream"]["errors"][0]["shape"] == "wrapped_chunk"


def test_an_ollama_error_line_keeps_its_counts():
    data = (json.dumps({"model": "m", "message": {"role": "assistant", "content": "CANARY"},
                        "done": False}) + "\n"
            + json.dumps({"error": "model ran out of memory", "prompt_eval_count": 7,
                          "eval_count": 2}) + "\n").encode()
    record = record_stream(data, path="/api/chat", content_type="application/x-ndjson")
    assert record["stream"]["usage"] == {"input": 7, "output": 2}
    assert record["stream"]["errors"][0]["shape"] == "ndjson_error"


# -- class 5: provider-run tools ---------------------------------------------------------------------
def test_anthropic_web_search_is_a_provider_tool_not_a_client_call():
    record = run("anthropic_web_search")
    stream = record["stream"]
    assert stream["tool_calls"] == []
    assert stream["server_tools"] == [{"index": 0, "type": "web_search", "started_ms": 2.0,
                                       "completed": True}]
    assert stream["event_counts"]["server_tool_start"] == 1
    assert stream["event_counts"]["server_tool_delta"] == 3
    assert stream["event_counts"]["server_tool_end"] == 1
    assert stream["unknown_types"] == []
    assert outcome(record) == ("none", "complete")
    no_canary(record)


@pytest.mark.parametrize("tool, result, label", [
    ("web_search", "web_search_tool_result", "web search"),
    ("code_execution", "code_execution_tool_result", "code execution"),
    ("web_fetch", "web_fetch_tool_result", "web fetch"),
])
def test_a_break_while_anthropic_runs_its_tool_names_the_tool(tool, result, label):
    """Before: "while the model was still writing the arguments of tool call #0 ...; the call
    never completed, so no tool ran"."""
    record = record_stream(ts.anthropic_web_search(cut="running", tool=tool, result=result),
                           path="/v1/messages", upstream="truncated")
    assert outcome(record) == ("transport", "server_tool")
    summary = record["outcome"]["summary"]
    assert f"while the provider was running its {label}" in summary
    assert "no tool ran" not in summary and "tool call" not in summary
    assert record["stream"]["server_tools"][0]["completed"] is False


def test_a_clean_close_right_after_the_search_result_says_so():
    record = record_stream(ts.anthropic_web_search(cut="after_result"), path="/v1/messages")
    assert outcome(record) == ("provider_close", "after_server_tool")
    assert "right after the provider's web search returned its result" in \
        record["outcome"]["summary"]


def test_responses_provider_tools_are_counted_by_type():
    record = run("responses_tools")
    stream = record["stream"]
    assert [(tool["type"], tool["completed"]) for tool in stream["server_tools"]] == [
        ("web_search", True), ("file_search", True), ("code_interpreter", True),
        ("tool_search", True)]
    assert stream["tool_calls"] == [] and stream["unknown_types"] == []
    assert stream["event_counts"]["server_tool_end"] == 4
    assert outcome(record) == ("none", "complete")
    no_canary(record)


def test_a_break_during_a_responses_web_search_names_it():
    record = record_stream(ts.responses_server_tools(cut_while="web_search"),
                           path="/v1/responses", upstream="reset")
    assert outcome(record) == ("transport", "server_tool")
    assert "while the provider was running its web search" in record["outcome"]["summary"]


def test_gemini_code_execution_is_a_provider_tool():
    record = run("gemini_code")
    stream = record["stream"]
    assert stream["server_tools"] == [{"index": 0, "type": "code_execution",
                                       "started_ms": 2.0, "completed": True}]
    assert stream["unknown_types"] == [] and stream["tool_calls"] == []
    no_canary(record)


def test_a_break_while_gemini_runs_code_names_it():
    record = record_stream(ts.gemini_code_execution(cut="running"),
                           path="/v1beta/models/g:streamGenerateContent", upstream="truncated")
    assert outcome(record) == ("transport", "server_tool")
    assert "while the provider was running its code execution" in record["outcome"]["summary"]


# -- chunking never matters -------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(STREAMS))
def test_bytewise_equals_whole(name):
    assert comparable(run(name, chunks="bytewise")) == comparable(run(name))


@pytest.mark.parametrize("name", sorted(STREAMS))
@settings(max_examples=20, deadline=None)
@given(sizes=st.lists(st.integers(1, 64), max_size=120))
def test_random_chunkings_equal_whole(name, sizes):
    assert comparable(run(name, chunks=sizes)) == comparable(run(name))
