"""The one sink of a response body: every piece the client is sent passes through `delivered`.

Whichever path copies the body (the relay from the upstream connection's callback, the await
loop, a fault stage that holds back, slows or cuts), the record of what the client was sent is
kept here, the same way: the recorder is fed the bytes with their time, the capture (with
--capture-bodies) keeps them, and the count of bytes the client got grows once they are written.
The idle watchdog reads `last_byte_ms` and `writing` from here too.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

MAX_CAPTURE_BYTES = 64 * 1024 * 1024  # per side, with --capture-bodies


class Downstream:
    """What the client of one exchange was sent, and the state the watchdog reads."""

    __slots__ = ("feed", "capture", "response", "bytes", "writing", "last_byte_ms")

    def __init__(self, feed: Callable[[bytes, float], None], capture: bytearray | None):
        self.feed = feed  # the recorder's: every byte the client is sent, with its time
        self.capture = capture  # the response body as the client got it (--capture-bodies)
        self.response: web.StreamResponse | None = None  # the answer the body is written to
        self.bytes = 0  # body bytes written to the client (the relay counts its own writes here)
        # The watchdog's: a client that is slow to read is not an idle upstream; and when a byte
        # last moved (an upstream read, a piece of a streamed upload).
        self.writing = False
        self.last_byte_ms = 0.0

    def delivered(self, data: bytes, t: float) -> None:
        """`data` goes to the client (read or released at `t` ms): the record says so."""
        self.feed(data, t)
        capture = self.capture
        if capture is not None and len(capture) < MAX_CAPTURE_BYTES:
            capture += data

    async def send(self, data: bytes, t: float) -> None:
        """Deliver `data` through aiohttp's writer (the await paths); raises ConnectionError
        when the client is gone."""
        if not data:
            return
        self.delivered(data, t)
        self.writing = True
        try:
            await self.response.write(data)
        finally:
            self.writing = False
        self.bytes += len(data)
