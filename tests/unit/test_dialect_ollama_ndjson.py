"""ollama-ndjson dialect (Ollama's API reference for `/api/chat` and `/api/generate`), line by
line: the exact events, delta keys, finish, usage, terminal, whole tool calls and error lines a
user sees, read from the bytes (the quick path) or parsed; then whole streams: the `done` line,
`{"error": ...}` lines, and the issue-3 classification rows this dialect can show."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.dialects import choose_dialect
from streamtap.diagnostics.dialects.ollama_ndjson import OllamaNdjson
from tests.support import comparable, fixture, record_stream
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


# -- whole streams: fixtures from the public docs, through the Recorder ---------------------------
NDJSON = "application/x-ndjson"
REQUEST = {
    "model": "qwen3:8b",
    "stream": True,
    "think": True,
    "messages": [{"role": "user", "content": "CANARY-PROMPT-1c9e"}],
    "tools": [
        {"type": "function", "function": {
            "name": "get_weather", "description": "CANARY-DESC-6a0f",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {}}},
    ],
}


def lines(name: str) -> list[bytes]:
    return fixture("ollama-ndjson", name).splitlines(keepends=True)


def record(data: bytes, path: str = "/api/chat", **kwargs) -> dict:
    kwargs.setdefault("request", REQUEST)
    return record_stream(data, path=path, content_type=NDJSON, provider="ollama", **kwargs)



def assert_no_canary(rec: dict) -> None:
    assert "CANARY" not in json.dumps(rec)


def test_registry_and_contract():
    cls = choose_dialect(None, "/api/chat", "application/x-ndjson")
    assert cls is OllamaNdjson
    assert choose_dialect(None, "/api/generate", "application/x-ndjson") is OllamaNdjson
    assert (cls.name, cls.framing, cls.terminal_names) == ("ollama-ndjson", "ndjson", ("done",))


# -- complete streams -------------------------------------------------------------------------------


def test_complete_chat_with_thinking_then_text():
    rec = record(fixture("ollama-ndjson", "chat_complete.ndjson"))
    stream = rec["stream"]
    assert rec["dialect"] == "ollama-ndjson"
    assert kinds(rec) == ["reasoning_delta"] * 3 + ["text_delta"] * 5 + ["finish"]
    assert stream["event_counts"] == {
        "reasoning_start": 1, "reasoning_delta": 3, "reasoning_end": 1,
        "text_start": 1, "text_delta": 5, "text_end": 1, "finish": 1, "usage": 1}
    assert stream["delta_keys"] == ["thinking", "content"]
    assert stream["finish_reason"] == "stop"
    assert stream["usage"] == {"input": 26, "output": 290}
    assert stream["terminal"] == "done"
    assert stream["errors"] == [] and stream["protocol_errors"] == {}
    assert stream["tool_calls"] == []
    assert rec["correlation"]["response_id"] is None  # Ollama sends no response id
    outcome = rec["outcome"]
    assert (outcome["boundary"], outcome["phase"], outcome["ok"]) == ("none", "complete", True)
    assert rec["timeline"]["terminal_event"] is not None
    assert sum(entry[1] for entry in rec["frames"]) == rec["stream"]["bytes"]
    assert_no_canary(rec)


def test_complete_chat_with_whole_tool_calls():
    rec = record(fixture("ollama-ndjson", "chat_tool_calls.ndjson"))
    stream = rec["stream"]
    assert kinds(rec) == ["reasoning_delta", "reasoning_delta", "tool_call", "tool_call", "finish"]
    weather_args = {"city": "CANARY-ARG-91c2", "CANARY-KEY-4e8a": True}
    time_args = {"zone": "CANARY-ARG-91c2 \u00e9"}
    size = lambda args: len(json.dumps(args, separators=(",", ":"), ensure_ascii=False).encode())
    calls = [{k: v for k, v in call.items() if k != "started_ms"} for call in stream["tool_calls"]]
    assert calls == [
        # index is a running count over the stream (calls arrive unnumbered and whole)
        {"index": 0, "name": "get_weather", "arg_chunks": 1, "arg_bytes": size(weather_args),
         "arg_parsed": True, "arg_unchecked": None, "completed": True},
        # a name the request did not define could be the model's words: not recorded
        {"index": 1, "name": None, "arg_chunks": 0, "arg_bytes": 0, "arg_parsed": None,
         "arg_unchecked": None, "completed": True},
        {"index": 2, "name": "get_time", "arg_chunks": 1, "arg_bytes": size(time_args),
         "arg_parsed": True, "arg_unchecked": None, "completed": True},
    ]
    assert stream["event_counts"] == {
        "reasoning_start": 1, "reasoning_delta": 2, "reasoning_end": 1,
        "tool_input_start": 3, "tool_input_delta": 2, "tool_input_end": 3, "tool_call": 3,
        "finish": 1, "usage": 1}
    assert stream["delta_keys"] == ["thinking"]
    assert (stream["finish_reason"], stream["terminal"]) == ("stop", "done")
    assert stream["usage"] == {"input": 141, "output": 37}
    assert (rec["outcome"]["boundary"], rec["outcome"]["phase"]) == ("none", "complete")
    assert_no_canary(rec)


def test_complete_generate_uses_top_level_response_and_thinking():
    rec = record(fixture("ollama-ndjson", "generate_complete.ndjson"), path="/api/generate",
                 request={"model": "qwen3:8b", "prompt": "CANARY-PROMPT-1c9e", "think": True})
    stream = rec["stream"]
    assert rec["dialect"] == "ollama-ndjson"
    assert kinds(rec) == ["reasoning_delta", "text_delta", "text_delta", "finish"]
    assert stream["delta_keys"] == ["thinking", "response"]
    assert (stream["finish_reason"], stream["terminal"]) == ("length", "done")
    assert stream["usage"] == {"input": 12, "output": 2}
    assert (rec["outcome"]["boundary"], rec["outcome"]["phase"]) == ("none", "complete")
    assert_no_canary(rec)


def test_empty_content_lines_are_meta_not_progress():
    head = (b'{"model":"m","created_at":"t","message":{"role":"assistant","content":""},'
            b'"done":false}\n')
    rec = record(head * 3, upstream="complete")
    assert kinds(rec) == ["meta"] * 3
    assert rec["timeline"]["first_progress"] is None
    assert (rec["outcome"]["boundary"], rec["outcome"]["phase"]) == (
        "provider_close", "before_progress")


# -- the issue-3 rows ---------------------------------------------------------------------------------


def test_upstream_reset_mid_text_is_transport_text():
    data = b"".join(lines("chat_complete.ndjson")[:6])  # 3 thinking lines, 3 text lines
    rec = record(data, upstream="reset")
    outcome = rec["outcome"]
    assert (outcome["boundary"], outcome["phase"]) == ("transport", "text")
    assert outcome["retryable"] is True
    assert "upstream_reset" in outcome["evidence"]
    assert rec["stream"]["terminal"] is None and rec["stream"]["finish_reason"] is None
    assert "writing its answer" in outcome["summary"]
    assert_no_canary(rec)


def test_clean_end_without_done_is_provider_close():
    data = b"".join(lines("chat_complete.ndjson")[:6])
    rec = record(data, upstream="complete")
    outcome = rec["outcome"]
    assert (outcome["boundary"], outcome["phase"]) == ("provider_close", "text")
    assert outcome["retryable"] is True
    assert "no_terminal_event" in outcome["evidence"]


def test_clean_end_mid_reasoning_is_provider_close_reasoning():
    data = b"".join(lines("chat_complete.ndjson")[:2])
    rec = record(data)
    assert (rec["outcome"]["boundary"], rec["outcome"]["phase"]) == (
        "provider_close", "reasoning")


def test_error_line_is_provider_error_where_it_was():
    rec = record(fixture("ollama-ndjson", "chat_error.ndjson"))
    stream, outcome = rec["stream"], rec["outcome"]
    assert kinds(rec) == ["text_delta"] * 3 + ["error"]
    assert (outcome["boundary"], outcome["phase"]) == ("provider_error", "text")
    assert outcome["retryable"] is True  # "internal error": the runner crashed, try again
    assert "ndjson_error" in outcome["evidence"]
    [error] = stream["errors"]
    assert error["shape"] == "ndjson_error"
    assert (error["type"], error["code"]) == (None, None)
    assert error["message"].startswith("model runner has unexpectedly stopped")
    assert stream["event_counts"]["error"] == 1
    assert stream["terminal"] is None


def test_error_line_message_is_scrubbed_and_capped():
    line = json.dumps({"error": "bad key sk-abcdefghijklmnopqrstuvwxyz0123 " + "x" * 400})
    rec = record(line.encode() + b"\n")
    [error] = rec["stream"]["errors"]
    assert "sk-abc" not in error["message"] and "[REDACTED]" in error["message"]
    assert len(error["message"]) <= 300
    assert rec["outcome"]["boundary"] == "provider_error"
    assert rec["outcome"]["phase"] == "before_progress"


def test_last_line_without_newline_is_unterminated_evidence():
    data = fixture("ollama-ndjson", "chat_complete.ndjson").rstrip(b"\n")
    rec = record(data)
    outcome = rec["outcome"]
    assert kinds(rec)[-1] == "unterminated"
    # The done line was never finished, so it is not interpreted: no terminal, no finish.
    assert rec["stream"]["terminal"] is None and rec["stream"]["finish_reason"] is None
    assert (outcome["boundary"], outcome["phase"]) == ("provider_close", "text")
    assert "unterminated_frame" in outcome["evidence"]


def test_reset_right_after_a_tool_call_is_transport_after_tool_call():
    data = b"".join(lines("chat_tool_calls.ndjson")[:3])
    rec = record(data, upstream="reset")
    outcome = rec["outcome"]
    assert (outcome["boundary"], outcome["phase"]) == ("transport", "after_tool_call")
    assert "`get_weather` completed" in outcome["summary"]
    assert rec["stream"]["tool_calls"][0]["completed"] is True
    assert_no_canary(rec)


def test_client_went_away_during_reasoning():
    data = b"".join(lines("chat_complete.ndjson")[:2])
    rec = record(data, upstream="closed_by_proxy", downstream="client_gone")
    assert (rec["outcome"]["boundary"], rec["outcome"]["phase"]) == ("client_abort", "reasoning")
    assert rec["outcome"]["retryable"] is None


def test_idle_watchdog_after_progress():
    data = b"".join(lines("chat_complete.ndjson")[:5])
    rec = record(data, upstream="closed_by_proxy", watchdog_fired="idle")
    assert (rec["outcome"]["boundary"], rec["outcome"]["phase"]) == ("watchdog", "text")


def test_headers_then_silence_then_clean_end():
    rec = record(b"")
    assert (rec["outcome"]["boundary"], rec["outcome"]["phase"]) == (
        "provider_close", "before_progress")
    assert "no_events" in rec["outcome"]["evidence"]


def test_unparseable_line_is_protocol_evidence_only():
    good = lines("chat_complete.ndjson")
    data = b"".join(good[:4] + [b'{"model":"qwen3:8b","message":{"role":\n'] + good[4:])
    rec = record(data)
    assert rec["stream"]["protocol_errors"] == {"invalid_json": 1}
    assert (rec["outcome"]["boundary"], rec["outcome"]["phase"]) == ("none", "complete")
    assert "invalid_json" in rec["outcome"]["evidence"]
    assert kinds(rec)[4] == "unknown"


def test_non_object_and_unknown_lines():
    data = b'[1,2]\n{"status":"pulling manifest"}\n'
    rec = record(data)
    assert rec["stream"]["unknown_types"] == ["non_object", "status"]
    assert kinds(rec) == ["unknown", "unknown"]


def test_done_without_reason_or_counts():
    rec = record(b'{"model":"m","message":{"role":"assistant","content":"hi"},"done":true}\n')
    stream = rec["stream"]
    assert stream["event_counts"] == {"text_start": 1, "text_delta": 1, "text_end": 1,
                                      "finish": 1}
    assert (stream["finish_reason"], stream["terminal"], stream["usage"]) == (None, "done", {})
    assert rec["outcome"]["boundary"] == "none"


def test_text_then_reasoning_again_opens_new_blocks():
    make = lambda field, value: json.dumps(
        {"model": "m", "created_at": "t", "message": {"role": "assistant", field: value},
         "done": False}, separators=(",", ":")).encode() + b"\n"
    data = (make("thinking", "a") + make("content", "b") + make("thinking", "c")
            + make("content", "d"))
    counts = record(data)["stream"]["event_counts"]
    assert counts["reasoning_start"] == counts["text_start"] == 2
    # Each switch closes the open block; the last text block is still open (no `done` came).
    assert (counts["reasoning_end"], counts["text_end"]) == (2, 1)


# -- the byte probe and the JSON path agree -------------------------------------------------------------


def respaced(data: bytes) -> bytes:
    """The same lines re-encoded with spaces after separators: they miss the byte probe."""
    return b"".join(json.dumps(json.loads(line)).encode() + b"\n" for line in data.splitlines())


def test_probe_and_json_paths_give_the_same_events():
    for name, path in (("chat_complete.ndjson", "/api/chat"),
                       ("chat_tool_calls.ndjson", "/api/chat"),
                       ("generate_complete.ndjson", "/api/generate")):
        data = fixture("ollama-ndjson", name)
        fast, slow = record(data, path=path), record(respaced(data), path=path)
        assert kinds(fast) == kinds(slow)
        for key in ("event_counts", "delta_keys", "finish_reason", "usage", "terminal",
                    "errors", "unknown_types"):
            assert fast["stream"][key] == slow["stream"][key], key
        assert fast["outcome"] == slow["outcome"]


def test_probe_is_not_fooled_by_text_that_looks_like_fields():
    line = json.dumps({"model": "m", "created_at": "t", "message": {
        "role": "assistant", "content": "", "thinking": '"content":"x',
    }, "done": False}, separators=(",", ":")).encode() + b"\n"
    rec = record(line)
    assert kinds(rec) == ["reasoning_delta"]
    assert rec["stream"]["delta_keys"] == ["thinking"]


# -- chunking -------------------------------------------------------------------------------------------

FIXTURES = ["chat_complete.ndjson", "chat_tool_calls.ndjson", "chat_error.ndjson",
            "generate_complete.ndjson"]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(FIXTURES), sizes=st.lists(st.integers(1, 64), max_size=60),
       cut=st.integers(0, 2000), upstream=st.sampled_from(["complete", "reset"]))
def test_any_chunking_gives_the_same_record(name, sizes, cut, upstream):
    data = fixture("ollama-ndjson", name)[:cut] if cut < 2000 else fixture("ollama-ndjson", name)
    whole = comparable(record(data, upstream=upstream))
    assert comparable(record(data, chunks="bytewise", upstream=upstream)) == whole
    assert comparable(record(data, chunks=sizes, upstream=upstream)) == whole
    assert "CANARY" not in json.dumps(whole)
