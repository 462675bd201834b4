"""redact.py beyond the allowlists (tests/unit/test_redact_headers.py): ids that cannot even be
encoded as they are, and headers that are both allowlisted and rate-limit shaped."""

from __future__ import annotations

import hashlib

from streamtap.diagnostics.redaction.redact import (
    RESPONSE_HEADERS_KEPT, find_request_id, keep_headers, safe_id)


def test_an_id_with_a_lone_surrogate_is_hashed_not_an_error():
    """aiohttp decodes a header's undecodable bytes to lone surrogates (surrogateescape): such a
    session id must still get a stable file name, not raise UnicodeEncodeError."""
    raw = "sess-\udcff\udcfe"
    expected = "h-" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    assert safe_id(raw) == expected
    assert safe_id("sess-\udcff") != expected


def test_rate_limit_opt_in_adds_to_the_allowlist_and_takes_nothing_away():
    headers = [("X-Request-Id", "req_1"), ("x-ratelimit-remaining-requests", "9"),
               ("Set-Cookie", "s=1"), ("ratelimit-reset", "30")]
    assert keep_headers(headers, RESPONSE_HEADERS_KEPT, keep_ratelimit=True) == {
        "x-request-id": "req_1", "x-ratelimit-remaining-requests": "9", "ratelimit-reset": "30"}
    assert keep_headers(headers, RESPONSE_HEADERS_KEPT) == {"x-request-id": "req_1"}


def test_a_scrubbed_request_id_is_what_correlation_gets():
    kept = keep_headers([("request-id", "sk-ant-api03-AbCdEf0123456789")], RESPONSE_HEADERS_KEPT)
    assert find_request_id(kept) == "[REDACTED]"
