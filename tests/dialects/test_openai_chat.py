"""openai-chat dialect: fixtures written from the public docs (samples/README.md, Sources), fed
through the Recorder, checked against the issue 3 classification table, chunking invariance and
redaction."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.dialects import choose_dialect, dialect_class, openai_chat
from streamtap.diagnostics.dialects.openai_chat import OpenAIChat
from tests.support import FIXTURES, comparable, first_frames, fixture, record_stream

DIALECT = "openai-chat"
PATH = "/v1/chat/completions"
TOOLS_REQUEST = {"model": "gpt-x", "stream": True,
                 "tools": [{"type": "function", "function": {"name": "apply_patch"}}]}
NAMES = sorted(path.name for path in (FIXTURES / DIALECT).iterdir())
TOOL_PIECES = ['{"patch":"', "CANARY-ARG-91c2", " ", "CANARY-ARG-91c2", '"}']


def run(data: bytes | str, request: dict | None = None, **kwargs) -> dict:
    if isinstance(data, str):
        data = fixture(DIALECT, data)
    return record_stream(data, path=PATH, request=request or TOOLS_REQUEST, **kwargs)


def chunk(usage: dict | None = None, **choice) -> bytes:
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
    record = run("text_complete.sse")
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
    squeezed = run(data.replace(b"data: ", b"data:"))["stream"]
    spaced = run(data.replace(b"data:{", b"data: {"))["stream"]
    assert squeezed["bytes"] != spaced["bytes"]
    squeezed.pop("bytes"), spaced.pop("bytes")
    assert squeezed == spaced
    assert spaced["event_counts"]["text_delta"] == 3


def test_deepseek_reasoning_content_and_usage_on_the_finish_chunk():
    record = run("reasoning_deepseek.sse")
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
    record = run("reasoning_openrouter.sse")
    stream = record["stream"]
    assert outcome(record) == ("none", "complete")
    assert stream["delta_keys"] == ["reasoning", "reasoning_details", "content"]
    # Both fields in one chunk are one delta; an encrypted-only detail is meta, not progress.
    assert stream["event_counts"]["reasoning_delta"] == 2
    assert [entry[2] for entry in record["frames"]][4] == "meta"
    assert stream["usage"]["reasoning"] == 3
    assert record["correlation"]["response_id"] == "gen-fx3"


def test_moonshot_usage_inside_the_choice():
    stream = run("moonshot_usage.sse")["stream"]
    assert stream["usage"] == {"input": 30, "output": 6}
    assert stream["delta_keys"] == ["reasoning_content", "content"]
    assert stream["finish_reason"] == "stop"


def test_complete_tool_call_in_pieces():
    record = run("tool_call.sse")
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
    record = run(cut, upstream="reset")
    calls = record["stream"]["tool_calls"]
    assert [(call["index"], call["completed"]) for call in calls] == [(0, True), (1, False)]
    assert calls[1]["name"] is None  # `read_file` was not defined by the request
    assert outcome(record) == ("transport", "tool_input")
    whole = run("two_tools.sse")["stream"]
    assert whole["event_counts"]["tool_call"] == 2
    assert all(call["completed"] for call in whole["tool_calls"])


def test_finish_reason_length_leaves_the_call_incomplete():
    record = run("tool_length.sse")
    stream = record["stream"]
    assert stream["finish_reason"] == "length"
    assert stream["tool_calls"][0]["completed"] is False
    assert "tool_call" not in stream["event_counts"]
    assert outcome(record) == ("none", "complete")


def test_ollama_whole_call_in_one_chunk():
    record = run("ollama_whole_call.sse")
    stream = record["stream"]
    assert [entry[2] for entry in record["frames"]][1] == "tool_call"
    assert stream["tool_calls"][0]["completed"] is True
    assert stream["tool_calls"][0]["arg_chunks"] == 1
    assert stream["delta_keys"] == ["reasoning", "arguments"]
    assert stream["event_counts"]["tool_call"] == 1  # the finish does not complete it twice


def test_legacy_function_call_completes_on_function_call_finish():
    data = (chunk(delta={"function_call": {"name": "apply_patch", "arguments": ""}})
            + chunk(delta={"function_call": {"arguments": '{"a":'}})
            + chunk(delta={"function_call": {"arguments": "1}"}})
            + chunk(finish_reason="function_call") + b"data: [DONE]\n\n")
    stream = run(data)["stream"]
    assert stream["tool_calls"][0]["completed"] is True
    assert stream["tool_calls"][0]["arg_chunks"] == 2


def test_tool_name_the_request_did_not_define_is_not_recorded():
    record = run("ollama_whole_call.sse", request={"model": "m", "stream": True})
    assert record["stream"]["tool_calls"][0]["name"] is None


# -- the classification rows -------------------------------------------------------------------
@pytest.mark.parametrize("partial", [0, 40])  # on a frame boundary; 40 bytes into the next
def test_reset_mid_text(partial):
    data = fixture(DIALECT, "text_complete.sse")
    cut = first_frames(data, 3)
    record = run(data[:len(cut) + partial], upstream="reset")
    assert ("unterminated_frame" in record["outcome"]["evidence"]) == bool(partial)
    assert outcome(record) == ("transport", "text")
    assert record["outcome"]["retryable"] is True
    assert "upstream_reset" in record["outcome"]["evidence"]


def test_reset_after_tool_input_deltas_without_tool_call():
    record = run(first_frames(fixture(DIALECT, "tool_call.sse"), 7), upstream="reset")
    stream = record["stream"]
    assert outcome(record) == ("transport", "tool_input")
    assert stream["event_counts"]["tool_input_delta"] == 5
    assert "tool_call" not in stream["event_counts"]
    assert stream["tool_calls"][0]["completed"] is False
    # the five pieces are the whole arguments: only the finish was missing (issue 21, item 6)
    assert ("`apply_patch` had arrived whole (43 bytes in 5 chunks) but the call was never "
            "finalized: no finish_reason, so no tool ran") in record["outcome"]["summary"]


def test_clean_end_after_tool_input_deltas():
    record = run(first_frames(fixture(DIALECT, "tool_call.sse"), 7))
    assert outcome(record) == ("provider_close", "tool_input")
    assert record["outcome"]["retryable"] is True
    assert {"clean_close", "no_terminal_event"} <= set(record["outcome"]["evidence"])


@pytest.mark.parametrize("frames", [5, 6])  # after the finish chunk; after finish and usage
def test_clean_end_after_finish_before_done(frames):
    record = run(first_frames(fixture(DIALECT, "text_complete.sse"), frames))
    assert outcome(record) == ("provider_close", "after_finish")
    assert record["outcome"]["retryable"] is False
    assert "finish_reason_seen" in record["outcome"]["evidence"]
    assert record["stream"]["finish_reason"] == "stop" and record["stream"]["terminal"] is None


def test_openai_mid_stream_error_chunk():
    record = run("openai_error_chunk.sse")
    stream = record["stream"]
    assert outcome(record) == ("provider_error", "text")
    assert record["outcome"]["retryable"] is True
    assert stream["errors"][0]["shape"] == "wrapped_chunk"
    assert stream["errors"][0]["type"] == "server_error"
    assert stream["terminal"] is None and stream["event_counts"]["error"] == 1


def test_openrouter_finish_reason_error_stays_in_the_phase_before_it():
    record = run("openrouter_error_finish.sse")
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
    assert outcome(run(reasoning)) == ("provider_error", "reasoning")


def test_finish_reason_error_without_an_error_object():
    record = run(chunk(delta={"content": "CANARY-OUTPUT-7f3a"}) + chunk(finish_reason="error"))
    assert outcome(record) == ("provider_error", "text")
    assert record["stream"]["errors"][0]["shape"] == "finish_reason_error"
    assert record["stream"]["finish_reason"] == "error"


def test_unparseable_json_in_one_frame_of_a_fine_stream():
    record = run("invalid_json.sse")
    assert outcome(record) == ("none", "complete")
    assert "invalid_json" in record["outcome"]["evidence"]
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert record["stream"]["event_counts"]["text_delta"] == 3


@pytest.mark.parametrize("data", [b"", b": OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\n"])
def test_headers_then_clean_end_without_events(data):
    record = run(data)
    assert outcome(record) == ("provider_close", "before_progress")
    assert record["outcome"]["retryable"] is True


def test_reset_right_after_a_whole_call():
    record = run(first_frames(fixture(DIALECT, "ollama_whole_call.sse"), 2), upstream="reset")
    assert outcome(record) == ("transport", "after_tool_call")
    assert "right after tool call `apply_patch` completed" in record["outcome"]["summary"]


# -- the byte probe for plain text chunks ------------------------------------------------------
def without_probe(monkeypatch) -> None:
    monkeypatch.setattr(openai_chat, "PLAIN_TEXT_HEAD", b"\x00no chunk has this")


@pytest.mark.parametrize("name", NAMES)
def test_byte_probe_agrees_with_parsing(name, monkeypatch):
    data = fixture(DIALECT, name)
    probed = comparable(run(data))
    without_probe(monkeypatch)
    assert comparable(run(data)) == probed


def test_byte_probe_skips_parsing_of_plain_text_chunks(monkeypatch):
    parsed = []
    real = openai_chat.load_json
    monkeypatch.setattr(openai_chat, "load_json", lambda data, state: parsed.append(1) or real(
        data, state))
    run("text_complete.sse")
    assert len(parsed) == 4  # role, first text, finish, usage; two text chunks and [DONE] probed


def test_byte_probe_is_not_fooled_by_text_that_looks_like_json(monkeypatch):
    tricky = ['"},"logprobs":null,"finish_reason":null}]', 'a": "b', '"usage":{"prompt_tokens":9}',
              '"error":{"type":"x"}']
    data = (chunk(delta={"content": "CANARY-OUTPUT-7f3a"})
            + b"".join(chunk(delta={"content": text}) for text in tricky)
            + chunk(delta={"content": "x", "refusal": "CANARY-OUTPUT-7f3a"})
            + chunk(delta={"content": "x"}, usage={"prompt_tokens": 7, "completion_tokens": 1})
            + chunk(delta={"content": "x", "tool_calls": [
                {"index": 0, "function": {"name": "apply_patch", "arguments": ""}}]})
            + chunk(finish_reason="stop") + b"data: [DONE]\n\n")
    probed = run(data)
    stream = probed["stream"]
    assert stream["event_counts"]["text_delta"] == 8
    assert stream["delta_keys"] == ["content", "refusal"]
    assert stream["usage"] == {"input": 7, "output": 1}
    assert stream["errors"] == [] and len(stream["tool_calls"]) == 1
    without_probe(monkeypatch)
    assert comparable(run(data)) == comparable(probed)


# -- invariants ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("upstream", ["complete", "reset"])
def test_no_canary_reaches_the_record(name, upstream):
    data = fixture(DIALECT, name)
    assert b"CANARY" in data
    for cut in (data, first_frames(data, 3)):
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


# -- facts no other test pinned -------------------------------------------------------------------
def test_a_tool_call_ended_by_finish_reason_stop_is_complete():
    call = chunk(delta={"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                        "function": {"name": "apply_patch", "arguments": "{}"}}]})
    record = run(call + chunk(finish_reason="stop") + b"data: [DONE]\n\n")
    assert record["stream"]["tool_calls"] == [{"index": 0, "name": "apply_patch",
                                               "started_ms": 2.0, "arg_chunks": 1,
                                               "arg_bytes": 2, "arg_parsed": True,
                                               "arg_unchecked": None, "completed": True}]
    assert record["stream"]["event_counts"]["tool_call"] == 1
    cut = run(call + chunk(finish_reason="stop"), upstream="reset")
    assert outcome(cut) == ("transport", "after_finish")  # not "while writing a tool call"


def test_a_chunk_with_text_and_a_top_level_error_keeps_the_error():
    body = {"id": "chatcmpl-x", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": "CANARY-OUTPUT-7f3a"},
                         "finish_reason": None}],
            "error": {"message": "upstream overloaded", "type": "server_error", "code": 503}}
    record = run(chunk(delta={"content": "hi"}) + b"data: " + json.dumps(body).encode()
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
    keepalive, role = b": keep-alive\n\n", chunk(delta={"role": "assistant"})
    record = run(keepalive + role + chunk(delta={"content": "hi"}),
                 chunks=[len(keepalive), len(role)], t_step=10.0)
    timeline = record["timeline"]
    assert (timeline["first_byte"], timeline["first_event"], timeline["first_progress"]) == (
        12.0, 22.0, 32.0)
