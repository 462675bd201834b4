"""Incremental HTTP/1.1 response-body framing (RFC 9112 sections 6.3 and 7.1), for a relay that
passes the upstream's bytes on as they arrived and reads a de-framed copy.

Fed a body's bytes as they arrived, whatever the read boundaries, `feed` returns two things:
`forward`, the bytes to pass on unchanged, framing included; and `payload`, the de-framed bytes
the recorder reads. Two parts of a chunked body are not forwarded: a chunk-size line that a read
cut in two waits until it is whole (only then is it known whether it starts the last chunk), and
the last chunk with its trailer section, which the relay's own HTTP server writes (as `0\\r\\n\\r\\n`)
when it ends the response: writing the upstream's too would end the client's response twice.

A body's end is `complete`; bytes after it (`extra`) are not part of it and are never forwarded.
Malformed framing sets `error` (a fixed description, never the bytes) and `error_code`, and stops
the body there: what came before it was forwarded, nothing after it is. The malformed piece itself
(the bad size line, or the bytes where a chunk's CRLF belonged) is kept in `malformed`, and where
it starts in the body in `malformed_at`: the relay passes it on, so that the client's own HTTP
parser meets the bytes it would have met without streamtap and fails the same way. Memory is
bounded: at most one size line (`MAX_SIZE_LINE`) is ever held back or kept.
"""

from __future__ import annotations

import re

MAX_SIZE_LINE = 8192  # aiohttp's own limit for a line of the head (max_line_size 8190) and more
MAX_TRAILER_BYTES = 64 * 1024  # trailers are skipped, not kept; past this the framing is broken
# chunk-size [ chunk-ext ] CRLF (RFC 9112 7.1.1): up to 16 hex digits (2**64 - 1, llhttp's limit
# too), extensions skipped, a bare LF accepted as the line end as aiohttp's parser does.
_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?\r?\n")

_SIZE, _DATA, _DATA_END, _TRAILERS, _DONE = range(5)

# Each malformation by its code (the record's `error.code`; `malformed_chunk_size` in a verdict's
# evidence) and its description (`error`): fixed text, never the upstream's bytes.
MALFORMATIONS = {
    "MALFORMED_CHUNK_SIZE": "malformed chunk-size line",
    "CHUNK_SIZE_LINE_TOO_LONG": "chunk-size line too long",
    "CHUNK_DATA_WITHOUT_CRLF": "chunk data not followed by CRLF",
    "TRAILER_SECTION_TOO_LONG": "trailer section too long",
}


class ChunkedBody:
    """`Transfer-Encoding: chunked`."""

    __slots__ = ("_state", "_remaining", "_held", "_trailer_bytes", "_fed", "complete", "error",
                 "error_code", "malformed", "malformed_at", "extra")

    def __init__(self):
        self._state = _SIZE
        self._remaining = 0  # chunk-data bytes still to come (_DATA), or CRLF bytes (_DATA_END)
        self._held = b""  # the start of a size line a read cut in two
        self._trailer_bytes = 0
        self._fed = 0  # body bytes fed so far
        self.complete = False
        self.error: str | None = None
        self.error_code: str | None = None  # a key of MALFORMATIONS
        self.malformed = b""  # the malformed piece, as the upstream sent it (<= MAX_SIZE_LINE + 1)
        self.malformed_at = 0  # where it starts, counted in body bytes fed
        self.extra = 0

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        """(forward, payload) for the bytes of one read."""
        if self._state == _DONE or self.error is not None:
            self.extra += len(data)
            return b"", b""
        forwarding = self._state != _TRAILERS  # past the last chunk nothing more is forwarded
        base = self._fed - len(self._held)  # the body offset of data[0] below
        self._fed += len(data)
        if self._held:
            data = self._held + data
            self._held = b""
        end = len(data)
        forward_end = end if forwarding else 0
        pieces = []
        pos = 0
        while pos < end:
            state = self._state
            if state == _DATA:
                take = min(self._remaining, end - pos)
                pieces.append(data if take == end else data[pos:pos + take])
                pos += take
                self._remaining -= take
                if not self._remaining:
                    self._state, self._remaining = _DATA_END, 2
            elif state == _DATA_END:  # the CRLF after chunk data, possibly cut by a read
                expected = b"\r\n"[2 - self._remaining:]
                got = data[pos:pos + len(expected)]
                if not expected.startswith(got):
                    self._malformed("CHUNK_DATA_WITHOUT_CRLF", base + pos, got)
                    break
                pos += len(got)
                self._remaining -= len(got)
                if not self._remaining:
                    self._state = _SIZE
            elif state == _SIZE:
                line = _SIZE_LINE.match(data, pos)
                if line is None:
                    line_end = data.find(b"\n", pos, pos + MAX_SIZE_LINE + 1)
                    if line_end >= 0:
                        self._malformed("MALFORMED_CHUNK_SIZE", base + pos,
                                        data[pos:line_end + 1])
                    elif end - pos > MAX_SIZE_LINE:
                        self._malformed("CHUNK_SIZE_LINE_TOO_LONG", base + pos,
                                        data[pos:pos + MAX_SIZE_LINE + 1])
                    else:  # cut by the read: it waits until whole
                        self._held = data[pos:]
                        forward_end = pos
                    break
                size = int(line.group(1), 16)
                start = line.end()
                if not size:  # the last chunk: the relay's server writes its own
                    self._state = _TRAILERS
                    forward_end = pos
                    pos = start
                    continue
                stop = start + size
                if stop + 2 <= end:  # the common case: the whole chunk is in this read
                    pieces.append(data[start:stop])
                    if data[stop:stop + 2] != b"\r\n":
                        pos = stop
                        self._malformed("CHUNK_DATA_WITHOUT_CRLF", base + pos,
                                        data[stop:stop + 2])
                        break
                    pos = stop + 2
                else:
                    self._state, self._remaining = _DATA, size
                    pos = start
            elif state == _TRAILERS:
                line_end = data.find(b"\n", pos)
                if line_end < 0:  # held until whole, so a CR and its LF are read together
                    if self._trailer_bytes + end - pos > MAX_TRAILER_BYTES:
                        self._malformed("TRAILER_SECTION_TOO_LONG", base + pos, b"")
                    else:
                        self._held = data[pos:]
                    break
                line = data[pos:line_end]
                pos = line_end + 1
                if line == b"" or line == b"\r":
                    self._state = _DONE
                    self.complete = True
                    self.extra = end - pos
                    break
                self._trailer_bytes += len(line) + 1
                if self._trailer_bytes > MAX_TRAILER_BYTES:
                    self._malformed("TRAILER_SECTION_TOO_LONG", base + pos, b"")
                    break
        if self.error is not None:  # what came before the error was the body's; nothing after
            forward_end = min(forward_end, pos)
        return data[:forward_end], pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _malformed(self, code: str, at: int, piece: bytes) -> None:
        # Trailers are never forwarded (the relay's server writes its own end), so a trailer
        # section too long has no piece to pass on: the client sees the body cut there.
        self.error, self.error_code = MALFORMATIONS[code], code
        self.malformed, self.malformed_at = piece, at


class LengthBody:
    """`Content-Length: n`: the payload is the framing; bytes past `n` are not the body's."""

    __slots__ = ("_remaining", "complete", "error", "extra")

    def __init__(self, length: int):
        self._remaining = length
        self.complete = length == 0
        self.error: str | None = None
        self.extra = 0

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        take = min(self._remaining, len(data))
        if take < len(data):
            self.extra += len(data) - take
            data = data[:take]
        self._remaining -= take
        if not self._remaining:
            self.complete = True
        return data, data


class UntilCloseBody:
    """No length and not chunked (an HTTP/1.0 upstream): the body ends when the connection does."""

    __slots__ = ("complete", "error", "extra")

    def __init__(self):
        self.complete = False
        self.error: str | None = None
        self.extra = 0

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        return data, data
