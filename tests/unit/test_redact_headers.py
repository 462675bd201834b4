"""redact.py's allowlists, header by header, and the ids and paths a record keeps.

The allowlists are written out here on purpose: adding or dropping a header from what a record
keeps must be a visible change to this file, not a side effect.
"""

from __future__ import annotations

import hashlib

import pytest

from streamtap.diagnostics.record.recorder import Limits, Recorder
from streamtap.diagnostics.redaction.redact import (
    REQUEST_HEADERS_KEPT, RESPONSE_HEADERS_KEPT, find_request_id, keep_headers, query_keys,
    redact_path, safe_id)

REQUEST_KEPT = ["content-type", "accept", "user-agent", "anthropic-version", "anthropic-beta",
                "openai-beta", "x-stainless-lang", "x-stainless-package-version",
                "x-stainless-runtime", "x-stainless-runtime-version", "x-stainless-retry-count",
                "x-stainless-timeout"]
REQUEST_DROPPED = ["authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie",
                   "proxy-authorization", "openai-organization", "openai-project", "host",
                   "content-length", "x-stainless-os", "x-stainless-arch", "x-session-id",
                   "x-ratelimit-limit-requests"]
RESPONSE_KEPT = ["content-type", "content-encoding", "x-request-id", "request-id",
                 "openai-processing-ms", "openai-version", "x-generation-id", "cf-ray",
                 "retry-after", "retry-after-ms", "server", "via"]
RESPONSE_DROPPED = ["set-cookie", "openai-organization", "openai-project",
                    "anthropic-organization-id", "date", "alt-svc", "cf-cache-status",
                    "strict-transport-security", "x-envoy-upstream-service-time",
                    "content-length", "authorization"]
RATELIMIT = ["x-ratelimit-remaining-tokens", "x-ratelimit-limit-requests",
             "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-tokens-reset",
             "ratelimit-reset", "ratelimit-policy"]
NEAR_RATELIMIT = ["x-ratelimitremaining", "ratelimit", "x-anthropic-ratelimit-tokens"]


def test_the_allowlists_are_exactly_these():
    assert REQUEST_HEADERS_KEPT == set(REQUEST_KEPT)
    assert RESPONSE_HEADERS_KEPT == set(RESPONSE_KEPT)


@pytest.mark.parametrize("name", REQUEST_KEPT)
def test_each_allowlisted_request_header_is_kept_by_the_recorder(name):
    recorder = Recorder(trace_id="t", session_id="s", message_id=None, started_at="now",
                        route="r", provider="p")
    recorder.on_request("POST", "/v1/chat/completions",
                        [(name.title(), "v-1"), ("Authorization", "Bearer sk-secretsecret")],
                        b"{}")
    assert recorder.request["headers"] == {name: "v-1"}


@pytest.mark.parametrize("name", REQUEST_DROPPED)
def test_each_other_request_header_is_dropped(name):
    assert keep_headers([(name, "value"), (name.upper(), "value")], REQUEST_HEADERS_KEPT) == {}
    assert keep_headers([(name, "value")], REQUEST_HEADERS_KEPT, keep_ratelimit=False) == {}


@pytest.mark.parametrize("name", RESPONSE_KEPT)
def test_each_allowlisted_response_header_is_kept(name):
    assert keep_headers([(name.upper(), "v-2"), ("Set-Cookie", "s=1")],
                        RESPONSE_HEADERS_KEPT) == {name: "v-2"}


@pytest.mark.parametrize("name", RESPONSE_DROPPED)
def test_each_other_response_header_is_dropped(name):
    assert keep_headers([(name, "value")], RESPONSE_HEADERS_KEPT, keep_ratelimit=True) == {}


@pytest.mark.parametrize("name", RATELIMIT)
def test_rate_limit_headers_only_with_the_opt_in(name):
    assert keep_headers([(name, "42")], RESPONSE_HEADERS_KEPT) == {}
    assert keep_headers([(name.upper(), "42")], RESPONSE_HEADERS_KEPT,
                        keep_ratelimit=True) == {name: "42"}


@pytest.mark.parametrize("name", NEAR_RATELIMIT)
def test_names_that_only_look_like_rate_limit_headers_stay_out(name):
    assert keep_headers([(name, "42")], RESPONSE_HEADERS_KEPT, keep_ratelimit=True) == {}


def test_repeated_headers_are_joined_and_values_capped_and_scrubbed():
    kept = keep_headers([("Via", "1.1 a"), ("via", "1.1 b"), ("server", "ab " * 200),
                         ("x-request-id", "req sk-abcdefghijklmnop")], RESPONSE_HEADERS_KEPT)
    assert kept == {"via": "1.1 a, 1.1 b", "server": ("ab " * 200)[:512],
                    "x-request-id": "req [REDACTED]"}


def recorded(headers: list, keep_ratelimit: bool = False) -> dict:
    recorder = Recorder(trace_id="t", session_id="s", message_id=None, started_at="now",
                        route="anthropic", provider="anthropic",
                        limits=Limits(keep_ratelimit_headers=keep_ratelimit))
    recorder.on_request("POST", "/v1/messages", [("content-type", "application/json")], b"{}")
    recorder.on_response(200, [("content-type", "text/event-stream")] + headers, 1.0)
    recorder.feed(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", 2.0)
    from streamtap.diagnostics.record.recorder import Ending
    return recorder.finish(Ending(upstream="complete"), 3.0)


def test_anthropic_request_id_becomes_the_correlation_request_id():
    record = recorded([("request-id", "req_011CPtm2"),
                       ("anthropic-ratelimit-requests-remaining", "49")])
    assert record["correlation"]["request_id"] == "req_011CPtm2"
    assert record["response"]["headers"] == {"content-type": "text/event-stream",
                                             "request-id": "req_011CPtm2"}


def test_the_recorder_keeps_rate_limit_headers_when_the_user_opts_in():
    record = recorded([("anthropic-ratelimit-requests-remaining", "49")], keep_ratelimit=True)
    assert record["response"]["headers"]["anthropic-ratelimit-requests-remaining"] == "49"
    assert record["correlation"]["request_id"] is None


@pytest.mark.parametrize("headers, expected", [
    ({"cf-ray": "4", "x-generation-id": "3", "request-id": "2", "x-request-id": "1"}, "1"),
    ({"cf-ray": "4", "x-generation-id": "3", "request-id": "2"}, "2"),
    ({"cf-ray": "4", "x-generation-id": "3"}, "3"),
    ({"cf-ray": "4"}, "4"),
    ({"server": "x"}, None),
])
def test_request_id_comes_from_the_most_specific_header(headers, expected):
    assert find_request_id(headers) == expected


def hashed(raw: str) -> str:
    return "h-" + hashlib.sha256(raw.encode()).hexdigest()[:24]


@pytest.mark.parametrize("raw, expected", [
    (None, None),
    ("", None),
    ("abc-1.2_3", "abc-1.2_3"),
    ("a." * 64, "a." * 64),  # dots, so that no scrubber sees one long token
    ("a." * 64 + "a", hashed("a." * 64 + "a")),
    (".", hashed(".")),
    ("..", hashed("..")),
    ("../etc", hashed("../etc")),
    ("a/b", hashed("a/b")),
    # README's rule: an id in the charset is kept as given (the scrubber still guards what is
    # logged); "sk-proj-..." session ids are the user's own choice of name.
    ("sk-abcdefghijklmnop", "sk-abcdefghijklmnop"),
    ("sk ab", hashed("sk ab")),
])
def test_safe_id(raw, expected):
    assert safe_id(raw) == expected


def test_paths_lose_their_query_and_vertex_projects():
    assert redact_path("/v1/chat/completions?key=AIzaSECRET") == "/v1/chat/completions"
    assert redact_path("/v1/projects/my-project-123/locations/us/models/g:streamGenerateContent"
                       ) == "/v1/projects/*/locations/us/models/g:streamGenerateContent"
    assert redact_path("/x/sk-abcdefghijklmnop/y") == "/x/[REDACTED]/y"
    assert redact_path("/a.b" * 150) == ("/a.b" * 150)[:512]


def test_query_keys_are_names_only():
    assert query_keys("key=secret&alt=sse&key=again&=x&flag") == ["key", "alt", "flag"]
    assert query_keys("&".join(f"k{i}=v" for i in range(40))) == [f"k{i}" for i in range(32)]
    assert query_keys("n." * 50 + "=1") == [("n." * 50)[:64]]
