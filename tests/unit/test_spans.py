"""The span view: a trace record as one OpenTelemetry span (pure, no SDK needed)."""

from __future__ import annotations

import json
import re

import pytest

from streamtap.diagnostics.record.schema import encode_record, record_from_dict
from streamtap.diagnostics.record.recorder import Ending, Recorder
from streamtap.diagnostics.trace_record import TraceRecord
from streamtap.diagnostics.views import genai_conventions as sc
from streamtap.diagnostics.views.spans import SpanError, otel_ids, record_to_span
from tests.streams import CANARY_ARG, CANARY_OUTPUT, chat_tool_stream, chat_text_stream
from tests.support import fixture, record_stream

STARTED = "2026-11-25T10:00:00.250Z"
STARTED_NS = 1_795_600_800_250_000_000


def stamped(record: dict, trace_id: str = "0123456789abcdef") -> dict:
    """A record as the proxy writes it: a real start time and a 16-hex trace id."""
    return {**record, "started_at": STARTED, "trace_id": trace_id, "session_id": "team-a",
            "message_id": "msg-7"}


def complete() -> dict:
    data = fixture("openai-chat", "text_complete.sse")
    blocks = [len(block) + 2 for block in data.split(b"\n\n")[:-1]]  # one SSE block a chunk
    return stamped(record_stream(data, path="/v1/chat/completions", chunks=blocks, t_step=10.0))


def reset_mid_tool_call() -> dict:
    return stamped(record_stream(
        # four of the five argument pieces: the JSON is not closed yet
        b"".join(chat_tool_stream(4, finish=False)), path="/v1/chat/completions",
        upstream="reset", t_step=10.0,
        error={"where": "upstream_body", "type": "ClientPayloadError", "message": None,
               "code": None, "cause": None}))


def wrapped_error() -> dict:
    return stamped(record_stream(fixture("openai-responses", "wrapped_error.sse"),
                                 path="/v1/responses", t_step=10.0))


def http_error() -> dict:
    return stamped(record_stream(fixture("json", "openai_429_rate_limit.json"),
                                 path="/v1/chat/completions", status=429,
                                 content_type="application/json"))


def test_a_complete_stream_is_a_chat_span_with_usage_and_no_error():
    span = record_to_span(record_from_dict(complete()), upstream_url="https://api.openai.com")
    a = span.attributes
    assert (span.name, span.kind, span.status, span.status_description) == \
        ("chat m", "CLIENT", "UNSET", None)
    assert a[sc.GEN_AI_OPERATION_NAME] == "chat" and a[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert a[sc.GEN_AI_REQUEST_MODEL] == "m" and a[sc.GEN_AI_REQUEST_STREAM] is True
    assert a[sc.GEN_AI_RESPONSE_ID] == "chatcmpl-fx1"
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert (a[sc.GEN_AI_USAGE_INPUT_TOKENS], a[sc.GEN_AI_USAGE_OUTPUT_TOKENS],
            a[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS],
            a[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS]) == (12, 3, 4, 0)
    assert (a[sc.SERVER_ADDRESS], a[sc.SERVER_PORT]) == ("api.openai.com", 443)
    assert a[sc.HTTP_RESPONSE_STATUS_CODE] == 200 and sc.ERROR_TYPE not in a
    assert (a[sc.ST_BOUNDARY], a[sc.ST_PHASE], a[sc.ST_EVIDENCE]) == \
        ("none", "complete", ("terminal_event",))
    assert a[sc.ST_SUMMARY].startswith("The openai stream completed normally")
    assert (a[sc.SESSION_ID], a[sc.ST_MESSAGE_ID], a[sc.ST_TRACE_ID]) == \
        ("team-a", "msg-7", "0123456789abcdef")
    assert a[sc.ST_FRAME_COUNT] == 7 and a[sc.ST_FRAME_EVENTS_DROPPED] == 0
    # Real times: the start is the record's, the end is start + duration.
    assert span.start_ns == STARTED_NS
    assert span.end_ns == STARTED_NS + 72_000_000  # 2 ms headers + 7 chunks 10 ms apart
    # First chunk came 12 ms after the request: seconds, as the convention says.
    assert a[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] == 0.012
    names = [event.name for event in span.events]
    assert names.count(sc.EVENT_FRAME) == 7
    assert [n for n in names if n != sc.EVENT_FRAME] == [
        "streamtap.first_byte", "streamtap.first_event", "streamtap.first_progress",
        "streamtap.last_progress", "streamtap.terminal", "streamtap.end"]
    assert [e.time_ns for e in span.events] == sorted(e.time_ns for e in span.events)
    first_frame = next(e for e in span.events if e.name == sc.EVENT_FRAME)
    assert first_frame.attributes[sc.FRAME_KIND] == "meta"
    assert first_frame.attributes[sc.FRAME_BYTES] > 100
    assert first_frame.time_ns == STARTED_NS + 12_000_000


def test_a_reset_mid_tool_call_is_an_error_span_that_says_so():
    span = record_to_span(record_from_dict(reset_mid_tool_call()))
    a = span.attributes
    assert span.status == "ERROR"
    assert span.status_description.startswith("The connection to openai was reset while the "
                                               "model was still writing the arguments")
    assert (a[sc.ST_BOUNDARY], a[sc.ST_PHASE], a[sc.ST_CONFIDENCE]) == \
        ("transport", "tool_input", "high")
    assert a[sc.ST_EVIDENCE] == ("upstream_reset",) and a[sc.ST_RETRYABLE] is True
    assert a[sc.ERROR_TYPE] == "transport:upstream_reset"
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)  # ended before its final event
    assert a[sc.ST_SUMMARY] == span.status_description
    assert sc.SERVER_ADDRESS not in a  # no route URL given: nothing guessed
    assert "streamtap.terminal" not in [e.name for e in span.events]
    kinds = [e.attributes[sc.FRAME_KIND] for e in span.events if e.name == sc.EVENT_FRAME]
    assert kinds == ["tool_input_start"] + ["tool_input_delta"] * 4


def test_a_wrapped_error_is_a_provider_error_span():
    span = record_to_span(record_from_dict(wrapped_error()))
    a = span.attributes
    assert span.name == "chat m" and span.status == "ERROR"
    assert (a[sc.ST_BOUNDARY], a[sc.ST_PHASE]) == ("provider_error", "text")
    assert a[sc.ST_EVIDENCE] == ("wrapped_chunk", "server_error")
    assert a[sc.ERROR_TYPE] == "provider_error:wrapped_chunk"
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)
    assert "sent an error inside the stream (server_error)" in span.status_description


def test_an_http_error_carries_its_status_and_no_stream_timing():
    span = record_to_span(record_from_dict(http_error()), upstream_url="http://127.0.0.1:9")
    a = span.attributes
    assert span.status == "ERROR" and a[sc.HTTP_RESPONSE_STATUS_CODE] == 429
    assert a[sc.ST_BOUNDARY] == "provider_error" and a[sc.ERROR_TYPE] == "provider_error:http_429"
    assert a[sc.ST_RETRYABLE] is True and sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in a
    assert (a[sc.SERVER_ADDRESS], a[sc.SERVER_PORT]) == ("127.0.0.1", 9)
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)


def test_frame_events_are_capped_head_and_tail():
    record = stamped(record_stream(b"".join(chat_text_stream(500)), path="/v1/chat/completions"))
    record["frames"] = [[float(i), 10 + i, "text_delta", 1] for i in range(503)]
    span = record_to_span(record_from_dict(record), frame_events=200)
    sizes = [e.attributes[sc.FRAME_BYTES] for e in span.events if e.name == sc.EVENT_FRAME]
    assert sizes == [10 + i for i in range(100)] + [10 + i for i in range(403, 503)]
    assert span.attributes[sc.ST_FRAME_EVENTS_DROPPED] == record["stream"]["frame_count"] - 200


def test_ids_are_stable_and_the_trace_id_is_searchable():
    assert otel_ids("0123456789abcdef") == (0x0123456789ABCDEF, 0x0123456789ABCDEF)
    trace, span = otel_ids("t")
    assert trace and span and otel_ids("t") == (trace, span) and trace < 2 ** 128
    assert record_to_span(record_from_dict(complete())).span_id == record_to_span(record_from_dict(complete())).span_id


def test_a_record_without_a_start_time_is_refused_clearly():
    with pytest.raises(SpanError, match="no usable started_at"):
        record_to_span(record_from_dict({**complete(), "started_at": "yesterday"}))


# -- the canary: nothing a record may not hold reaches a span ---------------------------------
SECRET_KEY = "sk-CANARY-KEY-0b1c2d3e4f5a6b7c8d9e"
PROMPT = "CANARY-PROMPT-3f1a"
REQUEST_ARG = "CANARY-REQARG-91c2"


def canary_record() -> TraceRecord:
    """A real Recorder fed a request with a key, a prompt, tool arguments and a streamed answer
    and tool call full of canaries; the stream is cut mid tool call."""
    recorder = Recorder(trace_id="fedcba9876543210", session_id="s", message_id="m",
                        started_at=STARTED, route="openai", provider="openai")
    body = json.dumps({"model": "gpt-test", "stream": True, "messages": [
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
            "name": "apply_patch", "arguments": REQUEST_ARG}}]}]}).encode()
    recorder.on_request("POST", f"/v1/chat/completions?key={SECRET_KEY}",
                        [("authorization", f"Bearer {SECRET_KEY}"), ("x-api-key", SECRET_KEY),
                         ("content-type", "application/json")], body)
    recorder.on_response(200, [("content-type", "text/event-stream"),
                               ("set-cookie", f"s={SECRET_KEY}")], 2.0)
    t = 2.0
    for chunk in chat_text_stream(3, done=False)[:-1] + chat_tool_stream(5, finish=False):
        t += 5
        recorder.feed(chunk, t)
    return recorder.finish(Ending(upstream="reset", upstream_end_ms=t, downstream_end_ms=t,
                                  downstream_status=200), t)


def span_strings(span) -> list[str]:
    """Every string the span carries: name, status, keys and string values, event names."""
    values = [span.name, span.status_description or ""]
    for attributes in [span.attributes] + [e.attributes for e in span.events]:
        for key, value in attributes.items():
            values.append(key)
            values += [item for item in (value if isinstance(value, tuple) else (value,))
                       if isinstance(item, str)]
    return values + [e.name for e in span.events]


def test_no_canary_and_nothing_but_the_record_reaches_the_span():
    record = canary_record()
    text = encode_record(record).decode()
    for canary in (SECRET_KEY, PROMPT, REQUEST_ARG, CANARY_OUTPUT, CANARY_ARG):
        assert canary not in text  # the record holds none (redaction's own tests prove why) ...
    span = record_to_span(record, upstream_url="https://api.openai.com")
    dumped = repr(span)
    assert "CANARY" not in dumped and "sk-" not in dumped  # ... and neither does the span
    # Every string in the span is a name streamtap defines, a whole string value of the record,
    # the configured upstream host, or made of those joined by " " or ":" (name, error.type).
    ours = {value for value in vars(sc).values() if isinstance(value, str)}
    ours |= {name for name, _ in sc.PHASE_EVENTS}

    def allowed(value: str) -> bool:
        if value in ours or json.dumps(value) in text or value == "api.openai.com":
            return True
        parts = re.split("[ :]", value)
        return len(parts) > 1 and all(allowed(part) for part in parts)

    strings = span_strings(span)
    assert "chat gpt-test" in strings and "transport:upstream_reset" in strings
    assert [value for value in strings if not allowed(value)] == []


def test_the_conventions_module_names_its_version():
    assert sc.SEMCONV_VERSION == "1.41.0"
    assert all(name.startswith("gen_ai.") for name in sc.USAGE_ATTRIBUTES.values())


def test_an_injected_fault_is_named_on_the_span():
    record = {**reset_mid_tool_call(), "fault": {"name": "cut-tools", "action": "reset",
                                                 "at": "event:tool_input_delta:3", "fired": True}}
    attributes = record_to_span(record_from_dict(record)).attributes
    assert (attributes[sc.ST_FAULT_NAME], attributes[sc.ST_FAULT_ACTION],
            attributes[sc.ST_FAULT_FIRED]) == ("cut-tools", "reset", True)
    assert sc.ST_FAULT_NAME not in record_to_span(record_from_dict(reset_mid_tool_call())).attributes
