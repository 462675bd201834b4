"""Scripted streams, pure: argument pieces, the default arguments for a tool's schema, the first
tool in each dialect's spelling, and the cut that `at` makes (by the fault trigger scanner)."""

import json

import pytest

from streamtap.diagnostics.samples.rebuild import rebuild
from streamtap.diagnostics.samples.scripted import (ScriptError, arguments_for, default_answer,
                                                     first_tool, scripted_sample)
from streamtap.diagnostics.samples.scripted_dialects import split_arguments, split_text


@pytest.mark.parametrize("arguments", ["{}", '{"a":1}', json.dumps({"city": "x" * 40}),
                                       json.dumps({"k": "v" * 3})])
def test_arguments_come_in_at_least_8_pieces_that_join_to_valid_json(arguments):
    pieces = split_arguments(arguments)
    assert len(pieces) >= 8 and all(pieces)
    assert json.loads("".join(pieces)) == json.loads(arguments)


def test_text_is_split_by_words_or_into_n_pieces():
    assert split_text("hello streamtap world") == ["hello ", "streamtap ", "world"]
    assert len(split_text("abcdefghijklmnopq", 8)) == 8
    assert split_text("") == []


def test_arguments_fit_the_tools_schema():
    schema = {"type": "object", "required": ["unit"], "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]},
        "days": {"type": ["integer", "null"]}, "tags": {"type": "array"}}}
    assert arguments_for(schema) == {"unit": "c", "city": "lorem ipsum dolor sit amet",
                                     "days": 1, "tags": []}
    assert arguments_for({}) == {}


@pytest.mark.parametrize("body", [
    {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
    {"tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]},
    {"tools": [{"name": "f", "input_schema": {"type": "object"}}]},
    {"tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "object"}}]}]},
])
def test_the_first_tool_in_every_dialects_spelling(body):
    assert first_tool(body) == ("f", {"type": "object"})


def test_at_cuts_right_after_the_trigger_and_truncated_leaves_half_a_frame():
    sample = scripted_sample("anthropic-messages", tool_calls=[{"name": "f", "arguments": {}}],
                             ending="truncated", at="event:tool_input_delta:5")
    kinds = [frame[2] for frame in sample["frames"]]
    assert kinds.count("tool_input_delta") == 5 and kinds[-1] == "unterminated"
    last = rebuild(sample).frames[-1]
    assert last.startswith(b"event: content_block_delta\n") and not last.endswith(b"\n\n")


def test_the_default_answer_follows_the_request():
    text = default_answer("openai-chat", {"stream": True}, True, "gpt-x")
    assert [f[2] for f in text["frames"]].count("text_delta") >= 10
    assert "usage" not in [f[2] for f in text["frames"]]  # only with include_usage, as OpenAI
    usage = default_answer("openai-chat", {"stream_options": {"include_usage": True}}, True, None)
    assert "usage" in [f[2] for f in usage["frames"]]
    whole = default_answer("anthropic-messages", {}, False, None)
    assert whole["dialect"] == "json" and json.loads(rebuild(whole).body)["type"] == "message"


def test_endings_that_need_no_frames_and_bad_input():
    assert scripted_sample("gemini", ending="http_error", status=429)["status"] == 429
    with pytest.raises(ScriptError, match="status for an http_error must be 400..599"):
        scripted_sample("gemini", ending="http_error", status=200)
    with pytest.raises(ScriptError, match="a whole JSON reply"):
        scripted_sample("openai-chat", stream=False, ending="reset")
    with pytest.raises(ScriptError, match="a scripted stream breaks after a frame"):
        scripted_sample("openai-chat", ending="reset", at="ms:100")
    with pytest.raises(ScriptError, match=r"tool_calls\[0\]: expected"):
        scripted_sample("openai-chat", tool_calls=["get_weather"])
