"""gemini dialect, chunk by chunk (Gemini API `streamGenerateContent` reference): the exact
events, delta keys, finish, usage, terminal, function calls (whole and Vertex streamed
arguments), code execution, errors, ids and timeline a user sees."""

from __future__ import annotations

import pytest

from streamtap.diagnostics.dialects.gemini import Gemini, GeminiArray
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
