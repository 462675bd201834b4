"""gemini dialect (Gemini API `streamGenerateContent` reference), chunk by chunk: the exact
events, delta keys, finish, usage, terminal, function calls (whole and Vertex streamed
arguments), code execution, errors, ids and timeline a user sees; then fixtures of both forms
(SSE with `alt=sse`, the streamed JSON array without it) from the public docs (samples/README.md,
Sources) fed through the Recorder, checked against the issue 3 classification table, chunking
invariance and redaction."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.dialects import choose_dialect, dialect_class
from streamtap.diagnostics.dialects.base import FRAMING_JSON_ARRAY, FRAMING_SSE
from streamtap.diagnostics.dialects.gemini import Gemini, GeminiArray
from tests.support import FIXTURES, comparable, fixture, record_stream
from tests.unit.dialect_feed import facts, feed, kinds, sse


USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 4, "thoughtsTokenCount": 2,
         "cachedContentTokenCount": 3, "totalTokenCount": 16}


def chunk(*parts: dict, finish: str | None = None, usage: dict | None = None,
          response_id: str | None = "gem-resp-1", **top) -> bytes:
    candidate = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    body = {"candidates": [candidate], **top}
    if usage is not None:
        body["usageMetadata"] = usage
    if response_id is not None:
        body["responseId"] = response_id
    return sse(body)


def run(*frames: bytes, **kwargs) -> dict:
    return feed("gemini", list(frames), **kwargs)


def calls(record: dict) -> list[tuple]:
    return [(c["index"], c["name"], c["arg_chunks"], c["arg_bytes"], c["completed"])
            for c in record["stream"]["tool_calls"]]


def test_text_stream_end_to_end():
    record = run(chunk({"text": "a"}, usage={"promptTokenCount": 10}), chunk({"text": "b"}),
                 chunk({"text": ""}, finish="STOP", usage=USAGE))
    assert facts(record) == {
        "event_counts": {"text_start": 1, "text_delta": 2, "text_end": 1, "finish": 1,
                         "usage": 1},
        "delta_keys": ["text"], "finish_reason": "STOP",
        "usage": {"input": 10, "output": 4, "reasoning": 2, "cache_read": 3},
        "terminal": "finishReason", "unknown_types": [], "protocol_errors": {}}
    assert kinds(record) == ["text_delta", "text_delta", "finish"]
    timeline = record["timeline"]
    assert (timeline["first_event"], timeline["first_progress"], timeline["last_progress"],
            timeline["terminal_event"]) == (3.0, 3.0, 4.0, 5.0)
    assert record["correlation"]["response_id"] == "gem-resp-1"
    assert record["dialect"] == "gemini"
    assert record["outcome"]["boundary"] == "none"


def test_usage_on_every_chunk_is_kept_but_counted_once_at_the_end():
    record = run(chunk({"text": "a"}, usage={"promptTokenCount": 10, "candidatesTokenCount": 1}),
                 chunk({"text": "b"}, usage={"promptTokenCount": 10, "candidatesTokenCount": 1}))
    assert record["stream"]["usage"] == {"input": 10, "output": 1}
    assert "usage" not in record["stream"]["event_counts"]
    record = run(chunk({"text": "a"}, finish="STOP"), chunk(usage=USAGE), chunk(usage=USAGE))
    assert kinds(record) == ["finish", "usage", "usage"]
    assert record["stream"]["event_counts"]["usage"] == 2


def test_thoughts_then_text_and_the_signature_part():
    record = run(chunk({"text": "t", "thought": True}), chunk({"text": "t", "thought": True}),
                 chunk({"text": "", "thoughtSignature": "sig"}), chunk({"text": "a"}),
                 chunk({"text": "b", "thought": False}, finish="STOP"))
    assert record["stream"]["delta_keys"] == ["thought", "text"]
    assert record["stream"]["event_counts"] == {
        "reasoning_start": 1, "reasoning_delta": 2, "reasoning_end": 1, "text_start": 1,
        "text_delta": 2, "text_end": 1, "finish": 1, "meta": 1}
    assert kinds(record) == ["reasoning_delta", "reasoning_delta", "meta", "text_delta",
                             "finish"]


def test_meta_parts_and_unknown_parts():
    record = run(chunk({"thoughtSignature": "s", "partMetadata": {}}),
                 chunk({"inlineData": {"mimeType": "image/png"}, "thought": True}),
                 chunk({"fileData": {}}, {"text": "a"}))
    assert record["stream"]["unknown_types"] == ["inlineData", "fileData"]
    assert kinds(record) == ["meta", "unknown", "text_delta"]
    assert record["stream"]["event_counts"] == {"meta": 1, "unknown": 2, "text_start": 1,
                                                "text_delta": 1}


@pytest.mark.parametrize("body", [
    {"candidates": []}, {"candidates": "x"}, {"candidates": ["x"]},
    {"candidates": [{"content": "x"}]}, {"candidates": [{"content": {"parts": "x"}}]},
    {"candidates": [{"content": {"parts": ["x", 1]}}]}, {},
])
def test_chunks_with_nothing_to_count_are_meta(body):
    record = run(sse(body))
    assert kinds(record) == ["meta"]
    assert record["stream"]["finish_reason"] is None


def test_not_json_or_not_an_object():
    record = run(sse(b"{nope"), sse(b"[1]"))
    assert kinds(record) == ["unknown", "unknown"]
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}


def test_a_blocked_prompt_ends_the_stream():
    record = run(sse({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": USAGE}))
    assert record["stream"]["finish_reason"] == "SAFETY"
    assert record["stream"]["terminal"] == "finishReason"
    assert kinds(record) == ["finish"]
    assert record["stream"]["event_counts"] == {"finish": 1, "usage": 1}
    record = run(sse({"promptFeedback": "x"}), sse({"promptFeedback": {}}))
    assert record["stream"]["finish_reason"] is None and kinds(record) == ["meta", "meta"]


def test_the_first_response_id_wins():
    record = run(chunk({"text": "a"}, response_id="gem-1"), chunk({"text": "b"},
                                                                    response_id="gem-2"))
    assert record["correlation"]["response_id"] == "gem-1"


# -- function calls -------------------------------------------------------------------------------
def test_whole_calls_complete_in_their_part():
    record = run(chunk({"text": "a"}, {"functionCall": {"name": "apply_patch",
                                                         "args": {"a": "\u00e9"}}}),
                 chunk({"functionCall": {"name": "read_file", "args": {}}}, finish="STOP"))
    assert calls(record) == [(0, "apply_patch", 1, 10, True), (1, "read_file", 0, 0, True)]
    assert record["stream"]["delta_keys"] == ["text", "args"]
    assert kinds(record) == ["tool_call", "finish"]
    assert record["stream"]["event_counts"] == {
        "text_start": 1, "text_delta": 1, "text_end": 1, "tool_input_start": 2,
        "tool_input_delta": 1, "tool_input_end": 2, "tool_call": 2, "finish": 1}


def test_vertex_streamed_arguments():
    record = run(chunk({"functionCall": {"name": "apply_patch", "willContinue": True}}),
                 chunk({"functionCall": {"partialArgs": [{"jsonPath": "$.a",
                                                          "stringValue": "x"}],
                                         "willContinue": True}}),
                 chunk({"functionCall": {"partialArgs": [{"jsonPath": "$.a", "numberValue": 1}],
                                         "willContinue": True}}),
                 chunk({"functionCall": {}}, finish="STOP"))
    assert calls(record) == [(0, "apply_patch", 2, 74, True)]
    assert record["stream"]["delta_keys"] == ["partialArgs"]
    assert kinds(record) == ["tool_input_start", "tool_input_delta", "tool_input_delta",
                             "finish"]
    assert record["stream"]["event_counts"]["tool_call"] == 1


def test_a_new_named_call_while_one_is_open_leaves_the_first_incomplete():
    record = run(chunk({"functionCall": {"name": "apply_patch", "willContinue": True}}),
                 chunk({"functionCall": {"name": "read_file", "willContinue": "yes"}}))
    assert calls(record) == [(0, "apply_patch", 0, 0, False), (1, "read_file", 0, 0, True)]


def test_a_named_part_with_partial_args_continues_the_open_call():
    record = run(chunk({"functionCall": {"name": "apply_patch", "willContinue": True}}),
                 chunk({"functionCall": {"name": "apply_patch",
                                         "partialArgs": [{"jsonPath": "$.a", "nullValue": None}],
                                         "willContinue": False}}))
    assert calls(record) == [(0, "apply_patch", 1, 37, True)]


# -- code execution -------------------------------------------------------------------------------
def test_code_execution_is_a_provider_run_tool():
    record = run(chunk({"text": "a"}, {"executableCode": {"language": "PYTHON", "code": "x"}}),
                 chunk({"codeExecutionResult": {"outcome": "OUTCOME_OK"}}),
                 chunk({"codeExecutionResult": {"outcome": "OUTCOME_OK"}}),
                 chunk({"text": "b"}, finish="STOP"))
    assert [(s["index"], s["type"], s["completed"]) for s in record["stream"]["server_tools"]] \
        == [(0, "code_execution", True)]
    assert kinds(record) == ["server_tool_start", "server_tool_end", "meta", "finish"]
    assert record["stream"]["event_counts"] == {
        "text_start": 2, "text_delta": 2, "text_end": 2, "server_tool_start": 1,
        "server_tool_end": 1, "meta": 1, "finish": 1}


def test_a_result_without_its_code_part_and_two_runs():
    record = run(chunk({"codeExecutionResult": {}}), chunk({"executableCode": {}}),
                 chunk({"executableCode": "x"}), chunk({"codeExecutionResult": {}}))
    tools = record["stream"]["server_tools"]
    assert [(s["index"], s["completed"]) for s in tools] == [(0, True), (1, True)]
    # a result whose code part never came starts the tool too: the start outranks the end
    assert kinds(record) == ["server_tool_start", "server_tool_start", "unknown",
                             "server_tool_end"]
    assert record["stream"]["unknown_types"] == ["executableCode"]


# -- errors ---------------------------------------------------------------------------------------
def test_an_error_chunk_keeps_its_id_and_usage():
    record = run(chunk({"text": "a"}),
                 sse({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"},
                      "responseId": "gem-err", "usageMetadata": {"promptTokenCount": 7}}))
    assert record["stream"]["errors"] == [{"shape": "wrapped_chunk", "t_ms": 4.0,
                                           "type": "UNAVAILABLE", "code": "503",
                                           "message": "overloaded"}]
    assert record["stream"]["usage"] == {"input": 7}
    assert kinds(record) == ["text_delta", "error"]
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 1, "error": 1,
                                                "usage": 1}
    assert record["correlation"]["response_id"] == "gem-resp-1"
    assert record["outcome"]["boundary"] == "provider_error"


def test_an_error_chunk_without_usage():
    record = run(sse({"error": {"code": 500, "status": "INTERNAL"}}))
    assert record["stream"]["event_counts"] == {"error": 1}


# -- the frame's kind is its most telling event ---------------------------------------------------
def test_the_frame_kind_ranks_events():
    record = run(chunk({"text": "a"}, {"text": "t", "thought": True}),
                 chunk({"functionCall": {"name": "apply_patch", "willContinue": True}},
                       {"text": "b"}),
                 chunk({"executableCode": {}}, {"functionCall": {"name": "read_file"}}),
                 chunk({"text": "c"}, usage=USAGE),
                 chunk({"text": "t", "thought": True}, {"executableCode": {}},
                       {"functionCall": {"name": "x", "willContinue": True}}, finish="STOP"),
                 chunk({"executableCode": {}}),
                 chunk({"codeExecutionResult": {}}, {"functionCall": {"name": "read_file"}}),
                 chunk({"functionCall": {"name": "x", "willContinue": True}}),
                 chunk({"functionCall": {"partialArgs": [{"jsonPath": "$.a"}],
                                         "willContinue": True}}, {"text": "d"}),
                 chunk({"inlineData": {}}))
    assert kinds(record) == ["text_delta", "tool_input_start", "server_tool_start", "text_delta",
                             "finish", "server_tool_start", "server_tool_end",
                             "tool_input_start", "tool_input_delta", "unknown"]


def test_the_array_form_reads_the_same_chunks():
    assert GeminiArray.framing == "json-array"
    assert Gemini.terminal_names == ("finishReason",)
    body = b'[{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"STOP"}]}]'
    record = feed("gemini-array", [body])
    assert record["dialect"] == "gemini"
    assert record["stream"]["finish_reason"] == "STOP"


# -- what the survivors of a mutation run showed unpinned -----------------------------------------
def test_every_meta_part_key_is_meta():
    record = run(chunk({"thought": True}), chunk({"videoMetadata": {}}),
                 chunk({"thoughtSignature": "s"}), chunk({"partMetadata": {}}))
    assert kinds(record) == ["meta"] * 4
    assert record["stream"]["unknown_types"] == []


def test_lone_surrogates_in_arguments_are_sized_not_fatal():
    record = run(chunk({"functionCall": {"name": "apply_patch", "args": {"a": "\ud800"}}}))
    # {"a":"\ud800"}, the lone surrogate sized as 3 bytes (surrogatepass), like every piece
    assert calls(record) == [(0, "apply_patch", 1, 11, True)]


def test_a_result_without_its_code_part_is_still_code_execution():
    record = run(chunk({"codeExecutionResult": {}}))
    assert record["stream"]["server_tools"][0]["type"] == "code_execution"


# -- whole streams: fixtures from the public docs, through the Recorder ---------------------------
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


def record_of(data: bytes | str, **kwargs) -> dict:
    """Record a Gemini response: `.json` fixtures as the streamed array, the rest as SSE."""
    array = isinstance(data, str) and data.endswith(".json")
    if isinstance(data, str):
        data = fixture(DIALECT, data)
    kwargs.setdefault("request", REQUEST)
    kwargs.setdefault("content_type", "application/json" if array else "text/event-stream")
    return record_stream(data, path=PATH if array else SSE_PATH, provider="gemini", **kwargs)


def wire_chunk(*parts: dict, finish: str | None = None, **top) -> bytes:
    """One Gemini SSE frame with `parts` in candidates[0] (and `\\r\\n\\r\\n`, as Gemini sends)."""
    candidate: dict = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return b"data: " + json.dumps({"candidates": [candidate], **top}).encode() + b"\r\n\r\n"


def outcome(record: dict) -> tuple:
    return record["outcome"]["boundary"], record["outcome"]["phase"]



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
    record = record_of("text_complete.sse")
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
    record = record_of("function_call_complete.sse")
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
    record = record_of("streamed_args_complete.sse")
    stream = record["stream"]
    assert outcome(record) == ("none", "complete")
    call = stream["tool_calls"][0]
    assert (call["index"], call["name"], call["arg_chunks"], call["completed"]) == (
        0, "get_weather", 3, True)
    assert stream["delta_keys"] == ["partialArgs"]
    assert kinds(record) == ["tool_input_start", "tool_input_delta", "tool_input_delta",
                             "tool_input_delta", "finish"]


def test_the_json_array_form_gives_the_same_stream_as_sse():
    array, sse = record_of("text_complete.json"), record_of("text_complete.sse")
    assert array["dialect"] == "gemini" and outcome(array) == ("none", "complete")
    assert json.loads(fixture(DIALECT, "text_complete.json"))[0]["responseId"] == RESPONSE_ID
    for record in (array, sse):
        record["stream"].pop("bytes")
    assert array["stream"] == sse["stream"]
    assert kinds(array) == kinds(sse)


# -- the classification table ------------------------------------------------------------------
def test_upstream_reset_mid_text():
    record = record_of("text_cut.sse", upstream="reset")
    assert outcome(record) == ("transport", "text")
    assert record["outcome"]["retryable"] is True
    assert kinds(record)[-1] == "unterminated"


def test_clean_close_before_the_finish_reason_chunk():
    record = record_of("no_finish.sse")
    stream = record["stream"]
    assert outcome(record) == ("provider_close", "text")
    assert record["outcome"]["retryable"] is True
    assert stream["terminal"] is None and stream["finish_reason"] is None
    assert stream["usage"] == {"input": 31}  # the interim counts are kept...
    assert "usage" not in stream["event_counts"]  # ...but no final usage report arrived


def test_error_frame_mid_stream():
    record = record_of("error_mid_stream.sse")
    assert outcome(record) == ("provider_error", "text")
    assert record["outcome"]["retryable"] is True
    assert record["stream"]["errors"] == [{
        "shape": "wrapped_chunk", "t_ms": 2.0, "type": "UNAVAILABLE", "code": "503",
        "message": "The model is overloaded."}]  # one short sentence is kept
    assert kinds(record)[-1] == "error"


def test_upstream_reset_after_a_whole_function_call():
    record = record_of("function_call_cut.sse", upstream="reset")
    assert outcome(record) == ("transport", "after_tool_call")
    assert record["stream"]["tool_calls"][0]["completed"] is True
    assert "`get_weather` completed" in record["outcome"]["summary"]


def test_streamed_arguments_cut_before_the_call_closed():
    reset = record_of("streamed_args_cut.sse", upstream="reset")
    assert outcome(reset) == ("transport", "tool_input")
    assert reset["stream"]["tool_calls"][0]["completed"] is False
    assert outcome(record_of("streamed_args_cut.sse")) == ("provider_close", "tool_input")


@pytest.mark.parametrize("content_type", ["text/event-stream", "application/json"])
def test_headers_then_silence_then_clean_end(content_type):
    record = record_of(b"", content_type=content_type)
    assert record["dialect"] == "gemini"
    assert outcome(record) == ("provider_close", "before_progress")
    assert "no_events" in record["outcome"]["evidence"]


def test_the_json_array_form_cut_mid_element():
    reset = record_of("text_cut.json", upstream="reset")
    assert outcome(reset) == ("transport", "text")
    assert kinds(reset)[-1] == "unterminated"
    assert reset["stream"]["event_counts"]["text_delta"] == 2
    assert outcome(record_of("text_cut.json")) == ("provider_close", "text")


# -- parts and quirks --------------------------------------------------------------------------
def test_signature_only_and_empty_parts_are_not_progress():
    record = record_of(wire_chunk({"thoughtSignature": "c2ln"}) + wire_chunk({"text": ""}),
                       upstream="reset")
    assert record["stream"]["event_counts"] == {"meta": 2}
    assert outcome(record) == ("transport", "before_progress")


def test_calls_are_indexed_by_running_count_and_unknown_names_are_dropped():
    data = (wire_chunk({"functionCall": {"name": "get_weather", "args": {}}},
                       {"functionCall": {"name": "CANARY-made-up", "args": {"CANARY-KEY-5d1e": 1}}})
            + wire_chunk({"functionCall": {"name": "get_weather", "args": {"a": 1}}},
                         finish="STOP"))
    calls = record_of(data)["stream"]["tool_calls"]
    assert [(c["index"], c["name"], c["arg_chunks"], c["completed"]) for c in calls] == [
        (0, "get_weather", 0, True), (1, None, 1, True), (2, "get_weather", 1, True)]


def test_a_call_named_while_a_streamed_one_is_open_is_a_new_call():
    piece = {"jsonPath": "$.location", "stringValue": "CANARY-ARG-91c2", "willContinue": True}
    data = (wire_chunk({"functionCall": {"name": "get_weather", "willContinue": True}})
            + wire_chunk({"functionCall": {"partialArgs": [piece], "willContinue": True}})
            + wire_chunk({"functionCall": {"name": "get_weather", "args": {"a": 1}}},
                         finish="STOP"))
    record = record_of(data)
    calls = record["stream"]["tool_calls"]
    assert [(c["index"], c["arg_chunks"], c["completed"]) for c in calls] == [
        (0, 1, False), (1, 1, True)]
    assert "CANARY" not in json.dumps(record)


def test_a_blocked_prompt_ends_the_stream_with_its_block_reason():
    data = b"data: " + json.dumps({"promptFeedback": {"blockReason": "SAFETY"},
                                   "usageMetadata": {"promptTokenCount": 7}}).encode() + b"\r\n\r\n"
    record = record_of(data)
    assert record["stream"]["finish_reason"] == "SAFETY"
    assert outcome(record) == ("none", "complete")


def test_unmodelled_parts_are_named():
    record = record_of(wire_chunk({"inlineData": {"mimeType": "image/png", "data": "CANARY"}}))
    assert record["stream"]["unknown_types"] == ["inlineData"]
    assert kinds(record) == ["unknown"]


def test_unparseable_frame_is_evidence_and_the_ending_decides():
    data = fixture(DIALECT, "text_complete.sse")
    record = record_of(b"data: {broken\r\n\r\n" + data)
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert outcome(record) == ("none", "complete")
    assert "invalid_json" in record["outcome"]["evidence"]


# -- invariance and redaction ------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_no_content_reaches_the_record(name):
    assert b"CANARY" in fixture(DIALECT, name)
    for upstream in ("complete", "reset"):
        assert "CANARY" not in json.dumps(record_of(name, upstream=upstream))


@pytest.mark.parametrize("name", NAMES)
def test_bytewise_feeding_gives_the_same_record(name):
    assert comparable(record_of(name, chunks="bytewise")) == comparable(record_of(name))


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(1, 64), max_size=120))
def test_any_chunking_gives_the_same_record(name, sizes):
    assert comparable(record_of(name, chunks=sizes)) == comparable(record_of(name))
