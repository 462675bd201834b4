"""Every private piece of aiohttp streamtap leans on, in one place, each checked at start-up.

aiohttp has no public way to take a response body off its client parser, to write a relayed body
past its server writer, to answer a request it could not parse with our own handler, or to keep
a response free of the headers it adds. streamtap does these through the hooks below, and through
nothing else private. `check()` looks for each one on the installed aiohttp: when one is missing
(an aiohttp newer than the pin in pyproject.toml moved it), the part that needs it runs on
aiohttp's public path instead, and the start-up banner and `/_streamtap/health` say
`fast_path: off (what is missing)`; never silently.

The hooks, by who uses them:
- the tap (proxy/serve/body/tap.py): `TCPConnector._factory`, where a connector names its
  protocol class (`ResponseHandler`, which the tap subclasses); the handler's `_payload`,
  `_skip_payload`, `_parser`, `_buffer`, `_exception`, `_upgraded` and `_reschedule_timeout`;
  `StreamReader._buffer`.
- the relay (proxy/serve/body/relay.py): the server's `StreamWriter`, whose public `transport`,
  `chunked`, `length` and `output_size` it keeps up to date; private only in that aiohttp does not
  promise a writer of its own class.
- the refusals (proxy/serve/runner.py): `AppRunner._make_server`, `Server._loop` and
  `_kwargs`, to give connections a RequestHandler whose `handle_error` streamtap overrides.
- `StreamResponse._prepare_headers`, where aiohttp adds Content-Type, Date and Server.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from aiohttp.client_proto import ResponseHandler
from aiohttp.http_writer import StreamWriter
from aiohttp.streams import DataQueue, StreamReader
from aiohttp.web_protocol import RequestHandler

# What each group of hooks makes possible, and what runs instead without it.
BODY = "body relay"  # else: aiohttp reads each body and the exchange copies it chunk by chunk
REFUSALS = "JSON refusals"  # else: aiohttp answers an unparsable request with its own plain 400
HEADERS = "pass-through headers"  # else: aiohttp adds Content-Type, Date, Server to answers

_HANDLER_ATTRIBUTES = ("_payload", "_skip_payload", "_parser", "_buffer", "_exception",
                       "_upgraded", "read_timeout")
_HANDLER_METHODS = ("set_response_params", "data_received", "connection_lost",
                    "_reschedule_timeout", "force_close", "resume_reading", "close", "abort")


@dataclass(frozen=True)
class FastPath:
    """Which hooks the installed aiohttp has: for each group, None or what is missing."""

    body: str | None = None
    refusals: str | None = None
    headers: str | None = None

    @property
    def missing(self) -> list[str]:
        return [f"{group}: {why}" for group, why in ((BODY, self.body), (REFUSALS, self.refusals),
                                                       (HEADERS, self.headers)) if why]

    def status(self) -> str:
        """`on`, or `off (...)` naming each missing hook: the banner's and health's words."""
        missing = self.missing
        if not missing:
            return "on"
        return f"off ({'; '.join(missing)}; aiohttp {aiohttp.__version__}, see docs/development.md)"


def check() -> FastPath:
    """Look for every hook on the installed aiohttp (a fresh event loop of its own, closed after:
    it runs before or inside the app's loop alike)."""
    loop = asyncio.new_event_loop()
    try:
        return FastPath(body=_body_hooks_missing(loop), refusals=_refusal_hooks_missing(loop),
                        headers=_header_hooks_missing())
    finally:
        loop.close()


def _body_hooks_missing(loop: asyncio.AbstractEventLoop) -> str | None:
    try:
        connector = aiohttp.TCPConnector(loop=loop)
        factory = getattr(connector, "_factory", None)
        if not isinstance(factory, functools.partial) or factory.func is not ResponseHandler:
            return "TCPConnector._factory no longer names ResponseHandler"
        handler = ResponseHandler(loop)
        for name in _HANDLER_ATTRIBUTES:
            if not hasattr(handler, name):
                return f"ResponseHandler has no {name}"
        for name in _HANDLER_METHODS:
            if not callable(getattr(ResponseHandler, name, None)):
                return f"ResponseHandler has no {name}()"
        if not hasattr(StreamReader(handler, 2 ** 16, loop=loop), "_buffer"):
            return "StreamReader has no _buffer"
        queue = DataQueue(loop)
        queue.feed_data(("message", "payload"), 0)
        if getattr(queue, "_buffer", None) is None or queue._buffer[-1][0][0] != "message":
            return "DataQueue no longer holds ((message, payload), size)"
        writer = StreamWriter(_NoProtocol(), loop)
        for name in ("transport", "protocol", "chunked", "length", "output_size", "on_body_write",
                     "send_headers"):
            if not hasattr(writer, name):
                return f"StreamWriter has no {name}"
    except Exception as exc:  # an aiohttp whose constructors changed: the hook is gone too
        return f"{type(exc).__name__} while checking ({exc})"
    return None


class _NoProtocol:
    """Stands in for the server protocol a StreamWriter is built with, to look at the writer."""

    transport = None


def _refusal_hooks_missing(loop: asyncio.AbstractEventLoop) -> str | None:
    if not callable(getattr(web.AppRunner, "_make_server", None)):
        return "AppRunner has no _make_server()"
    try:
        server = web.Server(_never_called, loop=loop)
    except Exception as exc:
        return f"{type(exc).__name__} while checking ({exc})"
    for name in ("_loop", "_kwargs", "request_handler", "request_factory",
                 "handler_cancellation"):
        if not hasattr(server, name):
            return f"web.Server has no {name}"
    if not callable(getattr(RequestHandler, "handle_error", None)):
        return "RequestHandler has no handle_error()"
    return None


async def _never_called(request):  # pragma: no cover - a handler for the check's Server
    raise AssertionError


def _header_hooks_missing() -> str | None:
    if not callable(getattr(web.StreamResponse, "_prepare_headers", None)):
        return "StreamResponse has no _prepare_headers()"
    return None


# -- the tap's hooks (aiohttp's client side) -------------------------------------------------------
def protocol_class(connector) -> type | None:
    """The protocol class `connector` builds its connections from, or None if not told so."""
    factory = getattr(connector, "_factory", None)
    if isinstance(factory, functools.partial):
        return factory.func
    return None


def use_protocol(connector, protocol: type) -> bool:
    """Make `connector` build `protocol` (a ResponseHandler subclass) connections; False (the
    connector left alone) when it does not name its protocol the way aiohttp 3.14 does."""
    factory = getattr(connector, "_factory", None)
    if not isinstance(factory, functools.partial) or factory.func is not ResponseHandler:
        return False
    connector._factory = functools.partial(protocol, *factory.args, **factory.keywords)
    return True


def parsed_head(handler: ResponseHandler):
    """The head aiohttp's parser just read: DataQueue holds ((message, payload), size) for
    ClientResponse.start to read, and the last is the newest."""
    buffer = handler._buffer
    return buffer[-1][0][0] if buffer else None


def cannot_take_body(handler: ResponseHandler) -> bool:
    """The parser failed or the connection was upgraded: the body is not ours to take."""
    return handler._exception is not None or handler._upgraded


def body_reader(handler: ResponseHandler) -> StreamReader | None:
    """The reader aiohttp's parser feeds the current response's body into (None before a head)."""
    return handler._payload


def skips_body(handler: ResponseHandler) -> bool:
    """The request said the response has no body (HEAD)."""
    return handler._skip_payload


def forget_parser(handler: ResponseHandler) -> None:
    """The parser sees nothing more of this response (it would read the rest as a new one); the
    next request on the connection gets a fresh one from set_response_params."""
    handler._parser = None


def restart_read_timer(handler: ResponseHandler) -> None:
    """A body byte arrived that aiohttp's own data_received did not see: restart its
    sock_read timer as it would."""
    handler._reschedule_timeout()


def reader_holds_bytes(reader: StreamReader) -> bool:
    return bool(reader._buffer)


# -- the relay's hook (aiohttp's server side) -----------------------------------------------------
def plain_writer(writer) -> bool:
    """The answer's writer is aiohttp's own StreamWriter, so the relay knows what its public
    `chunked`, `length` and `output_size` mean."""
    return type(writer) is StreamWriter


# -- the refusals' hook ----------------------------------------------------------------------------
class HandlerServer(web.Server):
    """A web.Server whose connections are `handler_class(server, loop=..., **aiohttp's own
    options)`: a RequestHandler subclass (or a partial of one)."""

    def __init__(self, *args, handler_class, **kwargs):
        super().__init__(*args, **kwargs)
        self.handler_class = handler_class

    def __call__(self) -> RequestHandler:
        return self.handler_class(self, loop=self._loop, **self._kwargs)


class HandlerRunner(web.AppRunner):
    """An AppRunner whose connections use `handler_class` (see HandlerServer); a plain
    AppRunner's when `enabled` is False (the hook is missing)."""

    def __init__(self, app: web.Application, handler_class, *, enabled: bool = True, **kwargs):
        super().__init__(app, **kwargs)
        self.handler_class = handler_class
        self.enabled = enabled

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        if not self.enabled:
            return server
        return HandlerServer(server.request_handler, request_factory=server.request_factory,
                             handler_cancellation=server.handler_cancellation,
                             loop=server._loop, handler_class=self.handler_class,
                             **server._kwargs)


# -- the headers' hook -----------------------------------------------------------------------------
class BareResponse(web.StreamResponse):
    """A StreamResponse that adds nothing: aiohttp would add Content-Type, Date and Server."""

    _ADDED_BY_AIOHTTP = ("Content-Type", "Date", "Server")

    async def _prepare_headers(self) -> None:
        had = {name for name in self._ADDED_BY_AIOHTTP if name in self.headers}
        await super()._prepare_headers()
        for name in self._ADDED_BY_AIOHTTP:
            if name not in had:
                self.headers.popall(name, None)
