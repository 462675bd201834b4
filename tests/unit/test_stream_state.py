"""diagnostics/dialects/stream.py: what a dialect can write into a record, and its caps."""

from __future__ import annotations

import pytest

from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.dialects import stream
from streamtap.diagnostics.dialects.stream import StreamState, ToolCall, token


@pytest.mark.parametrize("value, expected", [
    (None, None), ("", None), (0, "0"), (5, "5"), (1.5, "1.5"), (True, "<non-token>"),
    ("stop", "stop"), ("a_b.c:d/e-F9", "a_b.c:d/e-F9"), ("t" * 64, "t" * 64),
    ("t" * 65, "<non-token>"), ("two words", "<non-token>"), ("naïve", "<non-token>"),
    (["stop"], "<non-token>"),
])
def test_token(value, expected):
    assert token(value) == expected


def test_the_caps():
    assert (stream.MAX_ERRORS, stream.MAX_UNKNOWN_TYPES, stream.MAX_TOOL_CALLS,
            stream.MAX_DELTA_KEYS) == (20, 20, 256, 16)


def test_tool_call_as_dict():
    call = ToolCall(2, "apply_patch", 12.345)
    call.arg_chunks, call.arg_bytes, call.completed = 3, 40, True
    assert call.as_dict() == {"index": 2, "name": "apply_patch", "started_ms": 12.3,
                              "arg_chunks": 3, "arg_bytes": 40, "arg_parsed": None,
                              "arg_unchecked": None, "completed": True}


def test_emit_counts_and_moves_the_clocks_and_the_phase():
    state = StreamState()
    state.emit(ev.KEEPALIVE, 1.0)
    assert state.first_event_ms is None and state.phase == ev.BEFORE_PROGRESS
    state.emit(ev.META, 2.0)
    assert state.first_event_ms == 2.0 and state.first_progress_ms is None
    state.emit(ev.REASONING_DELTA, 3.0)
    state.emit(ev.TEXT_DELTA, 4.0)
    assert (state.first_event_ms, state.first_progress_ms, state.last_progress_ms) == (2.0, 3.0,
                                                                                       4.0)
    assert state.phase == ev.TEXT
    state.emit(ev.ERROR, 5.0)
    state.emit(ev.USAGE, 6.0)
    assert state.phase == ev.TEXT and state.last_progress_ms == 4.0
    state.emit(ev.TOOL_CALL, 7.0)
    assert state.phase == ev.AFTER_TOOL_CALL and state.last_progress_ms == 7.0
    state.emit(ev.FINISH, 8.0)
    assert state.phase == ev.AFTER_FINISH
    assert state.event_counts == {"keepalive": 1, "meta": 1, "reasoning_delta": 1,
                                  "text_delta": 1, "error": 1, "usage": 1, "tool_call": 1,
                                  "finish": 1}


def test_delta_keys_are_names_deduplicated_and_capped():
    state = StreamState()
    for key in ["content", "content", "", "reasoning_content"] + [f"k{i}" for i in range(20)]:
        state.delta_key(key)
    assert state.delta_keys[:3] == ["content", "<empty>", "reasoning_content"]
    assert len(state.delta_keys) == 16 and state.delta_keys[-1] == "k12"


def test_unknown_types_count_as_events_and_are_capped():
    state = StreamState()
    state.unknown_type(None, 1.0)
    state.unknown_type("new.kind", 1.0)
    state.unknown_type("new.kind", 1.0)
    for i in range(30):
        state.unknown_type(f"t{i}", 1.0)
    assert state.unknown_types[:2] == ["<none>", "new.kind"]
    assert len(state.unknown_types) == 20 and state.unknown_types[-1] == "t17"
    assert state.event_counts == {"unknown": 33}


def test_the_first_terminal_wins_and_finish_reasons_are_tokens():
    state = StreamState()
    state.set_terminal("[DONE]", 5.0)
    state.set_terminal("message_stop", 6.0)
    assert (state.terminal, state.terminal_ms) == ("[DONE]", 5.0)
    state.set_finish_reason("tool_calls")
    assert state.finish_reason == "tool_calls"
    state.set_finish_reason("The model said so")
    assert state.finish_reason == "<non-token>"


@pytest.mark.parametrize("value, expected", [
    ("chatcmpl-Abc123", "chatcmpl-Abc123"),
    ("chatcmpl_Abc", "chatcmpl_Abc"),
    ("resp_" + "a1" * 30, "resp_" + "a1" * 30),
    ("msg_01XFDUDYJgAACzvnptvVoYEL", "msg_01XFDUDYJgAACzvnptvVoYEL"),
    ("gen-1730000000-abc", "gen-1730000000-abc"),
    ("chatcmpl-" + "x" * 200, "chatcmpl-" + "x" * 119),
    ("sk-abcdefghijklmnop", "[REDACTED]"),
    ("plain id", "plain id"),
    ("", None),
    (12345, None),
])
def test_response_ids(value, expected):
    state = StreamState()
    state.set_response_id(value)
    assert state.response_id == expected


def test_the_first_response_id_wins():
    state = StreamState()
    state.set_response_id("resp_1")
    state.set_response_id("resp_2")
    assert state.response_id == "resp_1"


def test_usage_keeps_integers_only_and_later_counts_overwrite():
    state = StreamState()
    state.set_usage(input=10, output=True, reasoning=1.5, cache_read=None)
    state.set_usage(input=12, output=3)
    assert state.usage == {"input": 12, "output": 3}


def test_protocol_errors_are_counted():
    state = StreamState()
    for code in ("bad_json", "bad_json", "overlong_line"):
        state.protocol_error(code)
    assert state.protocol_errors == {"bad_json": 2, "overlong_line": 1}


def test_stream_errors_are_tokens_and_a_scrubbed_capped_message():
    state = StreamState()
    state.stream_error("error_event", 12.345, type="overloaded_error", code=529,
                       message="key sk-abcdefghijklmnop " + "m. " * 150)
    state.stream_error("wrapped_chunk", 13.0, type="two words", code=None, message=5)
    state.stream_error("wrapped_chunk", 14.0, message="")
    assert state.errors[0] == {"shape": "error_event", "t_ms": 12.3, "type": "overloaded_error",
                               "code": "529",
                               # one short sentence, the key gone (redaction/messages.py)
                               "message": "key [REDACTED] m."}
    assert state.errors[1] == {"shape": "wrapped_chunk", "t_ms": 13.0, "type": "<non-token>",
                               "code": None, "message": None}
    assert state.errors[2]["message"] is None


def test_stream_errors_are_capped_but_still_counted():
    state = StreamState()
    for i in range(25):
        state.stream_error("error_event", float(i))
    assert len(state.errors) == 20 and state.errors[-1]["t_ms"] == 19.0
    assert state.event_counts == {"error": 25}


def test_tool_calls():
    state = StreamState(frozenset({"apply_patch"}))
    first = state.tool_start(0, "apply_patch", 1.0)
    assert state.tool_start(0, "other", 2.0) is first  # the same index is the same call
    second = state.tool_start(1, "not_a_defined_tool", 3.0)
    assert (first.name, second.name) == ("apply_patch", None)
    state.tool_arguments(0, '{"a":')
    state.tool_arguments(0, '"é"}')  # sized as UTF-8
    state.tool_arguments(9, "{}")  # unknown index: ignored
    assert (first.arg_chunks, first.arg_bytes) == (2, 10)
    assert state.tool_completed(0) is True
    assert state.tool_completed(0) is False and state.tool_completed(9) is False
    assert state.open_tool_calls() == [second]


def test_tool_calls_are_capped():
    state = StreamState()
    calls = [state.tool_start(i, None, 0.0) for i in range(257)]
    assert calls[255] is not None and calls[256] is None
    assert len(state.tool_calls) == 256
