"""ollama-ndjson dialect, line by line (Ollama's API reference for `/api/chat` and
`/api/generate`): the exact events, delta keys, finish, usage, terminal, whole tool calls and
error lines a user sees, read from the bytes (the quick path) or parsed."""

from __future__ import annotations

import pytest

from streamtap.diagnostics.dialects.ollama_ndjson import OllamaNdjson
from tests.unit.dialect_feed import facts, feed, kinds, line

HEAD = '{"model":"qwen3:8b","created_at":"2025-06-01T12:00:00Z",'


def raw(middle: str, done: str = ',"done":false}') -> bytes:
    """A line exactly as Ollama's encoder writes it (the quick path's byte order)."""
    return (HEAD + middle + done).encode() + b"\n"


def chat(content: str | None = "", thinking: str | None = None) -> bytes:
    message = '"message":{"role":"assistant","content":' + (f'"{content}"' if content is not None
                                                             else "null")
    if thinking is not None:
        message += f',"thinking":"{thinking}"'
    return raw(message + "}")


def final(**extra) -> bytes:
    return line({"model": "m", "message": {"role": "assistant", "content": ""}, "done": True,
                 "done_reason": "stop", "prompt_eval_count": 12, "eval_count": 5, **extra})


def run(*frames: bytes, **kwargs) -> dict:
    return feed("ollama-ndjson", list(frames), **kwargs)


def calls(record: dict) -> list[tuple]:
    return [(c["index"], c["name"], c["arg_chunks"], c["arg_bytes"], c["completed"])
            for c in record["stream"]["tool_calls"]]


def test_chat_with_thinking_then_text():
    record = run(chat("", "t"), chat("", "t"), chat("a"), chat("b"), final())
    assert facts(record) == {
        "event_counts": {"reasoning_start": 1, "reasoning_delta": 2, "reasoning_end": 1,
                         "text_start": 1, "text_delta": 2, "text_end": 1, "finish": 1,
                         "usage": 1},
        "delta_keys": ["thinking", "content"], "finish_reason": "stop",
        "usage": {"input": 12, "output": 5}, "terminal": "done", "unknown_types": [],
        "protocol_errors": {}}
    assert kinds(record) == ["reasoning_delta", "reasoning_delta", "text_delta", "text_delta",
                             "finish"]
    timeline = record["timeline"]
    assert (timeline["first_event"], timeline["first_progress"], timeline["last_progress"],
            timeline["terminal_event"]) == (3.0, 3.0, 6.0, 7.0)
    assert record["dialect"] == "ollama-ndjson"
    assert record["outcome"]["boundary"] == "none"


@pytest.mark.parametrize("quick", [True, False])
def test_quick_and_parsed_lines_agree(quick):
    frames = [chat("", "t"), chat(""), chat("a"), chat("", "")]
    if not quick:  # a space after the comma: no longer Ollama's exact bytes, so parsed
        frames = [f.replace(b',"done":false}', b', "done":false}') for f in frames]
    record = run(*frames)
    assert kinds(record) == ["reasoning_delta", "meta", "text_delta", "meta"]
    assert record["stream"]["delta_keys"] == ["thinking", "content"]
    assert record["stream"]["event_counts"] == {
        "reasoning_start": 1, "reasoning_delta": 1, "reasoning_end": 1, "text_start": 1,
        "text_delta": 1, "meta": 2}


@pytest.mark.parametrize("quick", [True, False])
def test_generate_lines(quick):
    frames = [raw('"response":"","thinking":"t"'), raw('"response":"a"'), raw('"response":""')]
    if not quick:
        frames = [f.replace(b',"done":false}', b', "done":false}') for f in frames]
    record = run(*frames)
    assert kinds(record) == ["reasoning_delta", "text_delta", "meta"]
    assert record["stream"]["delta_keys"] == ["thinking", "response"]


def test_the_quick_path_only_takes_ollama_s_own_lines():
    # a line that does not start with `{"model":` is parsed: here it is not even JSON
    record = run(b'{"x":1,"response":"a","done":false}}\n',
                 b'{"model":"m","response":"a","done":false}}x\n')
    assert record["stream"]["protocol_errors"] == {"invalid_json": 2}
    assert kinds(record) == ["unknown", "unknown"]


def test_the_quick_path_reads_a_line_it_does_not_validate():
    record = run(raw('"response":"a"}'))  # one brace too many, still Ollama's head and tail
    assert kinds(record) == ["text_delta"]


def test_content_wins_over_a_top_level_response():
    record = run(line({"message": {"content": ""}, "response": "a", "done": False}),
                 line({"message": {"thinking": "t"}, "thinking": "", "done": False}),
                 line({"message": "x", "thinking": "t", "done": False}))
    assert kinds(record) == ["meta", "reasoning_delta", "reasoning_delta"]


def test_lines_with_no_known_key_are_named():
    record = run(line({"status": "pulling"}), line({}), line([1]), line("s"))
    assert record["stream"]["unknown_types"] == ["status", "<none>", "non_object"]
    assert kinds(record) == ["unknown"] * 4
    assert record["stream"]["protocol_errors"] == {}


def test_a_line_that_is_not_json():
    record = run(b"{nope\n")
    assert record["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert kinds(record) == ["unknown"]
    assert record["stream"]["event_counts"] == {"unknown": 1}


def test_whole_tool_calls_are_numbered_in_order():
    record = run(chat("a"),
                 line({"model": "m", "message": {"role": "assistant", "content": "",
                                                 "tool_calls": [
                     {"function": {"name": "apply_patch", "arguments": {"a": "\u00e9"}}},
                     {"function": {"name": "read_file", "arguments": '{"b":1}'}},
                     {"function": {"name": "other"}}, "x"]}, "done": False}),
                 final(done_reason="stop"))
    assert calls(record) == [(0, "apply_patch", 1, 10, True), (1, "read_file", 1, 7, True),
                             (2, None, 0, 0, True), (3, None, 0, 0, True)]
    assert kinds(record) == ["text_delta", "tool_call", "finish"]
    assert record["stream"]["event_counts"] == {
        "text_start": 1, "text_delta": 1, "text_end": 1, "tool_input_start": 4,
        "tool_input_delta": 2, "tool_input_end": 4, "tool_call": 4, "finish": 1, "usage": 1}
    assert record["outcome"]["boundary"] == "none"


def test_empty_tool_calls_are_nothing():
    record = run(line({"message": {"content": "", "tool_calls": []}, "done": False}))
    assert kinds(record) == ["meta"] and calls(record) == []


def test_the_done_line():
    record = run(chat("a"), line({"done": True, "done_reason": "length"}))
    assert record["stream"]["finish_reason"] == "length"
    assert record["stream"]["usage"] == {}
    assert kinds(record) == ["text_delta", "finish"]
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 1,
                                                "text_end": 1, "finish": 1}
    record = run(line({"done": "yes"}))
    assert kinds(record) == ["meta"] and record["stream"]["terminal"] is None


def test_an_error_line_keeps_its_counts():
    record = run(chat("a"), line({"error": "model crashed", "prompt_eval_count": 3}))
    assert record["stream"]["errors"] == [{"shape": "ndjson_error", "t_ms": 4.0, "type": None,
                                           "code": None, "message": "model crashed"}]
    assert record["stream"]["usage"] == {"input": 3}
    assert kinds(record) == ["text_delta", "error"]
    assert record["stream"]["event_counts"] == {"text_start": 1, "text_delta": 1, "error": 1,
                                                "usage": 1}
    assert record["outcome"]["boundary"] == "provider_error"
    record = run(line({"error": "x"}))
    assert record["stream"]["event_counts"] == {"error": 1}


def test_an_error_in_ollama_s_byte_order_is_parsed():
    record = run(raw('"error":"boom"'))
    assert kinds(record) == ["error"]


def test_tool_calls_in_ollama_s_byte_order_are_parsed():
    record = run(raw('"message":{"role":"assistant","content":"","tool_calls":'
                     '[{"function":{"name":"apply_patch","arguments":{}}}]}'))
    assert calls(record) == [(0, "apply_patch", 0, 0, True)]


def test_framing_and_terminal():
    assert OllamaNdjson.framing == "ndjson" and OllamaNdjson.terminal_names == ("done",)


# -- what the survivors of a mutation run showed unpinned -----------------------------------------
def test_any_one_known_key_makes_a_line_ollama_s():
    record = run(line({"message": {"content": "a"}}), line({"response": "b"}),
                 line({"thinking": "t"}), line({"error": ""}), line({"done": False}))
    assert kinds(record) == ["text_delta", "text_delta", "reasoning_delta", "meta", "meta"]
    assert record["stream"]["unknown_types"] == []
    assert record["stream"]["errors"] == []


def test_argument_sizes_are_compact_json_and_survive_lone_surrogates():
    record = run(line({"message": {"content": "", "tool_calls": [
        {"function": {"name": "apply_patch", "arguments": {"a": 1, "b": [1, 2]}}},
        {"function": {"name": "read_file", "arguments": {"a": "\ud800"}}},
        {"function": {"name": "read_file", "arguments": "\ud800"}}]}, "done": False}))
    # {"a":1,"b":[1,2]} is 17 bytes; a lone surrogate counts 3 (surrogatepass, like every
    # piece): {"a":"\ud800"} 11 and "\ud800" 3
    assert [c[3] for c in calls(record)] == [17, 11, 3]
