"""What passes through and what does not: the headers forwarded each way, the path check, the
upstream URL a record names, the session id, and the two kinds of answer the proxy writes itself
(a pass-through answer that adds nothing, and streamtap's own JSON errors).
"""

from __future__ import annotations

import json
import re
from urllib.parse import unquote

from aiohttp import hdrs, web
from multidict import CIMultiDict
from yarl import URL

from streamtap.diagnostics.redaction.redact import redact_path, safe_id

from streamtap.proxy.connection.aiohttp_hooks import BareResponse

# RFC 9110 7.6.1, plus Expect (aiohttp answers 100-continue itself) and Content-Length (aiohttp
# recomputes it from the body it forwards, which is the body it received).
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer",
                        "transfer-encoding", "upgrade", "expect"})


def upstream_url_for(base: str, rest: str) -> str:
    """scheme://host:port/path of the upstream request: never the query, the path redacted the
    way the record's request path is."""
    url = URL(base + rest, encoded=True)
    host = f"[{url.host}]" if url.host and ":" in url.host else url.host
    return f"{url.scheme}://{host}:{url.port}{redact_path(url.raw_path)}"


def _connection_tokens(headers) -> set[str]:
    names = set()
    for value in headers.getall(hdrs.CONNECTION, ()):
        names.update(part.strip().lower() for part in value.split(","))
    return names


# Proxy-Authorization is a credential for the proxy a client talks to, never for the provider.
NOT_FORWARDED = frozenset({"host", "content-length", "proxy-authorization"})
_SEGMENT_SEPARATORS = re.compile(r"[/\\]")


def has_dot_dot_segment(rest: str) -> bool:
    """Whether the path holds a `..` segment (also percent-encoded, or between backslashes, as
    some servers read them): forwarded, it would climb out of the route's base path."""
    path = unquote(rest.partition("?")[0])
    return any(segment == ".." for segment in _SEGMENT_SEPARATORS.split(path))


# Addressed to the upstream, not to the proxy: `streamtap replay` (or a FakeProvider) behind the
# proxy picks the sample it names.
FORWARDED_STREAMTAP_HEADERS = frozenset({"x-streamtap-sample"})


def upstream_request_headers(headers) -> CIMultiDict:
    """The client's headers minus hop-by-hop ones, Host, Content-Length, Proxy-Authorization
    and streamtap's own (but for the ones meant for a replay upstream)."""
    named = _connection_tokens(headers)
    kept = CIMultiDict()
    for name, value in headers.items():
        lname = name.lower()
        if (lname in HOP_BY_HOP or lname in named or lname in NOT_FORWARDED
                or (lname.startswith("x-streamtap-")
                    and lname not in FORWARDED_STREAMTAP_HEADERS)):
            continue
        kept.add(name, value)
    return kept


def downstream_response_headers(headers) -> CIMultiDict:
    named = _connection_tokens(headers)
    return CIMultiDict((name, value) for name, value in headers.items()
                       if name.lower() not in HOP_BY_HOP and name.lower() not in named)


class PassThroughResponse(BareResponse):
    """The answer a client gets from an upstream: the upstream's headers, nothing added (aiohttp
    would add Content-Type, Date and Server)."""


def proxy_error_response(status: int, code: str, message: str) -> web.Response:
    """An answer streamtap gives itself: JSON the SDKs can parse, and a header saying it was us."""
    body = json.dumps({"error": {"type": code, "message": message}}).encode()
    return web.Response(status=status, body=body, headers={
        hdrs.CONTENT_TYPE: "application/json", hdrs.CONNECTION: "close",
        "x-streamtap-error": code})


def session_id_for(headers, session_headers: tuple[str, ...], default: str) -> str:
    for name in ("x-streamtap-session", *session_headers):
        value = headers.get(name)
        if value:
            return safe_id(value)
    return safe_id(default) or "default"
