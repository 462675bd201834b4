"""Redaction, in the test process: what a record keeps and what it scrubs.

The secret scrubber (diagnostics/redaction/secrets.py), path redaction and ids as tables: real key
formats are always caught, ordinary long identifiers (paths, sample names, request ids, model
names) always kept, and every scrubber pattern is pinned by an example that no other pattern
catches. redact.py's allowlists, header by header (written out here on purpose: adding or
dropping a header from what a record keeps must be a visible change to this file, not a side
effect), ids that cannot even be encoded as they are, and headers that are both allowlisted and
rate-limit shaped. Then the scrubber with real key formats at full length and the near-misses a
user needs kept, the generic rule at its boundaries (24 characters, four letter/digit changes,
`/` inside a run) and every provider id prefix, with exact outputs, so that a pattern taken out
or a rule loosened fails here.
"""

from __future__ import annotations

import hashlib
import re

import pytest

from streamtap.diagnostics.record.schema import record_as_dict
from streamtap.diagnostics.redaction import secrets
from streamtap.diagnostics.record.recorder import Ending, Limits, Recorder
from streamtap.diagnostics.redaction.redact import (
    REQUEST_HEADERS_KEPT, RESPONSE_HEADERS_KEPT, find_request_id, keep_headers, query_keys,
    redact_path, safe_id)
from streamtap.diagnostics.redaction.secrets import (
    ID_PREFIXES, KEY_PATTERNS, REDACTED, compile_patterns, random_piece, scrub, segment_is_key)


# (pattern that alone catches it, text, the key inside the text). Each example is shaped so that
# only its own pattern catches it (short bodies, separators): deleting that pattern fails it.
KEYS = [
    ("sk_key", "Incorrect value: sk-proj-****wuv6.", "sk-proj-****wuv6"),
    ("sk_key", "seen as sk-abc...xyz1234567890abcdef.", "sk-abc...xyz1234567890abcdef"),
    ("sk_key", "sk-ant-api03-Ab1-Cd2_Ef3-Gh4", "sk-ant-api03-Ab1-Cd2_Ef3-Gh4"),
    ("auth_scheme", "Authorization: Bearer abc.def-123456", "abc.def-123456"),
    ("auth_scheme", "Proxy-Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    ("jwt", "got eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0. rejected",
     "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0."),
    ("google_key", "?q=AIzaSyA1b2C3d4_E5f6G7h8-I9j0K1l2M3n4O5p",
     "AIzaSyA1b2C3d4_E5f6G7h8-I9j0K1l2M3n4O5p"),
    ("aws_key_id", "aws_access_key_id AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_key_id", "ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A"),
    ("github_token", "remote https://ghp_abcdefghij0123456789@github.com/x",
     "ghp_abcdefghij0123456789"),
    ("github_token", "github_pat_11ABCDEFG_0123456789abcd", "github_pat_11ABCDEFG_0123456789abcd"),
    ("provider_prefix", "rejected fw_3ZabcDEF456ghiJKL789", "fw_3ZabcDEF456ghiJKL789"),
    ("provider_prefix", "hf_AbCdEfGhIjKl-MnOp", "hf_AbCdEfGhIjKl-MnOp"),
    ("provider_prefix", "gsk_0123456789ab", "gsk_0123456789ab"),
    ("openai_org_project", "organization org-AbCdEf0123456789", "org-AbCdEf0123456789"),
    ("named_key", "Invalid token: abc123def456", "abc123def456"),
    ("named_key", "Your api key: ****wuv6 is invalid", "****wuv6"),
    ("named_key", "secret=9f8e7d6c5b4a", "9f8e7d6c5b4a"),
    ("named_key", "x-api-key a1b2c3d4e5f6", "a1b2c3d4e5f6"),
    # the generic rule: long and random, no prefix announces it
    ("generic", "x9Fq2LmZ8vB3nK7pR4tW6yH1jD5sG0cA", "x9Fq2LmZ8vB3nK7pR4tW6yH1jD5sG0cA"),
    ("generic", "md5 d41d8cd98f00b204e9800998ecf8427e", "d41d8cd98f00b204e9800998ecf8427e"),
    ("generic", "QwErTyUiOpAsDfGhJkLzXcVbNm", "QwErTyUiOpAsDfGhJkLzXcVbNm"),  # letters only
    ("generic", "aws_secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),  # base64 with `/`, no word segment
    ("generic", "mistral key QK3mrZt9YhAeGd0PJvS5cU8nXbW2", "QK3mrZt9YhAeGd0PJvS5cU8nXbW2"),
]

# Long identifiers a user needs, which no pattern may touch.
KEPT = [
    "openai__openai-chat__reset__3",
    "anthropic__anthropic-messages__truncated__12.sample.json",
    "/home/user/projects/streamtap/samples/openai__openai-chat__reset__3.sample.json",
    "req_01H8XGJWBWBAQ4ZX4P1ZQ8QH8Y",
    "req_011CSHoEeqs5C35K2UUqR7Fy",
    "chatcmpl-9aBcDeFgHiJkLmNoPqRsTuVwXyZ012",
    "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
    "msg_01XFDUDYJgAACzvnptvVoYEL",
    "toolu_01A09q90qw90lq917835lq9",
    "gen-1734567890-AbCdEfGhIjKlMnOpQrSt",
    "8f14e45f-ceea-467f-a9b3-3f1c2d5e6a7b",
    "gpt-4o-mini-2024-07-18",
    "claude-3-5-sonnet-20241022",
    "meta-llama/Llama-3.1-8B-Instruct",
    "accounts/fireworks/models/llama-v3p1-405b-instruct",
    "gemini-2.0-flash-thinking-exp-01-21",
    "AbstractSingletonProxyFactoryBeanFactory",
    "https://platform.openai.com/account/api-keys",
    "OpenAI/Python 1.54.3",
    "max_tokens: 4096",
    "token limit exceeded",
    "basic usage information",
    "Bearer realm",
    "task-abcdefgh-run",
    "disk-usage-report-for-the-quarter",
    "xai-grok-2-vision-1212",
    "hf_inference_endpoint_name",
    "fw_function_calling_v2",
    "1732579200123456789",
    "x-stainless-package-version",
    "the prompt_tokens_details and cache_creation_input_tokens fields",
]


def without(pattern: str) -> re.Pattern:
    return secrets.compile_patterns({name: text for name, text in secrets.KEY_PATTERNS.items()
                                     if name != pattern})


@pytest.mark.parametrize("pattern, text, key", KEYS, ids=[f"{row[0]}-{i}" for i, row in
                                                        enumerate(KEYS)])
def test_real_key_formats_are_caught(pattern, text, key):
    scrubbed = scrub(text)
    assert key not in scrubbed and REDACTED in scrubbed


@pytest.mark.parametrize("pattern, text, key", [row for row in KEYS if row[0] != "generic"],
                         ids=[row[0] for row in KEYS if row[0] != "generic"])
def test_each_example_is_caught_by_its_own_pattern_only(pattern, text, key):
    """Taking the pattern out lets the key through: the example pins that pattern."""
    assert key in scrub(text, known=without(pattern))


def test_every_pattern_has_a_pinning_example():
    assert {row[0] for row in KEYS} == {*secrets.KEY_PATTERNS, "generic"}


@pytest.mark.parametrize("text", KEPT)
def test_ordinary_long_identifiers_are_kept(text):
    assert scrub(text) == text


def test_named_key_keeps_the_words_and_removes_the_value():
    assert scrub("Incorrect API key provided: sk-proj-****wuv6.") == \
        "Incorrect API key provided: [REDACTED]."
    assert scrub("Invalid token: abc123def456") == "Invalid token: [REDACTED]"


@pytest.mark.parametrize("piece, random", [
    ("x9Fq2LmZ8vB3nK7pR4tW6yH1jD5", True),   # letters and digits alternate
    ("release20241118buildnumber", False),  # a word, then a number
    ("QwErTyUiOpAsDfGhJkLzXcVbNm", True),   # mixed case that is not CamelCase
    ("AbstractSingletonProxyFactory", False),
    ("abcdefghijklmnopqrstuvwxyz", False),  # one case: a word
    ("ABCDEFGHIJKLMNOPQRSTUVWXYZ", False),
    ("123456789012345678901234567", False),  # a number
    ("x9Fq2LmZ8vB3nK7pR4tW6yH", False),     # 23 characters: below the minimum
    ("AbcDefGhi7JklMnoPqrStuVwxY", False),  # CamelCase with one digit
    ("AbCdEfGhIjKlMn0pQrStUvWxYz", True),   # mixed case with one digit, not CamelCase
])
def test_random_piece(piece, random):
    assert secrets.random_piece(piece) is random


def test_id_prefixes_keep_provider_ids_and_nothing_else():
    body = "Fq2LmZ8vB3nK7pR4tW6yH1jD5sG0cA"
    assert secrets.segment_is_key(body)
    assert secrets.segment_is_key(f"key_{body}")
    for prefix in ("req_", "msg_", "chatcmpl-", "resp_", "toolu_", "call_", "gen-", "file-"):
        assert not secrets.segment_is_key(prefix + body), prefix


# -- paths: segment by segment -----------------------------------------------------------------
GATEWAY_PATHS = [
    # Azure OpenAI deployments (the query, with api-version, is never part of the path)
    ("/openai/deployments/gpt-4o-prod-eastus2-deployment/chat/completions?api-version=2024-10-21",
     "/openai/deployments/gpt-4o-prod-eastus2-deployment/chat/completions", "openai-chat"),
    ("/openai/deployments/my-o3-mini-reasoning-global-standard/responses?api-version=preview",
     "/openai/deployments/my-o3-mini-reasoning-global-standard/responses", "openai-responses"),
    # Snowflake Cortex
    ("/api/v2/cortex/v1/chat/completions", "/api/v2/cortex/v1/chat/completions", "openai-chat"),
    # Hugging Face's router, per provider
    ("/hf-inference/models/meta-llama/Llama-3.1-8B-Instruct/v1/chat/completions",
     "/hf-inference/models/meta-llama/Llama-3.1-8B-Instruct/v1/chat/completions", "openai-chat"),
    ("/together/v3/openai/chat/completions", "/together/v3/openai/chat/completions",
     "openai-chat"),
    # DashScope's compatible mode
    ("/compatible-mode/v1/chat/completions", "/compatible-mode/v1/chat/completions",
     "openai-chat"),
    # Vertex: the project id goes, the rest stays
    ("/v1/projects/my-project-123456/locations/us-central1/publishers/google/models/"
     "gemini-2.0-flash:streamGenerateContent?alt=sse",
     "/v1/projects/*/locations/us-central1/publishers/google/models/"
     "gemini-2.0-flash:streamGenerateContent", "gemini"),
    ("/v1/responses/resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
     "/v1/responses/resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b", None),
]
KEYED_PATHS = [
    ("/v1/sk-proj-abc123DEF456ghi789JKL0/chat/completions",
     "/v1/[REDACTED]/chat/completions"),
    ("/key/AIzaSyA1b2C3d4_E5f6G7h8-I9j0K1l2M3n4O5p/v1beta/models/gemini-pro:generateContent",
     "/key/[REDACTED]/v1beta/models/gemini-pro:generateContent"),
    ("/gateway/x9Fq2LmZ8vB3nK7pR4tW6yH1jD5sG0cA/openai/chat/completions",
     "/gateway/[REDACTED]/openai/chat/completions"),
    ("/proxy/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig/v1/messages",
     "/proxy/[REDACTED]/v1/messages"),
    ("/t/fw_3ZabcDEF456ghiJKL789/inference/v1/chat/completions",
     "/t/[REDACTED]/inference/v1/chat/completions"),
]


@pytest.mark.parametrize("raw, recorded, dialect", GATEWAY_PATHS, ids=[r[0][:40] for r in
                                                                        GATEWAY_PATHS])
def test_gateway_paths_are_kept(raw, recorded, dialect):
    assert redact_path(raw) == recorded


@pytest.mark.parametrize("raw, recorded", KEYED_PATHS, ids=[r[0][:30] for r in KEYED_PATHS])
def test_a_key_in_a_path_is_replaced_by_segment(raw, recorded):
    assert redact_path(raw) == recorded


def _record_for(path: str, content_type: str = "text/event-stream") -> dict:
    recorder = Recorder(trace_id="t", session_id="s", message_id=None, started_at="now",
                        route="r", provider="p")
    recorder.on_request("POST", path, [], b'{"model": "m", "stream": true}')
    recorder.on_response(200, [("content-type", content_type)], 1.0)
    recorder.feed(b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,'
                  b'"delta":{"content":"hi"},"finish_reason":null}]}\n\n', 2.0)
    return record_as_dict(recorder.finish(Ending(upstream="truncated", upstream_end_ms=3.0), 3.0))


@pytest.mark.parametrize("raw, recorded, dialect",
                         [row for row in GATEWAY_PATHS if row[2] == "openai-chat"],
                         ids=[r[0][:40] for r in GATEWAY_PATHS if r[2] == "openai-chat"])
def test_the_dialect_is_chosen_from_the_real_path(raw, recorded, dialect):
    record = _record_for(raw)
    assert record["dialect"] == dialect
    assert record["request"]["path"] == recorded
    assert record["stream"]["event_counts"].get("text_delta") == 1
    assert record["outcome"]["phase"] == "text"  # not "before the model produced any output"


def test_the_dialect_is_chosen_before_a_key_segment_is_redacted():
    """A path whose key segment is redacted still names its dialect by its real ending."""
    record = _record_for("/gw/x9Fq2LmZ8vB3nK7pR4tW6yH1jD5sG0cA/v1/chat/completions")
    assert record["request"]["path"] == "/gw/[REDACTED]/v1/chat/completions"
    assert record["dialect"] == "openai-chat"


# -- session and message ids: README's rule, exactly --------------------------------------------
@pytest.mark.parametrize("raw", [
    "a" * 128, "0123456789abcdef0123456789abcdef0123456789", "8f14e45f-ceea-467f-a9b3-3f1c2d5e6a7b",
    "ses_3kZ9xQ2LmZ8vB3nK7pR4tW6yH1jD5sG0", "x9Fq2LmZ8vB3nK7pR4tW6yH1jD5sG0cA", "run.2024-11-25_01",
    "sk-proj-abcdef0123456789", "...", "a..b",
])
def test_ids_in_the_readme_charset_are_kept_as_is(raw):
    assert safe_id(raw) == raw


@pytest.mark.parametrize("raw", [".", "..", "a" * 129, "a/b", "a b", "sessión", "../x", "a\\b"])
def test_other_ids_are_hashed(raw):
    hashed = safe_id(raw)
    assert re.fullmatch(r"h-[0-9a-f]{24}", hashed)
    assert safe_id(raw) == hashed and safe_id(raw + "x") != hashed


def test_no_id_is_none():
    assert safe_id(None) is None and safe_id("") is None


# -- the allowlists, header by header, and the ids and paths a record keeps -----------------------
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
    return record_as_dict(recorder.finish(Ending(upstream="complete"), 3.0))


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


# -- beyond the allowlists: ids that cannot be encoded, rate-limit shaped headers -----------------
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


# -- the scrubber with real key formats at full length, and its near-misses -----------------------
# Real formats, full length (made-up bodies): (text, what the record must hold instead).
REAL = [
    # OpenAI project key, as an SDK sends it: the scheme goes with it
    ("Authorization: Bearer sk-proj-Ab3dEf6hIj9kLmN0pQrS_tUvWxYz12-345678aBcDeFgHiJkLmNoPqRsT3Blbk"
     "FJAbCdEfGhIjKlMnOpQrStUvWx", f"Authorization: {REDACTED}"),
    ("Incorrect API key provided: sk-proj-AbCd****************************wuv6. You can find",
     f"Incorrect API key provided: {REDACTED}. You can find"),
    ("sk-svcacct-AbCdEf0123456789AbCdEf0123456789 revoked", f"{REDACTED} revoked"),
    ("sk-None-AbCdEf0123456789AbCdEf0123456789", REDACTED),
    # Anthropic: api03 keys end in AA; admin keys
    ("x-api-key: sk-ant-api03-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5Ef6Gh7Ij8Kl9Mn0Op1Qr2St"
     "3Uv4Wx5Yz6Ab7Cd8E-f9GhAA", f"x-api-key: {REDACTED}"),
    ("sk-ant-admin01-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8", REDACTED),
    # Google: AIza + 35
    ("https://generativelanguage.googleapis.com/v1beta?key=AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
     f"https://generativelanguage.googleapis.com/v1beta?key={REDACTED}"),
    # JWT, alone and as a bearer token
    ("got eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fw"
     "pMeJf36POk6yJV_adQssw5c expired", f"got {REDACTED} expired"),
    ("Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJodHRwczovL2lkcCJ9.c2ln",
     f"Authorization: {REDACTED}"),
    ("Authorization: Basic dXNlcm5hbWU6cGFzc3dvcmQ=", f"Authorization: {REDACTED}"),
    ("BEARER ABCDEFGH12345678", REDACTED),
    ("bearer abcdefgh12345678", REDACTED),
    ("aws AKIAIOSFODNN7EXAMPLE ok", f"aws {REDACTED} ok"),
    ("gho_16C7e42F292c6912E7710c838347Ae178B4a", REDACTED),
    ("github_pat_11AAAAAAA0aBcDeFgHiJkLmN_OpQrStUvWxYz0123456789", REDACTED),
    ("xai-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", REDACTED),
    ("pplx-0123456789abcdef0123456789abcdef", REDACTED),
    ("nvapi-AbCdEf0123456789-xyz", REDACTED),
    ("glpat-xYz0123456789AbCdEf", REDACTED),
    ("r8_AbCdEf0123456789abcd", REDACTED),
    ("OpenAI-Organization: org-AbCdEf0123456789", f"OpenAI-Organization: {REDACTED}"),
    ("proj_AbCdEf0123456789gh", REDACTED),
    ("password: hunter2x", f"password: {REDACTED}"),
    ('{"api_key": "a1b2c3d4e5f6g7h8"}', '{"api_key": "' + REDACTED + '"}'),
    ("masked: sk-abc…xyz1", f"masked: {REDACTED}"),
    # no prefix at all: the generic rule (hex digest, base64 with `/`, a key inside a path)
    ("md5 d41d8cd98f00b204e9800998ecf8427e", f"md5 {REDACTED}"),
    ("x9Fq2LmZ8vB3nK7pR4tW6yH1", REDACTED),
    ("/home/user/x9Fq2LmZ8vB3nK7pR4tW6yH1jD5sG0cA/file", f"/home/user/{REDACTED}/file"),
    ("ab1cd2ef3gh4ij5kl/mn6op7qr8", REDACTED),
    ("abcdefgh12345678abcdefgh1a", REDACTED),
]

# Near-misses: each looks like one of the patterns above and must come through untouched.
NEAR = [
    "Bearer token", "Basic auth is deprecated", "bearer abcdefghijkl", "BASIC usage",
    "task-force-alpha-bravo", "risk-assessment-2024-11-25", "sk-short", "sk-abc...",
    "sk-proj-…", "eyJhb.cd", "AIzaShortKey", "AKIAIOSFODNN7EXAMPL", "ghp_short",
    "org-chart-2024", "proj_settings", "api_key: missing", "max_tokens: 4096",
    "hf_inference_endpoint_name", "x9Fq2LmZ8vB3nK7pR4tW6yH", "abcdefgh12345678abcdefgh1",
    "Ab1Cd2E/f3Gh4Ij/5Kl6Mn7", "Ab1Cd2Ef3Gh4Ij5Kl/my-docs", "Ab1Cd2Ef3Gh4Ij5Kl/Mn6Op7/a",
    "Ab1Cd2Ef3Gh4Ij5Kl/MyDocs", "-" * 30, "REQ_Fq2LmZ8vB3nK7pR4tW6yH1jD5sG0cA",
    "/v1/projects/my-project/locations/us-central1/models/gemini-2.0-flash",
    "x-stainless-runtime-version", "claude-3-7-sonnet-20250219",
]


def ids(texts) -> list[str]:
    """Test ids a command line can name (no `/`, spaces or brackets): bench/mutate.py does."""
    return [f"{i}-" + re.sub(r"[^A-Za-z0-9_-]", "_", text)[:24] for i, text in enumerate(texts)]


@pytest.mark.parametrize("text, scrubbed", REAL, ids=ids(row[0] for row in REAL))
def test_real_key_formats(text, scrubbed):
    assert scrub(text) == scrubbed
    assert secrets.looks_like_key(text) is True


@pytest.mark.parametrize("text", NEAR, ids=ids(NEAR))
def test_near_misses_are_kept(text):
    assert scrub(text) == text
    assert secrets.looks_like_key(text) is False


def test_the_compiled_table_is_the_scrubber():
    """compile_patterns(KEY_PATTERNS) is what scrub uses: same output on every example."""
    rebuilt = compile_patterns(KEY_PATTERNS)
    for text, _ in REAL:
        assert scrub(text, known=rebuilt) == scrub(text)
    for text in NEAR:
        assert scrub(text, known=rebuilt) == text


@pytest.mark.parametrize("pattern", ["sk_key", "auth_scheme", "jwt", "google_key", "aws_key_id",
                                     "github_token", "provider_prefix", "openai_org_project",
                                     "named_key"])
def test_taking_one_pattern_out_leaves_the_others_working(pattern):
    """Each pattern is one alternative of the compiled regex, not glue for the others."""
    smaller = without(pattern)
    for name, text in ONLY.items():
        if name != pattern:
            assert scrub(text, known=smaller) == ONLY_SCRUBBED[name], name
    assert scrub(ONLY[pattern], known=smaller) == ONLY[pattern]


# One text per pattern that only that pattern catches (the generic rule lets each through).
ONLY = {
    "sk_key": "sk-proj-****wuv6",
    "auth_scheme": "Bearer abc.def-123456",
    "jwt": "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.",
    "google_key": "AIzaSyA1b2C3d4_E5f6G7h8-I9j0K1l2M3n4O5p",
    "aws_key_id": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_abcdefghij0123456789",
    "provider_prefix": "gsk_0123456789ab",
    "openai_org_project": "org-AbCdEf0123456789",
    "named_key": "token: abc123def456",
}
ONLY_SCRUBBED = {name: REDACTED for name in ONLY} | {"named_key": f"token: {REDACTED}"}


def test_every_pattern_has_an_only_example():
    assert set(ONLY) == set(KEY_PATTERNS)


# Written out: a prefix added or dropped must be a visible change to this file.
PROVIDER_ID_PREFIXES = [
    "req", "request", "msg", "chatcmpl", "cmpl", "resp", "rs", "fc", "ws", "ci", "toolu",
    "srvtoolu", "call", "gen", "run", "file", "batch", "asst", "thread", "evt", "step", "ftjob",
    "modr", "item", "trace", "span"]


@pytest.mark.parametrize("prefix", PROVIDER_ID_PREFIXES)
def test_every_provider_id_prefix_keeps_its_ids(prefix):
    body = "Fq2LmZ8vB3nK7pR4tW6yH1jD5sG0cA"
    for sep in "_-":
        assert scrub(f"id {prefix}{sep}{body}") == f"id {prefix}{sep}{body}"
        assert segment_is_key(f"{prefix}{sep}{body}") is False
    assert scrub(f"{prefix}x_{body}") == REDACTED  # a longer first piece is no id prefix


def test_the_id_prefixes_are_exactly_these():
    assert ID_PREFIXES == set(PROVIDER_ID_PREFIXES)


@pytest.mark.parametrize("segment, key", [
    ("x9Fq2LmZ8vB3nK7pR4tW6yH1", True),  # 24: the minimum
    ("x9Fq2LmZ8vB3nK7pR4tW6yH", False),  # 23
    ("a-x9Fq2LmZ8vB3nK7pR4tW6yH", False),  # 25 long, but no piece reaches 24
    ("-" * 30, False),  # no piece at all
    ("short", False),
])
def test_segment_is_key(segment, key):
    assert segment_is_key(segment) is key


@pytest.mark.parametrize("piece, random", [
    ("x9Fq2LmZ8vB3nK7pR4tW6yHX", True),   # 24, ending in a letter
    ("x9Fq2LmZ8vB3nK7pR4tW6yH=", False),  # base64 padding does not count toward the 24
    ("x9Fq2LmZ8vB3nK7pR4tW6yH1==", True),
    ("abcdefgh12345678abcdefgh1a", True),  # lowercase, four letter/digit changes
    ("abcdefgh12345678abcdefgh1", False),  # lowercase, three
])
def test_random_piece_boundaries(piece, random):
    assert random_piece(piece) is random
