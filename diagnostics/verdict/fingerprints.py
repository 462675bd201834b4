"""Fingerprints of the exceptions that ended an exchange: where it broke, what it was, its errno
name or library code, and a message streamtap builds from those. Pure inspection of exception
objects.

A library's own text is never recorded: aiohttp's messages quote the full upstream URL (with a
`?api_key=` query) and the offending response header line. The message is built here from the
exception's class and errno name, so it can hold nothing the upstream or the client sent.
"""

from __future__ import annotations

import errno as errno_names
import re
import socket

WHERE = ("upstream_connect", "upstream_response", "upstream_read", "downstream_write", "proxy")
_RESET_WORDS = ("connection reset", "econnreset", "errno 104", "broken pipe")
# getaddrinfo's failures carry negative EAI_* numbers that `errno.errorcode` does not know.
_GAI_NAMES = {getattr(socket, name): name for name in dir(socket) if name.startswith("EAI_")}
# A host name or IP literal. The host is the route's configured upstream (config, not a request):
# it is kept so the summary can name what did not resolve.
_HOST = re.compile(r"[A-Za-z0-9.\-]{1,253}|\[?[0-9A-Fa-f:.]{2,45}\]?")

_BY_CODE = {
    "ECONNREFUSED": "the connection was refused (nothing listens on that port)",
    "ECONNRESET": "the connection was reset by the peer",
    "ECONNABORTED": "the connection was aborted",
    "EPIPE": "the connection was closed while streamtap was writing (broken pipe)",
    "ETIMEDOUT": "the connection timed out",
    "EHOSTUNREACH": "the host is unreachable",
    "ENETUNREACH": "the network is unreachable",
    "EADDRNOTAVAIL": "the address is not available",
}
# By class name, most specific first (matched along the exception's MRO, so no library import).
_BY_CLASS = (
    ("ClientConnectorDNSError", "the name could not be resolved"),
    ("ClientConnectorCertificateError", "the upstream's TLS certificate was not accepted"),
    ("ClientSSLError", "the TLS handshake with the upstream failed"),
    ("SSLError", "the TLS handshake failed"),
    ("ConnectionTimeoutError", "connecting timed out"),
    ("SocketTimeoutError", "reading timed out"),
    ("ServerTimeoutError", "the upstream did not answer in time"),
    ("ServerDisconnectedError", "the upstream closed the connection before answering"),
    ("ClientPayloadError", "the response body ended early or was malformed"),
    ("ClientResponseError", "the upstream's response could not be parsed"),
    ("InvalidURL", "the upstream URL is not valid"),
    ("BadHttpMessage", "the HTTP message could not be parsed"),
    ("ConnectionResetError", "the connection was reset by the peer"),
    ("ConnectionRefusedError", "the connection was refused"),
    ("BrokenPipeError", "the connection was closed while writing (broken pipe)"),
    ("TimeoutError", "timed out"),
    ("CancelledError", "the task was cancelled"),
)


def errno_name(exc: BaseException) -> str | None:
    """The errno's name (`ECONNREFUSED`, `EAI_NONAME`), never its number."""
    number = getattr(exc, "errno", None)
    if not isinstance(number, int) or isinstance(number, bool):
        return None
    if number < 0 or isinstance(exc, socket.gaierror):
        return _GAI_NAMES.get(number, "EAI_UNKNOWN")
    return errno_names.errorcode.get(number, "EUNKNOWN")


def host_of(exc: BaseException) -> str | None:
    host = getattr(exc, "host", None)
    return host if isinstance(host, str) and _HOST.fullmatch(host) else None


def describe(exc: BaseException, code: str | None) -> str:
    """A message streamtap builds from the class and errno name: nothing quoted from input."""
    classes = {cls.__name__ for cls in type(exc).__mro__}
    if (code or "").startswith("EAI_") or "ClientConnectorDNSError" in classes:
        host = host_of(exc)
        return (f"the name {host} could not be resolved" if host
                else "the upstream's host name could not be resolved")
    if code in _BY_CODE:
        return _BY_CODE[code]
    for name, text in _BY_CLASS:
        if name in classes:
            return text
    return f"{type(exc).__name__} (its text is not recorded: library messages can quote input)"


def _one(exc: BaseException) -> dict:
    code = errno_name(exc)
    library_code = getattr(exc, "__dict__", {}).get("code")  # not a deprecated property
    if code is None and isinstance(library_code, str):
        # a library's own code (e.g. undici-style names); aiohttp's integer `code` is an HTTP
        # status it would have answered with, not what happened, so it is left out
        code = library_code if re.fullmatch(r"[A-Z][A-Z0-9_]{0,63}", library_code) else None
    # `type` is a class name from our own process (never input); `message` is built above.
    return {"type": type(exc).__name__[:64], "message": describe(exc, code), "code": code}


def fingerprint(where: str, exc: BaseException) -> dict:
    """`{where, type, message, code, cause}`; cause is one level of __cause__/__context__/os_error."""
    result = {"where": where, **_one(exc), "cause": None}
    cause = exc.__cause__ or getattr(exc, "os_error", None) or exc.__context__
    if isinstance(cause, BaseException) and cause is not exc:
        result["cause"] = _one(cause)
        if result["code"] is None:
            result["code"] = result["cause"]["code"]
    return result


def looks_like_reset(exc: BaseException) -> bool:
    """Whether a read failure was a TCP reset rather than a clean FIN mid-body.

    aiohttp's ClientPayloadError does not chain the ConnectionResetError it saw; the reset is
    visible only in its message, so the message is read as well as the chain.
    """
    seen = exc
    for _ in range(4):
        if isinstance(seen, ConnectionResetError):
            return True
        if any(word in str(seen).lower() for word in _RESET_WORDS):
            return True
        nxt = seen.__cause__ or seen.__context__
        if not isinstance(nxt, BaseException):
            break
        seen = nxt
    return False
