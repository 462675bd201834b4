"""Provider error messages: `type`/`code` kept, the message cut to one short sentence with quoted
spans and key-like strings removed. The texts follow the formats each provider documents for its
401/400/429 answers (OpenAI "Error codes", Anthropic "Errors", Gemini "Troubleshooting",
OpenRouter "Errors"); the keys, prompts and ids in them are made up."""

import json

import pytest

from streamtap.diagnostics.dialects.json_body import provider_error_summary
from streamtap.diagnostics.dialects.base import error_fields
from streamtap.diagnostics.redaction.messages import MAX_MESSAGE, provider_message
from streamtap.diagnostics.dialects.stream import StreamState

PROMPT = "Summarise the quarterly numbers for ACME-CANARY"

# (provider and status, body as the provider sends it, type, code, message recorded, never kept)
ERRORS = [
    ("openai 401", {"error": {
        "message": "Incorrect API key provided: sk-proj-************************************wuv6. "
                   "You can find your API key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}},
     "invalid_request_error", "invalid_api_key", "Incorrect API key provided: [REDACTED].",
     ["wuv6", "sk-proj"]),
    ("openai 400 context", {"error": {
        "message": "This model's maximum context length is 128000 tokens. However, your messages "
                   "resulted in 130123 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
     "invalid_request_error", "context_length_exceeded",
     "This model's maximum context length is 128000 tokens.", ["130123"]),
    ("openai 400 echoing the input", {"error": {
        "message": f"Invalid 'messages[1].content': expected a string, got '{PROMPT}'.",
        "type": "invalid_request_error", "param": "messages[1].content", "code": None}},
     "invalid_request_error", None, "Invalid [quoted]: expected a string, got [quoted].",
     ["ACME-CANARY", "messages[1]"]),
    ("openai 429", {"error": {
        "message": "Rate limit reached for gpt-4o in organization org-Ab3dEf6hIj9kLmN0pQ on tokens "
                   "per min (TPM): Limit 30000, Used 29870, Requested 1200. Please try again in "
                   "2.14s. Visit https://platform.openai.com/account/rate-limits to learn more.",
        "type": "tokens", "param": None, "code": "rate_limit_exceeded"}},
     "tokens", "rate_limit_exceeded",
     "Rate limit reached for gpt-4o in organization [REDACTED] on tokens per min (TPM): "
     "Limit 30000, Used 29870, Requested …", ["org-Ab3dEf6hIj9kLmN0pQ"]),  # cut at a word
    ("anthropic 401", {"type": "error", "error": {
        "type": "authentication_error", "message": "invalid x-api-key"},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"},
     "authentication_error", None, "invalid x-api-key", ["req_011"]),
    ("anthropic 400", {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 215034 tokens > 200000 maximum"}},
     "invalid_request_error", None, "prompt is too long: 215034 tokens > 200000 maximum", []),
    ("anthropic 429", {"type": "error", "error": {
        "type": "rate_limit_error",
        "message": "This request would exceed the rate limit for your organization "
                   "(a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d) of 80,000 input tokens per minute. For "
                   "details, refer to: https://docs.claude.com/en/api/rate-limits."}},
     "rate_limit_error", None,
     "This request would exceed the rate limit for your organization "
     "(a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d) of 80,000 input …", ["refer to"]),
    ("gemini 400 key", {"error": {
        "code": 400, "message": "API key not valid. Please pass a valid API key.",
        "status": "INVALID_ARGUMENT",
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                     "reason": "API_KEY_INVALID", "domain": "googleapis.com",
                     "metadata": {"service": "generativelanguage.googleapis.com"}}]}},
     "INVALID_ARGUMENT", "400", "API key not valid.", ["Please pass"]),
    ("gemini 400 field", {"error": {
        "code": 400, "message": f"Invalid JSON payload received. Unknown name \"{PROMPT}\" at "
                                "'contents[0].parts[0]': Cannot find field.",
        "status": "INVALID_ARGUMENT"}},
     "INVALID_ARGUMENT", "400", "Invalid JSON payload received.", ["ACME-CANARY"]),
    ("gemini 429", {"error": {
        "code": 429, "message": "You exceeded your current quota, please check your plan and "
                                "billing details. For more information on this error, head to: "
                                "https://ai.google.dev/gemini-api/docs/rate-limits.",
        "status": "RESOURCE_EXHAUSTED"}},
     "RESOURCE_EXHAUSTED", "429",
     "You exceeded your current quota, please check your plan and billing details.", []),
    ("openrouter 401", {"error": {"message": "No auth credentials found", "code": 401}},
     None, "401", "No auth credentials found", []),
    ("openrouter 400", {"error": {
        "message": "google/gemini-pro-vision-canary is not a valid model ID", "code": 400}},
     None, "400", "google/gemini-pro-vision-canary is not a valid model ID", []),
    ("openrouter 429 upstream", {"error": {
        "message": "Provider returned error", "code": 429,
        "metadata": {"raw": f"{PROMPT} was rate-limited upstream", "provider_name": "Together"}}},
     None, "429", "Provider returned error", ["ACME-CANARY"]),
    ("deepseek 401 masked", {"error": {
        "message": "Authentication Fails, Your api key: ****wuv6 is invalid",
        "type": "authentication_error", "param": None, "code": "invalid_request_error"}},
     "authentication_error", "invalid_request_error",
     "Authentication Fails, Your api key: [REDACTED] is invalid", ["wuv6"]),
    ("fireworks 401", {"error": {
        "object": "error", "type": "invalid_request_error",
        "message": "The API key fw_3ZabcDEF456ghiJKL789 you provided is invalid."}},
     "invalid_request_error", None, "The API key [REDACTED] you provided is invalid.",
     ["fw_3Zabc"]),
    ("a 12-character key", {"error": {
        "message": "Invalid API key: a1b2c3d4e5f6", "type": "invalid_request_error"}},
     "invalid_request_error", None, "Invalid API key: [REDACTED]", ["a1b2c3d4e5f6"]),
    ("a key ending", {"error": {
        "message": "The key ending in 9x2z was revoked", "type": "permission_error"}},
     "permission_error", None, "The key ending in [REDACTED] was revoked", ["9x2z"]),
]


@pytest.mark.parametrize("name, body, type_, code, message, gone", ERRORS,
                         ids=[row[0] for row in ERRORS])
def test_provider_http_errors(name, body, type_, code, message, gone):
    summary = provider_error_summary(error_fields(body))
    assert summary == {"error_type": type_, "error_code": code, "error_message": message}
    for text in gone:
        assert text not in json.dumps(summary)


@pytest.mark.parametrize("name, body, type_, code, message, gone", ERRORS,
                         ids=[row[0] for row in ERRORS])
def test_errors_inside_a_stream_get_the_same_treatment(name, body, type_, code, message, gone):
    state = StreamState()
    fields = error_fields(body)
    state.stream_error("wrapped_chunk", 5.0, fields.get("type"), fields.get("code"),
                       fields.get("message"))
    assert state.errors[0]["message"] == message


@pytest.mark.parametrize("text, kept", [
    ('model "llama3:70b" not found, try pulling it first', "model [quoted] not found, try pulling "
                                                         "it first"),
    ("value `secret prompt` rejected", "value [quoted] rejected"),
    ("the field “prompt text” is invalid", "the field [quoted] is invalid"),
    ("the model doesn't exist and isn't listed", "the model doesn't exist and isn't listed"),
    ("line one\nline two\x00", "line one line two"),
    ("Authentication failed for ****wuv6", "Authentication failed for [REDACTED]"),  # masked
    ("Authentication failed for sk-****", "Authentication failed for [REDACTED]"),
    ("", None), ("   ", None), (None, None), (42, None),
])
def test_message_rules(text, kept):
    assert provider_message(text) == kept


def test_a_long_sentence_is_cut_at_a_word():
    text = "The request " + "was refused because " * 20
    kept = provider_message(text)
    assert len(kept) <= MAX_MESSAGE + 2 and kept.endswith(" …")
    assert text.startswith(kept[:-2])


def test_a_second_sentence_is_never_kept():
    assert provider_message("Bad request. You said: hello there") == "Bad request."
