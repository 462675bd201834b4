"""Requests streamtap answers itself before any upstream is involved (no such route, a header
longer than `max_header_bytes`, a request aiohttp cannot parse): each still gets a JSON error the
SDKs can read, one log line and one trace record with boundary `proxy`, like any other request.
"""

from __future__ import annotations

import functools

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

from streamtap.diagnostics.redaction.redact import hashed_id, safe_id
from streamtap.diagnostics.redaction.secrets import looks_like_key
from streamtap.proxy.config import Route
from streamtap.proxy.connection.aiohttp_hooks import HandlerRunner
from streamtap.proxy.serve.forward import Exchange
from streamtap.proxy.serve.passthrough import proxy_error_response


class RefusedExchange(Exchange):
    """An exchange that ends before it starts: recorded with `proxy_reason` as its evidence."""

    def refuse(self, reason: str, status: int, code: str, message: str,
               unparsed: bool = False) -> web.Response:
        """Answer now and write the record. The body is not read: nothing is forwarded."""
        request = self.request
        try:
            self.recorder.on_request(request.method, self.rest, request.headers.items(), b"")
            if unparsed:
                self.recorder.request.update(method=None, path=None)
            self.ending.proxy_reason = reason
            return self._answer(status, code, message)
        finally:
            self._write_record()


def refuse_unknown_route(proxy, request: web.Request, name: str, rest: str) -> web.Response:
    known = ", ".join(sorted(proxy.config.routes))
    # The route asked for is what a user needs to see to spot a typo in a base URL; anything but
    # a plain id, or anything key-like (a key pasted as a base URL), becomes a hash.
    exchange = RefusedExchange(proxy, request, Route(name=_asked_route(name), url=""), rest)
    return exchange.refuse(
        "unknown_route", 404, "streamtap_unknown_route",
        f"no route `{_asked_route(name)}`: streamtap forwards only configured routes ({known}); "
        "add one with --route NAME=URL, or fix the client's base URL")


def _asked_route(name: str) -> str:
    if not name:
        return "(none)"
    kept = safe_id(name)
    return hashed_id(name) if looks_like_key(kept) else kept


class ProxyRequestHandler(RequestHandler):
    """aiohttp answers a request it cannot parse (a header over `max_field_size`) with a plain
    text 400 that echoes the start of the header, and logs a traceback. streamtap answers with
    its own JSON error, without the header, logs one line and writes a record."""

    def __init__(self, manager, *, proxy, **kwargs):
        super().__init__(manager, **kwargs)
        self.proxy = proxy

    def handle_error(self, request, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        proxy = self.proxy
        if not isinstance(exc, HttpProcessingError) or status != 400:
            return super().handle_error(request, status, exc, message)
        if request.writer.output_size > 0:  # same rule as aiohttp: the answer is on its way
            raise ConnectionError("response already started")
        limit = proxy.config.max_header_bytes
        if isinstance(exc, LineTooLong) or "too long" in str(exc).lower():
            reason, status, code = "header_too_long", 431, "streamtap_header_too_long"
            text = (f"a request header or the request line is longer than streamtap's limit of "
                    f"{limit} bytes (max_header_bytes); raise it with max_header_bytes in the "
                    "config; nothing was forwarded")
        else:
            reason, code = "malformed_request", "streamtap_malformed_request"
            text = (f"streamtap could not parse the request ({type(exc).__name__}); nothing was "
                    "forwarded")
        try:
            exchange = RefusedExchange(proxy, request, Route(name="-", url=""), "")
            exchange.recorder.route = exchange.recorder.provider = None
            # aiohttp stopped before the request line was known: say so, not `UNKNOWN /`.
            response = exchange.refuse(reason, status, code, text, unparsed=True)
        except Exception:  # the record is best effort; the client still gets its answer
            proxy.log.exception("record_failed", reason=reason)
            response = proxy_error_response(status, code, text)
        response.force_close()
        return response


def proxy_runner(app: web.Application, proxy, **kwargs) -> web.AppRunner:
    """An AppRunner whose connections use ProxyRequestHandler, when aiohttp still lets a runner
    choose (aiohttp_hooks); else aiohttp's own, which answers an unparsable request itself."""
    return HandlerRunner(app, functools.partial(ProxyRequestHandler, proxy=proxy),
                         enabled=proxy.fast_path.refusals is None, **kwargs)
