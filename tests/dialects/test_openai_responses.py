"""openai-responses dialect: fixtures written from the public docs (samples/README.md, Sources),
fed through the Recorder, checked against the issue 3 classification table, chunking invariance and
redaction."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.dialects import choose_dialect, dialect_class
from streamtap.diagnostics.dialects.openai_responses import OpenAIResponses
from tests.support import FIXTURES, comparable, first_frames, fixture, record_stream

DIALECT = "openai-responses"
PATH = "/v1/responses"
TOOLS_REQUEST = {"model": "gpt-x", "stream": True,
                 "tools": [{"type": "function", "function": {"name": "apply_patch"}}]}
NAMES = sorted(path.name for path in (FIXTURES / DIALECT).iterdir())
TOOL_PIECES = ['{"patch":"', "CANARY-ARG-91c2", " ", "CANARY-ARG-91c2", '"}']
# text_complete.sse frames: 0 created, 1 in_progress, 2-8 reasoning item, 9-10 message item open,
# 11 an empty text delta, 12-14 text deltas, 15-17 message item close, 18 response.completed.
# function_call.sse frames: 0-1 head, 2 item added, 3-7 argument deltas, 8 arguments done,
# 9 item done, 10 response.completed.


def run(data: bytes | str, request: dict | None = None, **kwargs) -> dict:
    if isinstance(data, str):
        data = fixture(DIALECT, data)
    return record_stream(data, path=PATH, request=request or TOOLS_REQUEST, **kwargs)


def event(type: str, named: bool = True, raw: str | None = None, **fields) -> bytes:
    """One Responses event as an SSE frame (with its `event:` line unless `named` is False)."""
    body = raw if raw is not None else json.dumps({"type": type, **fields},
                                                  separators=(",", ":"))
    return (f"event: {type}\n" if named else "").encode() + f"data: {body}\n\n".encode()


CREATED = event("response.created", sequence_number=0,
                response={"id": "resp_inline", "status": "in_progress"})
COMPLETED = event("response.completed", response={"id": "resp_inline", "status": "completed"})


def outcome(record: dict) -> tuple:
    return record["outcome"]["boundary"], record["outcome"]["phase"]


# -- the registry -----------------------------------------------------------------------------
def test_registry_finds_the_dialect_by_name_and_path():
    assert dialect_class("openai-responses") is OpenAIResponses
    assert choose_dialect(None, PATH, "text/event-stream") is OpenAIResponses
    assert OpenAIResponses.terminal_names == (
        "response.completed", "response.incomplete", "response.failed")


# -- complete streams ---------------------------------------------------------------------------
def test_complete_stream_with_reasoning_summary_and_text():
    record = run("text_complete.sse")
    stream = record["stream"]
    assert record["dialect"] == "openai-responses"
    assert outcome(record) == ("none", "complete") and record["outcome"]["ok"] is True
    assert stream["terminal"] == "response.completed"
    assert stream["finish_reason"] == "completed"
    assert stream["usage"] == {"input": 40, "output": 25, "reasoning": 12, "cache_read": 16}
    assert stream["event_counts"] == {
        "meta": 11, "reasoning_start": 1, "reasoning_delta": 2, "reasoning_end": 1,
        "text_start": 1, "text_delta": 3, "text_end": 1, "usage": 1, "finish": 1}
    assert stream["delta_keys"] == ["response.reasoning_summary_text.delta",
                                    "response.output_text.delta"]
    assert record["correlation"]["response_id"] == "resp_fx1"
    kinds = [entry[2] for entry in record["frames"]]
    assert kinds[11] == "meta"  # the empty delta is not progress
    assert kinds[-1] == "finish" and kinds[6] == "reasoning_end" and kinds[15] == "text_end"


def test_frames_without_event_names_are_read_the_same():
    named, bare = run("text_complete.sse"), run("no_event_lines.sse")
    assert b"event:" not in fixture(DIALECT, "no_event_lines.sse")
    for record in (named, bare):
        record["stream"].pop("bytes")
    assert named["stream"] == bare["stream"]
    assert [e[2] for e in named["frames"]] == [e[2] for e in bare["frames"]]
    assert named["outcome"] == bare["outcome"]


def test_complete_function_call():
    record = run("function_call.sse")
    stream = record["stream"]
    assert outcome(record) == ("none", "complete")
    assert stream["tool_calls"] == [{
        "index": 0, "name": "apply_patch", "started_ms": 2.0, "arg_chunks": 5,
        "arg_bytes": sum(len(piece.encode()) for piece in TOOL_PIECES), "arg_parsed": True,
        "arg_unchecked": None, "completed": True}]
    assert stream["delta_keys"] == ["response.function_call_arguments.delta"]
    assert [entry[2] for entry in record["frames"]][8:] == ["meta", "tool_call", "finish"]
    assert stream["event_counts"]["tool_input_end"] == 1


def test_responses_tool_format_names_the_tool_too():
    request = {"model": "gpt-x", "stream": True,
               "tools": [{"type": "function", "name": "apply_patch"}]}
    named = run("function_call.sse", request=request)["stream"]["tool_calls"][0]
    unnamed = run("function_call.sse", request={"model": "m"})["stream"]["tool_calls"][0]
    assert named["name"] == "apply_patch" and unnamed["name"] is None


def test_response_incomplete_is_a_normal_terminal():
    record = run("incomplete.sse")
    stream = record["stream"]
    assert outcome(record) == ("none", "complete")
    assert stream["finish_reason"] == "max_output_tokens"
    assert stream["terminal"] == "response.incomplete"
    assert stream["errors"] == [] and stream["usage"]["output"] == 25


def test_function_call_done_without_an_added_event_arrives_whole():
    item = {"id": "fc_1", "type": "function_call", "status": "completed", "name": "apply_patch",
            "arguments": '{"patch":"CANARY-ARG-91c2"}'}
    data = CREATED + event("response.output_item.done", output_index=0, item=item) + COMPLETED
    stream = run(data)["stream"]
    assert stream["tool_calls"][0]["completed"] is True
    assert stream["tool_calls"][0]["arg_chunks"] == 1
    assert stream["event_counts"]["tool_call"] == 1


def test_custom_tool_call_input_counts_as_tool_input():
    item = {"id": "ctc_1", "type": "custom_tool_call", "name": "apply_patch", "input": ""}
    data = (CREATED + event("response.output_item.added", output_index=0, item=item)
            + event("response.custom_tool_call_input.delta", output_index=0,
                    delta="CANARY-ARG-91c2")
            + event("response.custom_tool_call_input.delta", output_index=0, delta="x"))
    record = run(data)
    assert outcome(record) == ("provider_close", "tool_input")
    assert record["stream"]["tool_calls"][0]["arg_chunks"] == 2


def test_unknown_type_is_named_and_server_tool_events_are_meta():
    data = (CREATED + event("response.future_thing", sequence_number=1)
            + event("response.web_search_call.searching", sequence_number=2) + COMPLETED)
    record = run(data)
    assert record["stream"]["unknown_types"] == ["response.future_thing"]
    assert [entry[2] for entry in record["frames"]] == ["meta", "unknown", "meta", "finish"]
    assert outcome(record) == ("none", "complete")


@pytest.mark.parametrize("spacing", ['"delta":""', '"delta": ""'])
@pytest.mark.parametrize("named", [True, False])
def test_empty_text_delta_is_not_progress(spacing, named):
    raw = '{"type":"response.output_text.delta","output_index":0,' + spacing + "}"
    record = run(CREATED + event("response.output_text.delta", named=named, raw=raw))
    assert outcome(record) == ("provider_close", "before_progress")
    assert record["stream"]["event_counts"] == {"meta": 2}


# -- the classification rows -------------------------------------------------------------------
@pytest.mark.parametrize("partial", [0, 40])  # on a frame boundary; 40 bytes into the next
def test_reset_mid_text(partial):
    data = fixture(DIALECT, "text_complete.sse")
    cut = first_frames(data, 14)
    record = run(data[:len(cut) + partial], upstream="reset")
    assert ("unterminated_frame" in record["outcome"]["evidence"]) == bool(partial)
    assert outcome(record) == ("transport", "text")
    assert record["outcome"]["retryable"] is True
    assert record["correlation"]["response_id"] == "resp_fx1"


def test_reset_after_tool_input_deltas_without_tool_call():
    record = run(first_frames(fixture(DIALECT, "function_call.sse"), 8), upstream="reset")
    stream = record["stream"]
    assert outcome(record) == ("transport", "tool_input")
    assert stream["event_counts"]["tool_input_delta"] == 5
    assert "tool_call" not in stream["event_counts"]
    # the five pieces are the whole arguments: only the item's end was missing (issue 21, item 6)
    assert ("`apply_patch` had arrived whole (43 bytes in 5 chunks) but the call was never "
            "finalized: no `response.output_item.done`, so no tool ran") in record["outcome"][
        "summary"]


def test_clean_end_after_tool_input_deltas():
    record = run(first_frames(fixture(DIALECT, "function_call.sse"), 8))
    assert outcome(record) == ("provider_close", "tool_input")
    assert record["outcome"]["retryable"] is True
    assert "no_terminal_event" in record["outcome"]["evidence"]


def test_reset_right_after_a_function_call_completed():
    record = run(first_frames(fixture(DIALECT, "function_call.sse"), 10), upstream="reset")
    assert outcome(record) == ("transport", "after_tool_call")
    assert record["stream"]["tool_calls"][0]["completed"] is True
    assert "right after tool call `apply_patch` completed" in record["outcome"]["summary"]


def test_wrapped_error_chunk_before_response_completed():
    record = run("wrapped_error.sse")
    stream = record["stream"]
    assert outcome(record) == ("provider_error", "text")
    assert record["outcome"]["retryable"] is True
    assert stream["errors"] == [{"shape": "wrapped_chunk", "t_ms": 2.0, "type": "server_error",
                                 "code": None, "message": None}]
    assert stream["terminal"] is None and stream["unknown_types"] == []


def test_wrapped_error_envelope():
    record = run("wrapped_envelope.sse")
    error = record["stream"]["errors"][0]
    assert outcome(record) == ("provider_error", "before_progress")
    assert (error["shape"], error["type"], error["code"]) == (
        "wrapped_chunk", "invalid_request_error", "context_length_exceeded")
    assert record["outcome"]["retryable"] is False


def test_response_failed_after_a_nested_error_event():
    record = run("failed.sse")
    stream = record["stream"]
    assert outcome(record) == ("provider_error", "text")  # the error did not move the phase
    assert [e["shape"] for e in stream["errors"]] == ["error_event", "failed_terminal"]
    assert stream["errors"][0]["type"] == "server_error"
    assert stream["errors"][1]["code"] == "server_error"
    assert stream["terminal"] == "response.failed" and stream["finish_reason"] == "failed"
    assert "finish" not in stream["event_counts"]
    assert record["outcome"]["retryable"] is True


def test_response_failed_alone_is_a_provider_error():
    failed = event("response.failed", response={"id": "resp_inline", "status": "failed",
                   "error": {"code": "server_error", "message": "An error occurred."}})
    record = run(CREATED + failed)
    assert outcome(record) == ("provider_error", "before_progress")
    assert record["stream"]["errors"][0]["shape"] == "failed_terminal"


def test_flat_error_event():
    record = run("error_flat.sse")
    error = record["stream"]["errors"][0]
    assert outcome(record) == ("provider_error", "text")
    assert (error["shape"], error["type"], error["code"]) == (
        "error_event", None, "rate_limit_exceeded")


def test_unparseable_json_in_one_frame_of_a_fine_stream():
    record = run("invalid_json.sse")
    assert outcome(record) == ("none", "complete")
    assert "invalid_json" in record["outcome"]["evidence"]
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert record["stream"]["event_counts"]["text_delta"] == 2
    assert record["stream"]["unknown_types"] == []


def test_headers_then_clean_end_without_events():
    record = run(b"")
    assert outcome(record) == ("provider_close", "before_progress")
    assert "no_events" in record["outcome"]["evidence"]


# -- invariants ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_dispatch_on_event_names_agrees_with_parsing(name):
    """Without `event:` lines every frame is decoded: the byte probes must change nothing."""
    data = fixture(DIALECT, name)
    bare = re.sub(rb"(?m)^event: [^\n]*\n", b"", data)
    named, parsed = run(data), run(bare)
    for record in (named, parsed):
        record["stream"].pop("bytes")
    assert named["stream"] == parsed["stream"]
    assert [e[2] for e in named["frames"]] == [e[2] for e in parsed["frames"]]
    assert named["outcome"] == parsed["outcome"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("upstream", ["complete", "reset"])
def test_no_canary_reaches_the_record(name, upstream):
    data = fixture(DIALECT, name)
    assert b"CANARY" in data or name == "wrapped_envelope.sse"
    for cut in (data, first_frames(data, 5)):
        assert "CANARY" not in json.dumps(run(cut, upstream=upstream))


@pytest.mark.parametrize("name", NAMES)
def test_bytewise_equals_whole(name):
    data = fixture(DIALECT, name)
    assert comparable(run(data, chunks="bytewise")) == comparable(run(data))


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 64), max_size=120))
def test_random_chunkings_equal_whole(name, sizes):
    data = fixture(DIALECT, name)
    assert comparable(run(data, chunks=sizes)) == comparable(run(data))


# -- refusal and reasoning text (refusal_and_reasoning_text.sse) --------------------------------
# frames: 0 created, 1 reasoning item added, 2-3 reasoning_text deltas, 4 reasoning_text done,
# 5 item done, 6-7 message item and refusal part added, 8-9 refusal deltas, 10 refusal done,
# 11-12 part and item done, 13 response.completed.
def test_refusal_and_reasoning_text_are_recorded_as_text_and_reasoning():
    record = run("refusal_and_reasoning_text.sse")
    stream = record["stream"]
    assert record["outcome"]["summary"] == ("The openai stream completed normally: terminal "
                                            "`response.completed` after 14 frames.")
    assert stream["event_counts"] == {"meta": 7, "reasoning_start": 1, "reasoning_delta": 2,
                                      "reasoning_end": 1, "text_start": 1, "text_delta": 2,
                                      "text_end": 1, "usage": 1, "finish": 1}
    assert stream["delta_keys"] == ["response.reasoning_text.delta", "response.refusal.delta"]
    assert stream["usage"] == {"input": 30, "output": 20, "reasoning": 8, "cache_read": 0}
    assert (stream["finish_reason"], stream["unknown_types"]) == ("completed", [])
    assert record["correlation"]["response_id"] == "resp_fx7"
    assert record["timeline"]["first_progress"] is not None


@pytest.mark.parametrize("frames, phase", [(3, "reasoning"), (9, "text")])
def test_cut_in_reasoning_text_or_refusal(frames, phase):
    data = first_frames(fixture(DIALECT, "refusal_and_reasoning_text.sse"), frames)
    record = run(data, upstream="reset")
    assert outcome(record) == ("transport", phase)
    assert record["outcome"]["summary"] == (
        "The connection to openai was reset while the model was "
        + ("reasoning." if phase == "reasoning" else "writing its answer."))
