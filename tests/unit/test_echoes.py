"""The by-value layer (redaction/echoes.py) through the Recorder: credentials of the request removed
from every string of its record, runs of 8 the provider echoed from the body replaced by `[echo]`,
a body too large to check dropping the message, and what it must not eat (model and tool names,
the API's own field names, runs shorter than 8, route and dialect names)."""

import base64
import json

from streamtap.diagnostics.redaction.echoes import (ECHO, MESSAGE_DROPPED, TEXT_BUDGET,
                                                 RequestEchoes, credential_values)
from streamtap.diagnostics.record.recorder import Ending, Recorder
from streamtap.diagnostics.redaction.secrets import REDACTED
from tests.streams import sse

SHORT_KEY = "Zq81kfJ2"  # no known prefix, 8 characters: the pattern scrubber keeps it
PROMPT = "tell the quartermaster about the violet heron"


def record_of(answer: list[bytes], *, status: int = 200, body: dict | bytes | None = None,
              headers: list | None = None, path: str = "/v1/chat/completions",
              response_headers: list | None = None, complete: bool = True,
              route: str = "openai") -> dict:
    recorder = Recorder(trace_id="t", session_id="s", message_id=None, started_at="now",
                        route=route, provider=route)
    if body is None:
        body = {"model": "gpt-test-mini", "stream": True,
                "messages": [{"role": "user", "content": PROMPT}]}
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    recorder.on_request("POST", path, [("content-type", "application/json"), *(headers or [])],
                        raw, complete)
    content_type = "application/json" if status >= 400 else "text/event-stream"
    recorder.on_response(status, [("content-type", content_type), *(response_headers or [])],
                         2.0)
    for chunk in answer:
        recorder.feed(chunk, 3.0)
    return recorder.finish(Ending(upstream="complete", downstream_status=status,
                                  upstream_end_ms=4.0), 4.0)


def http_error(message: str, **fields) -> list[bytes]:
    return [json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                  **fields}}).encode()]


def test_an_unquoted_echo_of_the_prompt_becomes_echo():
    record = record_of(http_error(f"Could not process {PROMPT} as given"), status=400)
    assert record["error"]["error_message"] == f"Could not process {ECHO} as given"
    assert "quartermaster" not in json.dumps(record)


def test_an_echo_inside_a_stream_error_becomes_echo():
    record = record_of([sse({"error": {"message": f"stopped at: {PROMPT[:25]}",
                                       "type": "server_error"}})])
    assert record["stream"]["errors"][0]["message"] == f"stopped at: {ECHO}"


def test_a_short_unusual_key_is_removed_from_every_string_of_the_record():
    """By value, whatever its shape: in the message, in an error code, in a response header the
    allowlist keeps, in a path segment."""
    record = record_of(
        [json.dumps({"error": {"message": f"key {SHORT_KEY[:4]}-{SHORT_KEY} rejected",
                               "type": "invalid_request_error", "code": SHORT_KEY}}).encode()],
        status=401, headers=[("x-api-key", SHORT_KEY)],
        response_headers=[("x-request-id", f"req-{SHORT_KEY}")],
        path=f"/keys/{SHORT_KEY}/v1/chat/completions")
    text = json.dumps(record)
    assert SHORT_KEY not in text
    assert record["error"]["error_code"] == REDACTED
    assert record["response"]["headers"]["x-request-id"] == f"req-{REDACTED}"
    assert record["request"]["path"] == f"/keys/{REDACTED}/v1/chat/completions"


def test_credential_values_of_every_header_and_scheme():
    basic = base64.b64encode(b"someuser:hunter2hunter2").decode()
    values = credential_values([
        ("Authorization", "Bearer tok-aaaa1111"), ("x-api-key", "xak-bbbb2222"),
        ("api-key", "azk-cccc3333"), ("x-goog-api-key", "ggk-dddd4444"),
        ("Proxy-Authorization", f"Basic {basic}"), ("Cookie", "a=1; session=cookie-eeee5555"),
        ("user-agent", "not-a-credential-at-all")], "alt=sse&key=qry-ffff6666")
    for value in ("tok-aaaa1111", "xak-bbbb2222", "azk-cccc3333", "ggk-dddd4444", basic,
                  "hunter2hunter2", "cookie-eeee5555", "qry-ffff6666"):
        assert value in values
    assert "not-a-credential-at-all" not in values and "sse" not in values


def test_a_placeholder_key_is_not_removed_from_route_or_dialect_names():
    """`ollama` as the API key (what local servers document) is no secret: shorter than 8."""
    record = record_of(http_error("model not found"), status=404, route="ollama",
                       headers=[("authorization", "Bearer ollama")], path="/api/chat")
    assert record["route"] == "ollama" and record["provider"] == "ollama"


def test_a_message_that_repeats_nothing_keeps_its_words():
    message = "The server had an error while processing your request."
    assert record_of(http_error(message), status=500)["error"]["error_message"] == message


def test_what_the_record_keeps_anyway_and_the_apis_own_words_stay_readable():
    """The model and tool names are in the record already; `max_tokens` and `messages` are the
    API's field names, not the user's words; a shared run shorter than 8 is chance."""
    body = {"model": "gpt-test-mini", "max_tokens": 100000,
            "messages": [{"role": "assistant", "content": "the heron flew"}],
            "tools": [{"type": "function", "function": {"name": "lookup_weather",
                                                        "parameters": {"type": "object"}}}]}
    message = ("max_tokens: 100000 > 8192 for gpt-test-mini; messages: the final assistant "
               "turn calls lookup_weather with a heron")
    record = record_of(http_error(message), status=400, body=body)
    assert record["error"]["error_message"] == message


def test_non_ascii_echoes_are_found_by_characters():
    prompt = "東京の天気を詳しく教えてください"
    record = record_of(http_error(f"入力 {prompt[2:12]} は無効です"), status=400,
                       body={"model": "m", "messages": [{"role": "user", "content": prompt}]})
    assert record["error"]["error_message"] == f"入力 {ECHO} は無効です"


def test_a_body_too_large_to_check_drops_the_message_and_says_so():
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * (TEXT_BUDGET + 10)}]}
    record = record_of(http_error("nothing from the request here", code="too_big"), status=400,
                       body=big)
    error = record["error"]
    assert error["error_type"] == "invalid_request_error" and error["error_code"] == "too_big"
    assert error["error_message"] is None
    assert error["message_dropped"] == MESSAGE_DROPPED
    # a body streamed upstream, never held whole, cannot be checked either
    streamed = record_of([sse({"error": {"message": "boom", "type": "server_error"}})],
                         body=b'{"model": "m", "messages": [', complete=False)
    assert streamed["stream"]["errors"][0]["message"] is None
    assert streamed["stream"]["errors"][0]["message_dropped"] == MESSAGE_DROPPED


def test_a_body_that_is_not_json_is_looked_up_as_text():
    echoes = RequestEchoes(body=b"plain prompt text here")
    assert echoes.clean("you sent plain prompt text") == f"you sent {ECHO}"


def test_no_exchange_holds_its_request_body_while_the_record_waits():
    """Records wait in the store's queue when the disk is slow (up to its limit): every
    exchange lets its request body go at its end, one with a message to check after looking
    the message up, and the record still says what was echoed."""
    def exchange(status: int, answer: list[bytes]) -> Recorder:
        recorder = Recorder(trace_id="t", session_id="s", message_id=None, started_at="now",
                            route="openai", provider="openai")
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": PROMPT}]})
        recorder.on_request("POST", "/v1/chat/completions", [], body.encode())
        kind = "application/json" if status >= 400 else "text/event-stream"
        recorder.on_response(status, [("content-type", kind)], 1.0)
        for chunk in answer:
            recorder.feed(chunk, 2.0)
        recorder.on_exchange_end(Ending(upstream="complete", upstream_end_ms=3.0), 3.0)
        return recorder

    done = exchange(200, [sse({"choices": [{"index": 0, "delta": {"content": "hi"},
                                            "finish_reason": "stop"}]}), b"data: [DONE]\n\n"])
    assert not done.echoes.holds_body
    failed = exchange(400, http_error(f"bad input: {PROMPT}"))
    assert not failed.echoes.holds_body  # looked up already: the queue holds no request body
    record = failed.finish(Ending(upstream="complete", upstream_end_ms=3.0), 3.0)
    assert record["error"]["error_message"] == f"bad input: {ECHO}"


def test_a_message_not_looked_up_at_the_exchange_end_is_dropped_not_kept_unchecked():
    echoes = RequestEchoes.from_request([], "", json.dumps({"messages": [PROMPT]}).encode(), True)
    echoes.check_early([f"bad input: {PROMPT}"])
    assert not echoes.holds_body
    assert echoes.clean_all([f"bad input: {PROMPT}", f"another quote of {PROMPT}"]) == \
        [f"bad input: {ECHO}", None]
