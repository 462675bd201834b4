"""The `json` dialect: a non-streamed reply (ids, usage, finish reason; never content) and every
provider's HTTP error body (status, type, code, scrubbed message, retryable)."""

from __future__ import annotations

import gzip
import json

import pytest

from streamtap.diagnostics.dialects import choose_dialect
from streamtap.diagnostics.dialects.json_body import JsonBody
from tests.support import fixture, record_stream

JSON = "application/json"
PATHS = {
    "openai": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/gemini-2.5-flash:generateContent",
    "ollama": "/api/chat",
    "openrouter": "/api/v1/chat/completions",
}


def reply(name: str, api: str, status: int = 200, **kwargs) -> dict:
    kwargs.setdefault("request", {"model": "m", "stream": False,
                                  "messages": [{"role": "user", "content": "CANARY-PROMPT-1c9e"}]})
    return record_stream(fixture("json", name), path=PATHS[api], content_type=JSON,
                         status=status, provider=api, **kwargs)


def test_json_replies_choose_the_json_dialect():
    for api, path in PATHS.items():
        if api != "gemini":
            assert choose_dialect(None, path, "application/json; charset=utf-8") is JsonBody
    assert choose_dialect(None, PATHS["gemini"], JSON) is JsonBody  # generateContent, not stream
    assert choose_dialect("openai-chat", "/v1/chat/completions", JSON) is JsonBody


# -- non-streamed replies ---------------------------------------------------------------------------

REPLIES = [
    # fixture, api, response id, usage, finish reason
    ("openai_chat.json", "openai", "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
     {"input": 19, "output": 10, "reasoning": 4, "cache_read": 3}, "stop"),
    ("openai_chat_tool_calls.json", "openai", "chatcmpl-tool123",
     {"input": 82, "output": 17}, "tool_calls"),
    ("openai_responses.json", "responses",
     "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
     {"input": 36, "output": 87, "reasoning": 64, "cache_read": 0}, "completed"),
    ("openai_responses_incomplete.json", "responses", "resp_incomplete01",
     {"input": 120, "output": 16, "reasoning": 16, "cache_read": 64}, "max_output_tokens"),
    ("anthropic.json", "anthropic", "msg_013Zva2CMHLNnXjNJJKqJ2EF",
     {"input": 2095, "output": 503, "cache_read": 1800, "cache_write": 12}, "end_turn"),
    ("gemini.json", "gemini", "mAitaLmkHPPlz7IPvtfUqQ4",
     {"input": 9, "output": 13, "reasoning": 108, "cache_read": 2}, "STOP"),
    ("ollama_chat.json", "ollama", None, {"input": 26, "output": 282}, "stop"),
]


@pytest.mark.parametrize("name, api, response_id, usage, finish", REPLIES,
                         ids=[row[0] for row in REPLIES])
def test_non_streamed_reply(name, api, response_id, usage, finish):
    rec = reply(name, api)
    stream, outcome = rec["stream"], rec["outcome"]
    assert rec["dialect"] == "json"
    assert rec["request"]["stream"] is False
    if response_id in LONG_OPENAI_IDS:  # see test_long_openai_response_ids_are_kept
        assert rec["correlation"]["response_id"] is not None
    else:
        assert rec["correlation"]["response_id"] == response_id
    assert stream["usage"] == usage
    assert stream["finish_reason"] == finish
    assert stream["terminal"] == "body"
    assert stream["event_counts"] == {"meta": 1, "usage": 1, "finish": 1}
    assert stream["errors"] == [] and stream["protocol_errors"] == {}
    assert stream["frame_count"] == 0 and stream["delta_keys"] == []
    assert rec["error"] is None
    assert (outcome["boundary"], outcome["phase"], outcome["ok"]) == ("none", "complete", True)
    assert outcome["retryable"] is None
    assert "CANARY" not in json.dumps(rec)


LONG_OPENAI_IDS = ("chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
                   "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b")


@pytest.mark.parametrize("name, api, response_id", [
    ("openai_chat.json", "openai", LONG_OPENAI_IDS[0]),
    ("openai_responses.json", "responses", LONG_OPENAI_IDS[1]),
])
def test_long_openai_response_ids_are_kept(name, api, response_id):
    assert reply(name, api)["correlation"]["response_id"] == response_id


def test_non_streamed_reply_whole_or_bytewise_is_the_same():
    whole = reply("anthropic.json", "anthropic")
    bytewise = reply("anthropic.json", "anthropic", chunks="bytewise")
    assert whole["stream"] == bytewise["stream"] and whole["outcome"] == bytewise["outcome"]


def test_gzip_encoded_reply_is_read_through():
    body = gzip.compress(fixture("json", "openai_chat.json"))
    rec = record_stream(body, path=PATHS["openai"], content_type=JSON, provider="openai",
                        headers=[("content-type", JSON), ("content-encoding", "gzip")],
                        chunks=[7, 20, 3], request={"model": "m", "stream": False})
    assert rec["stream"]["finish_reason"] == "stop"
    assert rec["stream"]["usage"]["input"] == 19
    assert rec["stream"]["bytes"] == len(body)
    assert rec["outcome"]["boundary"] == "none"


def test_reply_without_finish_reason_is_complete_with_low_confidence():
    rec = record_stream(b'{"object":"list","data":[]}', path="/v1/embeddings",
                        content_type=JSON, provider="openai", request={"model": "m"})
    assert rec["stream"]["terminal"] is None
    assert (rec["outcome"]["boundary"], rec["outcome"]["phase"]) == ("none", "complete")
    assert rec["outcome"]["confidence"] == "low"


# -- HTTP errors, as the providers write them ---------------------------------------------------------

ERRORS = [
    # fixture, api, status, error_type, error_code, retryable, message starts with
    ("openai_400_context.json", "openai", 400, "invalid_request_error",
     "context_length_exceeded", False, "This model's maximum context length"),
    ("openai_401.json", "openai", 401, "invalid_request_error", "invalid_api_key", False,
     "Incorrect API key provided: [REDACTED]"),
    ("openai_429_rate_limit.json", "openai", 429, "tokens", "rate_limit_exceeded", True,
     "Rate limit reached"),
    ("openai_429_quota.json", "openai", 429, "insufficient_quota", "insufficient_quota", False,
     "You exceeded your current quota"),
    ("openai_500.json", "openai", 500, "server_error", None, True, "The server had an error"),
    ("anthropic_400.json", "anthropic", 400, "invalid_request_error", None, False,
     "prompt is too long"),
    ("anthropic_401.json", "anthropic", 401, "authentication_error", None, False,
     "invalid x-api-key"),
    ("anthropic_429.json", "anthropic", 429, "rate_limit_error", None, True,
     "This request would exceed the rate limit"),
    ("anthropic_500.json", "anthropic", 500, "api_error", None, True, "Internal server error"),
    ("anthropic_529.json", "anthropic", 529, "overloaded_error", None, True, "Overloaded"),
    ("gemini_400.json", "gemini", 400, "INVALID_ARGUMENT", "400", False, "API key not valid"),
    ("gemini_401.json", "gemini", 401, "UNAUTHENTICATED", "401", False,
     "Request had invalid authentication credentials"),
    ("gemini_429.json", "gemini", 429, "RESOURCE_EXHAUSTED", "429", True,
     "Resource has been exhausted"),
    ("gemini_500.json", "gemini", 500, "INTERNAL", "500", True, "An internal error"),
    ("gemini_503.json", "gemini", 503, "UNAVAILABLE", "503", True, "The model is overloaded"),
    # a quoted span is dropped: 400 bodies quote the request (the prompt) the same way
    ("ollama_404.json", "ollama", 404, None, None, False, "model [quoted] not found"),
    ("ollama_500.json", "ollama", 500, None, None, True, "llama runner process has terminated"),
    ("openrouter_401.json", "openrouter", 401, None, "401", False, "No auth credentials found"),
    ("openrouter_429.json", "openrouter", 429, None, "429", True, "Rate limit exceeded"),
]


@pytest.mark.parametrize("name, api, status, error_type, error_code, retryable, message", ERRORS,
                         ids=[row[0] for row in ERRORS])
def test_http_error_body(name, api, status, error_type, error_code, retryable, message):
    # An error body is read as JSON even on a streaming route that asked for a stream.
    rec = reply(name, api, status=status, request={"model": "m", "stream": True})
    outcome, error = rec["outcome"], rec["error"]
    assert rec["dialect"] == "json"
    assert (outcome["boundary"], outcome["phase"]) == ("provider_error", "before_response")
    assert outcome["ok"] is False
    assert outcome["retryable"] is retryable
    assert f"http_{status}" in outcome["evidence"]
    assert str(status) in outcome["summary"] and api in outcome["summary"]
    assert error["status"] == status and error["where"] == "upstream_response"
    assert (error["error_type"], error["error_code"]) == (error_type, error_code)
    assert error["error_message"].startswith(message)
    assert len(error["error_message"]) <= 122
    # The error is the HTTP answer, not an error inside a stream.
    assert rec["stream"]["errors"] == []
    assert rec["stream"]["terminal"] is None and rec["stream"]["finish_reason"] is None


def test_openai_401_masked_key_is_scrubbed_everywhere():
    rec = reply("openai_401.json", "openai", status=401)
    dumped = json.dumps(rec)
    assert "sk-abc" not in dumped and "1234567890abcdef" not in dumped
    assert "[REDACTED]" in rec["error"]["error_message"]


def test_error_body_fields_other_than_type_code_message_are_not_kept():
    rec = reply("openrouter_429.json", "openrouter", status=429)
    dumped = json.dumps(rec)
    assert "user_2tT3KwXy8bP9QeR7sLmN4vJ6hA1" not in dumped
    assert "X-RateLimit" not in dumped
    rec = reply("anthropic_529.json", "anthropic", status=529)
    assert "req_011CSHoEeqs5C35K2UUqR7G2" not in json.dumps(rec)  # a body field, not a header


def test_long_error_message_is_capped():
    body = json.dumps({"error": {"message": "word " * 200, "type": "server_error"}}).encode()
    rec = record_stream(body, path=PATHS["openai"], content_type=JSON, status=500)
    # a short sentence at most, cut at a word and marked as cut
    assert rec["error"]["error_message"] == "word " * 23 + "word …"


def test_free_form_type_is_not_kept_as_a_token():
    body = json.dumps({"error": {"message": "m", "type": "CANARY words with spaces",
                                 "code": "CANARY: also words"}}).encode()
    rec = record_stream(body, path=PATHS["openai"], content_type=JSON, status=400)
    assert rec["error"]["error_type"] == rec["error"]["error_code"] == "<non-token>"
    assert "CANARY" not in json.dumps(rec)


# Every provider's error shape at every status the issue names: 429, 5xx and 529 are worth a
# retry, 400 and 401 are not, whatever the shape.
SHAPES = {
    "openai": lambda status, kind: {"error": {"message": "m", "type": kind, "param": None,
                                              "code": None}},
    "anthropic": lambda status, kind: {"type": "error", "error": {"type": kind, "message": "m"},
                                       "request_id": "req_1"},
    "gemini": lambda status, kind: {"error": {"code": status, "message": "m", "status": kind}},
    "ollama": lambda status, kind: {"error": "m"},
    "openrouter": lambda status, kind: {"error": {"code": status, "message": "m"}},
}
KINDS = {
    "openai": {400: "invalid_request_error", 401: "invalid_request_error", 429: "requests",
               500: "server_error", 529: "server_error"},
    "anthropic": {400: "invalid_request_error", 401: "authentication_error",
                  429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"},
    "gemini": {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED",
               500: "INTERNAL", 529: "UNAVAILABLE"},
    "ollama": dict.fromkeys((400, 401, 429, 500, 529)),
    "openrouter": dict.fromkeys((400, 401, 429, 500, 529)),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("status, retryable", [(429, True), (500, True), (529, True),
                                               (400, False), (401, False)])
def test_error_matrix(shape, status, retryable):
    body = json.dumps(SHAPES[shape](status, KINDS[shape][status])).encode()
    rec = record_stream(body, path=PATHS[shape], content_type=JSON, status=status,
                        provider=shape)
    outcome = rec["outcome"]
    assert (outcome["boundary"], outcome["phase"]) == ("provider_error", "before_response")
    assert outcome["retryable"] is retryable
    assert rec["error"]["status"] == status
    assert rec["error"]["error_type"] == KINDS[shape][status]
    assert rec["error"]["error_message"] == "m"


def test_error_body_with_a_non_json_content_type():
    rec = record_stream(fixture("json", "anthropic_529.json"), path=PATHS["anthropic"],
                        content_type="text/plain", status=529, provider="anthropic")
    assert rec["dialect"] == "json"
    assert rec["error"]["error_type"] == "overloaded_error"
    assert rec["outcome"]["retryable"] is True


def test_html_error_page_still_gives_the_status():
    rec = record_stream(b"<html><body><h1>502 Bad Gateway</h1></body></html>",
                        path=PATHS["openai"], content_type="text/html", status=502)
    assert rec["error"]["status"] == 502 and rec["error"].get("error_type") is None
    assert (rec["outcome"]["boundary"], rec["outcome"]["phase"]) == (
        "provider_error", "before_response")
    assert rec["outcome"]["retryable"] is True


def test_html_error_page_is_not_protocol_evidence():
    rec = record_stream(b"<html><body><h1>502 Bad Gateway</h1></body></html>",
                        path=PATHS["openai"], content_type="text/html", status=502)
    assert rec["stream"]["protocol_errors"] == {}
    assert rec["outcome"]["evidence"] == ["http_502"]


def test_http_error_record_always_has_the_provider_error_keys():
    rec = record_stream(b"", path=PATHS["openai"], content_type=JSON, status=503)
    assert {"error_type", "error_code", "error_message"} <= set(rec["error"])


# -- an error body inside a 200 ------------------------------------------------------------------------


def test_error_body_in_a_200_is_an_error_of_the_reply():
    body = json.dumps({"error": {"code": 502, "message": "Provider returned error"}}).encode()
    rec = record_stream(body, path=PATHS["openrouter"], content_type=JSON, status=200,
                        provider="openrouter")
    [error] = rec["stream"]["errors"]
    assert (error["shape"], error["code"], error["message"]) == (
        "wrapped_chunk", "502", "Provider returned error")
    assert rec["error"] is None  # not an HTTP error
    assert rec["outcome"]["boundary"] == "provider_error"
    assert rec["outcome"]["retryable"] is True


def test_failed_responses_object_in_a_200():
    body = json.dumps({"id": "resp_failed1", "object": "response", "status": "failed",
                       "error": {"code": "server_error", "message": "The model failed."},
                       "incomplete_details": None, "output": []}).encode()
    rec = record_stream(body, path=PATHS["responses"], content_type=JSON, provider="openai")
    assert rec["stream"]["errors"][0]["code"] == "server_error"
    assert rec["outcome"]["boundary"] == "provider_error"
    assert rec["outcome"]["retryable"] is True


def test_openai_org_id_in_a_rate_limit_message_is_scrubbed():
    body = json.dumps({"error": {
        "message": "Rate limit reached for gpt-4o in organization org-AbCdEfGhIjKlMnOpQrStUvWx "
                   "on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.",
        "type": "tokens", "param": None, "code": "rate_limit_exceeded"}}).encode()
    rec = record_stream(body, path=PATHS["openai"], content_type=JSON, status=429)
    assert rec["error"]["error_message"].startswith("Rate limit reached")
    assert "org-AbCdEfGhIjKlMnOpQrStUvWx" not in json.dumps(rec)
