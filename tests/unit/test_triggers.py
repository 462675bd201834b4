"""diagnostics/faults/triggers.py at its edges: the exact error a user gets for a bad `at`, and
where the scanner cuts when a count is reached exactly, on an oversized frame, on a three-byte
NDJSON line and before the body. (The everyday triggers are in tests/test_fault_rules.py.)"""

from __future__ import annotations

import pytest

from streamtap.diagnostics.faults.triggers import (
    TRIGGER_HELP, FrameScanner, Trigger, TriggerError, parse_trigger)
from streamtap.diagnostics.dialects.json_body import JsonBody
from streamtap.diagnostics.dialects.ollama_ndjson import OllamaNdjson
from streamtap.diagnostics.dialects.openai_chat import OpenAIChat

KINDS = ("text_start, text_delta, text_end, reasoning_start, reasoning_delta, reasoning_end, "
         "tool_input_start, tool_input_delta, tool_input_end, tool_call, server_tool_start, "
         "server_tool_delta, server_tool_end, finish, usage, error, keepalive, meta, unknown")


def error_of(text: str) -> str:
    with pytest.raises(TriggerError) as caught:
        parse_trigger(text)
    return str(caught.value)


@pytest.mark.parametrize("text, message", [
    ("event:bogus:1", f"unknown event kind `bogus` in `event:bogus:1`; kinds: {KINDS}"),
    ("event:text_delta:0", "`event:text_delta:0`: the count starts at 1"),
    ("event:text_delta:-3", "`event:text_delta:-3`: the count starts at 1"),
    ("events:0", "`events:0`: the number must be positive"),
    ("bytes:-1", "`bytes:-1`: the number must be positive"),
    ("ms:-1", "`ms:-1`: the number must be positive"),
    ("ms:1.5", "`ms:1.5`: expected a whole number after the colon"),
    ("events:", "`events:`: expected a whole number after the colon"),
    ("event:text_delta:two", "`event:text_delta:two`: expected a whole number after the colon"),
    ("bytes:1:2", f"unknown trigger `bytes:1:2`; expected one of {TRIGGER_HELP}"),
    ("event::1", f"unknown event kind `` in `event::1`; kinds: {KINDS}"),
    ("", f"unknown trigger ``; expected one of {TRIGGER_HELP}"),
    ("Request", f"unknown trigger `Request`; expected one of {TRIGGER_HELP}"),
])
def test_bad_trigger_messages_in_full(text, message):
    assert error_of(text) == message


def test_the_help_names_every_trigger():
    assert TRIGGER_HELP == ("request, headers, first_progress, terminal, event:<kind>:<n>, "
                            "events:<n>, bytes:<n>, ms:<n>")


@pytest.mark.parametrize("trigger, text", [
    (Trigger("events", None, 3), "events:3"),
    (Trigger("bytes", None, 0), "bytes:0"),
    (Trigger("ms", None, 250), "ms:250"),
    (Trigger("event", "finish", 2), "event:finish:2"),
    (Trigger("first_progress"), "first_progress"),
])
def test_a_trigger_reads_back_as_written(trigger, text):
    assert trigger.text == text and parse_trigger(text) == trigger


def test_a_body_dialect_cuts_when_exactly_n_bytes_have_arrived():
    scanner = FrameScanner(JsonBody, parse_trigger("bytes:5"))
    assert scanner.feed(b'{"a":', 0, 0) == 5
    assert FrameScanner(JsonBody, parse_trigger("bytes:0")).feed(b"{", 0, 0) == 0


def test_a_mid_frame_byte_cut_fires_when_exactly_n_bytes_have_arrived():
    scanner = FrameScanner(OpenAIChat, parse_trigger("bytes:10"), mid_frame=True)
    assert scanner.feed(b"data: {}\n\n"[:9], 0, 0) is None
    assert scanner.feed(b"\n", 1, 1) == 10  # the frame ends at 10: a frame boundary is fine
    scanner = FrameScanner(OpenAIChat, parse_trigger("bytes:4"), mid_frame=True)
    assert scanner.feed(b"data", 0, 0) == 4
    assert scanner.frames_before == 0


SMALL = b"data: {}\n\n"
# Data lines of 10 bytes each, one event: more data than max_line=16 lets an event keep.
OVERSIZED = b"data: aaaaaaaaaa\n" * 4 + b"\n"


@pytest.mark.parametrize("at, cut, frames", [
    ("events:1", len(SMALL), 1),
    ("events:2", len(SMALL) + len(OVERSIZED), 2),  # the oversized event counts as a frame
    ("events:3", len(SMALL) * 2 + len(OVERSIZED), 3),
])
def test_an_oversized_event_is_a_frame_of_the_count(at, cut, frames):
    scanner = FrameScanner(OpenAIChat, parse_trigger(at), max_line=16)
    assert scanner.feed(SMALL + OVERSIZED + SMALL, 0, 0) == cut
    assert scanner.frames == 3
    assert scanner.frames_before == frames


def test_a_mid_frame_cut_of_a_three_byte_ndjson_line_is_after_its_first_byte():
    scanner = FrameScanner(OllamaNdjson, parse_trigger("events:2"), mid_frame=True)
    assert scanner.feed(b'{"done":false}\n{}\n', 0, 0) == 15 + 1
    assert scanner.frames_before == 1


@pytest.mark.parametrize("at", ["request", "headers"])
def test_a_before_body_trigger_never_cuts_the_body(at):
    """The proxy acts on these before any body byte: reading the body, they never fire."""
    scanner = FrameScanner(OpenAIChat, parse_trigger(at))
    assert scanner.feed(SMALL * 3, 0, 0) is None
    assert scanner.frames == 3 and scanner.cut is None
