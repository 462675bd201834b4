"""anthropic-messages dialect (Anthropic's "Streaming Messages" reference): event by event, the
exact events, delta keys, finish, usage, terminal, tool calls, provider-run tools, errors, ids
and timeline a user sees for each event shape; then fixtures written from the public docs
(samples/README.md, Sources) fed through the Recorder, checked against the issue 3
classification table, chunking invariance and redaction."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.dialects import choose_dialect, dialect_class
from streamtap.diagnostics.dialects.anthropic_messages import AnthropicMessages
from tests.support import FIXTURES, comparable, first_frames, fixture, record_stream
from tests.unit.dialect_feed import facts, feed, kinds, sse


def ev(obj: dict | bytes, name: str | None = "") -> bytes:
    """An event named after its data's `type` (name="" ), a given name, or no `event:` line."""
    if name == "" and isinstance(obj, dict):
        name = obj["type"]
    return sse(obj, name or None)


def run(*frames: bytes, **kwargs) -> dict:
    return feed("anthropic-messages", list(frames), **kwargs)


START = ev({"type": "message_start", "message": {
    "id": "msg_01Unit", "type": "message", "role": "assistant", "content": [],
    "usage": {"input_tokens": 20, "cache_creation_input_tokens": 3,
              "cache_read_input_tokens": 4, "output_tokens": 1}}})
STOP = ev({"type": "message_stop"})
PING = ev({"type": "ping"})


def block_start(index: int, block: dict) -> bytes:
    return ev({"type": "content_block_start", "index": index, "content_block": block})


def delta(index: int, body: dict) -> bytes:
    return ev({"type": "content_block_delta", "index": index, "delta": body})


def text(index: int, words: str = "w") -> bytes:
    return delta(index, {"type": "text_delta", "text": words})


def thinking(index: int, words: str = "w") -> bytes:
    return delta(index, {"type": "thinking_delta", "thinking": words})


def json_piece(index: int, piece) -> bytes:
    return delta(index, {"type": "input_json_delta", "partial_json": piece})


def block_stop(index: int) -> bytes:
    return ev({"type": "content_block_stop", "index": index})


def message_delta(reason="end_turn", usage=None) -> bytes:
    body = {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None}}
    if usage is not None:
        body["usage"] = usage
    return ev(body)


def calls(record: dict) -> list[tuple]:
    return [(c["index"], c["name"], c["arg_chunks"], c["arg_bytes"], c["completed"])
            for c in record["stream"]["tool_calls"]]


def servers(record: dict) -> list[tuple]:
    return [(s["index"], s["type"], s["completed"]) for s in record["stream"]["server_tools"]]


# -- a whole message ------------------------------------------------------------------------------
def test_text_message_end_to_end():
    record = run(START, PING, block_start(0, {"type": "text", "text": ""}), text(0), text(0),
                 block_stop(0), message_delta(usage={"output_tokens": 9}), STOP)
    assert facts(record) == {
        "event_counts": {"meta": 3, "usage": 2, "keepalive": 1, "text_start": 1,
                         "text_delta": 2, "text_end": 1, "finish": 1},
        "delta_keys": ["text"], "finish_reason": "end_turn",
        "usage": {"input": 20, "output": 9, "cache_read": 4, "cache_write": 3},
        "terminal": "message_stop", "unknown_types": [], "protocol_errors": {}}
    assert kinds(record) == ["meta", "keepalive", "meta", "text_delta", "text_delta", "text_end",
                             "finish", "meta"]
    timeline = record["timeline"]
    assert (timeline["first_event"], timeline["first_progress"], timeline["last_progress"],
            timeline["terminal_event"]) == (3.0, 6.0, 7.0, 10.0)
    assert record["correlation"]["response_id"] == "msg_01Unit"
    assert record["outcome"]["boundary"] == "none"


def test_a_ping_first_is_not_the_first_event():
    record = run(PING, START)
    assert record["timeline"]["first_event"] == 4.0
    assert record["stream"]["event_counts"] == {"keepalive": 1, "meta": 1, "usage": 1}


def test_thinking_then_text_then_a_tool_call():
    record = run(START,
                 block_start(0, {"type": "thinking", "thinking": ""}), thinking(0),
                 delta(0, {"type": "thinking_delta", "thinking": ""}),
                 delta(0, {"type": "signature_delta", "signature": "sig"}), block_stop(0),
                 block_start(1, {"type": "text", "text": ""}), text(1), block_stop(1),
                 block_start(2, {"type": "tool_use", "id": "toolu_1", "name": "apply_patch",
                                 "input": {}}),
                 json_piece(2, ""), json_piece(2, '{"a":'), json_piece(2, "1}"), block_stop(2),
                 message_delta("tool_use"), STOP)
    assert calls(record) == [(2, "apply_patch", 2, 7, True)]
    assert record["stream"]["delta_keys"] == ["thinking", "text", "partial_json"]
    assert record["stream"]["event_counts"] == {
        "meta": 7, "usage": 1, "reasoning_start": 1, "reasoning_delta": 1, "reasoning_end": 1,
        "text_start": 1, "text_delta": 1, "text_end": 1, "tool_input_start": 1,
        "tool_input_delta": 2, "tool_input_end": 1, "tool_call": 1, "finish": 1}
    assert kinds(record) == [
        "meta", "meta", "reasoning_delta", "meta", "meta", "reasoning_end", "meta", "text_delta",
        "text_end", "tool_input_start", "meta", "tool_input_delta", "tool_input_delta",
        "tool_call", "finish", "meta"]
    assert record["stream"]["finish_reason"] == "tool_use"
    assert record["stream"]["tool_calls"][0]["started_ms"] == 12.0


def test_redacted_thinking_starts_reasoning_and_its_stop_ends_it():
    record = run(block_start(0, {"type": "redacted_thinking", "data": "opaque"}), block_stop(0))
    assert kinds(record) == ["reasoning_start", "reasoning_end"]
    assert record["stream"]["event_counts"] == {"reasoning_start": 1, "reasoning_end": 1}
    assert record["stream"]["delta_keys"] == []


def test_words_in_the_block_start_count():
    record = run(block_start(0, {"type": "text", "text": "w"}),
                 block_start(1, {"type": "thinking", "thinking": "w"}), block_stop(1),
                 block_stop(0))
    assert kinds(record) == ["text_delta", "reasoning_delta", "reasoning_end", "text_end"]
    assert record["stream"]["delta_keys"] == ["text", "thinking"]


def test_an_empty_block_stops_as_meta():
    record = run(block_start(0, {"type": "text", "text": ""}), block_stop(0))
    assert kinds(record) == ["meta", "meta"]
    assert record["stream"]["event_counts"] == {"meta": 2}


def test_deltas_without_their_block_start_still_open_the_block():
    record = run(text(0), text(0), block_stop(0), thinking(1), block_stop(1), block_stop(5))
    assert kinds(record) == ["text_delta", "text_delta", "text_end", "reasoning_delta",
                             "reasoning_end", "meta"]
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 2, "text_end": 1,
                                                "reasoning_start": 1, "reasoning_delta": 1,
                                                "reasoning_end": 1, "meta": 1}


# -- the byte probe and the parsed path agree -----------------------------------------------------
@pytest.mark.parametrize("spaced", [False, True])
def test_word_deltas_parsed_or_probed(spaced):
    frames = [text(0), thinking(1), text(0, ""), thinking(1, "")]
    if spaced:  # the probe allows whitespace; a different key order is parsed
        frames = [f.replace(b'"index":', b'"index": ') for f in frames]
    record = run(*frames)
    assert kinds(record) == ["text_delta", "reasoning_delta", "meta", "meta"]
    assert record["stream"]["delta_keys"] == ["text", "thinking"]


def test_a_word_delta_in_another_key_order_is_parsed():
    frame = ev(b'{"index":0,"type":"content_block_delta","delta":{"text":"w","type":"text_delta"}}',
               "content_block_delta")
    record = run(frame, frame)
    assert kinds(record) == ["text_delta", "text_delta"]
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 2}


def test_a_word_delta_cut_short_is_invalid_json():
    cut = b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"w'
    record = run(ev(cut, "content_block_delta"))
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert kinds(record) == ["unknown"]


def test_the_probe_reads_a_multi_digit_index():
    record = run(text(12), block_stop(12))
    assert kinds(record) == ["text_delta", "text_end"]


def test_a_thinking_piece_in_a_text_delta_does_not_match_the_probe():
    frame = ev(b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta",'
               b'"thinking":"w"}}', "content_block_delta")
    record = run(frame)
    assert kinds(record) == ["meta"]  # a text_delta without `text` carries nothing


# -- deltas ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("body", ["x", None, ["x"]])
def test_a_delta_that_is_not_an_object_is_malformed(body):
    record = run(ev({"type": "content_block_delta", "index": 0, "delta": body}))
    assert record["stream"]["protocol_errors"] == {"malformed_block_delta": 1}
    assert kinds(record) == ["meta"]


def test_citations_and_signatures_are_meta_and_unknown_deltas_are_named():
    record = run(delta(0, {"type": "citations_delta", "citation": {}}),
                 delta(0, {"type": "signature_delta", "signature": "s"}),
                 delta(0, {"type": "future_delta"}))
    assert kinds(record) == ["meta", "meta", "unknown"]
    assert record["stream"]["unknown_types"] == ["future_delta"]


@pytest.mark.parametrize("piece", ["", None, 5, ["x"]])
def test_empty_or_odd_json_pieces_are_meta(piece):
    record = run(block_start(0, {"type": "tool_use", "name": "apply_patch", "input": {}}),
                 json_piece(0, piece))
    assert kinds(record) == ["tool_input_start", "meta"]
    assert calls(record) == [(0, "apply_patch", 0, 0, False)]


def test_json_pieces_without_their_block_start_start_a_call():
    record = run(json_piece(3, '{"a":'), json_piece(3, "1}"), block_stop(3))
    assert calls(record) == [(3, None, 2, 7, True)]
    assert kinds(record) == ["tool_input_delta", "tool_input_delta", "tool_call"]
    assert record["stream"]["event_counts"]["tool_input_start"] == 1


def test_argument_bytes_count_utf8():
    record = run(block_start(0, {"type": "tool_use", "name": "apply_patch", "input": {}}),
                 json_piece(0, '"\u00e9"'))
    assert calls(record) == [(0, "apply_patch", 1, 4, False)]


def test_input_given_whole_at_the_start_is_sized_compactly():
    record = run(block_start(0, {"type": "tool_use", "name": "read_file",
                                 "input": {"a": [1, 2], "b": "\u00e9"}}), block_stop(0))
    assert calls(record) == [(0, "read_file", 1, 20, True)]
    assert record["stream"]["event_counts"] == {"tool_input_start": 1, "tool_input_delta": 1,
                                                "tool_input_end": 1, "tool_call": 1}


def test_a_name_the_request_did_not_define_is_dropped():
    record = run(block_start(0, {"type": "tool_use", "name": "secret_tool", "input": {}}))
    assert calls(record) == [(0, None, 0, 0, False)]


def test_a_tool_block_stopped_twice_completes_once():
    record = run(block_start(0, {"type": "tool_use", "name": "apply_patch", "input": {}}),
                 block_stop(0), block_stop(0))
    assert kinds(record) == ["tool_input_start", "tool_call", "meta"]


# -- block starts ---------------------------------------------------------------------------------
@pytest.mark.parametrize("body", [
    {"type": "content_block_start", "index": "0", "content_block": {"type": "text"}},
    {"type": "content_block_start", "index": 0, "content_block": "text"},
    {"type": "content_block_start", "content_block": {"type": "text"}},
])
def test_a_malformed_block_start(body):
    record = run(ev(body))
    assert record["stream"]["protocol_errors"] == {"malformed_block_start": 1}
    assert kinds(record) == ["meta"]


def test_unknown_blocks_are_named_and_their_stop_is_meta():
    record = run(block_start(0, {"type": "container_upload"}), block_stop(0),
                 block_start(1, {"kind": "x"}))
    assert kinds(record) == ["unknown", "meta", "unknown"]
    assert record["stream"]["unknown_types"] == ["container_upload", "<none>"]


# -- provider-run tools ---------------------------------------------------------------------------
def test_web_search_runs_on_the_provider():
    record = run(block_start(0, {"type": "server_tool_use", "id": "srvtoolu_1",
                                 "name": "web_search", "input": {}}),
                 json_piece(0, '{"query":'), json_piece(0, '"x"}'), block_stop(0),
                 block_start(1, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
                                 "content": []}), block_stop(1),
                 block_start(2, {"type": "text", "text": ""}), text(2))
    assert servers(record) == [(0, "web_search", True)]
    assert calls(record) == []
    assert record["stream"]["delta_keys"] == ["partial_json", "text"]
    assert kinds(record) == ["server_tool_start", "server_tool_delta", "server_tool_delta",
                             "meta", "server_tool_end", "meta", "meta", "text_delta"]


def test_mcp_tool_use_is_typed_mcp_whatever_its_name():
    record = run(block_start(0, {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "echo",
                                 "server_name": "s", "input": {}}),
                 block_start(1, {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1"}))
    assert servers(record) == [(0, "mcp", True)]
    assert kinds(record) == ["server_tool_start", "server_tool_end"]


def test_a_result_with_an_unknown_tool_use_id_ends_the_open_tool():
    record = run(block_start(0, {"type": "server_tool_use", "id": "srvtoolu_1",
                                 "name": "code_execution", "input": {}}),
                 block_start(1, {"type": "server_tool_use", "name": "web_fetch", "input": {}}),
                 block_start(2, {"type": "web_fetch_tool_result", "tool_use_id": "other"}),
                 block_start(3, {"type": "code_execution_tool_result",
                                 "tool_use_id": "srvtoolu_1"}))
    assert servers(record) == [(0, "code_execution", True), (1, "web_fetch", True)]
    assert kinds(record) == ["server_tool_start", "server_tool_start", "server_tool_end",
                             "server_tool_end"]


def test_a_result_for_a_tool_already_ended_still_counts_its_event_once():
    record = run(block_start(0, {"type": "server_tool_use", "id": "srvtoolu_1",
                                 "name": "web_search", "input": {}}),
                 block_start(1, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1"}),
                 block_start(2, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1"}))
    assert record["stream"]["event_counts"] == {"server_tool_start": 1, "server_tool_end": 1}
    assert kinds(record) == ["server_tool_start", "server_tool_end", "server_tool_end"]


# -- the message ----------------------------------------------------------------------------------
def test_message_delta_without_a_reason_is_a_usage_frame():
    record = run(ev({"type": "message_delta", "delta": {}, "usage": {"output_tokens": 5}}),
                 ev({"type": "message_delta", "delta": "x"}),
                 ev({"type": "message_delta", "delta": {"stop_reason": None}, "usage": {}}))
    assert kinds(record) == ["usage", "meta", "meta"]
    assert record["stream"]["usage"] == {"output": 5}
    assert record["stream"]["finish_reason"] is None
    assert record["stream"]["event_counts"] == {"usage": 1, "meta": 2}


def test_message_start_without_a_message_object():
    record = run(ev({"type": "message_start", "message": "x"}))
    assert kinds(record) == ["meta"]
    assert record["correlation"]["response_id"] is None
    assert record["stream"]["event_counts"] == {"meta": 1}


def test_cumulative_usage_overwrites():
    record = run(START, message_delta(usage={"input_tokens": 25, "output_tokens": 30}))
    assert record["stream"]["usage"] == {"input": 25, "output": 30, "cache_read": 4,
                                         "cache_write": 3}


# -- dispatch without event names -----------------------------------------------------------------
def test_frames_without_event_names_dispatch_on_type():
    record = run(ev({"type": "message_start", "message": {"id": "msg_x"}}, None),
                 ev({"type": "ping"}, None),
                 ev({"type": "content_block_start", "index": 0,
                     "content_block": {"type": "text", "text": ""}}, None),
                 ev({"type": "content_block_delta", "index": 0,
                     "delta": {"type": "text_delta", "text": "w"}}, None),
                 ev({"type": "content_block_stop", "index": 0}, None),
                 ev({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}, None),
                 ev({"type": "message_stop"}, None))
    assert kinds(record) == ["meta", "keepalive", "meta", "text_delta", "text_end", "finish",
                             "meta"]
    assert record["stream"]["terminal"] == "message_stop"


def test_a_data_ping_under_another_event_name_is_dispatched_by_name():
    record = run(ev({"type": "ping"}, "keepalive_custom"))
    assert kinds(record) == ["unknown"]
    assert record["stream"]["unknown_types"] == ["keepalive_custom"]


def test_a_ping_event_is_not_parsed():
    record = run(ev(b"not json", "ping"))
    assert kinds(record) == ["keepalive"]
    assert record["stream"]["protocol_errors"] == {}


# -- errors ---------------------------------------------------------------------------------------
def test_an_error_event():
    record = run(START, block_start(0, {"type": "text", "text": ""}), text(0),
                 ev({"type": "error", "error": {"type": "overloaded_error",
                                                "message": "Overloaded"}}))
    assert record["stream"]["errors"] == [{"shape": "error_event", "t_ms": 6.0,
                                           "type": "overloaded_error", "code": None,
                                           "message": "Overloaded"}]
    assert kinds(record)[-1] == "error"
    assert record["outcome"]["boundary"] == "provider_error"
    assert record["outcome"]["phase"] == "text"


def test_an_error_event_without_an_error_object():
    record = run(ev({"type": "error"}))
    assert record["stream"]["errors"] == [{"shape": "error_event", "t_ms": 3.0, "type": None,
                                           "code": None, "message": None}]
    assert kinds(record) == ["error"]


def test_an_error_event_that_does_not_parse():
    record = run(ev(b"{not json", "error"))
    assert [e["shape"] for e in record["stream"]["errors"]] == ["error_event"]
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert kinds(record) == ["error"]


def test_other_unparseable_frames_are_unknown():
    record = run(ev(b"{not json", "content_block_stop"), ev(b"[1]", "message_delta"))
    assert kinds(record) == ["unknown", "unknown"]
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert record["stream"]["errors"] == []


def test_a_gateway_error_chunk_without_event_or_type():
    record = run(ev({"error": {"type": "rate_limit_error", "message": "slow"}}, None))
    assert record["stream"]["errors"] == [{"shape": "wrapped_chunk", "t_ms": 3.0,
                                           "type": "rate_limit_error", "code": None,
                                           "message": "slow"}]
    assert kinds(record) == ["error"]


def test_a_frame_without_event_type_or_error_is_unknown():
    record = run(ev({"foo": 1}, None), ev({"error": None}, None))
    assert kinds(record) == ["unknown", "unknown"]
    assert record["stream"]["unknown_types"] == ["<none>"]
    assert record["stream"]["errors"] == []


def test_terminal_names():
    assert AnthropicMessages.terminal_names == ("message_stop",)


# -- what the survivors of a mutation run showed unpinned -----------------------------------------
def test_the_record_names_the_dialect():
    assert run(START)["dialect"] == "anthropic-messages"


def test_a_thinking_delta_in_another_key_order_is_parsed():
    frame = ev(b'{"index":1,"type":"content_block_delta",'
               b'"delta":{"thinking":"w","type":"thinking_delta"}}', "content_block_delta")
    record = run(frame, frame)
    assert kinds(record) == ["reasoning_delta", "reasoning_delta"]
    assert record["stream"]["delta_keys"] == ["thinking"]
    assert record["stream"]["event_counts"] == {"reasoning_start": 1, "reasoning_delta": 2}


def test_the_probe_runs_only_under_the_content_block_delta_name():
    word_delta = b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"w"}}'
    bad = word_delta + b"}"  # one brace too many: not JSON
    record = run(ev(bad, "content_block_delta"), ev(bad, None), ev(word_delta, "message_delta"))
    # Under its own name the probe counts the piece (it does not validate: it is a probe);
    # without a name the frame is parsed, and under another name it is that event.
    assert kinds(record) == ["text_delta", "unknown", "meta"]
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}


def test_lone_surrogates_are_sized_not_fatal():
    record = run(block_start(0, {"type": "tool_use", "name": "apply_patch",
                                 "input": {"a": "\ud800"}}),
                 json_piece(0, "\ud800"), block_stop(0))
    # every piece is sized alike, a lone surrogate as 3 bytes (surrogatepass): the whole input
    # `{"a":"\ud800"}` (11 bytes) and one piece of 3 bytes
    assert calls(record) == [(0, "apply_patch", 2, 14, True)]


def test_a_result_ends_the_tool_it_names_not_the_latest():
    record = run(block_start(0, {"type": "server_tool_use", "id": "srvtoolu_A",
                                 "name": "web_search", "input": {}}),
                 block_start(1, {"type": "server_tool_use", "id": "srvtoolu_B",
                                 "name": "web_fetch", "input": {}}),
                 block_start(2, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_A"}))
    assert servers(record) == [(0, "web_search", True), (1, "web_fetch", False)]


# -- whole streams: fixtures from the public docs, through the Recorder ---------------------------
DIALECT = "anthropic-messages"
PATH = "/v1/messages"
REQUEST = {"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 1024,
           "messages": [{"role": "user", "content": "CANARY-PROMPT-2b7e"}],
           "tools": [{"name": "apply_patch", "input_schema": {"type": "object"}}]}
NAMES = sorted(path.name for path in (FIXTURES / DIALECT).iterdir())
ARG_PIECES = ['{"path": "CANARY-ARG-91c2', '.py", "pa', 'tch": "@@ -1 +1', r" @@\n-a\n+b", '"}']
USAGE_START = {"input": 472, "output": 1, "cache_read": 128, "cache_write": 0}


def record_of(data: bytes | str, **kwargs) -> dict:
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



# -- the registry ------------------------------------------------------------------------------
def test_registry_finds_the_dialect_by_name_and_path():
    assert dialect_class(DIALECT) is AnthropicMessages
    assert choose_dialect(None, PATH, "text/event-stream; charset=utf-8") is AnthropicMessages
    assert AnthropicMessages.terminal_names == ("message_stop",)


# -- complete streams --------------------------------------------------------------------------
def test_complete_text_stream():
    record = record_of("text_complete.sse")
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
    record = record_of("tool_complete.sse")
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
    record = record_of("text_cut.sse", upstream="reset")
    assert outcome(record) == ("transport", "text")
    assert record["outcome"]["retryable"] is True
    assert record["outcome"]["evidence"] == ["upstream_reset", "unterminated_frame"]
    assert kinds(record)[-1] == "unterminated"
    assert record["stream"]["event_counts"]["text_delta"] == 2


def test_overloaded_error_event_mid_reasoning():
    record = record_of("overloaded_mid_thinking.sse")
    assert outcome(record) == ("provider_error", "reasoning")
    assert record["outcome"]["retryable"] is True
    assert record["outcome"]["evidence"] == ["error_event", "overloaded_error"]
    assert record["stream"]["errors"] == [{"shape": "error_event", "t_ms": 2.0,
                                           "type": "overloaded_error", "code": None,
                                           "message": "Overloaded"}]
    assert record["stream"]["event_counts"]["error"] == 1 and kinds(record)[-1] == "error"


def test_upstream_reset_after_tool_input_deltas_without_block_stop():
    record = record_of("tool_input_cut.sse", upstream="reset")
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
    record = record_of("tool_input_cut.sse")
    assert outcome(record) == ("provider_close", "tool_input")
    assert record["outcome"]["retryable"] is True
    assert record["outcome"]["evidence"] == ["clean_close", "no_terminal_event"]
    assert record["stream"]["tool_calls"][0]["arg_chunks"] == 5
    assert record["stream"]["terminal"] is None


def test_upstream_reset_right_after_the_tool_call_completed():
    record = record_of("after_tool_call_cut.sse", upstream="reset")
    assert outcome(record) == ("transport", "after_tool_call")
    assert record["stream"]["tool_calls"][0]["completed"] is True
    assert kinds(record)[-1] == "tool_call"


def test_clean_end_after_the_stop_reason_but_before_message_stop():
    record = record_of("after_finish_cut.sse")
    assert outcome(record) == ("provider_close", "after_finish")
    assert record["outcome"]["retryable"] is False
    assert "finish_reason_seen" in record["outcome"]["evidence"]
    assert record["stream"]["finish_reason"] == "tool_use"
    assert record["stream"]["terminal"] is None


def test_headers_then_silence_then_clean_end():
    record = record_of(b"")
    assert outcome(record) == ("provider_close", "before_progress")
    assert "no_events" in record["outcome"]["evidence"]


def test_pings_are_keepalives_not_progress():
    record = record_of("pings_only.sse")
    assert outcome(record) == ("provider_close", "before_progress")
    assert record["stream"]["event_counts"] == {"keepalive": 3}
    assert record["timeline"]["first_progress"] is None


# -- dispatch and quirks -----------------------------------------------------------------------
def test_ping_is_dispatched_on_the_event_name_without_parsing():
    record = record_of(event("ping", "not json") + fixture(DIALECT, "text_complete.sse"))
    assert record["stream"]["protocol_errors"] == {}
    assert record["stream"]["event_counts"]["keepalive"] == 2


def test_frames_without_event_lines_fall_back_to_the_data_type():
    data = fixture(DIALECT, "tool_complete.sse")
    bare = re.sub(rb"(?m)^event: [a-z_]+\n", b"", data)
    assert b"event:" not in bare
    with_names, without = record_of(data)["stream"], record_of(bare)["stream"]
    assert with_names.pop("bytes") != without.pop("bytes")
    assert with_names == without


def test_whitespace_padding_everywhere_changes_nothing():
    def pad(match: re.Match) -> bytes:
        obj = json.loads(match.group(1))
        return b"data: " + json.dumps(obj, separators=(" ,  ", " :\t")).encode() + b"  \n"

    data = fixture(DIALECT, "tool_complete.sse")
    padded = re.sub(rb"(?m)^data: (.*)\n", pad, data)
    assert padded != data
    plain, spaced = record_of(data)["stream"], record_of(padded)["stream"]
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
    record = record_of(data)
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
    record = record_of(data, upstream="reset")
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
    record = record_of(data + event(None, "{not json") + event(None, {"error": {
        "type": "api_error", "message": "upstream went away"}}))
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert record["stream"]["errors"][0]["shape"] == "wrapped_chunk"
    assert outcome(record) == ("provider_error", "text")
    assert "invalid_json" in record["outcome"]["evidence"]


def test_an_error_event_that_does_not_parse_is_still_an_error():
    record = record_of(event("error", "<html>502</html>"))
    assert record["stream"]["errors"][0]["shape"] == "error_event"
    assert outcome(record) == ("provider_error", "before_progress")


# -- invariance and redaction ------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_no_content_reaches_the_record(name):
    data = fixture(DIALECT, name)
    assert b"CANARY" in data or name == "pings_only.sse"
    for upstream in ("complete", "reset"):
        assert "CANARY" not in json.dumps(record_of(data, upstream=upstream))


@pytest.mark.parametrize("name", NAMES)
def test_bytewise_feeding_gives_the_same_record(name):
    assert comparable(record_of(name, chunks="bytewise")) == comparable(record_of(name))


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(1, 64), max_size=120))
def test_any_chunking_gives_the_same_record(name, sizes):
    assert comparable(record_of(name, chunks=sizes)) == comparable(record_of(name))


# -- citations and MCP tool blocks (citations_and_mcp_tool.sse) ---------------------------------
# frames: 0 message_start, 1 text block start, 2 text delta, 3 citations_delta, 4 text delta,
# 5 stop, 6 mcp_tool_use start, 7 empty input delta, 8-9 input deltas, 10 stop,
# 11-12 mcp_tool_result block, 13 message_delta, 14 message_stop.
def test_citations_and_mcp_tool_blocks():
    record = record_of("citations_and_mcp_tool.sse")
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
    record = record_of(first_frames(data, 4), upstream="truncated")
    assert outcome(record) == ("transport", "text")
    record = record_of(first_frames(data, 9), upstream="reset")
    assert outcome(record) == ("transport", "server_tool")
    assert record["outcome"]["summary"] == (
        "The connection to anthropic was reset while the provider was running its MCP tool call.")
