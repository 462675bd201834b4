"""The SSE and NDJSON decoders (diagnostics/decode/sse.py): the WHATWG EventSource examples and
edge cases, frame sizes, and identical frames whole, byte by byte and in any chunking (checked
against a plain whole-buffer reference written from the spec); then the decoder at its limits."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.decode.sse import (
    BOM, DEFAULT_MAX_LINE, MAX_FIELD_NAMES, MAX_FIELD_VALUE, OTHER_FIELD, Frame, LineSplitter,
    NdjsonDecoder, SseDecoder)


# -- helpers ------------------------------------------------------------------------------------


def cut(data: bytes, sizes) -> list[bytes]:
    """`data` whole ("whole"), byte by byte ("bytewise"), or in the given sizes (rest last)."""
    if sizes == "whole":
        return [data]
    if sizes == "bytewise":
        return [data[i:i + 1] for i in range(len(data))]
    chunks, pos = [], 0
    for size in sizes:
        if pos >= len(data):
            break
        chunks.append(data[pos:pos + size])
        pos += size
    if pos < len(data):
        chunks.append(data[pos:])
    return chunks


def decode(data: bytes, sizes="whole", max_line: int = DEFAULT_MAX_LINE, cls=SseDecoder):
    """All frames of `data` fed in the given chunking, and the decoder after close()."""
    decoder = cls(max_line)
    frames = []
    for chunk in cut(data, sizes):
        frames += decoder.feed(chunk)
    frames += decoder.close()
    return frames, decoder


def events(frames) -> list[tuple]:
    """What a client would dispatch: (event, data, id) of the complete, non-comment frames."""
    return [(f.event, f.data, f.id) for f in frames if not f.comment and not f.unterminated]


def assert_sizes_add_up(data: bytes, frames, decoder) -> None:
    assert sum(f.size for f in frames) + decoder.trailing_bytes == len(data)


LINE_END = re.compile(rb"\r\n|\n|\r")


def reference_sse(data: bytes, max_line: int = DEFAULT_MAX_LINE, max_event: int | None = None):
    """WHATWG EventSource parsing of a whole buffer, as plainly as the spec says it, plus what
    streamtap adds: comments as frames, sizes, an unterminated frame for an open event, and an
    oversized frame (data dropped) for an event whose data outgrew `max_event`."""
    frames, data_lines, event, last_id, retry = [], [], None, None, None
    size, open_event, overlong, oversized = 0, False, 0, False
    max_event = max_line if max_event is None else max_event
    if data.startswith(BOM):
        data, size = data[3:], 3
    pos, lines = 0, []
    for match in LINE_END.finditer(data):
        lines.append((data[pos:match.start()], match.end() - pos))
        pos = match.end()
    rest = data[pos:]
    for line, raw in lines:
        if len(line) > max_line:
            overlong += 1
            size += raw
            open_event = True
            continue
        if not line:
            size += raw
            if data_lines:
                frames.append(Frame(b"\n".join(data_lines), size, event, last_id, retry,
                                    oversized=oversized))
                retry, size = None, 0
            data_lines, event, open_event, oversized = [], None, False, False
            continue
        if line.startswith(b":"):
            frames.append(Frame(line[1:], raw, comment=True))
            continue
        size += raw
        open_event = True
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"event":
            event = value.decode("utf-8", "replace") or None
        elif name == b"data" and not oversized:
            data_lines.append(value)
            if sum(map(len, data_lines)) > max_event:
                data_lines, oversized = [b""], True
        elif name == b"id" and b"\0" not in value:
            last_id = value.decode("utf-8", "replace")
        elif name == b"retry" and re.fullmatch(rb"[0-9]+", value):
            retry = int(value)
    if rest:
        overlong += len(rest) > max_line
        size += len(rest)
        open_event = True
    if open_event or data_lines:
        frames.append(Frame(b"\n".join(data_lines), size, event, last_id, retry,
                            unterminated=True, oversized=oversized))
        size = 0
    return frames, size, overlong


# -- the WHATWG examples (html.spec.whatwg.org, "Server-sent events", parsing examples) ----------


def test_spec_stock_ticker_multiline_data():
    data = b"data: YHOO\ndata: +2\ndata: 10\n\n"
    frames, decoder = decode(data)
    assert frames == [Frame(b"YHOO\n+2\n10", len(data))]
    assert decoder.trailing_bytes == 0


def test_spec_comment_ids_and_a_last_event_without_blank_line():
    data = (b": test stream\n\ndata: first event\nid: 1\n\n"
            b"data:second event\nid\n\ndata:  third event\n")
    frames, decoder = decode(data)
    assert frames[0] == Frame(b" test stream", 14, comment=True)
    # The blank line after the comment dispatches nothing; its byte goes to the next frame.
    assert frames[1] == Frame(b"first event", 1 + 25, id="1")
    assert frames[2] == Frame(b"second event", 22, id="")  # `id` alone resets the last id
    # Not followed by a blank line: a client never sees it; we keep it as evidence. Only one
    # leading space is stripped.
    assert frames[3] == Frame(b" third event", 19, id="", unterminated=True)
    assert events(frames) == [(None, b"first event", "1"), (None, b"second event", "")]
    assert_sizes_add_up(data, frames, decoder)


def test_spec_third_event_without_final_newline():
    frames, _ = decode(b"data: first event\n\ndata:  third event")
    assert frames[-1].unterminated and frames[-1].size == len(b"data:  third event")
    assert frames[-1].data == b""  # an unfinished line is not interpreted


def test_spec_empty_data_lines():
    data = b"data\n\ndata\ndata\n\ndata:"
    frames, decoder = decode(data)
    # `data` with no colon is a data line with an empty value: the event IS dispatched.
    assert events(frames) == [(None, b"", None), (None, b"\n", None)]
    assert frames[2] == Frame(b"", 5, unterminated=True)
    assert_sizes_add_up(data, frames, decoder)


def test_spec_space_after_colon_is_optional():
    frames, _ = decode(b"data:test\n\ndata: test\n\n")
    assert events(frames) == [(None, b"test", None), (None, b"test", None)]


def test_spec_event_types():
    data = (b"event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\n"
            b"event: add\ndata: 113411\n\n")
    frames, decoder = decode(data)
    assert [(f.event, f.data) for f in frames] == [
        ("add", b"73857293"), ("remove", b"2153"), ("add", b"113411")]
    assert_sizes_add_up(data, frames, decoder)


def test_event_type_is_reset_after_each_dispatch():
    frames, _ = decode(b"event: a\ndata: 1\n\ndata: 2\n\n")
    assert [f.event for f in frames] == ["a", None]


def test_events_with_empty_data_buffer_are_not_dispatched_but_their_bytes_count():
    data = b"event: lonely\nid: 7\n\nretry: 10\n\ndata: x\n\n"
    frames, decoder = decode(data)
    assert len(frames) == 1
    # The event name of the undispatched event does not leak into the next one, the id does
    # (it is the stream's last event id) and so does the retry.
    assert frames[0] == Frame(b"x", len(data), None, "7", 10)
    assert_sizes_add_up(data, frames, decoder)


def test_undispatched_event_at_the_end_is_trailing_bytes_not_a_frame():
    data = b"data: x\n\nevent: end\n\n\n"
    frames, decoder = decode(data)
    assert frames == [Frame(b"x", 9)]
    assert decoder.trailing_bytes == len(b"event: end\n\n\n")
    assert_sizes_add_up(data, frames, decoder)


# -- line ends ----------------------------------------------------------------------------------


def test_crlf_lf_and_lone_cr_give_the_same_events():
    lines = [b"event: a", b"data: 1", b"data:2", b"", b": ka", b"data: 3", b"", b""]
    results = []
    for end in (b"\n", b"\r\n", b"\r"):
        data = end.join(lines)
        frames, decoder = decode(data)
        results.append([(f.event, f.data, f.comment) for f in frames])
        assert_sizes_add_up(data, frames, decoder)
        assert decode(data, "bytewise")[0] == frames
    assert results[0] == results[1] == results[2] == [
        ("a", b"1\n2", False), (None, b" ka", True), (None, b"3", False)]


def test_mixed_line_ends_in_one_stream():
    data = b"data: 1\r\ndata: 2\rdata: 3\n\r\n"
    frames, _ = decode(data)
    assert frames == [Frame(b"1\n2\n3", len(data))]


def test_cr_at_chunk_end_then_lf_is_one_line_end():
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\n\r") == []  # "\r" may still be the start of a CRLF
    assert decoder.feed(b"\n") == [Frame(b"a", 11)]
    assert decoder.close() == []


def test_cr_at_chunk_end_then_cr_is_two_line_ends():
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\r") == []  # "data: a" ended; the blank line may still be CRLF
    assert decoder.feed(b"data: b\n") == [Frame(b"a", 9)]
    assert decoder.close() == [Frame(b"b", 8, unterminated=True)]


def test_lone_cr_at_end_of_stream_is_a_line_end():
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\r\r") == []  # the last CR waits for a possible LF
    assert decoder.close() == [Frame(b"a", 9)]  # it was a blank line: the event is dispatched


def test_cr_split_across_chunks_gives_same_frames_as_whole():
    data = b"data: a\r\n\r\ndata: b\r\r: c\r\n"
    whole, _ = decode(data)
    for split in range(1, len(data)):
        assert decode(data, [split])[0] == whole, split


# -- BOM ----------------------------------------------------------------------------------------


def test_leading_bom_is_stripped_and_counted_in_the_first_frame():
    data = BOM + b"data: x\n\n"
    frames, decoder = decode(data)
    assert frames == [Frame(b"x", len(data))]
    assert decode(data, "bytewise")[0] == frames
    assert decode(data, [1, 1, 1])[0] == frames
    assert decode(data, [2, 5])[0] == frames


def test_only_one_bom_is_stripped():
    data = BOM + BOM + b"data: x\n\ndata: y\n\n"
    frames, decoder = decode(data)
    # The second BOM makes the first field name "\ufeffdata": an unknown field, ignored.
    assert events(frames) == [(None, b"y", None)]
    assert frames[0].size == len(data)
    assert decode(data, "bytewise")[0] == frames


def test_bom_after_the_stream_start_is_not_stripped():
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\n\n") == [Frame(b"a", 9)]
    assert decoder.feed(BOM + b"data: b\n\n") == []  # "\ufeffdata" is not a field we know


def test_a_bom_prefix_that_is_not_a_bom_is_kept_as_bytes():
    data = b"\xef\xbbdata: x\n\n"
    frames, decoder = decode(data, "bytewise")
    assert frames == []  # the line's field name is garbage: ignored, nothing dispatched
    assert decoder.trailing_bytes == len(data)


def test_stream_ending_inside_a_bom_prefix_is_unterminated():
    frames, decoder = decode(b"\xef\xbb", "bytewise")
    assert frames == [Frame(b"", 2, unterminated=True)]


def test_bom_only_stream():
    frames, decoder = decode(BOM, "bytewise")
    assert frames == [] and decoder.trailing_bytes == 3


# -- fields -------------------------------------------------------------------------------------


def test_comments_are_keepalive_frames_even_inside_an_event():
    data = b": OPENROUTER PROCESSING\n\ndata: 1\n:ping\ndata: 2\n\n"
    frames, decoder = decode(data)
    assert frames == [
        Frame(b" OPENROUTER PROCESSING", 24, comment=True),
        Frame(b"ping", 6, comment=True),
        Frame(b"1\n2", 1 + 8 + 8 + 1),  # the blank line after the comment is carried here
    ]
    assert_sizes_add_up(data, frames, decoder)


def test_empty_comment():
    frames, _ = decode(b":\r\n")
    assert frames == [Frame(b"", 3, comment=True)]


def test_exactly_one_leading_space_is_stripped():
    frames, _ = decode(b"event:  spaced\ndata:  two\ndata:\tTab\nid:  9\n\n")
    assert frames == [Frame(b" two\n\tTab", 44, " spaced", " 9")]


def test_data_without_space_and_data_lines_joined_with_lf():
    frames, _ = decode(b'data:{"a":\ndata:1}\n\n')
    assert frames[0].data == b'{"a":\n1}'


def test_field_without_colon_has_empty_value_and_unknown_fields_are_ignored():
    frames, _ = decode(b"event\ndata\nfoo: bar\nDATA: no\n data: no\n\n")
    assert frames == [Frame(b"", 40)]


def test_value_may_contain_colons():
    frames, _ = decode(b"data: a: b:c\nevent: x:y\n\n")
    assert (frames[0].data, frames[0].event) == (b"a: b:c", "x:y")


def test_id_with_nul_is_ignored_and_id_persists():
    frames, _ = decode(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\ndata: c\n\nid\ndata: d\n\n")
    assert [f.id for f in frames] == ["1", "1", "1", ""]


def test_retry_must_be_all_ascii_digits():
    stream = b"".join(b"retry: " + value + b"\ndata: x\n\n"
                      for value in (b"+5", b"5x", b"-5", b" 5", b"", b"5.0", "\uff15".encode(),
                                    b"5", b"0042"))
    frames, _ = decode(stream)
    assert [f.retry for f in frames] == [None] * 7 + [5, 42]


def test_retry_and_id_alone_do_not_dispatch():
    frames, decoder = decode(b"retry: 5\n\nid: 3\n\n")
    assert frames == [] and decoder.trailing_bytes == 17


def test_non_utf8_event_name_does_not_raise():
    frames, _ = decode(b"event: \xff\xfe\ndata: x\n\n")
    assert frames[0].event == "\ufffd\ufffd"


# -- end of stream --------------------------------------------------------------------------------


def test_open_event_at_close_is_unterminated_with_its_size():
    decoder = SseDecoder()
    assert decoder.feed(b'data: {"a":1}\n\nevent: x\ndata: {"b"') == [Frame(b'{"a":1}', 15)]
    assert decoder.close() == [Frame(b"", 19, "x", unterminated=True)]
    assert decoder.close() == []  # nothing is reported twice


def test_complete_data_lines_of_an_open_event_are_kept():
    frames, _ = decode(b"data: a\ndata: b\n")
    assert frames == [Frame(b"a\nb", 16, unterminated=True)]


def test_clean_stream_has_nothing_at_close():
    decoder = SseDecoder()
    decoder.feed(b"data: [DONE]\n\n")
    assert decoder.close() == [] and decoder.trailing_bytes == 0


def test_partial_comment_at_close_is_unterminated_not_keepalive():
    frames, _ = decode(b": keep")
    assert frames == [Frame(b"", 6, unterminated=True)]


# -- overlong lines ---------------------------------------------------------------------------------


def test_overlong_line_is_counted_and_later_frames_still_decode():
    data = b"data: short\n\ndata: " + b"x" * 100 + b"\n\ndata: after\n\n"
    for sizes in ("whole", "bytewise", [3] * 60, [17, 50, 1, 100]):
        frames, decoder = decode(data, sizes, max_line=16)
        assert decoder.overlong_lines == 1
        # The overlong data line is dropped, so its event has no data and is not dispatched;
        # its bytes travel with the next frame.
        assert frames == [Frame(b"short", 13), Frame(b"after", len(data) - 13)], sizes
        assert_sizes_add_up(data, frames, decoder)


def test_line_of_exactly_max_line_is_kept():
    data = b"data: " + b"y" * 10 + b"\r\n\r\n"
    for sizes in ("whole", "bytewise", [16, 1]):
        frames, decoder = decode(data, sizes, max_line=16)
        assert decoder.overlong_lines == 0
        assert frames == [Frame(b"y" * 10, len(data))]
    frames, decoder = decode(data.replace(b"y", b"yy", 1), max_line=16)
    assert decoder.overlong_lines == 1 and frames == []


def test_overlong_line_is_not_buffered():
    decoder = SseDecoder(max_line=1000)
    decoder.feed(b"data: ")
    for _ in range(2000):
        decoder.feed(b"z" * 100)
    assert decoder.overlong_lines == 1
    assert decoder._lines._held_len == 0  # 200 kB went by, none of it kept
    assert decoder.feed(b"\n\ndata: ok\n\n") == [Frame(b"ok", 6 + 200_000 + 2 + 10)]


def test_overlong_unfinished_line_at_close_is_unterminated():
    frames, decoder = decode(b"data: ok\n\ndata: " + b"q" * 50, [7], max_line=16)
    assert frames == [Frame(b"ok", 10), Frame(b"", 56, unterminated=True)]
    assert decoder.overlong_lines == 1


def test_overlong_line_ending_in_cr_split_from_its_lf():
    data = b"data: " + b"w" * 30 + b"\r\n\r\ndata: next\r\n\r\n"
    expected = [Frame(b"next", len(data))]
    for split in range(1, len(data)):
        frames, decoder = decode(data, [split], max_line=16)
        assert frames == expected and decoder.overlong_lines == 1, split


# -- the chunking property --------------------------------------------------------------------------

FIELD_LINES = st.one_of(
    st.sampled_from([b"", b"", b"", b"data", b"data:", b"data: ", b"event", b"id", b"retry: 5",
                     b"retry: +5", b"retry: 5x", b":", b": keep-alive", b"id: a\x00b", b"x: y",
                     b"data: [DONE]", b'data:{"k": 1}', BOM + b"data: bom", b"event: ping"]),
    st.builds(lambda name, space, value: name + b":" + space + value,
              st.sampled_from([b"data", b"event", b"id", b"retry", b"", b"other", b"Data"]),
              st.sampled_from([b"", b" ", b"  "]),
              st.binary(max_size=12).map(lambda v: v.replace(b"\r", b"").replace(b"\n", b""))),
)
LINE_ENDS = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def sse_streams(draw) -> bytes:
    lines = draw(st.lists(st.tuples(FIELD_LINES, LINE_ENDS), max_size=30))
    data = b"".join(line + end for line, end in lines)
    if draw(st.booleans()):
        data = BOM + data
    if draw(st.booleans()):
        data += draw(FIELD_LINES)  # an unfinished last line
    return data


CHUNKINGS = st.lists(st.integers(1, 64), max_size=40)


@settings(max_examples=300, deadline=None)
@given(data=sse_streams(), sizes=CHUNKINGS)
def test_any_chunking_gives_the_same_frames_as_the_reference(data, sizes):
    expected, trailing, _ = reference_sse(data)
    for chunking in ("whole", "bytewise", sizes):
        frames, decoder = decode(data, chunking)
        assert frames == expected, chunking
        assert decoder.trailing_bytes == trailing
        assert_sizes_add_up(data, frames, decoder)


@settings(max_examples=300, deadline=None)
@given(data=sse_streams(), sizes=CHUNKINGS, max_line=st.integers(0, 24))
def test_any_chunking_with_overlong_lines_matches_the_reference(data, sizes, max_line):
    expected, trailing, overlong = reference_sse(data, max_line)
    for chunking in ("whole", "bytewise", sizes):
        frames, decoder = decode(data, chunking, max_line=max_line)
        assert frames == expected, chunking
        assert decoder.overlong_lines == overlong
        assert decoder.trailing_bytes == trailing


# -- LineSplitter ---------------------------------------------------------------------------------


def test_line_splitter_pairs_and_close():
    splitter = LineSplitter()
    assert splitter.split(b"a\r\nb\rc\nd") == [(b"a", 3), (b"b", 2), (b"c", 2)]
    assert splitter.split(b"e\r") == []
    assert splitter.split(b"\nf") == [(b"de", 4)]
    assert splitter.close() == (b"f", 1, False)
    assert splitter.close() is None
    splitter.split(b"g\r")
    assert splitter.close() == (b"g", 2, True)


def test_line_splitter_leaves_out_overlong_lines():
    splitter = LineSplitter(max_line=3)
    assert splitter.split(b"abc\nabcd\nxy") == [(b"abc", 4)]
    assert splitter.split(b"z\n") == [(b"xyz", 4)]
    assert splitter.overlong_lines == 1 and splitter.dropped == []


# -- NDJSON ---------------------------------------------------------------------------------------


def test_ndjson_one_frame_per_line_blank_lines_carried():
    data = b'{"a":1}\n\n  \n{"b":2}\r\n{"c":3}'
    frames, decoder = decode(data, cls=NdjsonDecoder)
    assert frames == [Frame(b'{"a":1}', 8), Frame(b'{"b":2}', 4 + 9),
                      Frame(b'{"c":3}', 7, unterminated=True)]
    assert_sizes_add_up(data, frames, decoder)


def test_ndjson_complete_last_line_and_trailing_blank():
    frames, decoder = decode(b'{"a":1}\n\n', cls=NdjsonDecoder)
    assert frames == [Frame(b'{"a":1}', 8)] and decoder.trailing_bytes == 1


def test_ndjson_non_object_lines_are_frames_too():
    frames, _ = decode(b"[1]\nnot json\n", cls=NdjsonDecoder)
    assert [f.data for f in frames] == [b"[1]", b"not json"]


def test_ndjson_overlong_line():
    data = b'{"a":1}\n{"long":"' + b"x" * 40 + b'"}\n{"b":2}\n'
    for sizes in ("whole", "bytewise", [9, 9, 9]):
        frames, decoder = decode(data, sizes, max_line=16, cls=NdjsonDecoder)
        assert decoder.overlong_lines == 1
        assert frames == [Frame(b'{"a":1}', 8), Frame(b'{"b":2}', len(data) - 8)]
    frames, decoder = decode(b'{"a":1}\n{"long":"' + b"x" * 40, max_line=16, cls=NdjsonDecoder)
    assert frames[-1] == Frame(b"", 49, unterminated=True)


NDJSON_LINES = st.one_of(st.sampled_from([b"", b" ", b'{"done":true}', b'{"error":"x"}', b"{}"]),
                         st.binary(max_size=20).map(
                             lambda v: v.replace(b"\r", b"").replace(b"\n", b"")))


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.tuples(NDJSON_LINES, LINE_ENDS), max_size=20),
       tail=NDJSON_LINES, sizes=CHUNKINGS, max_line=st.sampled_from([4, 12, DEFAULT_MAX_LINE]))
def test_ndjson_any_chunking_gives_the_same_frames(lines, tail, sizes, max_line):
    data = b"".join(line + end for line, end in lines) + tail
    whole, decoder = decode(data, max_line=max_line, cls=NdjsonDecoder)
    assert_sizes_add_up(data, whole, decoder)
    assert all(f.data.strip() or f.unterminated for f in whole)
    for chunking in ("bytewise", sizes):
        frames, other = decode(data, chunking, max_line=max_line, cls=NdjsonDecoder)
        assert frames == whole
        assert other.overlong_lines == decoder.overlong_lines
        assert other.trailing_bytes == decoder.trailing_bytes


def test_frame_equality():
    assert Frame(b"a", 1) == Frame(b"a", 1)
    assert Frame(b"a", 1) != Frame(b"a", 2)
    assert Frame(b"a", 1) != Frame(b"a", 1, comment=True)
    assert Frame(b"a", 1).__eq__("a") is NotImplemented


# -- the per-event limit ----------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(data=sse_streams(), sizes=CHUNKINGS, max_event=st.integers(0, 40))
def test_any_chunking_with_oversized_events_matches_the_reference(data, sizes, max_event):
    expected, trailing, _ = reference_sse(data, 1 << 20, max_event)
    for chunking in ("whole", "bytewise", sizes):
        decoder = SseDecoder(1 << 20, max_event)
        frames = [frame for chunk in cut(data, chunking) for frame in decoder.feed(chunk)]
        frames += decoder.close()
        assert frames == expected, chunking
        assert decoder.trailing_bytes == trailing
        assert decoder.oversized_events == sum(frame.oversized for frame in expected)


def test_an_event_that_never_ends_is_not_kept_and_is_dispatched_oversized():
    decoder = SseDecoder(max_line=1024, max_event=4096)
    line = b"data: " + b"x" * 100 + b"\n"
    frames = []
    for _ in range(10_000):  # ~1 MB of one event, far past max_event
        frames += decoder.feed(line)
        assert decoder._data_len <= 4096 + 100  # never more than the limit is kept
    frames += decoder.feed(b"\ndata: after\n\n")
    assert [(f.data, f.size, f.oversized) for f in frames] == [
        (b"", 10_000 * len(line) + 1, True), (b"after", 13, False)]
    assert decoder.oversized_events == 1


# -------------------------------------------------------------------------------------------------
# diagnostics/decode/sse.py at its limits: the default line cap, a line that crosses the cap
# while it waits for its LF, the per-event cap per event, what close() leaves behind, and the
# frame's repr.
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
