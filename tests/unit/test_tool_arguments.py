"""Whether a tool call's arguments had arrived whole when a stream broke (issue 21, item 6).

Per dialect that streams arguments: the tool entry records `arg_bytes`, `arg_parsed` (the pieces
seen parse as one complete JSON value) and `arg_unchecked`, and a cut after the last piece says
the arguments had arrived whole but the call was never finalized, while a cut in the middle
still says the model was writing them. The accumulator holds the text bounded and lets it go.
"""

from __future__ import annotations

import json

import pytest

from streamtap.diagnostics.dialects import arguments
from streamtap.diagnostics.dialects.arguments import MAX_HELD_ARGUMENTS, ArgumentCheck
from streamtap.diagnostics.verdict.classify import classify
from streamtap.diagnostics.verdict.sentences import doing
from streamtap.diagnostics.dialects.stream import StreamState
from tests.unit.dialect_feed import feed, line, sse
from tests.unit.test_classify_table import APPLY_PATCH, OPEN, facts, verdict

PIECES = ['{"patch":', ' "--- a/README', '.md\\n"', ', "n": 2', "}"]
WHOLE_BYTES = sum(len(piece.encode()) for piece in PIECES)


def chat_chunk(delta: dict, finish: str | None = None) -> bytes:
    return sse({"id": "chatcmpl-t", "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def chat(pieces: list[str], end: bool) -> list[bytes]:
    frames = [chat_chunk({"tool_calls": [{"index": 0, "id": "call_t", "type": "function",
                                          "function": {"name": "apply_patch",
                                                       "arguments": ""}}]})]
    frames += [chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
               for piece in pieces]
    return frames + ([chat_chunk({}, "tool_calls"), b"data: [DONE]\n\n"] if end else [])


def responses_event(obj: dict) -> bytes:
    return sse(obj, event=obj["type"])


def responses(pieces: list[str], end: bool, item_type: str = "function_call") -> list[bytes]:
    delta = ("response.custom_tool_call_input.delta" if item_type == "custom_tool_call"
             else "response.function_call_arguments.delta")
    item = {"type": item_type, "name": "apply_patch", "call_id": "call_t"}
    frames = [responses_event({"type": "response.output_item.added", "output_index": 0,
                               "item": item | {"status": "in_progress"}})]
    frames += [responses_event({"type": delta, "output_index": 0, "delta": piece})
               for piece in pieces]
    if end:
        frames += [responses_event({"type": "response.output_item.done", "output_index": 0,
                                    "item": item | {"status": "completed"}}),
                   responses_event({"type": "response.completed",
                                    "response": {"status": "completed"}})]
    return frames


def anthropic_event(obj: dict) -> bytes:
    return sse(obj, event=obj["type"])


def anthropic(pieces: list[str], end: bool) -> list[bytes]:
    frames = [anthropic_event({"type": "content_block_start", "index": 0, "content_block": {
        "type": "tool_use", "id": "toolu_t", "name": "apply_patch", "input": {}}})]
    frames += [anthropic_event({"type": "content_block_delta", "index": 0, "delta": {
        "type": "input_json_delta", "partial_json": piece}}) for piece in pieces]
    if end:
        frames += [anthropic_event({"type": "content_block_stop", "index": 0}),
                   anthropic_event({"type": "message_stop"})]
    return frames


STREAMED = {"openai-chat": (chat, "finish_reason"),
            "openai-responses": (responses, "`response.output_item.done`"),
            "anthropic-messages": (anthropic, "`content_block_stop`")}


def the_call(record: dict) -> dict:
    (call,) = record["stream"]["tool_calls"]
    return call


def fields(call: dict) -> tuple:
    return call["arg_chunks"], call["arg_bytes"], call["arg_parsed"], call["arg_unchecked"]


# -- the dialects that stream arguments ----------------------------------------------------------
@pytest.mark.parametrize("dialect", sorted(STREAMED))
def test_a_reset_after_the_last_piece_says_the_arguments_had_arrived_whole(dialect):
    frames, end = STREAMED[dialect]
    record = feed(dialect, frames(PIECES, end=False), upstream="reset")
    call = the_call(record)
    assert fields(call) == (5, WHOLE_BYTES, True, None) and call["completed"] is False
    assert (record["outcome"]["boundary"], record["outcome"]["phase"]) == ("transport",
                                                                           "tool_input")
    assert record["outcome"]["summary"] == (
        f"The connection to {record['provider']} was reset when the arguments of tool call "
        f"`apply_patch` had arrived whole ({WHOLE_BYTES} bytes in 5 chunks) but the call was "
        f"never finalized: no {end}, so no tool ran.")


@pytest.mark.parametrize("dialect", sorted(STREAMED))
def test_a_reset_mid_arguments_says_the_model_was_still_writing_them(dialect):
    frames, _ = STREAMED[dialect]
    record = feed(dialect, frames(PIECES[:3], end=False), upstream="reset")
    assert fields(the_call(record)) == (3, len("".join(PIECES[:3]).encode()), False, None)
    assert record["outcome"]["summary"] == (
        f"The connection to {record['provider']} was reset while the model was still writing "
        "the arguments of tool call `apply_patch` (3 chunks); the call never completed, so no "
        "tool ran.")


@pytest.mark.parametrize("dialect", sorted(STREAMED))
def test_a_completed_call_records_whether_its_arguments_parsed(dialect):
    frames, _ = STREAMED[dialect]
    whole = the_call(feed(dialect, frames(PIECES, end=True)))
    assert fields(whole) == (5, WHOLE_BYTES, True, None) and whole["completed"] is True
    # a gateway that lost a piece: the call completed, its arguments do not parse
    lost = the_call(feed(dialect, frames(PIECES[:2] + PIECES[3:], end=True)))
    assert lost["arg_parsed"] is False and lost["completed"] is True


def test_a_call_with_no_argument_bytes_was_not_checked():
    record = feed("openai-chat", chat([], end=False), upstream="reset")
    assert fields(the_call(record)) == (0, 0, None, None)
    assert "still writing the arguments of tool call `apply_patch` (0 chunks)" in (
        record["outcome"]["summary"])


def test_a_custom_tools_free_form_input_is_not_checked_as_json():
    record = feed("openai-responses", responses(["*** Begin Patch", "{}"], end=False,
                                                item_type="custom_tool_call"), upstream="reset")
    assert fields(the_call(record)) == (2, 17, None, arguments.NOT_JSON_TEXT)
    assert "while the model was still writing" in record["outcome"]["summary"]


def test_gemini_whole_args_parse_and_partial_args_are_not_checked():
    def chunk(call: dict) -> bytes:
        return sse({"candidates": [{"content": {"parts": [{"functionCall": call}]}}]})

    whole = the_call(feed("gemini", [chunk({"name": "apply_patch", "args": {"patch": "x"}})]))
    assert fields(whole) == (1, len('{"patch":"x"}'), True, None) and whole["completed"]
    record = feed("gemini", [chunk({"name": "apply_patch", "willContinue": True}),
                             chunk({"partialArgs": [{"jsonPath": "$.patch",
                                                     "stringValue": "x"}],
                                    "willContinue": True})], upstream="reset")
    assert the_call(record)["arg_parsed"] is None
    assert the_call(record)["arg_unchecked"] == arguments.NOT_JSON_TEXT
    assert "while the model was still writing" in record["outcome"]["summary"]


def test_ollama_whole_arguments_parse():
    record = feed("ollama-ndjson", [line({"message": {"content": "", "tool_calls": [
        {"function": {"name": "apply_patch", "arguments": {"patch": "x"}}},
        {"function": {"name": "read_file", "arguments": '{"path": '}}]}, "done": False})])
    assert [call["arg_parsed"] for call in record["stream"]["tool_calls"]] == [True, False]


# -- the sentence, from facts ---------------------------------------------------------------------
WHOLE_CALL = APPLY_PATCH | {"arg_bytes": 38, "arg_parsed": True, "arg_unchecked": None}


def test_the_injected_reset_after_the_last_piece_reads_as_the_issue_asks():
    f = facts(**OPEN, phase="tool_input", open_tools=[WHOLE_CALL], tool_call_end="finish_reason",
              fault={"fired": True, "action": "reset", "at": "event:tool_input_delta:5",
                     "name": "cut5"})
    assert classify(f) == verdict(
        "injected", "tool_input", "high", ["injected_reset"], None,
        "streamtap injected reset after the 5th tool_input_delta, as configured (rule `cut5`), "
        "when the arguments of tool call `apply_patch` had arrived whole (38 bytes in 5 chunks) "
        "but the call was never finalized: no finish_reason, so no tool ran. This is not a real "
        "failure.")


@pytest.mark.parametrize("call, end, words", [
    (WHOLE_CALL | {"name": None, "index": 3}, None,
     "when the arguments of tool call #3 had arrived whole (38 bytes in 5 chunks) but the call "
     "was never finalized, so no tool ran"),
    (WHOLE_CALL | {"arg_parsed": False}, "finish_reason",
     "while the model was still writing the arguments of tool call `apply_patch` (5 chunks); "
     "the call never completed, so no tool ran"),
    (APPLY_PATCH | {"arg_bytes": 2_000_000, "arg_parsed": None,
                    "arg_unchecked": arguments.TOO_LARGE}, "finish_reason",
     "while the model was still writing the arguments of tool call `apply_patch` (5 chunks, "
     "2000000 bytes: too many for streamtap to check whether they had arrived whole); the call "
     "never completed, so no tool ran"),
    (APPLY_PATCH, "finish_reason",  # a record written before these fields: as before
     "while the model was still writing the arguments of tool call `apply_patch` (5 chunks); "
     "the call never completed, so no tool ran"),
])
def test_what_an_open_call_says(call, end, words):
    assert doing(facts(open_tools=[call], tool_call_end=end), "tool_input") == words


# -- the accumulator: parsed once, bounded, let go -----------------------------------------------
def test_the_text_is_let_go_once_the_call_completes():
    state = StreamState(frozenset({"apply_patch"}))
    call = state.tool_start(0, "apply_patch", 1.0)
    for piece in PIECES:
        state.tool_arguments(0, piece)
    assert state.held_argument_bytes == WHOLE_BYTES and call.arguments.parsed is None
    assert state.tool_completed(0) is True
    assert (call.arguments.pieces, call.arguments.parsed) == (None, True)
    assert state.held_argument_bytes == 0
    state.tool_arguments(0, " ")  # whitespace after a whole value changes nothing
    assert call.arguments.parsed is True
    state.tool_arguments(0, '{"again":1}')  # another value after it: the two do not parse
    assert call.as_dict()["arg_parsed"] is False and state.held_argument_bytes == 0


def test_the_codes_a_record_carries():
    assert (arguments.TOO_LARGE, arguments.NOT_JSON_TEXT) == ("too_large", "not_json_text")


def test_a_stream_holds_at_most_one_mib_of_arguments_all_open_calls_together():
    assert MAX_HELD_ARGUMENTS == 1024 * 1024
    state = StreamState()
    first, second = state.tool_start(0, None, 0.0), state.tool_start(1, None, 0.0)
    half = "x" * (MAX_HELD_ARGUMENTS // 2)
    state.tool_arguments(0, '["' + half)
    state.tool_arguments(1, half[:-2])  # exactly at the limit: still held
    assert state.held_argument_bytes == MAX_HELD_ARGUMENTS
    state.tool_arguments(1, "y")  # one byte over: this call is let go, the other kept
    assert (second.arguments.pieces, second.arguments.unchecked) == (None, arguments.TOO_LARGE)
    assert state.held_argument_bytes == len(half) + 2
    state.tool_arguments(1, '"]')  # a call given up stays unchecked
    state.tool_arguments(0, '"]')
    assert [call.as_dict()["arg_parsed"] for call in (first, second)] == [True, None]
    assert second.as_dict()["arg_unchecked"] == arguments.TOO_LARGE
    assert second.as_dict()["arg_bytes"] == len(half) - 2 + 1 + 2


def test_pieces_that_are_not_json_text_let_go_of_what_was_held():
    state = StreamState()
    call = state.tool_start(0, None, 0.0)
    state.tool_arguments(0, '{"a":')
    state.tool_arguments(0, "[]", json_text=False)
    assert state.held_argument_bytes == 0 and call.arguments.pieces is None
    assert (call.as_dict()["arg_parsed"], call.as_dict()["arg_unchecked"]) == (
        None, arguments.NOT_JSON_TEXT)


@pytest.mark.parametrize("text, parsed", [
    ('{"a": [1, 2]}', True), ("  42 ", True), ('"text"', True), ("null", True),
    ('{"a": [1, 2]', False), ('{"a":1}{"b":2}', False), ("[" * 100_000, False),
    ("", None), ("   ", None),
])
def test_settle_says_whether_the_text_is_one_complete_json_value(text, parsed):
    check = ArgumentCheck()
    check.hold(text, len(text))
    assert check.settle() == len(text)
    assert (check.parsed, check.pieces, check.held_bytes) == (parsed, None, 0)
    assert check.settle() == 0  # once


def test_nothing_of_the_arguments_reaches_the_record():
    canary = "CANARY-ARG-7d1e"
    record = feed("openai-chat", chat(['{"patch":"', canary, '"}'], end=False),
                  upstream="reset")
    assert canary not in json.dumps(record)
    assert the_call(record)["arg_parsed"] is True
