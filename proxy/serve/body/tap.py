"""Taking a response body off aiohttp's client parser, so it can be relayed as it arrived.

aiohttp reads a response in its connection protocol, `ResponseHandler.data_received`: the C
parser takes the head, then de-chunks the body into a StreamReader, and a proxy that reads that
reader pays for the parser, the reader and its own re-framing on every chunk. streamtap's upstream
connections use `TappedResponseHandler` instead. It gives the parser the response head only, then
holds the body's bytes, exactly as they came off the socket, until the exchange either takes them (`attach`: from then on each read goes to its sink
from `data_received`, with no parser in between) or gives them back (`release`: the parser, which
has seen exactly the head, reads them as if nothing had happened; the pool does so at once for a
request whose body aiohttp is to read, upstream.UpstreamPool.send). A response with no body, an
informational or upgrade answer, or a head this module cannot split safely is left to aiohttp.

A body aiohttp's parser reads after all (a fault rule is armed, or the relay could not start) is
still read by this module's de-framer first, when it is chunked (`_watch`): aiohttp 3.14's C parser
was seen to wait forever on a malformed chunk-size line (its pure-Python parser raises), and the
exchange must never wait on that. The de-framer gives the parser the bytes before the malformation
and then fails the body with `MalformedBodyError`, once aiohttp's reader has handed out what it
already holds.

When the sink has read a whole body it calls `body_done`: aiohttp's reader is then ended
(`feed_eof`), which is what returns the connection to the pool, and the next request on it gets a
fresh parser from `set_response_params` as usual.

It leans on aiohttp's client internals (the `ResponseHandler` it subclasses, that class's parser,
payload and timer, `TCPConnector._factory`) only through proxy/connection/aiohttp_hooks.py, which
checks each at start-up: if one is gone, the pool does not install the tap and every body takes
aiohttp's own path, and the banner and the health endpoint say `fast_path: off (...)`.
"""

from __future__ import annotations

import asyncio

from aiohttp import ClientPayloadError, hdrs
from aiohttp.client_proto import ResponseHandler
from aiohttp.helpers import EMPTY_BODY_STATUS_CODES
from aiohttp.streams import EMPTY_PAYLOAD, StreamReader

from streamtap.diagnostics.decode.chunked import ChunkedBody, LengthBody, UntilCloseBody

from streamtap.proxy.connection import aiohttp_hooks as hooks

MAX_HEAD = 256 * 1024  # past this without the head's end, the parser decides (it refuses it)
HOLD_LIMIT = 256 * 1024  # body bytes held before the exchange attaches: then reading pauses

_PASS, _HEAD, _HOLD, _RAW, _WATCH = range(5)
_MESSAGE_FIELDS = ("code", "headers", "chunked")


class MalformedBodyError(ClientPayloadError):
    """The upstream broke its chunked framing. `code` is a key of chunked.MALFORMATIONS (fixed
    text, recorded as the error's code). `malformed` holds the upstream's own malformed bytes, to
    pass on to the client; it is never recorded (an error fingerprint reads only the class and
    `code`)."""

    def __init__(self, framing: ChunkedBody):
        super().__init__(f"Response payload is not completed: {framing.error}")
        self.code = framing.error_code
        self.malformed = framing.malformed


class TappedResponseHandler(ResponseHandler):
    """aiohttp's client connection protocol, able to hand a response body over raw."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        super().__init__(loop)
        self._tap = _PASS
        self._head_bytes = b""
        self._held: list[bytes] = []
        self._held_size = 0
        self._held_paused = False
        self._lost: tuple[BaseException | None] | None = None  # lost while holding
        self._sink = None
        self._watched = 0  # body bytes the parser was given while watched
        # A broken body's reader and its error, raised once the reader has handed out its bytes.
        self._failed: tuple[StreamReader, MalformedBodyError] | None = None
        self.framing: ChunkedBody | LengthBody | UntilCloseBody | None = None

    # -- aiohttp's calls ------------------------------------------------------------------------
    def set_response_params(self, **kwargs) -> None:
        # Called for every request on this connection, before any byte of its response is
        # parsed. A body aiohttp is to decompress is aiohttp's to read.
        auto_decompress = kwargs.get("auto_decompress", True)
        self._tap = _PASS if auto_decompress else _HEAD
        self._head_bytes = b""
        self._held, self._held_size, self._lost = [], 0, None
        self._sink = self.framing = self._failed = None
        self._watched = 0
        super().set_response_params(**kwargs)

    def data_received(self, data: bytes) -> None:
        state = self._tap
        if state == _RAW:  # the hot path: the body's bytes to the sink, as they arrived
            if self.read_timeout:
                hooks.restart_read_timer(self)
            self._sink.data(data)
        elif state == _PASS:
            super().data_received(data)
        elif state == _HOLD:
            self._hold(data)
        elif state == _WATCH:
            self._watch(data)
        else:
            self._split_head(data)

    def resume_reading(self, resume_parser: bool = True) -> None:
        # aiohttp's reader calls this when it has handed out what it held: a failure kept back
        # until then can be raised without losing the bytes before it.
        super().resume_reading(resume_parser)
        if self._failed is not None:
            self._raise_failure()

    def connection_lost(self, exc: BaseException | None) -> None:
        state, sink, payload = self._tap, self._sink, hooks.body_reader(self)
        if state == _HOLD:
            # Kept until the held bytes have gone where the exchange says (attach, release):
            # told now, aiohttp's parser would end the body without them.
            self._lost = (exc,)
            return
        if state == _HEAD and self._head_bytes:  # a head cut short: the parser says how
            self._tap = _PASS
            super().data_received(self._head_bytes)
        super().connection_lost(exc)  # sets the reader's error as aiohttp's own path would
        if state == _RAW and sink is not None:
            self._tap = _PASS
            sink.lost(self._failure(payload, exc))

    def close(self) -> None:
        super().close()
        self._connection_lost_now()  # an exchange that closes instead of taking the body

    def abort(self) -> None:
        super().abort()
        self._connection_lost_now()

    # -- the exchange's calls -------------------------------------------------------------------
    def holding(self) -> bool:
        """Whether a response body is held for the exchange that sent this request."""
        return self._tap == _HOLD

    def attach(self, sink) -> None:
        """From now on the body's bytes go to `sink.data(bytes)`, the held ones first; the end of
        the connection goes to `sink.lost(exc or None)`."""
        self._tap, self._sink = _RAW, sink
        held = self._take_held()
        if held:
            sink.data(held[0] if len(held) == 1 else b"".join(held))
        if self._lost is not None:
            still_attached = self._sink is sink  # the body did not end within the held bytes
            self._tap, self._sink = _PASS, None
            payload, exc = hooks.body_reader(self), self._lost[0]
            self._connection_lost_now()
            if still_attached:
                sink.lost(self._failure(payload, exc))

    def release(self) -> None:
        """Give the body back to aiohttp's parser, held bytes first. Idempotent."""
        state = self._tap
        self._tap, self._sink = _PASS, None
        if state == _HOLD:
            held = b"".join(self._take_held())
            if isinstance(self.framing, ChunkedBody):
                self._tap = _WATCH
                self._watch(held)
            elif held:
                super().data_received(held)
        elif state == _HEAD and self._head_bytes:
            head, self._head_bytes = self._head_bytes, b""
            super().data_received(head)
        self._connection_lost_now()

    def body_done(self, extra: int) -> None:
        """The sink read the whole body: end aiohttp's reader, which releases the connection to
        the pool (closed instead if bytes came after the body: the upstream is confused)."""
        self._tap, self._sink = _PASS, None
        if extra:
            self.force_close()
        # The parser still thinks it is inside this body; the next request gets a new one.
        hooks.forget_parser(self)
        payload = hooks.body_reader(self)
        if payload is not None:
            payload.feed_eof()

    def detach(self) -> None:
        """The exchange is over: nothing more goes to its sink."""
        if self._tap in (_RAW, _HOLD):
            self._tap, self._sink = _PASS, None
            self._take_held()
        self._connection_lost_now()

    def _connection_lost_now(self) -> None:
        """Tell aiohttp of a connection end kept back while the body was held."""
        if self._lost is not None:
            (exc,), self._lost = self._lost, None
            super().connection_lost(exc)

    # -- inside ---------------------------------------------------------------------------------
    def _split_head(self, data: bytes) -> None:
        buffered = self._head_bytes + data if self._head_bytes else data
        while True:
            end = buffered.find(b"\r\n\r\n")
            if end < 0:
                if len(buffered) > MAX_HEAD or b"\n\n" in buffered:  # not ours to judge
                    self._give_back(buffered)
                else:
                    self._head_bytes = buffered
                return
            head, buffered = buffered[:end + 4], buffered[end + 4:]
            self._head_bytes = b""
            super().data_received(head)
            message = hooks.parsed_head(self)
            # The C parser's message is its own class, with the fields of RawResponseMessage.
            if (not all(hasattr(message, field) for field in _MESSAGE_FIELDS)
                    or hooks.cannot_take_body(self)):
                self._give_back(buffered)
                return
            if message.code in EMPTY_BODY_STATUS_CODES and message.code >= 200:
                self._give_back(buffered)  # 204, 304: no body
                return
            if message.code < 200:  # 100 Continue and friends: the real head follows
                if message.code == 101:
                    self._give_back(buffered)
                    return
                if not buffered:
                    return
                continue
            self.framing = self._framing(message)
            if self.framing is None:
                self._give_back(buffered)
                return
            self._tap = _HOLD
            if buffered:
                self._hold(buffered)
            return

    def _framing(self, message):
        payload = hooks.body_reader(self)
        if (hooks.skips_body(self) or payload is None or payload is EMPTY_PAYLOAD
                or type(payload) is not StreamReader or payload.is_eof()):
            return None
        if message.chunked:
            return ChunkedBody()
        length = message.headers.get(hdrs.CONTENT_LENGTH)
        if length is not None:
            return LengthBody(int(length))  # the parser has validated it
        return UntilCloseBody()

    def _watch(self, data: bytes) -> None:
        """A chunked body on its way to aiohttp's parser: the de-framer reads it first."""
        framing = self.framing
        if framing.error is not None:
            return  # broken: the rest is dropped until the exchange closes the connection
        framing.feed(data)
        if framing.error is None:
            self._watched += len(data)
            if framing.complete:
                self._tap = _PASS
            super().data_received(data)
            return
        clean = framing.malformed_at - self._watched
        if clean > 0:
            super().data_received(data[:clean])
        # The parser sees nothing more, and the connection's end must not replace this error.
        hooks.forget_parser(self)
        self.force_close()
        payload = hooks.body_reader(self)
        if payload is not None:
            self._failed = (payload, MalformedBodyError(framing))
            self._raise_failure()

    def _raise_failure(self) -> None:
        """Fail the body, once aiohttp's reader holds none of its bytes (readany raises a set
        error before handing out what it holds)."""
        payload, failure = self._failed
        if not hooks.reader_holds_bytes(payload):
            self._failed = None
            payload.set_exception(failure)

    def _give_back(self, data: bytes) -> None:
        self._tap = _PASS
        if data:
            super().data_received(data)

    def _hold(self, data: bytes) -> None:
        self._held.append(data)
        self._held_size += len(data)
        if self._held_size > HOLD_LIMIT and not self._held_paused and self.transport:
            self._held_paused = True
            self.transport.pause_reading()

    def _take_held(self) -> list[bytes]:
        """The held body bytes, handed over; reading resumes if holding them had paused it."""
        held, self._held, self._held_size = self._held, [], 0
        if self._held_paused:
            self._held_paused = False
            transport = self.transport
            if transport is not None and not transport.is_closing():
                transport.resume_reading()
        return held

    def _failure(self, payload, exc: BaseException | None) -> BaseException | None:
        """How the connection's end reads for the body: the error aiohttp's reader got (the same
        one its await loop would raise), else the socket's, else None for a clean close."""
        failure = payload.exception() if payload is not None else None
        if failure is None and exc is not None:
            failure = exc
        if failure is None and not isinstance(self.framing, UntilCloseBody):
            failure = ClientPayloadError("Response payload is not completed: the upstream "
                                         "closed the connection inside the body")
        return failure


def install(connector) -> bool:
    """Make `connector` open TappedResponseHandler connections. False (and the connector left as
    it is) on an aiohttp whose connectors no longer name their protocol this way."""
    return hooks.use_protocol(connector, TappedResponseHandler)


def release(response) -> None:
    """Give a body held for `response` (an aiohttp ClientResponse) back to aiohttp's parser, to
    be read the ordinary way; nothing when its connection is not a tapped one."""
    connection = response.connection
    handler = connection.protocol if connection is not None else None
    if isinstance(handler, TappedResponseHandler):
        handler.release()
