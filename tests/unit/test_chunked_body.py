"""The relay's body framing (diagnostics/decode/chunked.py): what is forwarded, what is read, where
a body ends, whatever the read boundaries."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.decode.chunked import (MALFORMATIONS, MAX_SIZE_LINE, MAX_TRAILER_BYTES,
                                                  ChunkedBody, LengthBody, UntilCloseBody)

BODY = b"5\r\nhello\r\n1;ext=1\r\n \r\nA\r\n0123456789\r\n"
END = b"0\r\nx-trailer: 1\r\n\r\n"


def feed_all(body, reads):
    forwarded, payload = [], []
    for read in reads:
        forward, data = body.feed(read)
        forwarded.append(forward)
        payload.append(data)
    return b"".join(forwarded), b"".join(payload)


def cut(data: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in zip(edges, edges[1:])]


def test_a_whole_body_forwards_everything_but_the_last_chunk_and_reads_the_payload():
    body = ChunkedBody()
    forward, payload = body.feed(BODY + END)
    assert forward == BODY  # extensions and all, as the upstream sent them
    assert payload == b"hello 0123456789"
    assert body.complete and body.error is None and body.extra == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=200), max_size=12))
def test_any_read_boundaries_give_the_same_forward_and_payload(points):
    body = ChunkedBody()
    forward, payload = feed_all(body, cut(BODY + END, points))
    assert (forward, payload) == (BODY, b"hello 0123456789")
    assert body.complete and body.extra == 0


def test_a_size_line_cut_by_a_read_is_held_back_until_whole():
    body = ChunkedBody()
    assert body.feed(b"5\r\nhello\r\n0") == (b"5\r\nhello\r\n", b"hello")
    # "0" alone could start "0a" (ten bytes) as well as the last chunk: it waits.
    assert body.feed(b"a\r\n") == (b"0a\r\n", b"")
    assert not body.complete


def test_bytes_after_the_end_are_not_the_body():
    body = ChunkedBody()
    forward, payload = body.feed(b"2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert (forward, payload) == (b"2\r\nok\r\n", b"ok")
    assert body.complete and body.extra == len(b"HTTP/1.1 200 OK\r\n")
    assert body.feed(b"more") == (b"", b"") and body.extra == len(b"HTTP/1.1 200 OK\r\nmore")


def test_a_lone_cr_before_the_final_lf_ends_the_trailers_across_reads():
    body = ChunkedBody()
    feed_all(body, [b"1\r\na\r\n0\r\n\r", b"\n"])
    assert body.complete and body.extra == 0


@pytest.mark.parametrize("stream, code, forwarded, malformed", [
    (b"2\r\nok\r\nzz\r\n", "MALFORMED_CHUNK_SIZE", b"2\r\nok\r\n", b"zz\r\n"),
    (b"2\r\nokXX", "CHUNK_DATA_WITHOUT_CRLF", b"2\r\nok", b"XX"),
    (b"\r\n", "MALFORMED_CHUNK_SIZE", b"", b"\r\n"),
    (b"-1\r\n", "MALFORMED_CHUNK_SIZE", b"", b"-1\r\n"),
    (b"1" * 17 + b"\r\n", "MALFORMED_CHUNK_SIZE", b"", b"1" * 17 + b"\r\n"),
])
def test_malformed_framing_stops_the_body_where_it_breaks(stream, code, forwarded, malformed):
    body = ChunkedBody()
    forward, _ = body.feed(stream)
    assert body.error_code == code and body.error == MALFORMATIONS[code] and not body.complete
    assert forward == forwarded
    # The malformed piece is kept as sent, for the relay to pass on, and where it starts.
    assert body.malformed == malformed
    assert body.malformed_at == len(forwarded)
    assert body.feed(b"2\r\nok\r\n") == (b"", b"")  # nothing after an error is the body's


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=40), max_size=8))
def test_any_read_boundaries_find_the_same_malformed_piece_at_the_same_offset(points):
    stream = b"5\r\nhello\r\n2\r\nok\r\nzz;x\r\n1\r\na\r\n"
    body = ChunkedBody()
    forward, payload = feed_all(body, cut(stream, points))
    assert body.error_code == "MALFORMED_CHUNK_SIZE" and payload == b"hellook"
    assert body.malformed == b"zz;x\r\n" and body.malformed_at == stream.index(b"zz")
    assert forward == stream[:body.malformed_at]


def test_memory_is_bounded_by_one_size_line_and_the_trailer_section():
    body = ChunkedBody()
    assert body.feed(b"1" * MAX_SIZE_LINE) == (b"", b"")  # held: it may still become whole
    body.feed(b"1")
    assert body.error == "chunk-size line too long"
    assert body.malformed == b"1" * (MAX_SIZE_LINE + 1)  # what is kept to pass on is bounded too
    trailers = ChunkedBody()
    trailers.feed(b"0\r\n")
    for _ in range(MAX_TRAILER_BYTES // 1000 + 1):
        trailers.feed(b"x-t: " + b"v" * 994 + b"\r\n")
    assert trailers.error == "trailer section too long"


def test_a_content_length_body_is_its_own_framing_and_ends_at_its_length():
    body = LengthBody(5)
    assert body.feed(b"hel") == (b"hel", b"hel") and not body.complete
    assert body.feed(b"lo, extra") == (b"lo", b"lo")
    assert body.complete and body.extra == len(b", extra")
    assert LengthBody(0).complete


def test_a_body_until_close_passes_everything_and_never_ends_by_itself():
    body = UntilCloseBody()
    assert body.feed(b"abc") == (b"abc", b"abc")
    assert not body.complete and body.error is None
