"""diagnostics/decode/sse.py at its limits: the default line cap, a line that crosses the cap
while it waits for its LF, the per-event cap per event, what close() leaves behind, and the
frame's repr. (The WHATWG cases and the chunking properties are in tests/test_sse.py.)"""

from __future__ import annotations

import pytest

from streamtap.diagnostics.decode.sse import (
    DEFAULT_MAX_LINE, Frame, LineSplitter, NdjsonDecoder, SseDecoder)

MIB = 1024 * 1024


def test_the_default_line_cap_is_8_mib_of_content():
    assert DEFAULT_MAX_LINE == 8 * MIB
    at_cap = b"data: " + b"x" * (8 * MIB - 6) + b"\n\n"
    decoder = SseDecoder()
    frames = decoder.feed(at_cap)
    assert [(len(f.data), f.size) for f in frames] == [(8 * MIB - 6, len(at_cap))]
    assert decoder.overlong_lines == 0
    over = SseDecoder()
    assert over.feed(b"data: " + b"x" * (8 * MIB - 5) + b"\n\ndata: next\n\n") == [
        Frame(b"next", 8 * MIB + 1 + 2 + 12)]
    assert over.overlong_lines == 1


def test_the_default_event_cap_is_the_line_cap():
    decoder = SseDecoder(max_line=16)
    assert decoder.max_event == 16
    assert SseDecoder(max_line=16, max_event=0).max_event == 0


@pytest.mark.parametrize("chunks, kept, overlong", [
    ([b"ab", b"cde\r", b"\n", b"x\n"], [(b"x", 2)], 1),  # 5 bytes of content, CR held: dropped
    ([b"ab", b"cd\r", b"\n", b"x\n"], [(b"abcd", 6), (b"x", 2)], 0),  # 4 bytes: kept
    ([b"abcd\r", b"\n"], [(b"abcd", 6)], 0),
    ([b"abcde\r", b"\n"], [], 1),
])
def test_a_line_waiting_for_its_lf_is_judged_on_its_content(chunks, kept, overlong):
    splitter = LineSplitter(max_line=4)
    assert [pair for chunk in chunks for pair in splitter.split(chunk)] == kept
    assert splitter.overlong_lines == overlong


def test_the_event_cap_counts_each_event_from_zero():
    """Two events of exactly max_event data bytes: neither is oversized."""
    decoder = SseDecoder(max_line=64, max_event=4)
    frames = decoder.feed(b"data: abcd\n\ndata: efgh\n\ndata: ijklm\n\n")
    assert [(f.data, f.oversized) for f in frames] == [
        (b"abcd", False), (b"efgh", False), (b"", True)]
    assert decoder.oversized_events == 1


def test_the_event_cap_counts_data_split_over_lines():
    decoder = SseDecoder(max_line=64, max_event=4)
    frames = decoder.feed(b"data: ab\ndata: cd\n\ndata: ab\ndata: cde\n\n")
    assert [(f.data, f.size, f.oversized) for f in frames] == [
        (b"ab\ncd", 19, False), (b"", 20, True)]


def test_a_second_close_reports_nothing_and_counts_nothing():
    decoder = SseDecoder(max_line=8)
    assert decoder.feed(b"data: ok\n\n: x\ndata: aaaaaaaaaaaa") == [
        Frame(b"ok", 10), Frame(b" x", 4, comment=True)]
    assert decoder.close() == [Frame(b"", 18, unterminated=True)]
    assert (decoder.close(), decoder.trailing_bytes, decoder.overlong_lines) == ([], 0, 1)
    trailing = SseDecoder()
    trailing.feed(b"data: a\n\nid: 1\n\n")
    assert (trailing.close(), trailing.trailing_bytes) == ([], 7)
    assert (trailing.close(), trailing.trailing_bytes) == ([], 7)


def test_a_splitter_closed_inside_an_overlong_line_is_clean_after():
    splitter = LineSplitter(max_line=3)
    assert splitter.split(b"abcdef\r") == []
    assert splitter.close() is not None
    assert splitter.close() is None
    assert splitter.split(b"xyz") == [] and splitter.split(b"\n") == [(b"xyz", 4)]
    assert splitter.overlong_lines == 1


def test_a_splitter_closed_after_a_lone_cr_is_clean_after():
    splitter = LineSplitter(max_line=3)
    splitter.split(b"ab\r")
    assert splitter.close() == (b"ab", 3, True)
    assert splitter.split(b"xyz") == []  # nothing of the closed line is held, not even its CR
    assert splitter.split(b"\n") == [(b"xyz", 4)]
    assert splitter.overlong_lines == 0


def test_a_decoder_fed_after_close_starts_a_new_event():
    decoder = SseDecoder(max_line=64, max_event=4)
    decoder.feed(b"event: big\ndata: abcdefgh\n")
    assert decoder.close() == [Frame(b"", 26, "big", unterminated=True, oversized=True)]
    assert decoder.feed(b"data: abcd\n\n") == [Frame(b"abcd", 12)]


def test_an_ndjson_second_close_counts_nothing():
    decoder = NdjsonDecoder()
    decoder.feed(b'{"a":1}\n\n\n')
    assert (decoder.close(), decoder.trailing_bytes) == ([], 2)
    assert (decoder.close(), decoder.trailing_bytes) == ([], 2)


@pytest.mark.parametrize("frame, text", [
    (Frame(b"hi", 9), "Frame(event=None, data=b'hi', size=9)"),
    (Frame(b"x" * 70, 80, "delta"), f"Frame(event='delta', data=b'{'x' * 60}', size=80)"),
    (Frame(b" ping", 7, comment=True), "Frame(event=None, data=b' ping', size=7 comment)"),
    (Frame(b"", 5, unterminated=True), "Frame(event=None, data=b'', size=5 unterminated)"),
    (Frame(b"", 5, unterminated=True, oversized=True),
     "Frame(event=None, data=b'', size=5 unterminated oversized)"),
    (Frame(b"", 5, oversized=True), "Frame(event=None, data=b'', size=5 oversized)"),
])
def test_frame_repr(frame, text):
    assert repr(frame) == text


def test_a_bare_data_field_at_exactly_max_event_keeps_the_event():
    """`data` without a colon goes through the field parser, not the `data:` fast path; an event
    already at exactly max_event bytes is still within the cap after it (an empty value)."""
    decoder = SseDecoder(max_line=64, max_event=4)
    [frame] = decoder.feed(b"data: abcd\ndata\n\n")
    assert frame.data == b"abcd\n" and not frame.oversized
    assert decoder.oversized_events == 0
