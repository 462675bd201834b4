"""diagnostics/decode/sse.py at its limits: the default line cap, a line that crosses the cap
while it waits for its LF, the per-event cap per event, what close() leaves behind, and the
frame's repr. (The WHATWG cases and the chunking properties are in tests/test_sse.py.)"""

from __future__ import annotations

import pytest

from streamtap.diagnostics.decode.sse import (
    DEFAULT_MAX_LINE, MAX_FIELD_NAMES, MAX_FIELD_VALUE, OTHER_FIELD, Frame, LineSplitter,
    NdjsonDecoder, SseDecoder)

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


# -- unknown field lines (issue 27): evidence, never dispatched ----------------------------------
GPUSTACK_TAIL = (b'data: {"choices":[{"delta":{"content":"w"}}]}\n\n'
                 b'error: {"detail":"failed to decode","error":{"message":"m","code":500}}\n\n')


def fed(data: bytes, sizes: list[int] | None, **kwargs) -> tuple[SseDecoder, list[Frame]]:
    """A decoder fed `data` whole (sizes None), byte by byte ([]) or in the given sizes, closed."""
    decoder = SseDecoder(**kwargs)
    if sizes is None:
        chunks = [data]
    elif not sizes:
        chunks = [data[i:i + 1] for i in range(len(data))]
    else:
        cuts = [0, *sizes, len(data)]
        chunks = [data[a:b] for a, b in zip(cuts, cuts[1:])]
    frames = [frame for chunk in chunks for frame in decoder.feed(chunk)]
    return decoder, frames + decoder.close()


@pytest.mark.parametrize("sizes", [None, [], [50, 51, 60], [3, 49, 52, 100]])
def test_an_error_field_line_dispatches_nothing_and_is_counted(sizes):
    """WHATWG ignores the `error` field: the frames are those of the stream without the line,
    whatever the chunking; only `unknown_fields` (and `take_fields`) see it."""
    decoder, frames = fed(GPUSTACK_TAIL, sizes, keep_fields=True)
    assert [frame.data for frame in frames] == [b'{"choices":[{"delta":{"content":"w"}}]}']
    assert decoder.unknown_fields == {"error": 1}
    assert decoder.take_fields() == [
        ("error", b'{"detail":"failed to decode","error":{"message":"m","code":500}}')]
    assert decoder.take_fields() == []
    assert decoder.trailing_bytes == len(GPUSTACK_TAIL) - frames[0].size


def test_field_lines_are_held_only_when_asked_for():
    decoder, _ = fed(GPUSTACK_TAIL, None)
    assert decoder.unknown_fields == {"error": 1} and decoder.take_fields() == []


def test_an_error_field_line_without_a_blank_line_after_it_is_an_unterminated_event():
    """WHATWG drops the line the stream ended inside; as evidence it is still counted and held."""
    decoder, frames = fed(GPUSTACK_TAIL.rstrip(b"\n"), None, keep_fields=True)
    assert [(frame.data, frame.unterminated) for frame in frames] == [
        (b'{"choices":[{"delta":{"content":"w"}}]}', False), (b"", True)]
    assert decoder.unknown_fields == {"error": 1}
    assert [name for name, _ in decoder.take_fields()] == ["error"]
    ended_in_data, frames = fed(b"data: {}\n\ndata: {", None, keep_fields=True)
    assert (ended_in_data.unknown_fields, frames[-1].unterminated) == ({}, True)


def test_field_names_are_capped_in_count_and_in_what_they_may_be():
    """At most MAX_FIELD_NAMES names, plus `<other>`: a name that is not one short identifier, a
    line with no colon (raw text is all name) and every name past the cap count as that."""
    names = b"".join(b"f%d: 1\n" % i for i in range(25))
    odd = (b"two words: x\n" + b"n" * 33 + b": x\n" + b"a line of raw text\n" + b"hello\n"
           + b"9lives: x\n" + "naïve: x\n".encode())
    bare, _ = fed(b"hello\nhello:\n\n", None, keep_fields=True)  # one word of raw text, alone
    assert bare.unknown_fields == {OTHER_FIELD: 1, "hello": 1}
    assert bare.take_fields() == [("hello", b"")]
    decoder, frames = fed(names + odd + b"\n", [], keep_fields=True)
    assert frames == []
    assert len(decoder.unknown_fields) == MAX_FIELD_NAMES + 1
    assert decoder.unknown_fields[OTHER_FIELD] == 25 - MAX_FIELD_NAMES + 6
    assert sum(decoder.unknown_fields.values()) == 31
    assert [name for name, _ in decoder.take_fields()] == [f"f{i}" for i in range(16)]


def test_a_held_field_value_is_bounded():
    big = b"x" * (MAX_FIELD_VALUE + 1)
    decoder, _ = fed(b"error: " + big + b"\nerror: " + big[1:] + b"\n\n", None, keep_fields=True)
    assert decoder.unknown_fields == {"error": 2}
    assert decoder.take_fields() == [("error", big[1:])]
