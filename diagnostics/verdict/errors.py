"""Fingerprints of the exceptions that ended an exchange: where it broke, what it was, and its
errno or library code. Pure inspection of exception objects; messages pass the secret scrubber."""

from __future__ import annotations

import errno as errno_names

from streamtap.diagnostics.record.redact import scrub

WHERE = ("upstream_connect", "upstream_response", "upstream_read", "downstream_write", "proxy")
_RESET_WORDS = ("connection reset", "econnreset", "errno 104", "broken pipe")


def _one(exc: BaseException) -> dict:
    code = None
    number = getattr(exc, "errno", None)
    if isinstance(number, int):
        code = errno_names.errorcode.get(number, str(number))
    elif isinstance(getattr(exc, "code", None), str):
        # a library's own code (e.g. undici-style names); aiohttp's integer `code` is an HTTP
        # status it would have answered with, not what happened, so it is left out
        code = getattr(exc, "code")[:64]
    return {"type": type(exc).__name__, "message": scrub(str(exc))[:300] or None, "code": code}


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
