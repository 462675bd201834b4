"""Frames rebuilt from a sample (diagnostics/samples/rebuild.py) decode, with our own dialects, to what the
original decoded to: the same frame kinds and sizes, event counts, terminal and outcome; tool
arguments concatenate to valid JSON (left open where the call broke); no content survives."""

from __future__ import annotations

import json
import re

import pytest

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.diagnostics.samples.rebuild import Rebuilt, rebuild, writes
from streamtap.diagnostics.samples.format import build_sample, check_sample
from streamtap.diagnostics.decode.sse import NdjsonDecoder, SseDecoder
from tests.streams import chat_text_stream, chat_tool_stream
from tests.support import FIXTURES, fixture, record_stream

PATHS = {"openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses",
         "anthropic-messages": "/v1/messages",
         "gemini": "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
         "ollama-ndjson": "/api/chat"}
JSON_PATHS = {"anthropic": "/v1/messages", "gemini": "/v1beta/models/g:generateContent",
              "ollama": "/api/chat", "openai_responses": "/v1/responses"}
REQUEST = {"model": "m", "stream": True, "messages": [],
           "tools": [{"type": "function", "function": {"name": "get_weather"}}]}
FIXTURE_FILES = sorted(f"{path.parent.name}/{path.name}" for path in FIXTURES.glob("*/*"))


def exchange(name: str) -> dict:
    """How `tests/fixtures/streams/<name>` is served: path, content type, status."""
    dialect, file = name.split("/")
    if dialect == "json":
        status = re.search(r"_(\d{3})", file)
        prefix = next((key for key in JSON_PATHS if file.startswith(key)), None)
        return {"path": JSON_PATHS.get(prefix, "/v1/chat/completions"),
                "content_type": "application/json",
                "status": int(status.group(1)) if status else 200}
    content_type = {"ollama-ndjson": "application/x-ndjson"}.get(dialect, "text/event-stream")
    if file.endswith(".json"):
        content_type = "application/json"
    return {"path": PATHS[dialect], "content_type": content_type, "status": 200}


def replay_bytes(sample: dict) -> bytes:
    return b"".join(data for _, data in writes(sample, rebuild(sample)))


def recorded(data: bytes, **kwargs) -> dict:
    kwargs.setdefault("request", REQUEST)
    return record_stream(data, **kwargs)


def round_trip(data: bytes, chunks="whole", **kwargs) -> tuple[dict, dict, bytes]:
    """(the original's sample, the replay's sample, the replay's bytes)."""
    original = build_sample(record_from_dict(recorded(data, t_step=1.0, chunks=[40] * 10_000, **kwargs)))
    out = replay_bytes(original)
    return original, build_sample(record_from_dict(recorded(out, chunks=chunks, **kwargs))), out


def assert_same(original: dict, replayed: dict) -> None:
    assert [f[2] for f in replayed["frames"]] == [f[2] for f in original["frames"]]
    assert [f[1] for f in replayed["frames"]] == [f[1] for f in original["frames"]]
    for key in ("event_counts", "terminal", "finish_reason"):
        assert replayed["stream"][key] == original["stream"][key], key
    assert len(replayed["stream"]["tool_calls"]) == len(original["stream"]["tool_calls"])
    assert [call["completed"] for call in replayed["stream"]["tool_calls"]] == \
        [call["completed"] for call in original["stream"]["tool_calls"]]
    for key in ("boundary", "phase"):
        assert replayed["outcome"][key] == original["outcome"][key], key


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_every_fixture_rebuilds_to_the_same_frames(name):
    dialect, file = name.split("/")
    original, replayed, out = round_trip(fixture(dialect, file), **exchange(name))
    assert_same(original, replayed)
    if original["status"] >= 400:
        assert replayed["error"] == original["error"]  # provider error type and code kept
    assert b"CANARY" not in out  # the fixtures are full of canaries; none reaches the replay


CORPUS = sorted((FIXTURES.parent.parent.parent / "samples").glob("*.sample.json"))
_UPSTREAM = {"reset": "reset", "truncated": "truncated"}


@pytest.mark.parametrize("path", CORPUS, ids=[path.name for path in CORPUS])
def test_every_corpus_sample_rebuilds_to_its_frames(path):
    """The starter corpus (samples/) replays as what it describes, in every dialect and ending."""
    sample = check_sample(json.loads(path.read_text()))
    out = replay_bytes(sample)
    assert b"CANARY" not in out
    if sample["ending"] == "no_response":
        assert out == b""
        return
    request = dict(REQUEST, tools=[{"type": "function", "function": {"name": name}}
                                   for name in sample["request"].get("tool_names") or []])
    replayed = build_sample(record_from_dict(recorded(out, path=sample["request"]["path"],
                                     content_type=sample["content_type"] or "",
                                     status=sample["status"], request=request,
                                     upstream=_UPSTREAM.get(sample["ending"], "complete"))))
    assert [f[2] for f in replayed["frames"]] == [f[2] for f in sample["frames"]]
    assert [f[1] for f in replayed["frames"]] == [f[1] for f in sample["frames"]]
    for key in ("event_counts", "terminal", "finish_reason"):
        assert replayed["stream"][key] == sample["stream"][key], key


@pytest.mark.parametrize("name", ["openai-chat/two_tools.sse",
                                  "anthropic-messages/tool_complete.sse",
                                  "openai-responses/function_call.sse",
                                  "ollama-ndjson/chat_tool_calls.ndjson"])
def test_rebuilt_frames_decode_the_same_byte_by_byte(name):
    dialect, file = name.split("/")
    original, replayed, _ = round_trip(fixture(dialect, file), chunks="bytewise",
                                       **exchange(name))
    assert_same(original, replayed)


# -- tool arguments -------------------------------------------------------------------------------
def sse_payloads(data: bytes) -> list[dict]:
    decoder = SseDecoder()
    frames = decoder.feed(data) + decoder.close()
    return [json.loads(frame.data) for frame in frames
            if not frame.comment and not frame.unterminated and frame.data[:1] == b"{"]


def chat_arguments(data: bytes) -> dict[int, str]:
    calls: dict[int, str] = {}
    for obj in sse_payloads(data):
        for choice in obj.get("choices") or []:
            for call in (choice.get("delta") or {}).get("tool_calls") or []:
                pieces = (call.get("function") or {}).get("arguments") or ""
                calls[call["index"]] = calls.get(call["index"], "") + pieces
    return calls


def test_chat_argument_pieces_concatenate_to_json_per_call():
    sample, _, out = round_trip(fixture("openai-chat", "two_tools.sse"), **exchange(
        "openai-chat/two_tools.sse"))
    calls = chat_arguments(out)
    assert len(calls) == 2
    for text in calls.values():
        assert isinstance(json.loads(text), dict)
    ids = [call["id"] for obj in sse_payloads(out) for choice in obj.get("choices") or []
           for call in (choice.get("delta") or {}).get("tool_calls") or [] if "id" in call]
    assert len(set(ids)) == 2 and all(id.startswith("call_") for id in ids)


def test_argument_pieces_stay_open_where_the_call_broke():
    data = b"".join(chat_tool_stream(4, finish=False))
    sample, replayed, out = round_trip(data, path=PATHS["openai-chat"])
    assert sample["stream"]["tool_calls"][0]["completed"] is False
    (text,) = chat_arguments(out).values()
    assert text.startswith('{"a":"') and not text.endswith('"}')
    with pytest.raises(ValueError):
        json.loads(text)
    assert_same(sample, replayed)


def test_anthropic_partial_json_concatenates_and_stays_open_when_cut():
    for name, complete in (("tool_complete.sse", True), ("tool_input_cut.sse", False)):
        _, _, out = round_trip(fixture("anthropic-messages", name),
                               **exchange(f"anthropic-messages/{name}"))
        pieces = [obj["delta"]["partial_json"] for obj in sse_payloads(out)
                  if (obj.get("delta") or {}).get("type") == "input_json_delta"]
        text = "".join(pieces)
        assert pieces and text.startswith('{"a":"')
        if complete:
            assert json.loads(text) == {"a": text[6:-2]}
        else:
            with pytest.raises(ValueError):
                json.loads(text)


def test_responses_argument_deltas_match_the_done_event():
    _, _, out = round_trip(fixture("openai-responses", "function_call.sse"),
                           **exchange("openai-responses/function_call.sse"))
    payloads = sse_payloads(out)
    deltas = "".join(obj["delta"] for obj in payloads
                     if obj["type"] == "response.function_call_arguments.delta")
    (done,) = [obj["arguments"] for obj in payloads
               if obj["type"] == "response.function_call_arguments.done"]
    assert json.loads(deltas) == json.loads(done)
    assert [obj["sequence_number"] for obj in payloads] == list(range(len(payloads)))


def test_whole_argument_objects_stay_empty_only_where_they_were():
    _, _, out = round_trip(fixture("ollama-ndjson", "chat_tool_calls.ndjson"),
                           **exchange("ollama-ndjson/chat_tool_calls.ndjson"))
    calls = [call["function"]["arguments"] for line in out.splitlines() if line.strip()
             for call in (json.loads(line).get("message") or {}).get("tool_calls") or []]
    assert len(calls) == 3 and calls[1] == {} and calls[0] and calls[2]


def test_gemini_streamed_arguments_and_crlf():
    _, _, out = round_trip(fixture("gemini", "streamed_args_complete.sse"),
                           **exchange("gemini/streamed_args_complete.sse"))
    assert out.endswith(b"\r\n\r\n") and b"\n\n" not in out.replace(b"\r\n", b"")
    values = [arg["stringValue"] for obj in sse_payloads(out)
              for part in obj["candidates"][0]["content"]["parts"]
              for arg in (part.get("functionCall") or {}).get("partialArgs") or []]
    assert values and all(values)


# -- ids, unfinished frames, frames without shapes ------------------------------------------------
def test_ids_keep_their_prefix_and_agree_across_frames():
    _, _, out = round_trip(b"".join(chat_text_stream(4)), path=PATHS["openai-chat"])
    ids = {obj["id"] for obj in sse_payloads(out)}
    assert len(ids) == 1 and ids.pop().startswith("chatcmpl-")


@pytest.mark.parametrize("dialect, data, content_type", [
    ("openai-chat", b"".join(chat_text_stream(3, done=False)), "text/event-stream"),
    ("ollama-ndjson", fixture("ollama-ndjson", "chat_complete.ndjson"), "application/x-ndjson"),
    ("gemini", fixture("gemini", "text_complete.json"), "application/json"),
])
def test_an_unterminated_frame_is_rebuilt_unfinished(dialect, data, content_type):
    cut = data[:len(data) - 40]
    sample, replayed, out = round_trip(cut, path=PATHS[dialect], content_type=content_type,
                                       upstream="truncated")
    assert sample["frames"][-1][2] == "unterminated"
    assert sample["ending"] == "truncated"
    assert_same(sample, replayed)
    last = rebuild(sample).frames[-1]
    assert len(last) == sample["frames"][-1][1]
    assert not last.endswith(b"\n\n") and not last.endswith(b"}")
    if dialect == "gemini":
        assert not out.endswith(b"]")  # a cut array is not closed


def test_a_json_array_closes_on_a_clean_end():
    _, _, out = round_trip(fixture("gemini", "text_complete.json"),
                           **exchange("gemini/text_complete.json"))
    assert out.startswith(b"[") and isinstance(json.loads(out), list)


def test_frames_without_shapes_become_padding_of_their_size():
    record = recorded(b"".join(chat_text_stream(3)), path=PATHS["openai-chat"])
    old = dict(record, frames=[entry[:3] for entry in record["frames"]])
    del old["shapes"]  # a record written before shapes existed
    sample = build_sample(record_from_dict(old))
    assert any("no shapes" in note for note in sample["notes"])
    rebuilt = rebuild(sample)
    assert [len(frame) for frame in rebuilt.frames] == [f[1] for f in sample["frames"]]
    decoder = SseDecoder()
    frames = decoder.feed(b"".join(rebuilt.frames)) + decoder.close()
    assert len(frames) == len(sample["frames"]) and all(frame.comment for frame in frames)


def test_a_frame_whose_shape_was_dropped_borrows_one_of_its_kind():
    sample = build_sample(record_from_dict(recorded(b"".join(chat_text_stream(4)), path=PATHS["openai-chat"])))
    texts = [i for i, entry in enumerate(sample["frames"]) if entry[2] == "text_delta"]
    sample["frames"][texts[-1]][3] = None  # the shape table was full when it arrived
    out = replay_bytes(sample)
    replayed = build_sample(record_from_dict(recorded(out, path=PATHS["openai-chat"])))
    assert_same(sample, replayed)


def test_frames_that_cannot_grow_are_padded_outside_their_data():
    sample = build_sample(record_from_dict(recorded(b": ping\n\n" + b"".join(chat_text_stream(1)),
                                   path=PATHS["openai-chat"])))
    sample["frames"][0][1] += 5  # the comment
    sample["frames"][-1][1] += 3  # [DONE]
    rebuilt = rebuild(sample)
    assert rebuilt.frames[0] == b": ping     \n"
    assert rebuilt.frames[-1] == b"\n\n\ndata: [DONE]\n\n"
    replayed = build_sample(record_from_dict(recorded(replay_bytes(sample), path=PATHS["openai-chat"])))
    assert_same(sample, replayed)


# -- bodies and timing ----------------------------------------------------------------------------
def test_an_error_body_without_a_shape_is_the_dialects_own():
    sample = build_sample(record_from_dict(recorded(fixture("json", "anthropic_429.json"), path="/v1/messages",
                                   content_type="application/json", status=429)))
    sample["body_shape"] = None
    body = json.loads(rebuild(sample).body)
    assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"


def test_writes_keep_the_timing_and_group_frames_that_arrived_together():
    frames = [[0.0, 10, "meta", None], [0.0, 12, "text_delta", None],
              [30.0, 14, "text_delta", None], [75.5, 14, "finish", None]]
    sample = {"frames": frames, "ending": "terminal", "timing": {}}
    rebuilt = Rebuilt("sse", (b"a" * 10, b"b" * 12, b"c" * 14, b"d" * 14))
    assert writes(sample, rebuilt) == [(0.0, b"a" * 10 + b"b" * 12), (30.0, b"c" * 14),
                                       (75.5, b"d" * 14)]
    body = {"frames": [], "ending": "terminal",
            "timing": {"response_headers_ms": 5.0, "first_byte_ms": 25.0}}
    assert writes(body, Rebuilt("body", (), body=b"{}")) == [(20.0, b"{}")]


def test_ndjson_rebuild_has_one_object_per_line():
    _, _, out = round_trip(fixture("ollama-ndjson", "generate_complete.ndjson"),
                           path="/api/generate", content_type="application/x-ndjson")
    decoder = NdjsonDecoder()
    frames = decoder.feed(out) + decoder.close()
    assert all(isinstance(json.loads(frame.data), dict) for frame in frames)
