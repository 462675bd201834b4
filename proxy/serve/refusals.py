"""Requests streamtap answers itself before any upstream is involved (no such route, a header
longer than `max_header_bytes`, a request aiohttp cannot parse): each still gets a JSON error the
SDKs can read, one log line and one trace record with boundary `proxy`, like any other request.
The last kind reaches streamtap through the runner's request handler (runner.py).
"""

from __future__ import annotations

from aiohttp import web

from streamtap.diagnostics.redaction.redact import hashed_id, safe_id
from streamtap.diagnostics.redaction.secrets import looks_like_key
from streamtap.proxy.config import Route
from streamtap.proxy.serve.exchange import Exchange


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
