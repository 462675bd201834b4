"""Redaction: what may reach a record. Headers are kept by allowlist, never by blocklist; every
string that gets through also passes a secret scrubber as a second line of defence."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

# `scrub` and `REDACTED` are re-exported: every module that redacts imports them from here.
from streamtap.diagnostics.redaction.secrets import REDACTED, looks_like_key, scrub  # noqa: F401

REQUEST_HEADERS_KEPT = frozenset({
    "content-type", "accept", "user-agent", "anthropic-version", "anthropic-beta", "openai-beta",
    "x-stainless-lang", "x-stainless-package-version", "x-stainless-runtime",
    "x-stainless-runtime-version", "x-stainless-retry-count", "x-stainless-timeout",
})
RESPONSE_HEADERS_KEPT = frozenset({
    "content-type", "content-encoding", "x-request-id", "request-id", "openai-processing-ms",
    "openai-version", "x-generation-id", "cf-ray", "retry-after", "retry-after-ms", "server", "via",
})
# Rate-limit headers reveal account tier and usage: kept only when the user opts in.
RATELIMIT_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-", "ratelimit-")
# Where a request or response id travels, most specific first.
REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-generation-id", "cf-ray")

_SAFE_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_VERTEX_PROJECT = re.compile(r"/projects/[^/]+")


def keep_headers(headers: Iterable[tuple[str, str]], allowed: frozenset[str],
                 keep_ratelimit: bool = False) -> dict[str, str]:
    """The allowlisted headers, names lowercased, values scrubbed; repeated headers joined."""
    kept: dict[str, str] = {}
    for name, value in headers:
        lname = name.lower()
        if lname in allowed or (keep_ratelimit and lname.startswith(RATELIMIT_PREFIXES)):
            value = scrub(value)[:512]
            kept[lname] = f"{kept[lname]}, {value}" if lname in kept else value
    return kept


def find_request_id(headers: dict[str, str]) -> str | None:
    for name in REQUEST_ID_HEADERS:
        if name in headers:
            return headers[name]
    return None


def safe_id(raw: str | None) -> str | None:
    """An id that can name a folder or file: `[A-Za-z0-9._-]{1,128}`, not `.` or `..`, else a hash.

    README's rule, exactly: the id is the user's own label (a UUID, a 40-character session id), so
    it is kept as given and never judged by the secret scrubber. Hashing (not truncating) keeps
    distinct ids distinct while no id can climb out of the trace dir.
    """
    if raw is None or raw == "":
        return None
    if _SAFE_ID.fullmatch(raw) and raw not in (".", ".."):
        return raw
    return hashed_id(raw)


def hashed_id(raw: str) -> str:
    """A stable stand-in for a string that may not be kept: distinct inputs stay distinct."""
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"h-{digest}"


def redact_path(path: str) -> str:
    """The request path for a record: never the query; Vertex project ids removed; a segment that
    looks like a key (some gateways put one in the path) replaced whole, every other segment kept.

    Segment by segment, so gateway paths (`/openai/deployments/<name>/chat/completions`) stay
    readable: the scrubber judges one segment at a time, never the path as one long token.
    """
    path = _VERTEX_PROJECT.sub("/projects/*", path.split("?", 1)[0])
    return "/".join(REDACTED if looks_like_key(segment) else segment
                    for segment in path.split("/"))[:512]


def query_keys(raw_query: str) -> list[str]:
    """The names of query parameters, never their values (a `?key=` value is an API key)."""
    names: list[str] = []
    for part in raw_query.split("&"):
        name = part.split("=", 1)[0]
        if name and len(names) < 32:
            name = scrub(name)[:64]
            if name not in names:
                names.append(name)
    return names
