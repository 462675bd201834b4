"""openai-chat dialect (OpenAI's Chat Completions streaming reference and the compatible servers
the module docstring names), frame by frame: the exact events, delta keys, finish, usage,
terminal, tool calls, errors, ids and timeline a user sees for each shape of chunk; then
fixtures written from the public docs (samples/README.md, Sources) fed through the Recorder,
checked against the issue 3 classification table, chunking invariance and redaction."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.decode.sse import Frame
from streamtap.diagnostics.dialects import choose_dialect, dialect_class, openai_chat
from streamtap.diagnostics.dialects.openai_chat import OpenAIChat
from streamtap.diagnostics.dialects.stream import StreamState
from tests.support import FIXTURES, comparable, first_frames, fixture, record_stream
from tests.unit.dialect_feed import facts, feed, kinds, sse


DONE = b"data: [DONE]\n\n"


def chunk(delta: dict | None = None, finish=None, usage=None, compact: bool = True,
          **top) -> bytes:
    """A chat chunk in OpenAI's own key order (the byte probe's order when `compact`)."""
    body = {"id": "chatcmpl-u1", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta if delta is not None else {},
                         "logprobs": None, "finish_reason": finish}], "usage": usage, **top}
    if compact:
        return sse(body)
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def run(*frames: bytes, **kwargs) -> dict:
    return feed("openai-chat", list(frames), **kwargs)


def calls(record: dict) -> list[tuple]:
    return [(c["index"], c["name"], c["arg_chunks"], c["arg_bytes"], c["completed"])
            for c in record["stream"]["tool_calls"]]


# -- the terminal ---------------------------------------------------------------------------------
def test_done_is_the_terminal_and_a_meta_event():
    record = run(chunk({"role": "assistant"}), chunk({"content": "a"}), chunk(finish="stop"),
                 DONE)
    assert facts(record) == {
        "event_counts": {"meta": 2, "text_start": 1, "text_delta": 1, "text_end": 1,
                         "finish": 1},
        "delta_keys": ["content"], "finish_reason": "stop", "usage": {}, "terminal": "[DONE]",
        "unknown_types": [], "protocol_errors": {}}
    assert kinds(record) == ["meta", "text_delta", "finish", "meta"]
    timeline = record["timeline"]
    assert (timeline["first_event"], timeline["first_progress"], timeline["last_progress"],
            timeline["terminal_event"]) == (3.0, 4.0, 4.0, 6.0)
    assert record["correlation"]["response_id"] == "chatcmpl-u1"
    assert record["outcome"]["boundary"] == "none"


def test_done_twice_keeps_the_first_terminal_time():
    record = run(chunk(finish="stop"), DONE, DONE)
    assert record["timeline"]["terminal_event"] == 4.0
    assert record["stream"]["event_counts"] == {"finish": 1, "meta": 2}


def test_the_first_id_wins():
    record = run(chunk({"role": "assistant"}, id="chatcmpl-first"),
                 chunk({"content": "a"}, id="chatcmpl-second"))
    assert record["correlation"]["response_id"] == "chatcmpl-first"


# -- text, and the byte probe ---------------------------------------------------------------------
def test_plain_text_chunks_count_one_delta_each():
    record = run(chunk({"content": "a"}), chunk({"content": "b"}), chunk({"content": "c"}))
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 3}
    assert kinds(record) == ["text_delta"] * 3
    assert record["outcome"]["phase"] == "text"


def test_an_empty_content_piece_is_not_progress():
    record = run(chunk({"content": "a"}), chunk({"content": ""}))
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 1, "meta": 1}
    assert kinds(record) == ["text_delta", "meta"]
    assert record["timeline"]["last_progress"] == 3.0


def test_text_with_a_second_field_is_parsed_and_both_count():
    record = run(chunk({"content": "a"}), chunk({"content": "b", "reasoning_content": "r"}))
    assert record["stream"]["delta_keys"] == ["content", "reasoning_content"]
    assert record["stream"]["event_counts"] == {
        "text_start": 2, "text_delta": 2, "text_end": 1, "reasoning_start": 1,
        "reasoning_delta": 1, "reasoning_end": 1}
    assert kinds(record) == ["text_delta", "text_delta"]


def test_text_chunk_with_usage_after_it_counts_the_usage():
    usage = {"prompt_tokens": 5, "completion_tokens": 2}
    record = run(chunk({"content": "a"}), chunk({"content": "b"}, usage=usage))
    assert record["stream"]["usage"] == {"input": 5, "output": 2}
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 2, "usage": 1}
    assert kinds(record) == ["text_delta", "text_delta"]


def test_a_truncated_text_chunk_is_invalid_json_not_text():
    whole = chunk({"content": "a"})
    cut = whole.replace(b"}\n\n", b"\n\n")  # the final brace is missing
    record = run(whole, cut)
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 1, "unknown": 1}
    assert kinds(record) == ["text_delta", "unknown"]


def test_a_chunk_not_from_the_probe_s_key_order_with_an_extra_brace_is_invalid():
    body = b'{"choices":[{"delta":{"content":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},"logprobs":null,' \
           b'"finish_reason":null}]}}'
    record = run(chunk({"content": "a"}), sse(body))
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert kinds(record) == ["text_delta", "unknown"]


def test_probe_only_runs_while_text_is_open():
    # The first text chunk is parsed (no block open), so its id is read.
    record = run(chunk({"content": "a"}, id="chatcmpl-probe"))
    assert record["correlation"]["response_id"] == "chatcmpl-probe"


def test_plain_text_probe_directly():
    probe = OpenAIChat._plain_text
    head, tail = openai_chat.PLAIN_TEXT_HEAD, openai_chat.PLAIN_TEXT_TAIL
    assert probe(b'{"id":"x",' + head + b'hi' + tail + b'}') is True
    assert probe(b'{"id":"x",' + head + b'' + tail + b'}') is False  # empty piece
    assert probe(b'{"id":"x",' + head + b'hi' + tail) is False  # not ending in }
    assert probe(b'{"id":"x",' + head + b'hi","refusal":"x' + tail + b'}') is False
    assert probe(b'{"id":"x",' + head + b'hi' + tail + b',"usage":{"a":1}}') is False
    assert probe(b'{"id":"x",' + head + b'hi' + tail + b',"usage":null}') is True
    assert probe(b'{"error":1,' + head + b'hi' + tail + b'}') is False
    assert probe(b'{"id":"x",' + head + b'hi' + tail + b',"error":{}}') is False
    assert probe(b'{"id":"x","choices":[{"delta":{"content":"hi' + tail + b'}') is False
    assert probe(head[1:] + b'hi' + tail + b'}') is False  # head missing its first byte


# -- reasoning -----------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_reasoning_fields(key):
    record = run(chunk({key: "r"}), chunk({key: "r"}), chunk({"content": "a"}),
                 chunk(finish="stop"))
    assert record["stream"]["delta_keys"] == [key, "content"]
    assert record["stream"]["event_counts"] == {
        "reasoning_start": 1, "reasoning_delta": 2, "reasoning_end": 1, "text_start": 1,
        "text_delta": 1, "text_end": 1, "finish": 1}
    assert kinds(record) == ["reasoning_delta", "reasoning_delta", "text_delta", "finish"]


def test_reasoning_details_with_text_or_summary_is_reasoning():
    text = [{"type": "reasoning.text", "text": "r"}]
    summary = [{"type": "reasoning.summary", "summary": "s"}]
    record = run(chunk({"reasoning_details": text}), chunk({"reasoning_details": summary}))
    assert record["stream"]["delta_keys"] == ["reasoning_details"]
    assert record["stream"]["event_counts"] == {"reasoning_start": 1, "reasoning_delta": 2}


def test_reasoning_details_with_only_encrypted_data_is_meta():
    blob = [{"type": "reasoning.encrypted", "data": "opaque"}, "not-a-dict"]
    record = run(chunk({"reasoning_details": blob}))
    assert record["stream"]["event_counts"] == {"meta": 1}
    assert record["stream"]["delta_keys"] == []
    assert kinds(record) == ["meta"]


def test_reasoning_details_not_a_list_counts_if_truthy():
    record = run(chunk({"reasoning_details": {"text": "r"}}), chunk({"reasoning_details": {}}))
    assert record["stream"]["event_counts"] == {"reasoning_start": 1, "reasoning_delta": 1,
                                                "meta": 1}


def test_typed_parts_in_a_reasoning_field_are_reasoning():
    record = run(chunk({"reasoning": [{"type": "text", "text": "r"}]}))
    assert record["stream"]["delta_keys"] == ["reasoning[].text"]
    assert record["stream"]["event_counts"] == {"reasoning_start": 1, "reasoning_delta": 1}


def test_mistral_thinking_and_text_parts():
    thinking = [{"type": "thinking", "thinking": [{"type": "text", "text": "r"}]}]
    text = [{"type": "text", "text": "a"}, {"type": "reference", "reference_ids": [1]}]
    record = run(chunk({"content": thinking}), chunk({"content": text}), chunk(finish="stop"))
    assert record["stream"]["delta_keys"] == ["content[].thinking", "content[].text"]
    assert record["stream"]["event_counts"] == {
        "reasoning_start": 1, "reasoning_delta": 1, "reasoning_end": 1, "text_start": 1,
        "text_delta": 1, "text_end": 1, "finish": 1}
    assert record["stream"]["unknown_types"] == []


def test_typed_parts_without_words_are_not_progress():
    parts = [{"type": "thinking", "thinking": [{"type": "text", "text": ""}]},
             {"type": "text", "text": ""}, {"type": "text", "text": 5},
             {"type": "thinking", "thinking": ["not-a-part"]}, "not-a-part"]
    record = run(chunk({"content": parts}))
    assert record["stream"]["event_counts"] == {"meta": 1}
    assert record["stream"]["delta_keys"] == []


def test_typed_parts_of_one_type_count_once_per_chunk():
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"},
             {"type": "output_text", "text": "c"}, {"type": "refusal", "refusal": "no"},
             {"type": "reasoning_text", "text": "r"}]
    record = run(chunk({"content": parts}))
    assert record["stream"]["delta_keys"] == ["content[].reasoning_text", "content[].text",
                                              "content[].output_text", "content[].refusal"]
    assert record["stream"]["event_counts"] == {"reasoning_start": 1, "reasoning_delta": 1,
                                                "reasoning_end": 1, "text_start": 1,
                                                "text_delta": 1}


def test_unknown_part_types_are_named():
    record = run(chunk({"content": [{"type": "image_url", "image_url": {}}]}),
                 chunk({"refusal": [{"type": "audio"}]}))
    assert record["stream"]["unknown_types"] == ["content[].image_url", "refusal[].audio"]
    assert record["stream"]["event_counts"] == {"unknown": 2, "meta": 2}


def test_refusal_is_text():
    record = run(chunk({"refusal": "no"}), chunk(finish="stop"))
    assert record["stream"]["delta_keys"] == ["refusal"]
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 1,
                                                "text_end": 1, "finish": 1}


# -- odd chunks -----------------------------------------------------------------------------------
@pytest.mark.parametrize("body", [
    {"id": "chatcmpl-u1", "choices": []},
    {"id": "chatcmpl-u1", "choices": "x"},
    {"id": "chatcmpl-u1", "choices": ["x"]},
    {"id": "chatcmpl-u1", "choices": [{"index": 0, "delta": "x"}]},
    {"id": "chatcmpl-u1", "choices": [{"index": 0, "delta": {}}]},
    {"id": "chatcmpl-u1", "choices": [{"index": 0, "delta": {"role": "assistant",
                                                             "content": None}}]},
])
def test_chunks_with_nothing_to_count_are_meta(body):
    record = run(sse(body))
    assert record["stream"]["event_counts"] == {"meta": 1}
    assert kinds(record) == ["meta"]
    assert record["correlation"]["response_id"] == "chatcmpl-u1"


@pytest.mark.parametrize("data", [b"[1,2]", b'"s"', b"not json"])
def test_a_frame_that_is_no_object_is_unknown(data):
    record = run(sse(data))
    assert record["stream"]["event_counts"] == {"unknown": 1}
    assert record["stream"]["protocol_errors"] == ({"invalid_json": 1} if data == b"not json"
                                                   else {})


# -- usage ----------------------------------------------------------------------------------------
def test_usage_on_its_own_chunk_is_a_usage_frame():
    usage = {"prompt_tokens": 9, "completion_tokens": 4,
             "completion_tokens_details": {"reasoning_tokens": 1},
             "prompt_tokens_details": {"cached_tokens": 2}}
    record = run(chunk(finish="stop"), sse({"id": "chatcmpl-u1", "choices": [], "usage": usage}),
                 DONE)
    assert record["stream"]["usage"] == {"input": 9, "output": 4, "reasoning": 1,
                                         "cache_read": 2}
    assert kinds(record) == ["finish", "usage", "meta"]
    assert record["stream"]["event_counts"] == {"finish": 1, "usage": 1, "meta": 1}


def test_usage_inside_the_choice_and_on_the_finish_chunk():
    inside = {"id": "chatcmpl-u1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop",
                                                "usage": {"prompt_tokens": 3,
                                                          "completion_tokens": 1}}]}
    record = run(sse(inside))
    assert record["stream"]["usage"] == {"input": 3, "output": 1}
    assert kinds(record) == ["finish"]
    assert record["stream"]["event_counts"] == {"usage": 1, "finish": 1}


def test_usage_without_counts_is_no_usage_event():
    record = run(chunk(usage={"total_tokens": 5}), chunk(usage={}))
    assert record["stream"]["usage"] == {}
    assert record["stream"]["event_counts"] == {"meta": 2}


def test_text_with_usage_stays_a_text_frame():
    record = run(chunk({"content": "a"}, usage={"prompt_tokens": 1, "completion_tokens": 1}))
    assert kinds(record) == ["text_delta"]
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 1, "usage": 1}


# -- tool calls -----------------------------------------------------------------------------------
def tool(index=0, name=None, arguments=None, **extra) -> dict:
    function = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    call = {"function": function, **extra}
    if index is not None:
        call["index"] = index
    return call


def test_a_call_in_pieces_completes_on_its_finish():
    record = run(chunk({"content": "a"}),
                 chunk({"tool_calls": [tool(0, "apply_patch", "", id="call_1")]}),
                 chunk({"tool_calls": [tool(0, arguments='{"a":')]}),
                 chunk({"tool_calls": [tool(0, arguments='1}')]}),
                 chunk(finish="tool_calls"), DONE)
    assert calls(record) == [(0, "apply_patch", 2, 7, True)]
    assert record["stream"]["delta_keys"] == ["content", "arguments"]
    assert record["stream"]["event_counts"] == {
        "text_start": 1, "text_delta": 1, "text_end": 1, "tool_input_start": 1,
        "tool_input_delta": 2, "tool_input_end": 1, "tool_call": 1, "finish": 1, "meta": 1}
    assert kinds(record) == ["text_delta", "tool_input_start", "tool_input_delta",
                             "tool_input_delta", "finish", "meta"]
    assert record["stream"]["tool_calls"][0]["started_ms"] == 4.0
    assert record["outcome"]["boundary"] == "none"


@pytest.mark.parametrize("reason, completed", [
    ("tool_calls", True), ("function_call", True), ("stop", True), ("length", False),
    ("content_filter", False)])
def test_which_finish_reasons_complete_an_open_call(reason, completed):
    record = run(chunk({"tool_calls": [tool(0, "apply_patch", '{"a":')]}), chunk(finish=reason))
    assert calls(record) == [(0, "apply_patch", 1, 5, completed)]
    assert record["stream"]["event_counts"].get("tool_call", 0) == int(completed)
    assert record["stream"]["finish_reason"] == reason


def test_a_non_string_finish_reason_completes_nothing():
    record = run(chunk({"tool_calls": [tool(0, "apply_patch", '{"a":')]}), chunk(finish=7))
    assert calls(record) == [(0, "apply_patch", 1, 5, False)]
    assert record["stream"]["finish_reason"] == "7"


def test_a_new_index_completes_the_calls_before_it():
    record = run(chunk({"tool_calls": [tool(0, "apply_patch", '{"a":'), tool(1, "read_file", "")]}),
                 chunk({"tool_calls": [tool(1, arguments='{"b":1}')]}),
                 chunk({"tool_calls": [tool(2, "other", '{"c":')]}))
    assert calls(record) == [(0, "apply_patch", 1, 5, True), (1, "read_file", 1, 7, True),
                             (2, None, 1, 5, False)]
    assert kinds(record) == ["tool_input_start", "tool_input_delta", "tool_input_start"]
    assert record["stream"]["event_counts"] == {"tool_input_start": 3, "tool_input_delta": 3,
                                                "tool_input_end": 2, "tool_call": 2}
    assert record["outcome"]["phase"] == "tool_input"


def test_calls_without_index_take_their_position_and_bool_is_no_index():
    record = run(chunk({"tool_calls": [tool(None, "apply_patch", ""), tool(True, "read_file", "")]}))
    assert calls(record) == [(0, "apply_patch", 0, 0, True), (1, "read_file", 0, 0, False)]


def test_a_call_without_a_function_object_still_starts():
    record = run(chunk({"tool_calls": [{"index": 0, "function": "x"}, "not-a-call"]}))
    assert calls(record) == [(0, None, 0, 0, False)]
    assert kinds(record) == ["tool_input_start"]


@pytest.mark.parametrize("arguments, whole, nbytes", [
    ({"a": 1}, True, 8), ('{"a": 1}', True, 8), ('{"a": 1}  ', True, 10), ("{}", True, 2),
    ('{"a": 1', False, 7), ('{"a"}', False, 5), ("[1]", False, 3), ('"{}"', False, 4),
    ("{ 1 }", False, 5), ("x}", False, 2)])
def test_a_call_that_arrives_whole_completes_at_once(arguments, whole, nbytes):
    record = run(chunk({"tool_calls": [tool(0, "apply_patch", arguments)]}))
    assert calls(record) == [(0, "apply_patch", 1, nbytes, whole)]
    assert kinds(record) == ["tool_call" if whole else "tool_input_start"]
    counts = record["stream"]["event_counts"]
    assert counts.get("tool_call", 0) == counts.get("tool_input_end", 0) == int(whole)


def test_whole_arguments_after_the_first_piece_do_not_complete():
    record = run(chunk({"tool_calls": [tool(0, "apply_patch", "")]}),
                 chunk({"tool_calls": [tool(0, arguments='{"a":1}')]}))
    assert calls(record) == [(0, "apply_patch", 1, 7, False)]
    assert kinds(record) == ["tool_input_start", "tool_input_delta"]


def test_legacy_function_call():
    record = run(chunk({"function_call": {"name": "apply_patch", "arguments": ""}}),
                 chunk({"function_call": {"arguments": "{}"}}), chunk(finish="function_call"))
    assert calls(record) == [(0, "apply_patch", 1, 2, True)]
    assert kinds(record) == ["tool_input_start", "tool_input_delta", "finish"]


def test_tool_calls_win_over_an_empty_function_call_and_not_a_list_is_ignored():
    record = run(chunk({"tool_calls": [tool(3, "read_file", "")], "function_call": {}}),
                 chunk({"tool_calls": {"index": 0}}))
    assert calls(record) == [(3, "read_file", 0, 0, False)]
    assert kinds(record) == ["tool_input_start", "meta"]


def test_a_tool_call_closes_the_text_block():
    record = run(chunk({"content": "a"}), chunk({"tool_calls": [tool(0, "apply_patch", "")]}),
                 chunk({"content": "b"}))
    assert record["stream"]["event_counts"] == {"text_start": 2, "text_delta": 2,
                                                "text_end": 1, "tool_input_start": 1}


def test_text_and_a_whole_call_in_one_chunk_is_a_tool_call_frame():
    record = run(chunk({"content": "a", "tool_calls": [tool(0, "apply_patch", "{}")]}))
    assert kinds(record) == ["tool_call"]


# -- errors ---------------------------------------------------------------------------------------
def test_a_bare_error_chunk():
    record = run(chunk({"content": "a"}),
                 sse({"error": {"message": "overloaded", "type": "server_error",
                                "code": "server_error"}}))
    assert record["stream"]["errors"] == [{"shape": "wrapped_chunk", "t_ms": 4.0,
                                           "type": "server_error", "code": "server_error",
                                           "message": "overloaded"}]
    assert kinds(record) == ["text_delta", "error"]
    assert record["outcome"]["boundary"] == "provider_error"
    assert record["outcome"]["phase"] == "text"


def test_text_and_a_top_level_error_in_one_compact_chunk():
    record = run(chunk({"content": "a"}),
                 chunk({"content": "b"}, error={"message": "m", "type": "t"}))
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 2, "error": 1}
    assert [e["type"] for e in record["stream"]["errors"]] == ["t"]
    assert kinds(record) == ["text_delta", "error"]


def test_openrouter_finish_reason_error_with_usage():
    body = {"id": "gen-1", "choices": [{"index": 0, "delta": {"content": ""},
                                        "finish_reason": "error"}],
            "error": {"message": "provider down", "type": "upstream_error", "code": 502},
            "usage": {"prompt_tokens": 4, "completion_tokens": 2}}
    record = run(chunk({"content": "a"}), sse(body))
    assert record["stream"]["errors"] == [{"shape": "finish_reason_error", "t_ms": 4.0,
                                           "type": "upstream_error", "code": "502",
                                           "message": "provider down"}]
    assert record["stream"]["finish_reason"] == "error"
    assert record["stream"]["usage"] == {"input": 4, "output": 2}
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 1, "usage": 1,
                                                "error": 1}
    assert kinds(record) == ["text_delta", "error"]
    assert record["outcome"]["phase"] == "text"


@pytest.mark.parametrize("error, fields", [
    ("went away", (None, None, "went away")),
    (None, (None, None, None)),
    ({}, (None, None, None)),
    (["x"], (None, None, None)),
])
def test_finish_reason_error_with_other_error_values(error, fields):
    body = {"id": "gen-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "error"}]}
    if error is not None:
        body["error"] = error
    record = run(sse(body))
    errors = record["stream"]["errors"]
    assert [(e["shape"], e["type"], e["code"], e["message"]) for e in errors] == [
        ("finish_reason_error", *fields)]
    assert record["stream"]["finish_reason"] == "error"
    assert "finish" not in record["stream"]["event_counts"]


# -- direct --------------------------------------------------------------------------------------
def test_terminal_names_and_the_completing_reasons():
    assert OpenAIChat.terminal_names == ("[DONE]",)
    assert openai_chat.COMPLETING_FINISH_REASONS == {"tool_calls", "function_call", "stop"}


def test_on_frame_returns_each_frame_s_kind():
    state = StreamState()
    dialect = OpenAIChat(state)
    frame = lambda data: Frame(data=data, size=len(data))  # noqa: E731
    assert dialect.on_frame(frame(b"[DONE]"), 1.0) == "meta"
    assert state.terminal == "[DONE]" and state.terminal_ms == 1.0


# -- what the survivors of a mutation run showed unpinned -----------------------------------------
def test_a_reasoning_typed_part_is_reasoning():
    record = run(chunk({"content": [{"type": "reasoning", "text": "r"}]}))
    assert record["stream"]["delta_keys"] == ["content[].reasoning"]
    assert record["stream"]["event_counts"] == {"reasoning_start": 1, "reasoning_delta": 1}


def test_arguments_with_leading_whitespace_are_a_first_piece_not_a_whole_call():
    # Only a piece that starts with `{` is checked as a whole object (Ollama writes it compact).
    record = run(chunk({"tool_calls": [tool(0, "apply_patch", ' {"a":1}')]}))
    assert calls(record) == [(0, "apply_patch", 1, 8, False)]


def test_the_probe_finds_the_head_anywhere_and_an_error_key_anywhere():
    probe = OpenAIChat._plain_text
    head, tail = openai_chat.PLAIN_TEXT_HEAD, openai_chat.PLAIN_TEXT_TAIL
    assert probe(head + b"hi" + tail + b"}") is True  # not validated: it is a probe
    assert probe(b'"error":1,' + head + b"hi" + tail + b"}") is False


def test_tool_calls_that_are_empty_or_not_a_list_leave_the_text_block_open():
    record = run(chunk({"content": "a"}), chunk({"tool_calls": []}),
                 chunk({"tool_calls": {"index": 0}}), chunk({"content": "b"}))
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 2, "meta": 2}
    assert kinds(record) == ["text_delta", "meta", "meta", "text_delta"]


def test_the_most_telling_call_event_names_the_frame():
    record = run(chunk({"tool_calls": [tool(0, "apply_patch", "{}"), tool(1, "read_file", "")]}),
                 chunk({"tool_calls": [tool(1, arguments='{"b":'), tool(0)]}),
                 chunk({"content": "a", "tool_calls": [tool(1)]}))
    assert kinds(record) == ["tool_call", "tool_input_delta", "text_delta"]
    assert calls(record) == [(0, "apply_patch", 1, 2, True), (1, "read_file", 1, 5, False)]


def test_a_whole_call_past_the_cap_is_not_counted_as_a_call():
    many = [tool(i, "apply_patch", "{}") for i in range(257)]
    record = run(chunk({"tool_calls": many[:256]}), chunk({"tool_calls": many[256:]}))
    assert len(record["stream"]["tool_calls"]) == 256
    assert record["stream"]["event_counts"]["tool_call"] == 256
    assert record["stream"]["event_counts"]["tool_input_start"] == 257
    assert kinds(record) == ["tool_call", "tool_input_start"]


# -- one stream with every shape, fed straight to the dialect in many chunkings -------------------
def _sink_stream() -> bytes:
    role = {"role": "assistant"}
    frames = [
        chunk(role, id="chatcmpl-sink"), chunk(role, id="chatcmpl-later"),
        sse({"id": "chatcmpl-sink", "choices": [{"index": 0, "delta": "x"}]}),
        chunk({"reasoning_content": "r"}), chunk({"reasoning": "r"}),
        chunk({"reasoning_details": [{"type": "reasoning.text", "text": "r"}]}),
        chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "d"}]}),
        chunk({"content": "a"}), chunk({"content": ""}), chunk({"refusal": "no"}),
        chunk({"content": "b"}, error={"message": "m", "type": "server_error"}),
        chunk({"content": "c"}), chunk({"tool_calls": []}), chunk({"content": "d"}),
        chunk({"tool_calls": [tool(0, "apply_patch", "{}"), tool(1, "read_file", "")]}),
        chunk({"tool_calls": [tool(2, "apply_patch", ' {"a":1}')]}),
        chunk(finish="tool_calls"), chunk(finish="error"), DONE]
    return b"".join(frames)


@pytest.mark.parametrize("size", [0, 1, 7, 13, 29, 31, 64, 97, 101, 128, 199, 256, 311, 400, 512,
                                  777, 1024, 1500, 2048, 4096])
def test_every_shape_in_one_stream_in_any_chunking(size):
    from streamtap.diagnostics.decode.sse import SseDecoder

    data = _sink_stream()
    pieces = [data] if size == 0 else [data[i:i + size] for i in range(0, len(data), size)]
    state, decoder = StreamState(frozenset({"apply_patch", "read_file"})), SseDecoder()
    dialect = OpenAIChat(state)
    frame_kinds = [dialect.on_frame(frame, 1.0) for piece in pieces
                   for frame in decoder.feed(piece)]
    assert frame_kinds == [
        "meta", "meta", "meta", "reasoning_delta", "reasoning_delta", "reasoning_delta", "meta",
        "text_delta", "meta", "text_delta", "error", "text_delta", "meta", "text_delta",
        "tool_call", "tool_input_start", "finish", "error", "meta"]
    assert state.response_id == "chatcmpl-sink"
    assert state.delta_keys == ["reasoning_content", "reasoning", "reasoning_details",
                                "content", "refusal", "arguments"]
    assert state.errors == [{"shape": "wrapped_chunk", "t_ms": 1.0, "type": "server_error",
                             "code": None, "message": "m"},
                            {"shape": "finish_reason_error", "t_ms": 1.0, "type": None,
                             "code": None, "message": None}]
    assert [(c.index, c.name, c.arg_chunks, c.arg_bytes, c.completed)
            for c in state.tool_calls.values()] == [
        (0, "apply_patch", 1, 2, True), (1, "read_file", 0, 0, True),
        (2, "apply_patch", 1, 8, True)]
    assert state.event_counts == {
        "meta": 7, "reasoning_start": 1, "reasoning_delta": 3, "reasoning_end": 1,
        "text_start": 1, "text_delta": 5, "error": 2, "text_end": 1, "tool_input_start": 3,
        "tool_input_delta": 2, "tool_input_end": 3, "tool_call": 3, "finish": 1}
    assert (state.finish_reason, state.terminal) == ("error", "[DONE]")


# -- whole streams: fixtures from the public docs, through the Recorder ---------------------------
DIALECT = "openai-chat"
PATH = "/v1/chat/completions"
TOOLS_REQUEST = {"model": "gpt-x", "stream": True,
                 "tools": [{"type": "function", "function": {"name": "apply_patch"}}]}
NAMES = sorted(path.name for path in (FIXTURES / DIALECT).iterdir())
TOOL_PIECES = ['{"patch":"', "CANARY-ARG-91c2", " ", "CANARY-ARG-91c2", '"}']


def record_of(data: bytes | str, request: dict | None = None, **kwargs) -> dict:
    if isinstance(data, str):
        data = fixture(DIALECT, data)
    return record_stream(data, path=PATH, request=request or TOOLS_REQUEST, **kwargs)


def choice_chunk(usage: dict | None = None, **choice) -> bytes:
    """One chat chunk as an SSE frame, compact and in OpenAI's key order; `choice` fields go
    into choices[0]."""
    body = {"id": "chatcmpl-inline", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": None,
                         **choice}], "usage": usage}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def outcome(record: dict) -> tuple:
    return record["outcome"]["boundary"], record["outcome"]["phase"]


# -- the registry -----------------------------------------------------------------------------
def test_registry_finds_the_dialect_by_name_and_path():
    assert dialect_class("openai-chat") is OpenAIChat
    assert choose_dialect(None, PATH, "text/event-stream; charset=utf-8") is OpenAIChat
    assert OpenAIChat.terminal_names == ("[DONE]",)


# -- complete streams ---------------------------------------------------------------------------
def test_complete_text_stream():
    record = record_of("text_complete.sse")
    stream = record["stream"]
    assert record["dialect"] == "openai-chat"
    assert outcome(record) == ("none", "complete") and record["outcome"]["ok"] is True
    assert stream["terminal"] == "[DONE]"
    assert stream["finish_reason"] == "stop"
    assert stream["usage"] == {"input": 12, "output": 3, "reasoning": 0, "cache_read": 4}
    assert stream["event_counts"] == {"meta": 2, "text_start": 1, "text_delta": 3, "text_end": 1,
                                      "finish": 1, "usage": 1}
    assert stream["delta_keys"] == ["content"]
    assert record["correlation"]["response_id"] == "chatcmpl-fx1"
    assert [entry[2] for entry in record["frames"]] == [
        "meta", "text_delta", "text_delta", "text_delta", "finish", "usage", "meta"]
    assert stream["protocol_errors"] == {} and stream["errors"] == []


def test_data_without_space_and_obfuscation_fields_change_nothing():
    data = fixture(DIALECT, "text_complete.sse")
    assert b"data:{" in data and b'"obfuscation"' in data
    squeezed = record_of(data.replace(b"data: ", b"data:"))["stream"]
    spaced = record_of(data.replace(b"data:{", b"data: {"))["stream"]
    assert squeezed["bytes"] != spaced["bytes"]
    squeezed.pop("bytes"), spaced.pop("bytes")
    assert squeezed == spaced
    assert spaced["event_counts"]["text_delta"] == 3


def test_deepseek_reasoning_content_and_usage_on_the_finish_chunk():
    record = record_of("reasoning_deepseek.sse")
    stream = record["stream"]
    assert outcome(record) == ("none", "complete")
    assert stream["delta_keys"] == ["reasoning_content", "content"]
    assert stream["event_counts"] == {"keepalive": 2, "meta": 2, "reasoning_start": 1,
                                      "reasoning_delta": 2, "reasoning_end": 1, "text_start": 1,
                                      "text_delta": 2, "text_end": 1, "usage": 1, "finish": 1}
    # DeepSeek spells cached input `prompt_cache_hit_tokens`.
    assert stream["usage"] == {"input": 20, "output": 9, "reasoning": 5, "cache_read": 8}
    assert [entry[2] for entry in record["frames"]][:4] == [
        "keepalive", "meta", "reasoning_delta", "reasoning_delta"]


def test_openrouter_reasoning_and_reasoning_details():
    record = record_of("reasoning_openrouter.sse")
    stream = record["stream"]
    assert outcome(record) == ("none", "complete")
    assert stream["delta_keys"] == ["reasoning", "reasoning_details", "content"]
    # Both fields in one chunk are one delta; an encrypted-only detail is meta, not progress.
    assert stream["event_counts"]["reasoning_delta"] == 2
    assert [entry[2] for entry in record["frames"]][4] == "meta"
    assert stream["usage"]["reasoning"] == 3
    assert record["correlation"]["response_id"] == "gen-fx3"


def test_moonshot_usage_inside_the_choice():
    stream = record_of("moonshot_usage.sse")["stream"]
    assert stream["usage"] == {"input": 30, "output": 6}
    assert stream["delta_keys"] == ["reasoning_content", "content"]
    assert stream["finish_reason"] == "stop"


def test_complete_tool_call_in_pieces():
    record = record_of("tool_call.sse")
    stream = record["stream"]
    assert outcome(record) == ("none", "complete")
    assert stream["finish_reason"] == "tool_calls"
    assert stream["tool_calls"] == [{
        "index": 0, "name": "apply_patch", "started_ms": 2.0, "arg_chunks": 5,
        "arg_bytes": sum(len(piece.encode()) for piece in TOOL_PIECES), "arg_parsed": True,
        "arg_unchecked": None, "completed": True}]
    assert stream["event_counts"]["tool_input_delta"] == 5
    assert stream["event_counts"]["tool_call"] == 1
    assert stream["delta_keys"] == ["arguments"]


def test_next_index_completes_the_previous_call():
    cut = first_frames(fixture(DIALECT, "two_tools.sse"), 5)  # ... up to index 1's start
    record = record_of(cut, upstream="reset")
    calls = record["stream"]["tool_calls"]
    assert [(call["index"], call["completed"]) for call in calls] == [(0, True), (1, False)]
    assert calls[1]["name"] is None  # `read_file` was not defined by the request
    assert outcome(record) == ("transport", "tool_input")
    whole = record_of("two_tools.sse")["stream"]
    assert whole["event_counts"]["tool_call"] == 2
    assert all(call["completed"] for call in whole["tool_calls"])


def test_finish_reason_length_leaves_the_call_incomplete():
    record = record_of("tool_length.sse")
    stream = record["stream"]
    assert stream["finish_reason"] == "length"
    assert stream["tool_calls"][0]["completed"] is False
    assert "tool_call" not in stream["event_counts"]
    assert outcome(record) == ("none", "complete")


def test_ollama_whole_call_in_one_chunk():
    record = record_of("ollama_whole_call.sse")
    stream = record["stream"]
    assert [entry[2] for entry in record["frames"]][1] == "tool_call"
    assert stream["tool_calls"][0]["completed"] is True
    assert stream["tool_calls"][0]["arg_chunks"] == 1
    assert stream["delta_keys"] == ["reasoning", "arguments"]
    assert stream["event_counts"]["tool_call"] == 1  # the finish does not complete it twice


def test_legacy_function_call_completes_on_function_call_finish():
    data = (choice_chunk(delta={"function_call": {"name": "apply_patch", "arguments": ""}})
            + choice_chunk(delta={"function_call": {"arguments": '{"a":'}})
            + choice_chunk(delta={"function_call": {"arguments": "1}"}})
            + choice_chunk(finish_reason="function_call") + b"data: [DONE]\n\n")
    stream = record_of(data)["stream"]
    assert stream["tool_calls"][0]["completed"] is True
    assert stream["tool_calls"][0]["arg_chunks"] == 2


def test_tool_name_the_request_did_not_define_is_not_recorded():
    record = record_of("ollama_whole_call.sse", request={"model": "m", "stream": True})
    assert record["stream"]["tool_calls"][0]["name"] is None


# -- the classification rows -------------------------------------------------------------------
@pytest.mark.parametrize("partial", [0, 40])  # on a frame boundary; 40 bytes into the next
def test_reset_mid_text(partial):
    data = fixture(DIALECT, "text_complete.sse")
    cut = first_frames(data, 3)
    record = record_of(data[:len(cut) + partial], upstream="reset")
    assert ("unterminated_frame" in record["outcome"]["evidence"]) == bool(partial)
    assert outcome(record) == ("transport", "text")
    assert record["outcome"]["retryable"] is True
    assert "upstream_reset" in record["outcome"]["evidence"]


def test_reset_after_tool_input_deltas_without_tool_call():
    record = record_of(first_frames(fixture(DIALECT, "tool_call.sse"), 7), upstream="reset")
    stream = record["stream"]
    assert outcome(record) == ("transport", "tool_input")
    assert stream["event_counts"]["tool_input_delta"] == 5
    assert "tool_call" not in stream["event_counts"]
    assert stream["tool_calls"][0]["completed"] is False
    # the five pieces are the whole arguments: only the finish was missing (issue 21, item 6)
    assert ("`apply_patch` had arrived whole (43 bytes in 5 chunks) but the call was never "
            "finalized: no finish_reason, so no tool ran") in record["outcome"]["summary"]


def test_clean_end_after_tool_input_deltas():
    record = record_of(first_frames(fixture(DIALECT, "tool_call.sse"), 7))
    assert outcome(record) == ("provider_close", "tool_input")
    assert record["outcome"]["retryable"] is True
    assert {"clean_close", "no_terminal_event"} <= set(record["outcome"]["evidence"])


@pytest.mark.parametrize("frames", [5, 6])  # after the finish chunk; after finish and usage
def test_clean_end_after_finish_before_done(frames):
    record = record_of(first_frames(fixture(DIALECT, "text_complete.sse"), frames))
    assert outcome(record) == ("provider_close", "after_finish")
    assert record["outcome"]["retryable"] is False
    assert "finish_reason_seen" in record["outcome"]["evidence"]
    assert record["stream"]["finish_reason"] == "stop" and record["stream"]["terminal"] is None


def test_openai_mid_stream_error_chunk():
    record = record_of("openai_error_chunk.sse")
    stream = record["stream"]
    assert outcome(record) == ("provider_error", "text")
    assert record["outcome"]["retryable"] is True
    assert stream["errors"][0]["shape"] == "wrapped_chunk"
    assert stream["errors"][0]["type"] == "server_error"
    assert stream["terminal"] is None and stream["event_counts"]["error"] == 1


def test_openrouter_finish_reason_error_stays_in_the_phase_before_it():
    record = record_of("openrouter_error_finish.sse")
    stream = record["stream"]
    assert outcome(record) == ("provider_error", "text")
    assert stream["finish_reason"] == "error"
    assert "finish" not in stream["event_counts"]
    error = stream["errors"][0]
    assert (error["shape"], error["code"], error["message"]) == (
        "finish_reason_error", "502", "Provider returned error")
    # Mid-reasoning, the same chunk leaves the phase at reasoning.
    error_frame = fixture(DIALECT, "openrouter_error_finish.sse").split(b"\n\n")[3] + b"\n\n"
    reasoning = first_frames(fixture(DIALECT, "reasoning_openrouter.sse"), 3) + error_frame
    assert outcome(record_of(reasoning)) == ("provider_error", "reasoning")


def test_finish_reason_error_without_an_error_object():
    record = record_of(choice_chunk(delta={"content": "CANARY-OUTPUT-7f3a"})
                       + choice_chunk(finish_reason="error"))
    assert outcome(record) == ("provider_error", "text")
    assert record["stream"]["errors"][0]["shape"] == "finish_reason_error"
    assert record["stream"]["finish_reason"] == "error"


def test_unparseable_json_in_one_frame_of_a_fine_stream():
    record = record_of("invalid_json.sse")
    assert outcome(record) == ("none", "complete")
    assert "invalid_json" in record["outcome"]["evidence"]
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert record["stream"]["event_counts"]["text_delta"] == 3


@pytest.mark.parametrize("data", [b"", b": OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\n"])
def test_headers_then_clean_end_without_events(data):
    record = record_of(data)
    assert outcome(record) == ("provider_close", "before_progress")
    assert record["outcome"]["retryable"] is True


def test_reset_right_after_a_whole_call():
    record = record_of(first_frames(fixture(DIALECT, "ollama_whole_call.sse"), 2), upstream="reset")
    assert outcome(record) == ("transport", "after_tool_call")
    assert "right after tool call `apply_patch` completed" in record["outcome"]["summary"]


# -- the byte probe for plain text chunks ------------------------------------------------------
def without_probe(monkeypatch) -> None:
    monkeypatch.setattr(openai_chat, "PLAIN_TEXT_HEAD", b"\x00no chunk has this")


@pytest.mark.parametrize("name", NAMES)
def test_byte_probe_agrees_with_parsing(name, monkeypatch):
    data = fixture(DIALECT, name)
    probed = comparable(record_of(data))
    without_probe(monkeypatch)
    assert comparable(record_of(data)) == probed


def test_byte_probe_skips_parsing_of_plain_text_chunks(monkeypatch):
    parsed = []
    real = openai_chat.load_json
    monkeypatch.setattr(openai_chat, "load_json", lambda data, state: parsed.append(1) or real(
        data, state))
    record_of("text_complete.sse")
    assert len(parsed) == 4  # role, first text, finish, usage; two text chunks and [DONE] probed


def test_byte_probe_is_not_fooled_by_text_that_looks_like_json(monkeypatch):
    tricky = ['"},"logprobs":null,"finish_reason":null}]', 'a": "b', '"usage":{"prompt_tokens":9}',
              '"error":{"type":"x"}']
    data = (choice_chunk(delta={"content": "CANARY-OUTPUT-7f3a"})
            + b"".join(choice_chunk(delta={"content": text}) for text in tricky)
            + choice_chunk(delta={"content": "x", "refusal": "CANARY-OUTPUT-7f3a"})
            + choice_chunk(delta={"content": "x"},
                           usage={"prompt_tokens": 7, "completion_tokens": 1})
            + choice_chunk(delta={"content": "x", "tool_calls": [
                {"index": 0, "function": {"name": "apply_patch", "arguments": ""}}]})
            + choice_chunk(finish_reason="stop") + b"data: [DONE]\n\n")
    probed = record_of(data)
    stream = probed["stream"]
    assert stream["event_counts"]["text_delta"] == 8
    assert stream["delta_keys"] == ["content", "refusal"]
    assert stream["usage"] == {"input": 7, "output": 1}
    assert stream["errors"] == [] and len(stream["tool_calls"]) == 1
    without_probe(monkeypatch)
    assert comparable(record_of(data)) == comparable(probed)


# -- invariants ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("upstream", ["complete", "reset"])
def test_no_canary_reaches_the_record(name, upstream):
    data = fixture(DIALECT, name)
    assert b"CANARY" in data
    for cut in (data, first_frames(data, 3)):
        assert "CANARY" not in json.dumps(record_of(cut, upstream=upstream))


@pytest.mark.parametrize("name", NAMES)
def test_bytewise_equals_whole(name):
    data = fixture(DIALECT, name)
    assert comparable(record_of(data, chunks="bytewise")) == comparable(record_of(data))


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 64), max_size=120))
def test_random_chunkings_equal_whole(name, sizes):
    data = fixture(DIALECT, name)
    assert comparable(record_of(data, chunks=sizes)) == comparable(record_of(data))


# -- facts no other test pinned -------------------------------------------------------------------
def test_a_tool_call_ended_by_finish_reason_stop_is_complete():
    call = choice_chunk(delta={"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                        "function": {"name": "apply_patch", "arguments": "{}"}}]})
    record = record_of(call + choice_chunk(finish_reason="stop") + b"data: [DONE]\n\n")
    assert record["stream"]["tool_calls"] == [{"index": 0, "name": "apply_patch",
                                               "started_ms": 2.0, "arg_chunks": 1,
                                               "arg_bytes": 2, "arg_parsed": True,
                                               "arg_unchecked": None, "completed": True}]
    assert record["stream"]["event_counts"]["tool_call"] == 1
    cut = record_of(call + choice_chunk(finish_reason="stop"), upstream="reset")
    assert outcome(cut) == ("transport", "after_finish")  # not "while writing a tool call"


def test_a_chunk_with_text_and_a_top_level_error_keeps_the_error():
    body = {"id": "chatcmpl-x", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": "CANARY-OUTPUT-7f3a"},
                         "finish_reason": None}],
            "error": {"message": "upstream overloaded", "type": "server_error", "code": 503}}
    record = record_of(choice_chunk(delta={"content": "hi"}) + b"data: " + json.dumps(body).encode()
                       + b"\n\n")
    assert record["stream"]["errors"] == [{"shape": "wrapped_chunk", "t_ms": 2.0,
                                           "type": "server_error", "code": "503",
                                           "message": "upstream overloaded"}]
    assert record["outcome"]["summary"] == ("openai sent an error inside the stream "
                                            "(server_error), as a wrapped chunk, while the "
                                            "model was writing its answer. Only a client that "
                                            "reads the stream's events sees this error; one "
                                            "that does not (a plain fetch, a gateway) sees a "
                                            "200 stream that just ended.")
    assert record["outcome"]["retryable"] is True


def test_timeline_first_event_skips_keepalives():
    keepalive, role = b": keep-alive\n\n", choice_chunk(delta={"role": "assistant"})
    record = record_of(keepalive + role + choice_chunk(delta={"content": "hi"}),
                       chunks=[len(keepalive), len(role)], t_step=10.0)
    timeline = record["timeline"]
    assert (timeline["first_byte"], timeline["first_event"], timeline["first_progress"]) == (
        12.0, 22.0, 32.0)
