"""The guard in front of every `/_streamtap/` endpoint: the control API is for the user at this
machine, never for a web page the user happens to have open.

`guarded(handler)` wraps any endpoint (faults, health, an events stream, a live page) with checks
that need no token:
- the peer is on loopback;
- `Host` names the address streamtap listens on (or localhost, 127.0.0.1, [::1]) with its port,
  which defeats DNS rebinding (a page of evil.example resolved to 127.0.0.1 sends
  `Host: evil.example`);
- an `Origin` header, when a browser sends one, is streamtap's own origin;
- a request with a body (POST, PUT, PATCH) says `Content-Type: application/json`: a page can send
  only text/plain, form or multipart bodies without a CORS preflight, and streamtap answers no
  preflight, so a browser never sends the real request. DELETE is never a "simple" method, so it
  is preflighted too.
With those, a per-run token adds nothing a local attacker could not read anyway, so there is none.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable

from aiohttp import hdrs, web

from streamtap.diagnostics.errors import UserError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]")
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
MAX_CONTROL_BODY = 1024 * 1024  # a fault list is a few kB
MAX_JSON_DEPTH = 32  # deeper than any rule needs; json.loads would recurse until RecursionError


class ControlRequestError(UserError):
    """A control request streamtap refuses: the status, and a message saying what to do."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def control_error(status: int, message: str, field: str | None = None) -> web.Response:
    error = {"type": "streamtap_control_error", "message": message}
    if field is not None:
        error["field"] = field
    return web.json_response({"error": error}, status=status)


def _is_loopback(address: str | None) -> bool:
    try:
        return ipaddress.ip_address(address or "").is_loopback
    except ValueError:
        return False


def allowed_hosts(request: web.Request) -> set[str]:
    """The `Host` values that name this listener: its own address, or a local name, with its
    port (as the socket the request came in on says, so port 0 and any bind address work)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    if not sockname:
        return set()
    address, port = sockname[0], sockname[1]
    own = f"[{address}]" if ":" in address else address
    names = {own, *LOCAL_NAMES}
    hosts = {f"{name}:{port}" for name in names}
    if port == 80:
        hosts |= names
    return {host.lower() for host in hosts}


def refusal(request: web.Request) -> ControlRequestError | None:
    """Why this request may not reach a control endpoint, or None."""
    if not _is_loopback(request.remote):
        return ControlRequestError(403, "the control API answers loopback clients only")
    hosts = allowed_hosts(request)
    host = (request.headers.get(hdrs.HOST) or "").strip().lower()
    if host not in hosts:
        return ControlRequestError(
            403, f"the control API answers only requests addressed to streamtap itself (Host "
                 f"{' or '.join(sorted(hosts))}); another Host is what a DNS-rebinding page sends")
    origin = request.headers.get(hdrs.ORIGIN)
    if origin is not None:
        scheme, _, rest = origin.strip().lower().partition("://")
        if scheme not in ("http", "https") or rest.rstrip("/") not in hosts:
            return ControlRequestError(
                403, "the control API does not answer web pages of other sites (cross-site "
                     "Origin); use `streamtap fault` or curl from this machine")
    if request.method in BODY_METHODS and request.content_type != "application/json":
        return ControlRequestError(
            415, "send the body as JSON with `Content-Type: application/json` (other types are "
                 "what a web page can send without asking)")
    return None


def guarded(handler: Handler) -> Handler:
    """`handler` behind the guard: refused requests get a JSON error, never reach it."""
    async def guard(request: web.Request) -> web.StreamResponse:
        problem = refusal(request)
        if problem is not None:
            return control_error(problem.status, problem.message)
        try:
            return await handler(request)
        except ControlRequestError as exc:
            return control_error(exc.status, exc.message)
    guard.__name__ = getattr(handler, "__name__", "guarded")
    guard.__doc__ = handler.__doc__
    return guard


def _depth(text: bytes) -> int:
    """How deeply brackets nest in JSON text (brackets inside strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in text:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 92:  # backslash
                escaped = True
            elif byte == 34:
                in_string = False
        elif byte == 34:
            in_string = True
        elif byte in (91, 123):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (93, 125):
            depth -= 1
    return deepest


async def read_json(request: web.Request) -> object:
    """The request's JSON body; a body too large, too deep or not JSON raises a 400 that says so."""
    if request.content_length is not None and request.content_length > MAX_CONTROL_BODY:
        raise ControlRequestError(413, f"the body is larger than the control API's limit of "
                                       f"{MAX_CONTROL_BODY} bytes")
    body = bytearray()
    async for chunk in request.content.iter_any():
        body += chunk
        if len(body) > MAX_CONTROL_BODY:
            raise ControlRequestError(413, f"the body is larger than the control API's limit "
                                           f"of {MAX_CONTROL_BODY} bytes")
    if _depth(body) > MAX_JSON_DEPTH:
        raise ControlRequestError(400, f"the JSON nests deeper than {MAX_JSON_DEPTH} levels; a "
                                       "fault rule is a flat object (or a list of them)")
    try:
        return json.loads(body or b"null")
    except (ValueError, RecursionError) as exc:
        raise ControlRequestError(400, f"the body is not JSON: {exc}") from None
