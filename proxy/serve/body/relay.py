"""The body relay: the upstream's bytes go to the client's transport from the upstream
connection's `data_received`, as they arrived, and the recorder reads a de-framed copy.

aiohttp's own body path costs, per chunk, its C parser and StreamReader on the upstream side, two
awaits (`readany()` and `write()` with its drain) and its chunked writer on the client side. Here
`tap` holds the response body back from aiohttp's parser, and `Relay.data` gets each socket
read of it: it timestamps the read, de-frames it (`diagnostics/decode/chunked.py`) for the
recorder, and writes it to the client. When both sides use the same framing (a chunked upstream
and a chunked answer, or the same Content-Length) the bytes written are the upstream's own,
framing included, but for the last chunk, which aiohttp writes when the Exchange ends the
response; otherwise (an HTTP/1.0 client, a close-delimited upstream) the payload is framed the
way aiohttp frames the answer. The handler awaits one future for the whole body: it resolves on
the body's end, on an upstream failure, or when the client is gone, and the Exchange ends the
exchange exactly as its await loop would.

Backpressure: when the client's transport passes its high-water mark (the server protocol's
`pause_writing`), the relay stops reading the upstream socket, and resumes when aiohttp's own
drain waiter resolves (`resume_writing`). At most one socket read is written past the mark.

How it plugs into aiohttp's server side, all public: the answer's StreamWriter (`request.writer`)
gives the transport, the framing (`chunked`, `length`) and the byte count (`output_size`) the
relay keeps up to date; the server protocol says `writing_paused`, and the writer's `drain()`
says when it is not any more. `start` refuses (and the Exchange falls back to its await loop,
after giving the body back to aiohttp's parser) whenever an assumption does not hold: a response
aiohttp compresses itself, a body not held by `tap`, a writer not of aiohttp's own class
(aiohttp_hooks.plain_writer). (An upstream gzip body is relayed: it passes through compressed, as
always; the recorder decompresses its copy.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import ClientResponse
from aiohttp.client_exceptions import ClientConnectionResetError
from aiohttp.http_writer import StreamWriter
from aiohttp.web import StreamResponse

from streamtap.diagnostics.decode.chunked import ChunkedBody, LengthBody

from streamtap.proxy.connection import aiohttp_hooks as hooks
from streamtap.proxy.serve.body.downstream import Downstream
from streamtap.proxy.serve.body.tap import MalformedBodyError, TappedResponseHandler

# How the relay ended: what the Exchange does next.
EOF = "eof"  # the upstream ended cleanly: write the final chunk through aiohttp
UPSTREAM_FAILED = "upstream_failed"  # mirror it (reset for a reset, FIN otherwise)
CLIENT_GONE = "client_gone"  # close the upstream at once
INTERNAL = "internal"  # a bug of ours: re-raised, recorded as internal_error


class Relay:
    """Copies one response body from the upstream connection to the client transport."""

    def __init__(self, handler: TappedResponseHandler, writer: StreamWriter,
                 downstream: Downstream, now: Callable[[], float]):
        self.downstream = downstream
        self.now = now
        self.handler = handler
        self.framing = handler.framing
        self.writer = writer
        self.protocol = writer.protocol
        self.transport = writer.transport
        self.up_transport = handler.transport
        # The upstream's bytes go out as they are when the answer is framed the same way.
        self.as_is = (isinstance(self.framing, ChunkedBody) and writer.chunked) or (
            isinstance(self.framing, LengthBody) and not writer.chunked)
        self.chunked = writer.chunked
        self.ended: asyncio.Future = asyncio.get_running_loop().create_future()
        self.finished = False
        self.held = False  # upstream reading paused because the client is slow
        self.draining: asyncio.Future | None = None  # writer.drain() while held
        self.framed = 0  # bytes written to the client, framing included (aiohttp's output_size)

    # -- the hot path: one socket read of the body ------------------------------------------------
    def data(self, data: bytes) -> None:
        """Timestamp, de-frame, deliver, write, then check the body's end and backpressure."""
        if self.finished:
            return  # the rest of a read that came after the end: the Exchange is closing it
        downstream = self.downstream
        try:
            t = self.now()
            downstream.last_byte_ms = t
            framing = self.framing
            forward, payload = framing.feed(data)
            if payload:
                downstream.delivered(payload, t)
            transport = self.transport
            if transport.is_closing():
                self._finish(CLIENT_GONE,
                             ClientConnectionResetError("Cannot write to closing transport"))
                return
            size = len(payload)
            if self.as_is:
                out = forward
                if not self.chunked:
                    out = self._within_length(out)
            elif not size:
                out = b""
            elif self.chunked:
                out = b"%x\r\n%b\r\n" % (size, payload)
            else:
                out = self._within_length(payload)
            if out:
                self.framed += len(out)
                transport.write(out)
            downstream.bytes += size  # written: counted as Downstream.send counts
            if framing.error is not None:
                self._finish(UPSTREAM_FAILED, MalformedBodyError(framing))
            elif framing.complete:
                self.handler.body_done(framing.extra)
                self._finish(EOF, None)
            elif self.protocol.writing_paused:
                self._hold()
        except ConnectionError as exc:
            self._finish(CLIENT_GONE, exc)
        except Exception as exc:  # never let a bug of ours pass for an upstream failure
            self._finish(INTERNAL, exc)

    def _within_length(self, data: bytes) -> bytes:
        """A Content-Length answer: never past its length (aiohttp's writer clips too)."""
        length = self.writer.length
        if length is None:
            return data
        if len(data) > length:
            data = data[:length]
        self.writer.length = length - len(data)
        return data

    def lost(self, exc: BaseException | None) -> None:
        """The upstream connection ended: cleanly (the end of a close-delimited body) or not."""
        if exc is None:
            self._finish(EOF, None)
        else:
            self._finish(UPSTREAM_FAILED, exc)

    def _hold(self) -> None:
        """The client's buffer is full: stop reading the upstream until the writer's drain()
        (which the server protocol's resume_writing ends) says it has room again."""
        if self.held:
            return
        self.held = True
        self.downstream.writing = True  # backpressure is the client's doing, not upstream idleness
        self.up_transport.pause_reading()
        # Never cancelled: it awaits the server protocol's own drain waiter, which aiohttp's
        # next write would find cancelled. It ends when the client reads or leaves.
        self.draining = asyncio.ensure_future(self.writer.drain())
        self.draining.add_done_callback(self._released)

    def _released(self, waiter: asyncio.Future) -> None:
        # Always retrieve the outcome, so a lost connection is never logged as unretrieved.
        lost = ConnectionError("Connection lost") if waiter.cancelled() else waiter.exception()
        self.draining = None
        if self.finished:
            return
        self.held = False
        self.downstream.writing = False
        if lost is not None:
            self._finish(CLIENT_GONE, lost)
            return
        try:
            if not self.up_transport.is_closing():
                self.up_transport.resume_reading()
        except Exception as exc:  # pragma: no cover - a transport that cannot resume
            self._finish(INTERNAL, exc)

    # -- the end ----------------------------------------------------------------------------------
    def _finish(self, how: str, exc: BaseException | None) -> None:
        if self.finished:
            return
        self.finished = True
        self.downstream.writing = False
        if not self.ended.done():
            self.ended.set_result((how, exc))

    def detach(self) -> None:
        """The exchange is over: stop taking the upstream's bytes and bring aiohttp's byte count
        up to date. Idempotent."""
        self.finished = True
        self.downstream.writing = False
        self.handler.detach()
        self.writer.output_size += self.framed
        self.framed = 0


def start(upstream: ClientResponse, response: StreamResponse, writer, downstream: Downstream,
          now: Callable[[], float]) -> Relay | None:
    """Take over the body copy of `upstream` into `response` (prepared, headers sent; `writer`
    is its request's), or None when the relay cannot (the body is then aiohttp's again, for the
    Exchange's await loop)."""
    connection = upstream.connection
    handler = connection.protocol if connection is not None else None
    if not isinstance(handler, TappedResponseHandler):
        return None
    if not handler.holding():
        handler.release()
        return None
    usable = (hooks.plain_writer(writer) and response.prepared and not response.compression
              and writer.on_body_write is None and writer.transport is not None
              and not writer.transport.is_closing() and handler.transport is not None)
    if usable:
        writer.send_headers()  # already sent by prepare(): the relay's bytes must follow them
    if not usable:
        handler.release()
        return None
    relay = Relay(handler, writer, downstream, now)
    handler.attach(relay)
    return relay
