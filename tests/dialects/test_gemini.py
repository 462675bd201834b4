"""gemini dialect (SSE with `alt=sse`, and the streamed JSON array without it): fixtures from the
public docs (samples/README.md, Sources), fed through the Recorder, checked against the issue 3
classification table, chunking invariance and redaction."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.dialects import choose_dialect, dialect_class
from streamtap.diagnostics.dialects.base import FRAMING_JSON_ARRAY, FRAMING_SSE
from streamtap.diagnostics.dialects.gemini import Gemini, GeminiArray
from tests.support import FIXTURES, comparable, fixture, record_stream

DIALECT = "gemini"
PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
SSE_PATH = PATH + "?alt=sse"
REQUEST = {"contents": [{"role": "user", "parts": [{"text": "CANARY-PROMPT-2b7e"}]}],
           "tools": [{"functionDeclarations": [{"name": "get_weather",
                                                "parameters": {"type": "object"}}]}],
           "generationConfig": {"thinkingConfig": {"thinkingBudget": 1024}}}
NAMES = sorted(path.name for path in (FIXTURES / DIALECT).iterdir())
FINAL_USAGE = {"input": 31, "output": 42, "reasoning": 48, "cache_read": 8}
RESPONSE_ID = "7nXyaKmYGqOvz7IPq8_X4AM"


def run(data: bytes | str, **kwargs) -> dict:
    """Record a Gemini response: `.json` fixtures as the streamed array, the rest as SSE."""
    array = isinstance(data, str) and data.endswith(".json")
    if isinstance(data, str):
        data = fixture(DIALECT, data)
    kwargs.setdefault("request", REQUEST)
    kwargs.setdefault("content_type", "application/json" if array else "text/event-stream")
    return record_stream(data, path=PATH if array else SSE_PATH, provider="gemini", **kwargs)


def chunk(*parts: dict, finish: str | None = None, **top) -> bytes:
    """One Gemini SSE frame with `parts` in candidates[0] (and `\\r\\n\\r\\n`, as Gemini sends)."""
    candidate: dict = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return b"data: " + json.dumps({"candidates": [candidate], **top}).encode() + b"\r\n\r\n"


def outcome(record: dict) -> tuple:
    return record["outcome"]["boundary"], record["outcome"]["phase"]


def kinds(record: dict) -> list[str]:
    return [entry[2] for entry in record["frames"]]


# -- the registry ------------------------------------------------------------------------------
def test_registry_finds_both_forms_by_path_and_content_type():
    assert dialect_class(DIALECT) is Gemini and dialect_class("gemini-array") is GeminiArray
    assert choose_dialect(None, SSE_PATH, "text/event-stream") is Gemini
    assert choose_dialect(None, PATH, "application/json; charset=UTF-8") is GeminiArray
    assert (Gemini.framing, GeminiArray.framing) == (FRAMING_SSE, FRAMING_JSON_ARRAY)
    assert Gemini.name == GeminiArray.name == "gemini"
    assert GeminiArray.terminal_names == Gemini.terminal_names == ("finishReason",)


# -- complete streams --------------------------------------------------------------------------
def test_complete_stream_with_thoughts_then_text():
    data = fixture(DIALECT, "text_complete.sse")
    assert b"}\r\n\r\ndata: " in data and b'"parts": [' in data  # CRLF separators, ": " spacing
    record = run("text_complete.sse")
    stream = record["stream"]
    assert record["dialect"] == "gemini"
    assert outcome(record) == ("none", "complete") and record["outcome"]["ok"] is True
    assert stream["terminal"] == "finishReason" and stream["finish_reason"] == "STOP"
    assert stream["event_counts"] == {
        "reasoning_start": 1, "reasoning_delta": 2, "reasoning_end": 1,
        "text_start": 1, "text_delta": 3, "text_end": 1, "finish": 1,
        "usage": 1}  # usageMetadata rides on every chunk: the event counts the final report
    assert stream["delta_keys"] == ["thought", "text"]
    assert stream["usage"] == FINAL_USAGE
    assert record["correlation"]["response_id"] == RESPONSE_ID
    assert kinds(record) == ["reasoning_delta", "reasoning_delta", "text_delta", "text_delta",
                             "finish"]
    assert stream["protocol_errors"] == {} and stream["errors"] == []


def test_a_whole_function_call_is_one_complete_tool_call():
    record = run("function_call_complete.sse")
    stream = record["stream"]
    assert outcome(record) == ("none", "complete")
    args = {"location": "CANARY-ARG-91c2", "CANARY-KEY-5d1e": 1}
    assert stream["tool_calls"] == [{
        "index": 0, "name": "get_weather", "started_ms": 2.0, "arg_chunks": 1,
        "arg_bytes": len(json.dumps(args, separators=(",", ":"))), "arg_parsed": True,
        "arg_unchecked": None, "completed": True}]
    assert stream["event_counts"] == {
        "text_start": 1, "text_delta": 1, "text_end": 1, "tool_input_start": 1,
        "tool_input_delta": 1, "tool_input_end": 1, "tool_call": 1, "finish": 1, "usage": 1}
    assert stream["delta_keys"] == ["text", "args"]
    assert kinds(record) == ["text_delta", "tool_call", "finish"]  # the last: empty text part


def test_vertex_streamed_arguments_complete_on_the_part_without_will_continue():
    record = run("streamed_args_complete.sse")
    stream = record["stream"]
    assert outcome(record) == ("none", "complete")
    call = stream["tool_calls"][0]
    assert (call["index"], call["name"], call["arg_chunks"], call["completed"]) == (
        0, "get_weather", 3, True)
    assert stream["delta_keys"] == ["partialArgs"]
    assert kinds(record) == ["tool_input_start", "tool_input_delta", "tool_input_delta",
                             "tool_input_delta", "finish"]


def test_the_json_array_form_gives_the_same_stream_as_sse():
    array, sse = run("text_complete.json"), run("text_complete.sse")
    assert array["dialect"] == "gemini" and outcome(array) == ("none", "complete")
    assert json.loads(fixture(DIALECT, "text_complete.json"))[0]["responseId"] == RESPONSE_ID
    for record in (array, sse):
        record["stream"].pop("bytes")
    assert array["stream"] == sse["stream"]
    assert kinds(array) == kinds(sse)


# -- the classification table ------------------------------------------------------------------
def test_upstream_reset_mid_text():
    record = run("text_cut.sse", upstream="reset")
    assert outcome(record) == ("transport", "text")
    assert record["outcome"]["retryable"] is True
    assert kinds(record)[-1] == "unterminated"


def test_clean_close_before_the_finish_reason_chunk():
    record = run("no_finish.sse")
    stream = record["stream"]
    assert outcome(record) == ("provider_close", "text")
    assert record["outcome"]["retryable"] is True
    assert stream["terminal"] is None and stream["finish_reason"] is None
    assert stream["usage"] == {"input": 31}  # the interim counts are kept...
    assert "usage" not in stream["event_counts"]  # ...but no final usage report arrived


def test_error_frame_mid_stream():
    record = run("error_mid_stream.sse")
    assert outcome(record) == ("provider_error", "text")
    assert record["outcome"]["retryable"] is True
    assert record["stream"]["errors"] == [{
        "shape": "wrapped_chunk", "t_ms": 2.0, "type": "UNAVAILABLE", "code": "503",
        "message": "The model is overloaded."}]  # one short sentence is kept
    assert kinds(record)[-1] == "error"


def test_upstream_reset_after_a_whole_function_call():
    record = run("function_call_cut.sse", upstream="reset")
    assert outcome(record) == ("transport", "after_tool_call")
    assert record["stream"]["tool_calls"][0]["completed"] is True
    assert "`get_weather` completed" in record["outcome"]["summary"]


def test_streamed_arguments_cut_before_the_call_closed():
    reset = run("streamed_args_cut.sse", upstream="reset")
    assert outcome(reset) == ("transport", "tool_input")
    assert reset["stream"]["tool_calls"][0]["completed"] is False
    assert outcome(run("streamed_args_cut.sse")) == ("provider_close", "tool_input")


@pytest.mark.parametrize("content_type", ["text/event-stream", "application/json"])
def test_headers_then_silence_then_clean_end(content_type):
    record = run(b"", content_type=content_type)
    assert record["dialect"] == "gemini"
    assert outcome(record) == ("provider_close", "before_progress")
    assert "no_events" in record["outcome"]["evidence"]


def test_the_json_array_form_cut_mid_element():
    reset = run("text_cut.json", upstream="reset")
    assert outcome(reset) == ("transport", "text")
    assert kinds(reset)[-1] == "unterminated"
    assert reset["stream"]["event_counts"]["text_delta"] == 2
    assert outcome(run("text_cut.json")) == ("provider_close", "text")


# -- parts and quirks --------------------------------------------------------------------------
def test_signature_only_and_empty_parts_are_not_progress():
    record = run(chunk({"thoughtSignature": "c2ln"}) + chunk({"text": ""}), upstream="reset")
    assert record["stream"]["event_counts"] == {"meta": 2}
    assert outcome(record) == ("transport", "before_progress")


def test_calls_are_indexed_by_running_count_and_unknown_names_are_dropped():
    data = (chunk({"functionCall": {"name": "get_weather", "args": {}}},
                  {"functionCall": {"name": "CANARY-made-up", "args": {"CANARY-KEY-5d1e": 1}}})
            + chunk({"functionCall": {"name": "get_weather", "args": {"a": 1}}},
                    finish="STOP"))
    calls = run(data)["stream"]["tool_calls"]
    assert [(c["index"], c["name"], c["arg_chunks"], c["completed"]) for c in calls] == [
        (0, "get_weather", 0, True), (1, None, 1, True), (2, "get_weather", 1, True)]


def test_a_call_named_while_a_streamed_one_is_open_is_a_new_call():
    piece = {"jsonPath": "$.location", "stringValue": "CANARY-ARG-91c2", "willContinue": True}
    data = (chunk({"functionCall": {"name": "get_weather", "willContinue": True}})
            + chunk({"functionCall": {"partialArgs": [piece], "willContinue": True}})
            + chunk({"functionCall": {"name": "get_weather", "args": {"a": 1}}}, finish="STOP"))
    record = run(data)
    calls = record["stream"]["tool_calls"]
    assert [(c["index"], c["arg_chunks"], c["completed"]) for c in calls] == [
        (0, 1, False), (1, 1, True)]
    assert "CANARY" not in json.dumps(record)


def test_a_blocked_prompt_ends_the_stream_with_its_block_reason():
    data = b"data: " + json.dumps({"promptFeedback": {"blockReason": "SAFETY"},
                                   "usageMetadata": {"promptTokenCount": 7}}).encode() + b"\r\n\r\n"
    record = run(data)
    assert record["stream"]["finish_reason"] == "SAFETY"
    assert outcome(record) == ("none", "complete")


def test_unmodelled_parts_are_named():
    record = run(chunk({"inlineData": {"mimeType": "image/png", "data": "CANARY"}}))
    assert record["stream"]["unknown_types"] == ["inlineData"]
    assert kinds(record) == ["unknown"]


def test_unparseable_frame_is_evidence_and_the_ending_decides():
    data = fixture(DIALECT, "text_complete.sse")
    record = run(b"data: {broken\r\n\r\n" + data)
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert outcome(record) == ("none", "complete")
    assert "invalid_json" in record["outcome"]["evidence"]


# -- invariance and redaction ------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_no_content_reaches_the_record(name):
    assert b"CANARY" in fixture(DIALECT, name)
    for upstream in ("complete", "reset"):
        assert "CANARY" not in json.dumps(run(name, upstream=upstream))


@pytest.mark.parametrize("name", NAMES)
def test_bytewise_feeding_gives_the_same_record(name):
    assert comparable(run(name, chunks="bytewise")) == comparable(run(name))


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(1, 64), max_size=120))
def test_any_chunking_gives_the_same_record(name, sizes):
    assert comparable(run(name, chunks=sizes)) == comparable(run(name))
