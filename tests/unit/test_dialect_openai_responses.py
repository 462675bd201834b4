"""openai-responses dialect (OpenAI's Responses streaming events reference), event by event: the
exact events, delta keys, finish, usage, terminal, tool calls, provider-run tools, errors, ids
and timeline a user sees for each event type; then fixtures written from the public docs
(samples/README.md, Sources) fed through the Recorder, checked against the issue 3
classification table, chunking invariance and redaction."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.dialects import choose_dialect, dialect_class, openai_responses
from streamtap.diagnostics.dialects.openai_responses import OpenAIResponses
from tests.support import FIXTURES, comparable, first_frames, fixture, record_stream
from tests.unit.dialect_feed import facts, feed, kinds, sse


def ev(obj: dict | bytes, name: str | None = "") -> bytes:
    if name == "" and isinstance(obj, dict):
        name = obj["type"]
    return sse(obj, name or None)


def run(*frames: bytes, **kwargs) -> dict:
    return feed("openai-responses", list(frames), **kwargs)


def typed(kind: str, **fields) -> bytes:
    return ev({"type": kind, **fields})


CREATED = typed("response.created", sequence_number=0,
                response={"id": "resp_unit1", "status": "in_progress", "usage": None})
USAGE = {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 5}, "output_tokens": 8,
         "output_tokens_details": {"reasoning_tokens": 2}}


def completed(status="completed", usage=USAGE, **response) -> bytes:
    return typed("response.completed", response={"id": "resp_unit1", "status": status,
                                                 "usage": usage, **response})


def text(words="w", kind="response.output_text.delta") -> bytes:
    return typed(kind, output_index=0, delta=words)


def added(item: dict, index: int | None = 0) -> bytes:
    body = {"type": "response.output_item.added", "item": item}
    if index is not None:
        body["output_index"] = index
    return ev(body)


def done(item: dict, index: int | None = 0) -> bytes:
    body = {"type": "response.output_item.done", "item": item}
    if index is not None:
        body["output_index"] = index
    return ev(body)


def args(piece, index: int | None = 0, kind="response.function_call_arguments.delta") -> bytes:
    body = {"type": kind, "delta": piece}
    if index is not None:
        body["output_index"] = index
    return ev(body)


def calls(record: dict) -> list[tuple]:
    return [(c["index"], c["name"], c["arg_chunks"], c["arg_bytes"], c["completed"])
            for c in record["stream"]["tool_calls"]]


def servers(record: dict) -> list[tuple]:
    return [(s["index"], s["type"], s["completed"]) for s in record["stream"]["server_tools"]]


# -- a whole response -----------------------------------------------------------------------------
def test_text_response_end_to_end():
    record = run(CREATED, typed("response.in_progress"), added({"type": "message"}),
                 typed("response.content_part.added"), text(), text(),
                 typed("response.output_text.done"), typed("response.content_part.done"),
                 done({"type": "message"}), completed())
    assert facts(record) == {
        "event_counts": {"meta": 6, "text_start": 1, "text_delta": 2, "text_end": 1,
                         "usage": 1, "finish": 1},
        "delta_keys": ["response.output_text.delta"], "finish_reason": "completed",
        "usage": {"input": 30, "output": 8, "reasoning": 2, "cache_read": 5},
        "terminal": "response.completed", "unknown_types": [], "protocol_errors": {}}
    assert kinds(record) == ["meta", "meta", "meta", "meta", "text_delta", "text_delta",
                             "text_end", "meta", "meta", "finish"]
    timeline = record["timeline"]
    assert (timeline["first_event"], timeline["first_progress"], timeline["last_progress"],
            timeline["terminal_event"]) == (3.0, 7.0, 8.0, 12.0)
    assert record["correlation"]["response_id"] == "resp_unit1"
    assert record["dialect"] == "openai-responses"
    assert record["outcome"]["boundary"] == "none"


def test_reasoning_summary_and_reasoning_text_then_refusal():
    record = run(typed("response.reasoning_summary_part.added"),
                 text("r", "response.reasoning_summary_text.delta"),
                 text("r", "response.reasoning_text.delta"),
                 typed("response.reasoning_text.done"),
                 typed("response.reasoning_summary_text.done"),
                 typed("response.reasoning_summary_part.done"),
                 text("no", "response.refusal.delta"), typed("response.refusal.done"),
                 typed("response.output_text.done"))
    assert record["stream"]["delta_keys"] == ["response.reasoning_summary_text.delta",
                                              "response.reasoning_text.delta",
                                              "response.refusal.delta"]
    assert kinds(record) == ["meta", "reasoning_delta", "reasoning_delta", "reasoning_end",
                             "meta", "meta", "text_delta", "text_end", "meta"]
    assert record["stream"]["event_counts"] == {
        "meta": 4, "reasoning_start": 1, "reasoning_delta": 2, "reasoning_end": 1,
        "text_start": 1, "text_delta": 1, "text_end": 1}


@pytest.mark.parametrize("spaced", [False, True])
def test_empty_deltas_are_not_progress(spaced):
    empty = text("")
    if spaced:
        empty = empty.replace(b'"delta":""', b'"delta": ""')
    record = run(text(), empty, text("", "response.reasoning_text.delta"))
    assert kinds(record) == ["text_delta", "meta", "meta"]
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 1, "meta": 2}


def test_counted_events_without_an_event_line_are_parsed():
    record = run(ev({"type": "response.output_text.delta", "delta": "w"}, None),
                 ev({"type": "response.output_text.delta", "delta": ""}, None),
                 ev({"type": "response.output_text.done"}, None),
                 ev({"type": "response.content_part.added"}, None))
    assert kinds(record) == ["text_delta", "meta", "text_end", "meta"]


def test_a_counted_event_that_is_not_a_json_object_is_parsed():
    record = run(ev(b"[1]", "response.output_text.delta"),
                 ev(b' {"type":"response.output_text.delta","delta":"w"}',
                    "response.output_text.delta"),
                 ev(b'{"type":"response.output_text.delta","delta":"w"} ',
                    "response.output_text.delta"))
    assert kinds(record) == ["unknown", "text_delta", "text_delta"]


def test_response_created_without_an_object_and_the_first_id_wins():
    record = run(typed("response.created", response="x"), CREATED,
                 completed(id="resp_other"))
    assert record["correlation"]["response_id"] == "resp_unit1"
    assert kinds(record) == ["meta", "meta", "finish"]


@pytest.mark.parametrize("kind", sorted(openai_responses.META_TYPES))
def test_every_meta_type_is_meta(kind):
    for frame in (typed(kind), ev({"type": kind}, None)):
        record = run(frame)
        assert kinds(record) == ["meta"]
        assert record["stream"]["unknown_types"] == []


# -- tool calls -----------------------------------------------------------------------------------
def test_a_function_call_in_pieces():
    record = run(added({"type": "function_call", "name": "apply_patch", "call_id": "c"}, 1),
                 args("", 1), args('{"a":', 1), args("1}", 1),
                 typed("response.function_call_arguments.done", output_index=1),
                 done({"type": "function_call", "name": "apply_patch"}, 1),
                 completed())
    assert calls(record) == [(1, "apply_patch", 2, 7, True)]
    assert record["stream"]["delta_keys"] == ["response.function_call_arguments.delta"]
    assert kinds(record) == ["tool_input_start", "meta", "tool_input_delta", "tool_input_delta",
                             "meta", "tool_call", "finish"]
    assert record["stream"]["event_counts"]["tool_input_end"] == 1


def test_a_custom_tool_call():
    record = run(added({"type": "custom_tool_call", "name": "read_file"}, 0),
                 args("abc", 0, "response.custom_tool_call_input.delta"),
                 typed("response.custom_tool_call_input.done"),
                 done({"type": "custom_tool_call"}, 0))
    assert calls(record) == [(0, "read_file", 1, 3, True)]
    assert record["stream"]["delta_keys"] == ["response.custom_tool_call_input.delta"]


@pytest.mark.parametrize("piece", ["", None, 5])
def test_argument_deltas_without_a_string_are_meta(piece):
    record = run(added({"type": "function_call", "name": "apply_patch"}), args(piece))
    assert kinds(record) == ["tool_input_start", "meta"]
    assert calls(record) == [(0, "apply_patch", 0, 0, False)]


def test_indexes_fall_back_when_missing_or_bool():
    record = run(added({"type": "function_call", "name": "apply_patch"}, None),
                 args("ab", None), added({"type": "function_call", "name": "read_file"}, None),
                 ev({"type": "response.output_item.added", "output_index": True,
                     "item": {"type": "function_call"}}))
    # the first call takes index 0 (no calls yet), the next ones take the count so far
    assert calls(record) == [(0, "apply_patch", 1, 2, False), (1, "read_file", 0, 0, False),
                             (2, None, 0, 0, False)]


def test_a_call_that_arrives_whole_in_its_done():
    record = run(done({"type": "function_call", "name": "apply_patch", "arguments": "{}"}, 4),
                 done({"type": "custom_tool_call", "name": "read_file", "input": "abc"}, 5),
                 done({"type": "function_call", "arguments": ""}, None),
                 done({"type": "function_call", "arguments": {"a": 1}}, 7))
    assert calls(record) == [(4, "apply_patch", 1, 2, True), (5, "read_file", 1, 3, True),
                             (2, None, 0, 0, True), (7, None, 0, 0, True)]
    assert kinds(record) == ["tool_call"] * 4
    assert record["stream"]["event_counts"] == {"tool_input_start": 4, "tool_input_delta": 2,
                                                "tool_input_end": 4, "tool_call": 4}


def test_a_call_done_twice_completes_once():
    item = {"type": "function_call", "name": "apply_patch"}
    record = run(added(item), done(item), done(item))
    assert kinds(record) == ["tool_input_start", "tool_call", "meta"]


@pytest.mark.parametrize("item", [{"type": "message"}, {"type": "reasoning"}, "x", None])
def test_items_that_are_not_calls_are_meta(item):
    # parsed, whatever their bytes: `_call"` inside a message's text must not matter
    frames = [ev({"type": "response.output_item.added", "output_index": 0, "item": item,
                  "x_call": 1}),
              ev({"type": "response.output_item.done", "output_index": 0, "item": item,
                  "x_call": 1})]
    record = run(*frames)
    assert kinds(record) == ["meta", "meta"]
    assert calls(record) == [] and servers(record) == []


def test_item_events_are_probed_for_a_call_before_parsing():
    record = run(ev(b"{not json}", "response.output_item.added"),
                 ev(b'{"a_call":1,}', "response.output_item.added"),
                 ev(b'{"x_call": 1', "response.output_item.done"))
    # without `_call"` in its bytes an item event is no call (not parsed: it is a probe)
    assert kinds(record) == ["meta", "unknown", "unknown"]
    assert record["stream"]["protocol_errors"] == {"invalid_json": 2}


# -- provider-run tools ---------------------------------------------------------------------------
@pytest.mark.parametrize("item_type", sorted(openai_responses.SERVER_TOOL_ITEMS))
def test_provider_run_tools_by_type(item_type):
    tool = item_type.removesuffix("_call")
    status = f"response.{item_type}.in_progress" if tool != "mcp" else "response.mcp_call.in_progress"
    record = run(added({"type": item_type, "id": "x"}, 2), typed(status, output_index=2),
                 typed(status.replace("in_progress", "completed"), output_index=2),
                 done({"type": item_type}, 2))
    assert servers(record) == [(0, tool, True)]
    assert kinds(record) == ["server_tool_start", "server_tool_delta", "server_tool_end", "meta"]
    assert record["stream"]["unknown_types"] == []
    assert calls(record) == []


def test_a_provider_tool_ends_on_its_done_or_failed_status():
    record = run(added({"type": "web_search_call"}, 0), typed("response.web_search_call.searching",
                                                             output_index=0),
                 done({"type": "web_search_call"}, 0),
                 added({"type": "file_search_call"}, 1),
                 typed("response.file_search_call.failed", output_index=1),
                 typed("response.file_search_call.failed", output_index=1))
    assert servers(record) == [(0, "web_search", True), (1, "file_search", True)]
    assert kinds(record) == ["server_tool_start", "server_tool_delta", "server_tool_end",
                             "server_tool_start", "server_tool_end", "meta"]


def test_a_provider_tool_that_arrives_whole_in_its_done():
    record = run(done({"type": "code_interpreter_call"}, 3), done({"type": "mcp_call"}, None))
    assert servers(record) == [(0, "code_interpreter", True), (1, "mcp", True)]
    assert kinds(record) == ["server_tool_end", "server_tool_end"]
    assert record["stream"]["event_counts"] == {"server_tool_start": 2, "server_tool_end": 2}


def test_status_events_for_an_unknown_item_and_mcp_listings_are_meta():
    record = run(typed("response.web_search_call.searching", output_index=9),
                 added({"type": "mcp_call"}, 0),
                 typed("response.mcp_list_tools.in_progress", output_index=0),
                 typed("response.mcp_call_arguments.delta", output_index=0, delta="x"))
    assert kinds(record) == ["meta", "server_tool_start", "meta", "server_tool_delta"]


def test_unknown_types_are_named():
    record = run(typed("response.audio.delta", delta="x"), ev({"type": "", "x": 1}, "named"),
                 ev({"x": 1}, None))
    assert kinds(record) == ["unknown", "unknown", "unknown"]
    assert record["stream"]["unknown_types"] == ["response.audio.delta", "named", "<none>"]


# -- terminals ------------------------------------------------------------------------------------
def test_incomplete_takes_its_reason():
    record = run(text(), typed("response.incomplete", response={
        "id": "resp_unit1", "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"}, "usage": USAGE}))
    assert record["stream"]["finish_reason"] == "max_output_tokens"
    assert record["stream"]["terminal"] == "response.incomplete"
    assert kinds(record) == ["text_delta", "finish"]


@pytest.mark.parametrize("response, reason", [
    ({"status": "incomplete", "incomplete_details": None}, "incomplete"),
    ({"incomplete_details": "x"}, "incomplete"),
    ({}, "incomplete"),
])
def test_incomplete_without_details(response, reason):
    record = run(typed("response.incomplete", response=response))
    assert record["stream"]["finish_reason"] == reason


@pytest.mark.parametrize("response", [{}, "x"])
def test_completed_without_a_status_is_named_after_the_event(response):
    record = run(typed("response.completed", response=response))
    assert record["stream"]["finish_reason"] == "completed"
    assert record["stream"]["usage"] == {}
    assert record["stream"]["event_counts"] == {"finish": 1}


def test_failed_is_an_error_terminal():
    record = run(text(), typed("response.failed", response={
        "id": "resp_unit1", "status": "failed", "usage": USAGE,
        "error": {"type": "server_error", "code": "server_error", "message": "broke"}}))
    assert record["stream"]["errors"] == [{"shape": "failed_terminal", "t_ms": 4.0,
                                           "type": "server_error", "code": "server_error",
                                           "message": "broke"}]
    assert record["stream"]["finish_reason"] == "failed"
    assert record["stream"]["terminal"] == "response.failed"
    assert record["stream"]["usage"]["input"] == 30
    assert kinds(record) == ["text_delta", "error"]
    assert "finish" not in record["stream"]["event_counts"]
    assert record["outcome"]["boundary"] == "provider_error"


def test_failed_without_status_or_error_object():
    record = run(typed("response.failed", response={"error": "x"}))
    assert record["stream"]["finish_reason"] == "failed"
    assert [(e["type"], e["code"], e["message"]) for e in record["stream"]["errors"]] == [
        (None, None, None)]


def test_only_the_first_terminal_counts_as_the_terminal():
    record = run(completed(), typed("response.failed", response={}))
    assert record["stream"]["terminal"] == "response.completed"
    assert record["timeline"]["terminal_event"] == 3.0


# -- errors ---------------------------------------------------------------------------------------
def test_the_documented_flat_error_event():
    record = run(text(), typed("error", code="rate_limit_exceeded", message="slow", param=None))
    assert record["stream"]["errors"] == [{"shape": "error_event", "t_ms": 4.0, "type": None,
                                           "code": "rate_limit_exceeded", "message": "slow"}]
    assert kinds(record) == ["text_delta", "error"]
    assert record["outcome"]["phase"] == "text"


def test_the_nested_error_event():
    record = run(typed("error", error={"type": "invalid_request_error", "code": "bad",
                                       "message": "m"}),
                 typed("error", error="plain words"))
    assert [(e["shape"], e["type"], e["code"], e["message"])
            for e in record["stream"]["errors"]] == [
        ("error_event", "invalid_request_error", "bad", "m"),
        ("error_event", None, None, "plain words")]


def test_a_wrapped_error_chunk_without_a_type():
    record = run(ev({"error": {"type": "server_error", "code": 500, "message": "m"}}, None))
    assert record["stream"]["errors"] == [{"shape": "wrapped_chunk", "t_ms": 3.0,
                                           "type": "server_error", "code": "500",
                                           "message": "m"}]
    assert kinds(record) == ["error"]


def test_a_frame_that_is_not_json():
    record = run(ev(b"nope", "response.created"))
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert kinds(record) == ["unknown"]


def test_terminal_names():
    assert OpenAIResponses.terminal_names == ("response.completed", "response.incomplete",
                                              "response.failed")


# -- what the survivors of a mutation run showed unpinned -----------------------------------------
def test_counted_events_are_probed_only_when_they_look_like_an_object():
    record = run(ev(b"{not json}", "response.output_text.delta"),
                 ev(b"x}", "response.output_text.delta"), ev(b"{x", "response.output_text.delta"),
                 ev(b"{not json}", "response.output_item.done"))
    # an object-shaped frame is classified from its name (not validated: it is a probe)
    assert kinds(record) == ["text_delta", "unknown", "unknown", "meta"]
    assert record["stream"]["protocol_errors"] == {"invalid_json": 2}


def test_a_summary_done_closes_the_reasoning_it_opened():
    record = run(text("r", "response.reasoning_summary_text.delta"),
                 typed("response.reasoning_summary_text.done"))
    assert kinds(record) == ["reasoning_delta", "reasoning_end"]


def test_provider_tool_events_without_an_output_index_share_one_key():
    record = run(added({"type": "web_search_call"}, None),
                 typed("response.web_search_call.searching"),
                 done({"type": "web_search_call"}, None))
    assert servers(record) == [(0, "web_search", True)]
    assert kinds(record) == ["server_tool_start", "server_tool_delta", "server_tool_end"]


def test_the_id_is_read_from_the_terminal_when_no_created_event_came():
    assert run(completed())["correlation"]["response_id"] == "resp_unit1"


def test_the_status_is_the_finish_reason_when_nothing_more_precise_is_given():
    failed = run(typed("response.failed", response={"status": "cancelled"}))
    assert failed["stream"]["finish_reason"] == "cancelled"
    incomplete = run(typed("response.incomplete", response={"status": "cancelled"}))
    assert incomplete["stream"]["finish_reason"] == "cancelled"


# -- whole streams: fixtures from the public docs, through the Recorder ---------------------------
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


def record_of(data: bytes | str, request: dict | None = None, **kwargs) -> dict:
    if isinstance(data, str):
        data = fixture(DIALECT, data)
    return record_stream(data, path=PATH, request=request or TOOLS_REQUEST, **kwargs)


def event(type: str, named: bool = True, raw: str | None = None, **fields) -> bytes:
    """One Responses event as an SSE frame (with its `event:` line unless `named` is False)."""
    body = raw if raw is not None else json.dumps({"type": type, **fields},
                                                  separators=(",", ":"))
    return (f"event: {type}\n" if named else "").encode() + f"data: {body}\n\n".encode()


INLINE_CREATED = event("response.created", sequence_number=0,
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
    record = record_of("text_complete.sse")
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
    named, bare = record_of("text_complete.sse"), record_of("no_event_lines.sse")
    assert b"event:" not in fixture(DIALECT, "no_event_lines.sse")
    for record in (named, bare):
        record["stream"].pop("bytes")
    assert named["stream"] == bare["stream"]
    assert [e[2] for e in named["frames"]] == [e[2] for e in bare["frames"]]
    assert named["outcome"] == bare["outcome"]


def test_complete_function_call():
    record = record_of("function_call.sse")
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
    named = record_of("function_call.sse", request=request)["stream"]["tool_calls"][0]
    unnamed = record_of("function_call.sse", request={"model": "m"})["stream"]["tool_calls"][0]
    assert named["name"] == "apply_patch" and unnamed["name"] is None


def test_response_incomplete_is_a_normal_terminal():
    record = record_of("incomplete.sse")
    stream = record["stream"]
    assert outcome(record) == ("none", "complete")
    assert stream["finish_reason"] == "max_output_tokens"
    assert stream["terminal"] == "response.incomplete"
    assert stream["errors"] == [] and stream["usage"]["output"] == 25


def test_function_call_done_without_an_added_event_arrives_whole():
    item = {"id": "fc_1", "type": "function_call", "status": "completed", "name": "apply_patch",
            "arguments": '{"patch":"CANARY-ARG-91c2"}'}
    data = INLINE_CREATED + event("response.output_item.done", output_index=0, item=item) + COMPLETED
    stream = record_of(data)["stream"]
    assert stream["tool_calls"][0]["completed"] is True
    assert stream["tool_calls"][0]["arg_chunks"] == 1
    assert stream["event_counts"]["tool_call"] == 1


def test_custom_tool_call_input_counts_as_tool_input():
    item = {"id": "ctc_1", "type": "custom_tool_call", "name": "apply_patch", "input": ""}
    data = (INLINE_CREATED + event("response.output_item.added", output_index=0, item=item)
            + event("response.custom_tool_call_input.delta", output_index=0,
                    delta="CANARY-ARG-91c2")
            + event("response.custom_tool_call_input.delta", output_index=0, delta="x"))
    record = record_of(data)
    assert outcome(record) == ("provider_close", "tool_input")
    assert record["stream"]["tool_calls"][0]["arg_chunks"] == 2


def test_unknown_type_is_named_and_server_tool_events_are_meta():
    data = (INLINE_CREATED + event("response.future_thing", sequence_number=1)
            + event("response.web_search_call.searching", sequence_number=2) + COMPLETED)
    record = record_of(data)
    assert record["stream"]["unknown_types"] == ["response.future_thing"]
    assert [entry[2] for entry in record["frames"]] == ["meta", "unknown", "meta", "finish"]
    assert outcome(record) == ("none", "complete")


@pytest.mark.parametrize("spacing", ['"delta":""', '"delta": ""'])
@pytest.mark.parametrize("named", [True, False])
def test_empty_text_delta_is_not_progress(spacing, named):
    raw = '{"type":"response.output_text.delta","output_index":0,' + spacing + "}"
    record = record_of(INLINE_CREATED + event("response.output_text.delta", named=named, raw=raw))
    assert outcome(record) == ("provider_close", "before_progress")
    assert record["stream"]["event_counts"] == {"meta": 2}


# -- the classification rows -------------------------------------------------------------------
@pytest.mark.parametrize("partial", [0, 40])  # on a frame boundary; 40 bytes into the next
def test_reset_mid_text(partial):
    data = fixture(DIALECT, "text_complete.sse")
    cut = first_frames(data, 14)
    record = record_of(data[:len(cut) + partial], upstream="reset")
    assert ("unterminated_frame" in record["outcome"]["evidence"]) == bool(partial)
    assert outcome(record) == ("transport", "text")
    assert record["outcome"]["retryable"] is True
    assert record["correlation"]["response_id"] == "resp_fx1"


def test_reset_after_tool_input_deltas_without_tool_call():
    record = record_of(first_frames(fixture(DIALECT, "function_call.sse"), 8), upstream="reset")
    stream = record["stream"]
    assert outcome(record) == ("transport", "tool_input")
    assert stream["event_counts"]["tool_input_delta"] == 5
    assert "tool_call" not in stream["event_counts"]
    # the five pieces are the whole arguments: only the item's end was missing (issue 21, item 6)
    assert ("`apply_patch` had arrived whole (43 bytes in 5 chunks) but the call was never "
            "finalized: no `response.output_item.done`, so no tool ran") in record["outcome"][
        "summary"]


def test_clean_end_after_tool_input_deltas():
    record = record_of(first_frames(fixture(DIALECT, "function_call.sse"), 8))
    assert outcome(record) == ("provider_close", "tool_input")
    assert record["outcome"]["retryable"] is True
    assert "no_terminal_event" in record["outcome"]["evidence"]


def test_reset_right_after_a_function_call_completed():
    record = record_of(first_frames(fixture(DIALECT, "function_call.sse"), 10), upstream="reset")
    assert outcome(record) == ("transport", "after_tool_call")
    assert record["stream"]["tool_calls"][0]["completed"] is True
    assert "right after tool call `apply_patch` completed" in record["outcome"]["summary"]


def test_wrapped_error_chunk_before_response_completed():
    record = record_of("wrapped_error.sse")
    stream = record["stream"]
    assert outcome(record) == ("provider_error", "text")
    assert record["outcome"]["retryable"] is True
    assert stream["errors"] == [{"shape": "wrapped_chunk", "t_ms": 2.0, "type": "server_error",
                                 "code": None, "message": None}]
    assert stream["terminal"] is None and stream["unknown_types"] == []


def test_wrapped_error_envelope():
    record = record_of("wrapped_envelope.sse")
    error = record["stream"]["errors"][0]
    assert outcome(record) == ("provider_error", "before_progress")
    assert (error["shape"], error["type"], error["code"]) == (
        "wrapped_chunk", "invalid_request_error", "context_length_exceeded")
    assert record["outcome"]["retryable"] is False


def test_response_failed_after_a_nested_error_event():
    record = record_of("failed.sse")
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
    record = record_of(INLINE_CREATED + failed)
    assert outcome(record) == ("provider_error", "before_progress")
    assert record["stream"]["errors"][0]["shape"] == "failed_terminal"


def test_flat_error_event():
    record = record_of("error_flat.sse")
    error = record["stream"]["errors"][0]
    assert outcome(record) == ("provider_error", "text")
    assert (error["shape"], error["type"], error["code"]) == (
        "error_event", None, "rate_limit_exceeded")


def test_unparseable_json_in_one_frame_of_a_fine_stream():
    record = record_of("invalid_json.sse")
    assert outcome(record) == ("none", "complete")
    assert "invalid_json" in record["outcome"]["evidence"]
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert record["stream"]["event_counts"]["text_delta"] == 2
    assert record["stream"]["unknown_types"] == []


def test_headers_then_clean_end_without_events():
    record = record_of(b"")
    assert outcome(record) == ("provider_close", "before_progress")
    assert "no_events" in record["outcome"]["evidence"]


# -- invariants ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_dispatch_on_event_names_agrees_with_parsing(name):
    """Without `event:` lines every frame is decoded: the byte probes must change nothing."""
    data = fixture(DIALECT, name)
    bare = re.sub(rb"(?m)^event: [^\n]*\n", b"", data)
    named, parsed = record_of(data), record_of(bare)
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


# -- refusal and reasoning text (refusal_and_reasoning_text.sse) --------------------------------
# frames: 0 created, 1 reasoning item added, 2-3 reasoning_text deltas, 4 reasoning_text done,
# 5 item done, 6-7 message item and refusal part added, 8-9 refusal deltas, 10 refusal done,
# 11-12 part and item done, 13 response.completed.
def test_refusal_and_reasoning_text_are_recorded_as_text_and_reasoning():
    record = record_of("refusal_and_reasoning_text.sse")
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
    record = record_of(data, upstream="reset")
    assert outcome(record) == ("transport", phase)
    assert record["outcome"]["summary"] == (
        "The connection to openai was reset while the model was "
        + ("reasoning." if phase == "reasoning" else "writing its answer."))
