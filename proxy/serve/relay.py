"""The body relay: each upstream chunk goes downstream from the parser's own callback, no await.

aiohttp's default body path costs two awaits per chunk: `readany()` on the upstream StreamReader
(a future, a task step, a trip through the loop) and `StreamResponse.write()` with its drain. A
streamed LLM reply is thousands of small chunks, so that is most of what a proxy spends per frame.
Here the live StreamReader of the upstream response hands each chunk, as the C parser produces
it, to `Relay.chunk`, which timestamps it, records it, frames it and writes it to the client's
transport in the same callback. The handler awaits one future for the whole body: it resolves on
the upstream's end, on an upstream failure, or when the client is gone, and the Exchange ends the
exchange exactly as its await loop would.

Backpressure: when the client's transport passes its high-water mark (the server protocol's
`pause_writing`), the relay stops reading the upstream socket, and resumes when aiohttp's own
drain waiter resolves (`resume_writing`). At most one socket read is written past the mark.

How it plugs into aiohttp (3.14): `StreamReader` has `__slots__`, so the relay swaps the live
reader's class for `_RelayedReader` (a subclass adding no slots, so the layout is the same) and
rides in its `_waiter` slot, which StreamReader wakes on end of stream (`set_result`) and on
errors (`set_exception`). `start` refuses (and the Exchange falls back to its await loop) whenever
an assumption does not hold: a response aiohttp compresses itself, a body already complete or
failed, another reader waiting, an aiohttp without these attributes. (An upstream gzip body is
relayed: it passes through compressed, as always.)
"""

from __future__ import annotations

import asyncio
from collections import deque

from aiohttp import ClientResponse
from aiohttp.client_exceptions import ClientConnectionResetError
from aiohttp.http_writer import StreamWriter
from aiohttp.streams import StreamReader
from aiohttp.web import StreamResponse

# How the relay ended: what the Exchange does next.
EOF = "eof"  # the upstream ended cleanly: write the final chunk through aiohttp
UPSTREAM_FAILED = "upstream_failed"  # mirror it (reset for a reset, FIN otherwise)
CLIENT_GONE = "client_gone"  # close the upstream at once
INTERNAL = "internal"  # a bug of ours: re-raised, recorded as internal_error


class _RelayedReader(StreamReader):
    """The upstream body reader while a Relay owns it: data goes to the relay, not the buffer."""

    __slots__ = ()  # no new slots: `__class__` can be swapped on a live StreamReader

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        relay = self._waiter
        if data and relay is not None:
            relay.chunk(data)  # type: ignore[union-attr]
        return False  # nothing held back: the parser need not call again

    def begin_http_chunk_receiving(self) -> None:  # nothing is buffered, so no splits to keep
        pass

    def end_http_chunk_receiving(self) -> None:
        pass


class Relay:
    """Copies one response body from the upstream parser to the client transport."""

    def __init__(self, exchange, reader: StreamReader, writer: StreamWriter,
                 up_transport: asyncio.Transport, capture_limit: int):
        self.exchange = exchange
        self.reader = reader
        self.writer = writer
        self.protocol = writer.protocol
        self.transport = writer.transport
        self.up_transport = up_transport
        self.chunked = writer.chunked
        self.feed = exchange.recorder.feed
        self.now = exchange.now
        self.capture = exchange.capture
        self.capture_limit = capture_limit
        self.ended: asyncio.Future = exchange.loop.create_future()
        self.finished = False
        self.held = False  # upstream reading paused because the client is slow
        self.framed = 0  # bytes written with their chunked framing (aiohttp's output_size)
        self.body = 0  # body bytes fed through the relay (aiohttp's total_bytes)

    # -- the reader's waiter: StreamReader wakes it on end of stream and on errors -------------
    def done(self) -> bool:
        return False  # so StreamReader always delivers the wake-up

    def set_result(self, _result) -> None:
        self._finish(EOF, None)

    def set_exception(self, exc: BaseException) -> None:
        self._finish(UPSTREAM_FAILED, exc)

    # -- the hot path -------------------------------------------------------------------------
    def chunk(self, data: bytes) -> None:
        """One body chunk from the parser: timestamp, record, write, then check backpressure."""
        if self.finished:
            return  # the rest of a read that came after the end: the Exchange is closing it
        exchange = self.exchange
        try:
            t = self.now()
            exchange.last_byte_ms = t
            self.feed(data, t)
            capture = self.capture
            if capture is not None and len(capture) < self.capture_limit:
                capture += data
            transport = self.transport
            if transport.is_closing():
                self._finish(CLIENT_GONE,
                             ClientConnectionResetError("Cannot write to closing transport"))
                return
            size = len(data)
            self.body += size
            if self.chunked:
                frame = b"%x\r\n%b\r\n" % (size, data)
                self.framed += len(frame)
                transport.write(frame)
            else:
                length = self.writer.length
                if length is not None:  # Content-Length: never past it (aiohttp clips too)
                    if size > length:
                        data = data[:length]
                        size = length
                    self.writer.length = length - size
                    if not size:
                        return
                self.framed += size
                transport.write(data)
            exchange.downstream_bytes += size
            if self.protocol._paused:
                self._hold()
        except ConnectionError as exc:
            self._finish(CLIENT_GONE, exc)
        except Exception as exc:  # never let a bug of ours pass for an upstream failure
            self._finish(INTERNAL, exc)

    def _hold(self) -> None:
        """The client's buffer is full: stop reading the upstream until aiohttp's drain waiter
        (resolved by the server protocol's resume_writing) says it has room again."""
        if self.held:
            return
        self.held = True
        self.exchange.writing = True  # backpressure is the client's doing, not upstream idleness
        self.up_transport.pause_reading()
        protocol = self.protocol
        waiter = protocol._drain_waiter
        if waiter is None:
            waiter = protocol._drain_waiter = self.exchange.loop.create_future()
        waiter.add_done_callback(self._released)

    def _released(self, waiter: asyncio.Future) -> None:
        # Always retrieve the outcome, so a lost connection is never logged as unretrieved.
        lost = ConnectionError("Connection lost") if waiter.cancelled() else waiter.exception()
        if self.finished:
            return
        self.held = False
        self.exchange.writing = False
        if lost is not None:
            self._finish(CLIENT_GONE, lost)
            return
        try:
            if not self.up_transport.is_closing():
                self.up_transport.resume_reading()
        except Exception as exc:  # pragma: no cover - a transport that cannot resume
            self._finish(INTERNAL, exc)

    # -- start and end ------------------------------------------------------------------------
    def _finish(self, how: str, exc: BaseException | None) -> None:
        if self.finished:
            return
        self.finished = True
        self.exchange.writing = False
        if not self.ended.done():
            self.ended.set_result((how, exc))

    def _take_buffered(self) -> None:
        """Bytes that arrived with the headers, or while they went out, before the relay began."""
        reader = self.reader
        # Read all of it before writing any: read_nowait() resumes the upstream transport, which
        # must not undo a pause that writing them puts on it.
        taken = []
        while reader._buffer and reader.exception() is None:
            taken.append(reader.read_nowait())
        if taken:
            self.chunk(b"".join(taken))
        self.body = 0  # StreamReader already counted these in total_bytes

    def _attach(self) -> None:
        reader = self.reader
        reader._waiter = self
        reader.__class__ = _RelayedReader

    def detach(self) -> None:
        """Give the reader back to aiohttp and bring its bookkeeping up to date. Idempotent."""
        self.finished = True
        self.exchange.writing = False
        reader = self.reader
        if reader.__class__ is _RelayedReader:
            reader.__class__ = StreamReader
        if reader._waiter is self:
            reader._waiter = None
        if reader._http_chunk_splits is None:
            reader._http_chunk_splits = deque()  # so a late end-of-chunk does not raise
        reader.total_bytes += self.body
        reader._cursor += self.body
        self.body = 0
        self.writer.output_size += self.framed
        self.framed = 0


def start(exchange, upstream: ClientResponse, response: StreamResponse,
          capture_limit: int) -> Relay | None:
    """Take over the body copy of `upstream` into `response` (prepared, headers sent), or None
    when the relay cannot (the Exchange then uses its await loop)."""
    try:
        reader = upstream.content
        writer = response._payload_writer
        connection = upstream.connection
        if (type(reader) is not StreamReader or reader.is_eof()
                or reader.exception() is not None or reader._waiter is not None
                or type(writer) is not StreamWriter or writer._compress is not None
                or writer._eof or writer._headers_buf or not writer._headers_written
                or writer._on_chunk_sent is not None or writer.on_body_write is not None
                or connection is None or connection.transport is None
                or connection.transport.is_closing()):
            return None
        protocol = writer.protocol
        transport = writer.transport
        if transport is None or transport.is_closing() or not hasattr(protocol, "_drain_waiter"):
            return None
        if not hasattr(protocol, "_paused"):
            return None
    except AttributeError:  # another aiohttp: its private attributes moved
        return None
    relay = Relay(exchange, reader, writer, connection.transport, capture_limit)
    relay._take_buffered()
    if relay.finished:
        return relay
    exc = reader.exception()
    if exc is not None:
        relay.set_exception(exc)
    elif reader.is_eof():
        relay.set_result(None)
    else:
        relay._attach()
    return relay
