"""diagnostics/dialects/errorframes.py: the exact bytes streamtap injects or replays as a
provider's error, per dialect, and what each dialect reads back from them (type, code, message)."""

from __future__ import annotations

import json

import pytest

from streamtap.diagnostics.dialects.errorframes import (DEFAULT_MESSAGE, body_error_frame,
                                                          error_body, native_error_frame,
                                                          wrapped_error_frame)
from streamtap.diagnostics.redaction.messages import provider_message
from tests.support import record_stream

PATHS = {"openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses",
         "anthropic-messages": "/v1/messages",
         "gemini": "/v1beta/models/m:streamGenerateContent", "ollama-ndjson": "/api/chat"}


def test_default_message():
    assert DEFAULT_MESSAGE == "streamtap injected error"


# -- the gateway's wrapped shape ------------------------------------------------------------------
def test_wrapped_frame_defaults_per_framing():
    sse = (b'data: {"error":{"code":"","message":"streamtap injected error",'
           b'"type":"server_error"},"request_id":""}\n\n')
    assert wrapped_error_frame("openai-chat") == sse
    assert wrapped_error_frame("anthropic-messages") == sse
    assert wrapped_error_frame("gemini") == sse.replace(b"\n", b"\r\n")
    assert wrapped_error_frame("ollama-ndjson") == (
        b'{"error": {"code": "", "message": "streamtap injected error", "type": "server_error"}, '
        b'"request_id": ""}\n')


def test_wrapped_frame_takes_type_code_and_message():
    assert wrapped_error_frame("openai-chat", "rate_limit_error", 429, "slow down") == (
        b'data: {"error":{"code":429,"message":"slow down","type":"rate_limit_error"},'
        b'"request_id":""}\n\n')
    # a code of 0 is a code, not a missing one
    assert b'"code":0,' in wrapped_error_frame("openai-chat", code=0)


# -- each dialect's own in-stream error -----------------------------------------------------------
@pytest.mark.parametrize("dialect, expected", [
    ("anthropic-messages",
     b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
     b'"message":"streamtap injected error"}}\n\n'),
    ("openai-responses",
     b'event: error\ndata: {"type":"error","code":"server_error",'
     b'"message":"streamtap injected error","param":null,"sequence_number":0}\n\n'),
    ("gemini",
     b'data: {"error":{"code":503,"message":"streamtap injected error","status":"UNAVAILABLE"}}'
     b'\r\n\r\n'),
    ("ollama-ndjson", b'{"error": "streamtap injected error"}\n'),
    ("openai-chat",
     b'data: {"error":{"message":"streamtap injected error","type":"server_error","param":null,'
     b'"code":null}}\n\n'),
    ("sse",
     b'data: {"error":{"message":"streamtap injected error","type":"server_error","param":null,'
     b'"code":null}}\n\n'),
])
def test_native_frame_defaults(dialect, expected):
    assert native_error_frame(dialect) == expected


def test_native_frame_takes_type_code_message_and_sequence_number():
    assert native_error_frame("anthropic-messages", "api_error", None, "boom") == (
        b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"boom"}}\n\n')
    assert native_error_frame("openai-responses", code="rate_limit_exceeded", message="m",
                              sequence_number=7) == (
        b'event: error\ndata: {"type":"error","code":"rate_limit_exceeded","message":"m",'
        b'"param":null,"sequence_number":7}\n\n')
    assert native_error_frame("gemini", "INTERNAL", 500, "m") == (
        b'data: {"error":{"code":500,"message":"m","status":"INTERNAL"}}\r\n\r\n')
    assert native_error_frame("openai-chat", "invalid_request_error", 0, "m") == (
        b'data: {"error":{"message":"m","type":"invalid_request_error","param":null,'
        b'"code":0}}\n\n')
    assert native_error_frame("ollama-ndjson", message="m") == b'{"error": "m"}\n'


# -- what the dialects read back from them --------------------------------------------------------
def _errors(dialect: str, frame: bytes) -> tuple[list[dict], dict]:
    content_type = "application/x-ndjson" if dialect == "ollama-ndjson" else "text/event-stream"
    record = record_stream(frame, path=PATHS[dialect], content_type=content_type)
    assert record["dialect"] == dialect
    errors = [{k: e[k] for k in ("shape", "type", "code", "message")}
              for e in record["stream"]["errors"]]
    return errors, record["outcome"]


@pytest.mark.parametrize("dialect, shape, type, code", [
    ("anthropic-messages", "error_event", "overloaded_error", None),
    ("openai-responses", "error_event", None, "server_error"),
    ("gemini", "wrapped_chunk", "UNAVAILABLE", "503"),
    ("ollama-ndjson", "ndjson_error", None, None),
    ("openai-chat", "wrapped_chunk", "server_error", None),
])
def test_every_dialect_reads_its_native_error(dialect, shape, type, code):
    errors, outcome = _errors(dialect, native_error_frame(dialect))
    assert errors == [{"shape": shape, "type": type, "code": code,
                       "message": "streamtap injected error"}]
    assert outcome["boundary"] == "provider_error" and outcome["evidence"][0] == shape


@pytest.mark.parametrize("dialect, shape", [
    ("anthropic-messages", "wrapped_chunk"), ("openai-responses", "wrapped_chunk"),
    ("gemini", "wrapped_chunk"), ("ollama-ndjson", "ndjson_error"),
    ("openai-chat", "wrapped_chunk"),
])
def test_every_dialect_reads_the_wrapped_error(dialect, shape):
    frame = wrapped_error_frame(dialect, "rate_limit_error", "rate_limit_exceeded", "slow down")
    errors, outcome = _errors(dialect, frame)
    assert errors == [{"shape": shape, "type": "rate_limit_error", "code": "rate_limit_exceeded",
                       "message": "slow down"}]
    assert outcome["boundary"] == "provider_error" and outcome["evidence"][0] == shape


# -- errors in shapes no dialect documents (issue 23) --------------------------------------------
DIALECTS = ("openai-chat", "openai-responses", "anthropic-messages", "gemini", "ollama-ndjson")
# A Responses gateway's error frame, verbatim: no `type`, no `error` member, only code and message.
PEER_CLOSED = {"code": "InternalError",
               "message": "peer closed connection without sending complete message body "
                          "(incomplete chunked read)"}


def test_a_body_frame_carries_the_json_text_as_given():
    body = '{"code":"InternalError","message":"m"}'
    assert body_error_frame("openai-responses", body) == b"data: " + body.encode() + b"\n\n"
    assert body_error_frame("openai-chat", body) == b"data: " + body.encode() + b"\n\n"
    assert body_error_frame("gemini", body) == b"data: " + body.encode() + b"\r\n\r\n"
    assert body_error_frame("ollama-ndjson", body) == body.encode() + b"\n"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_dialect_reads_a_code_and_message_frame_as_an_error(dialect):
    errors, outcome = _errors(dialect, body_error_frame(dialect, json.dumps(PEER_CLOSED)))
    assert errors == [{"shape": "error_frame_unknown_shape", "type": None,
                       "code": "InternalError", "message": PEER_CLOSED["message"]}]
    assert outcome["boundary"] == "provider_error"
    assert outcome["evidence"][:2] == ["error_frame_unknown_shape", "InternalError"]


@pytest.mark.parametrize("dialect, frame", [
    ("openai-responses", b'event: response.gateway_error\ndata: {"type":"response.gateway_error",'
                         b'"error":{"type":"server_error","code":"bad_gateway",'
                         b'"message":"m"}}\n\n'),
    ("anthropic-messages", b'event: gateway_error\ndata: {"type":"gateway_error","error":'
                           b'{"type":"server_error","code":"bad_gateway","message":"m"}}\n\n'),
])
def test_an_unknown_event_carrying_an_error_member_is_an_error_not_an_unknown_type(dialect, frame):
    record = record_stream(frame, path=PATHS[dialect])
    assert [{k: e[k] for k in ("shape", "type", "code", "message")}
            for e in record["stream"]["errors"]] == [
        {"shape": "error_frame_unknown_shape", "type": "server_error", "code": "bad_gateway",
         "message": "m"}]
    assert record["stream"]["unknown_types"] == []
    assert record["outcome"]["evidence"][:2] == ["error_frame_unknown_shape", "server_error"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_unknown_shape_message_is_cut_like_every_provider_message(dialect):
    echo = {"code": 400, "message": 'bad input "my secret prompt", key sk-proj-abcdef1234567890XYZ'}
    errors, _ = _errors(dialect, body_error_frame(dialect, json.dumps(echo)))
    assert errors[0]["code"] == "400"
    assert errors[0]["message"] == provider_message(echo["message"])
    assert "secret prompt" not in errors[0]["message"] and "abcdef" not in errors[0]["message"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("body", [{"code": "x"}, {"message": "m"}, {"code": True, "message": "m"},
                                  {"code": "x", "message": {"text": "m"}}])
def test_half_an_error_is_no_error(dialect, body):
    errors, outcome = _errors(dialect, body_error_frame(dialect, json.dumps(body)))
    assert errors == [] and outcome["boundary"] != "provider_error"


# -- HTTP error bodies ------------------------------------------------------------------------------
@pytest.mark.parametrize("status, type", [
    (400, "invalid_request_error"), (401, "authentication_error"), (403, "permission_error"),
    (404, "not_found_error"), (413, "request_too_large"), (429, "rate_limit_error"),
    (500, "api_error"), (502, "api_error"), (503, "api_error"), (529, "overloaded_error"),
    (418, "api_error"),
])
def test_anthropic_error_body(status, type):
    assert error_body("anthropic-messages", status) == {
        "type": "error",
        "error": {"type": type, "message": f"streamtap injected error (HTTP {status})"},
        "request_id": "req_streamtap"}


@pytest.mark.parametrize("status, status_name", [
    (400, "INVALID_ARGUMENT"), (401, "UNAUTHENTICATED"), (403, "PERMISSION_DENIED"),
    (404, "NOT_FOUND"), (429, "RESOURCE_EXHAUSTED"), (500, "INTERNAL"), (503, "UNAVAILABLE"),
    (504, "DEADLINE_EXCEEDED"), (502, "UNKNOWN"),
])
def test_gemini_error_body(status, status_name):
    assert error_body("gemini", status) == {"error": {
        "code": status, "message": f"streamtap injected error (HTTP {status})",
        "status": status_name}}


@pytest.mark.parametrize("status, type, code", [
    (429, "rate_limit_exceeded", "rate_limit_exceeded"), (401, "invalid_request_error", None),
    (400, "invalid_request_error", None), (500, "server_error", None),
    (503, "server_error", None), (403, "server_error", None),
])
@pytest.mark.parametrize("dialect", ["openai-chat", "openai-responses", None])
def test_openai_error_body(dialect, status, type, code):
    assert error_body(dialect, status) == {"error": {
        "message": f"streamtap injected error (HTTP {status})", "type": type, "param": None,
        "code": code}}


def test_error_bodies_take_the_given_type_code_and_message():
    assert error_body("anthropic-messages", 429, "overloaded_error", message="m") == {
        "type": "error", "error": {"type": "overloaded_error", "message": "m"},
        "request_id": "req_streamtap"}
    assert error_body("gemini", 429, "INTERNAL", message="m") == {
        "error": {"code": 429, "message": "m", "status": "INTERNAL"}}
    assert error_body("ollama-ndjson", 500) == {"error": "streamtap injected error (HTTP 500)"}
    assert error_body("ollama-ndjson", 500, message="m") == {"error": "m"}
    assert error_body("openai-chat", 429, "t", "c", "m") == {
        "error": {"message": "m", "type": "t", "param": None, "code": "c"}}
    assert error_body("openai-chat", 500, code=0)["error"]["code"] == 0

