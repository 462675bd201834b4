"""anthropic-messages dialect, event by event (Anthropic's "Streaming Messages" reference): the
exact events, delta keys, finish, usage, terminal, tool calls, provider-run tools, errors, ids
and timeline a user sees for each event shape."""

from __future__ import annotations

import pytest

from streamtap.diagnostics.dialects.anthropic_messages import AnthropicMessages
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
