"""The secret scrubber (diagnostics/redaction/secrets.py) with real key formats, full length, and the
near-misses a user needs kept; the generic rule at its boundaries (24 characters, four letter/digit
changes, `/` inside a run); and every provider id prefix. Exact outputs, so that a pattern taken
out or a rule loosened fails here. (Short examples that only one pattern catches, one per
pattern, are in tests/test_redact.py.)"""

from __future__ import annotations

import re

import pytest

from streamtap.diagnostics.redaction import secrets
from streamtap.diagnostics.redaction.secrets import (
    ID_PREFIXES, KEY_PATTERNS, REDACTED, compile_patterns, random_piece, scrub, segment_is_key)

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


def without(pattern: str):
    return compile_patterns({name: text for name, text in KEY_PATTERNS.items() if name != pattern})


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
