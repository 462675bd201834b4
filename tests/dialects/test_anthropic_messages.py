"""anthropic-messages dialect: fixtures written from the public docs (samples/README.md, Sources),
fed through the Recorder, checked against the issue 3 classification table, chunking invariance and
redaction."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.dialects import choose_dialect, dialect_class
from streamtap.diagnostics.dialects.anthropic_messages import AnthropicMessages
from tests.support import FIXTURES, comparable, first_frames, fixture, record_stream

DIALECT = "anthropic-messages"
PATH = "/v1/messages"
REQUEST = {"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 1024,
           "messages": [{"role": "user", "content": "CANARY-PROMPT-2b7e"}],
           "tools": [{"name": "apply_patch", "input_schema": {"type": "object"}}]}
NAMES = sorted(path.name for path in (FIXTURES / DIALECT).iterdir())
ARG_PIECES = ['{"path": "CANARY-ARG-91c2', '.py", "pa', 'tch": "@@ -1 +1', r" @@\n-a\n+b", '"}']
USAGE_START = {"input": 472, "output": 1, "cache_read": 128, "cache_write": 0}


def run(data: bytes | str, **kwargs) -> dict:
    if isinstance(data, str):
        data = fixture(DIALECT, data)
    kwargs.setdefault("request", REQUEST)
    return record_stream(data, path=PATH, provider="anthropic", **kwargs)


def event(name: str | None, body: object) -> bytes:
    """One SSE frame; `name=None` leaves out the `event:` line (as some gateways do)."""
    data = body if isinstance(body, str) else json.dumps(body)
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {data}\n\n".encode()


def outcome(record: dict) -> tuple:
    return record["outcome"]["boundary"], record["outcome"]["phase"]


def kinds(record: dict) -> list[str]:
    return [entry[2] for entry in record["frames"]]


# -- the registry ------------------------------------------------------------------------------
def test_registry_finds_the_dialect_by_name_and_path():
    assert dialect_class(DIALECT) is AnthropicMessages
    assert choose_dialect(None, PATH, "text/event-stream; charset=utf-8") is AnthropicMessages
    assert AnthropicMessages.terminal_names == ("message_stop",)


# -- complete streams --------------------------------------------------------------------------
def test_complete_text_stream():
    record = run("text_complete.sse")
    stream = record["stream"]
    assert record["dialect"] == DIALECT
    assert outcome(record) == ("none", "complete") and record["outcome"]["ok"] is True
    assert stream["terminal"] == "message_stop" and stream["finish_reason"] == "end_turn"
    # message_start's counts, then message_delta's cumulative output count overwrites
    assert stream["usage"] == {**USAGE_START, "output": 15}
    assert stream["event_counts"] == {"meta": 3, "usage": 2, "keepalive": 1, "text_start": 1,
                                      "text_delta": 3, "text_end": 1, "finish": 1}
    assert stream["delta_keys"] == ["text"]
    assert record["correlation"]["response_id"] == "msg_01XFDUDYJgAACzvnptvVoYEL"
    assert kinds(record) == ["meta", "meta", "keepalive", "text_delta", "text_delta",
                             "text_delta", "text_end", "finish", "meta"]
    # content_block_stop is whitespace-padded (`"index":0   }`) and still parses
    assert b'"index":0   }' in fixture(DIALECT, "text_complete.sse")
    assert stream["protocol_errors"] == {} and stream["errors"] == []


def test_complete_stream_with_thinking_redacted_thinking_text_and_a_tool_call():
    record = run("tool_complete.sse")
    stream = record["stream"]
    assert outcome(record) == ("none", "complete")
    assert stream["event_counts"] == {
        "meta": 7, "usage": 2, "keepalive": 1,
        "reasoning_start": 2, "reasoning_delta": 2, "reasoning_end": 2,  # thinking + redacted
        "text_start": 1, "text_delta": 1, "text_end": 1,
        "tool_input_start": 1, "tool_input_delta": 5, "tool_input_end": 1, "tool_call": 1,
        "finish": 1}
    assert stream["delta_keys"] == ["thinking", "text", "partial_json"]
    # the tool's index is its content block index; the leading `""` piece is not an arg chunk
    assert stream["tool_calls"] == [{
        "index": 3, "name": "apply_patch", "started_ms": 2.0, "arg_chunks": 5,
        "arg_bytes": sum(len(piece.encode()) for piece in ARG_PIECES), "arg_parsed": True,
        "arg_unchecked": None, "completed": True}]
    assert stream["finish_reason"] == "tool_use" and stream["usage"]["output"] == 89
    assert kinds(record)[:9] == [
        "meta",  # message_start
        "meta", "reasoning_delta", "keepalive", "reasoning_delta",  # thinking block opens empty
        "meta", "meta",  # the closing empty thinking delta, then signature_delta: not progress
        "reasoning_end",
        "reasoning_start",  # redacted_thinking: reasoning, whole at its block start
    ]


# -- the classification table ------------------------------------------------------------------
def test_upstream_reset_mid_text():
    record = run("text_cut.sse", upstream="reset")
    assert outcome(record) == ("transport", "text")
    assert record["outcome"]["retryable"] is True
    assert record["outcome"]["evidence"] == ["upstream_reset", "unterminated_frame"]
    assert kinds(record)[-1] == "unterminated"
    assert record["stream"]["event_counts"]["text_delta"] == 2


def test_overloaded_error_event_mid_reasoning():
    record = run("overloaded_mid_thinking.sse")
    assert outcome(record) == ("provider_error", "reasoning")
    assert record["outcome"]["retryable"] is True
    assert record["outcome"]["evidence"] == ["error_event", "overloaded_error"]
    assert record["stream"]["errors"] == [{"shape": "error_event", "t_ms": 2.0,
                                           "type": "overloaded_error", "code": None,
                                           "message": "Overloaded"}]
    assert record["stream"]["event_counts"]["error"] == 1 and kinds(record)[-1] == "error"


def test_upstream_reset_after_tool_input_deltas_without_block_stop():
    record = run("tool_input_cut.sse", upstream="reset")
    assert outcome(record) == ("transport", "tool_input")
    assert record["outcome"]["retryable"] is True
    call = record["stream"]["tool_calls"][0]
    assert (call["name"], call["arg_chunks"], call["completed"]) == ("apply_patch", 5, False)
    # the five pieces are the whole input: only the block's end was missing (issue 21, item 6)
    assert call["arg_parsed"] is True
    assert ("`apply_patch` had arrived whole (62 bytes in 5 chunks) but the call was never "
            "finalized: no `content_block_stop`, so no tool ran") in record["outcome"]["summary"]
    assert "tool_call" not in record["stream"]["event_counts"]


def test_clean_end_after_five_tool_input_deltas():
    record = run("tool_input_cut.sse")
    assert outcome(record) == ("provider_close", "tool_input")
    assert record["outcome"]["retryable"] is True
    assert record["outcome"]["evidence"] == ["clean_close", "no_terminal_event"]
    assert record["stream"]["tool_calls"][0]["arg_chunks"] == 5
    assert record["stream"]["terminal"] is None


def test_upstream_reset_right_after_the_tool_call_completed():
    record = run("after_tool_call_cut.sse", upstream="reset")
    assert outcome(record) == ("transport", "after_tool_call")
    assert record["stream"]["tool_calls"][0]["completed"] is True
    assert kinds(record)[-1] == "tool_call"


def test_clean_end_after_the_stop_reason_but_before_message_stop():
    record = run("after_finish_cut.sse")
    assert outcome(record) == ("provider_close", "after_finish")
    assert record["outcome"]["retryable"] is False
    assert "finish_reason_seen" in record["outcome"]["evidence"]
    assert record["stream"]["finish_reason"] == "tool_use"
    assert record["stream"]["terminal"] is None


def test_headers_then_silence_then_clean_end():
    record = run(b"")
    assert outcome(record) == ("provider_close", "before_progress")
    assert "no_events" in record["outcome"]["evidence"]


def test_pings_are_keepalives_not_progress():
    record = run("pings_only.sse")
    assert outcome(record) == ("provider_close", "before_progress")
    assert record["stream"]["event_counts"] == {"keepalive": 3}
    assert record["timeline"]["first_progress"] is None


# -- dispatch and quirks -----------------------------------------------------------------------
def test_ping_is_dispatched_on_the_event_name_without_parsing():
    record = run(event("ping", "not json") + fixture(DIALECT, "text_complete.sse"))
    assert record["stream"]["protocol_errors"] == {}
    assert record["stream"]["event_counts"]["keepalive"] == 2


def test_frames_without_event_lines_fall_back_to_the_data_type():
    data = fixture(DIALECT, "tool_complete.sse")
    bare = re.sub(rb"(?m)^event: [a-z_]+\n", b"", data)
    assert b"event:" not in bare
    with_names, without = run(data)["stream"], run(bare)["stream"]
    assert with_names.pop("bytes") != without.pop("bytes")
    assert with_names == without


def test_whitespace_padding_everywhere_changes_nothing():
    def pad(match: re.Match) -> bytes:
        obj = json.loads(match.group(1))
        return b"data: " + json.dumps(obj, separators=(" ,  ", " :\t")).encode() + b"  \n"

    data = fixture(DIALECT, "tool_complete.sse")
    padded = re.sub(rb"(?m)^data: (.*)\n", pad, data)
    assert padded != data
    plain, spaced = run(data)["stream"], run(padded)["stream"]
    plain.pop("bytes"), spaced.pop("bytes")
    assert plain == spaced


def test_unknown_events_and_blocks_are_named_not_guessed():
    data = (event("message_start", {"type": "message_start", "message": {"id": "msg_x"}})
            + event("message_pause", {"type": "message_pause"})
            + event("content_block_start", {"type": "content_block_start", "index": 0,
                                            "content_block": {"type": "hologram"}})
            + event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "hologram_delta", "x": "CANARY"}})
            + event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    record = run(data)
    assert record["stream"]["unknown_types"] == ["message_pause", "hologram", "hologram_delta"]
    assert record["stream"]["event_counts"] == {"meta": 2, "unknown": 3}
    assert outcome(record) == ("provider_close", "before_progress")


def test_server_tool_use_is_a_provider_run_tool_and_its_result_ends_it():
    """Issue 11 class 5: no client tool call; the break after the result names the search."""
    data = (event("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "server_tool_use",
                                                            "id": "srvtoolu_1",
                                                            "name": "web_search", "input": {}}})
            + event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "input_json_delta",
                                                      "partial_json": '{"query": "CANARY"}'}})
            + event("content_block_stop", {"type": "content_block_stop", "index": 0})
            + event("content_block_start", {"type": "content_block_start", "index": 1,
                                            "content_block": {"type": "web_search_tool_result",
                                                              "content": [{"title": "CANARY"}]}})
            + event("content_block_stop", {"type": "content_block_stop", "index": 1}))
    record = run(data, upstream="reset")
    assert record["stream"]["tool_calls"] == []
    assert record["stream"]["server_tools"] == [{"index": 0, "type": "web_search",
                                                 "started_ms": 2.0, "completed": True}]
    assert kinds(record) == ["server_tool_start", "server_tool_delta", "meta",
                             "server_tool_end", "meta"]
    assert outcome(record) == ("transport", "after_server_tool")
    assert "right after the provider's web search returned its result" in \
        record["outcome"]["summary"]
    assert "CANARY" not in json.dumps(record)


def test_gateway_error_chunk_and_unparseable_frames():
    data = fixture(DIALECT, "text_cut.sse").rsplit(b"event:", 1)[0]  # two whole text deltas
    record = run(data + event(None, "{not json") + event(None, {"error": {
        "type": "api_error", "message": "upstream went away"}}))
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert record["stream"]["errors"][0]["shape"] == "wrapped_chunk"
    assert outcome(record) == ("provider_error", "text")
    assert "invalid_json" in record["outcome"]["evidence"]


def test_an_error_event_that_does_not_parse_is_still_an_error():
    record = run(event("error", "<html>502</html>"))
    assert record["stream"]["errors"][0]["shape"] == "error_event"
    assert outcome(record) == ("provider_error", "before_progress")


# -- invariance and redaction ------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_no_content_reaches_the_record(name):
    data = fixture(DIALECT, name)
    assert b"CANARY" in data or name == "pings_only.sse"
    for upstream in ("complete", "reset"):
        assert "CANARY" not in json.dumps(run(data, upstream=upstream))


@pytest.mark.parametrize("name", NAMES)
def test_bytewise_feeding_gives_the_same_record(name):
    assert comparable(run(name, chunks="bytewise")) == comparable(run(name))


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(1, 64), max_size=120))
def test_any_chunking_gives_the_same_record(name, sizes):
    assert comparable(run(name, chunks=sizes)) == comparable(run(name))


# -- citations and MCP tool blocks (citations_and_mcp_tool.sse) ---------------------------------
# frames: 0 message_start, 1 text block start, 2 text delta, 3 citations_delta, 4 text delta,
# 5 stop, 6 mcp_tool_use start, 7 empty input delta, 8-9 input deltas, 10 stop,
# 11-12 mcp_tool_result block, 13 message_delta, 14 message_stop.
def test_citations_and_mcp_tool_blocks():
    record = run("citations_and_mcp_tool.sse")
    stream = record["stream"]
    assert record["outcome"]["summary"] == ("The anthropic stream completed normally: terminal "
                                            "`message_stop` after 15 frames.")
    # One kind per frame: a citation is meta, not progress. An MCP tool call is run by the
    # provider (Anthropic's MCP connector), so it is a server tool: its arguments and its result
    # are the provider's, not a client tool call left waiting.
    assert kinds(record) == ["meta", "meta", "text_delta", "meta", "text_delta", "text_end",
                             "server_tool_start", "meta", "server_tool_delta",
                             "server_tool_delta", "meta", "server_tool_end", "meta", "finish",
                             "meta"]
    assert stream["event_counts"]["text_start"] == 1
    assert stream["tool_calls"] == []
    assert stream["server_tools"] == [{"index": 0, "type": "mcp", "started_ms": 2.0,
                                       "completed": True}]
    assert (stream["unknown_types"], stream["finish_reason"]) == ([], "end_turn")
    assert stream["delta_keys"] == ["text", "partial_json"]
    assert stream["usage"] == {"input": 610, "output": 42, "cache_read": 0, "cache_write": 0}


def test_cut_after_a_citation_and_inside_an_mcp_call():
    data = fixture(DIALECT, "citations_and_mcp_tool.sse")
    record = run(first_frames(data, 4), upstream="truncated")
    assert outcome(record) == ("transport", "text")
    record = run(first_frames(data, 9), upstream="reset")
    assert outcome(record) == ("transport", "server_tool")
    assert record["outcome"]["summary"] == (
        "The connection to anthropic was reset while the provider was running its MCP tool call.")
