"""The secret scrubber, path redaction and ids, as tables: real key formats are always caught,
ordinary long identifiers (paths, sample names, request ids, model names) always kept, and every
scrubber pattern is pinned by an example that no other pattern catches."""

import re

import pytest

from streamtap.diagnostics.redaction import secrets
from streamtap.diagnostics.record.recorder import Ending, Recorder
from streamtap.diagnostics.redaction.redact import REDACTED, redact_path, safe_id, scrub

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
    return recorder.finish(Ending(upstream="truncated", upstream_end_ms=3.0), 3.0)


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
