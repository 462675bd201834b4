"""The aiohttp runner of the proxy's app: its connections answer a request aiohttp cannot
parse (a header over `max_header_bytes`, a malformed request line) as a refusal (refusals.py),
with a JSON error and a record, instead of aiohttp's plain-text 400 that echoes the header.
"""

from __future__ import annotations

import functools

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

from streamtap.proxy.config import Route
from streamtap.proxy.connection.aiohttp_hooks import HandlerRunner
from streamtap.proxy.serve.passthrough import proxy_error_response
from streamtap.proxy.serve.refusals import RefusedExchange


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
