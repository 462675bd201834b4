"""Gemini and Ollama through the proxy with httpx (no official SDK needed): the written record
carries the dialect's counts, terminal, usage and verdict, and none of the stream's content."""

import json

import httpx
import pytest

from streamtap.diagnostics.record.schema import record_as_dict
from streamtap.diagnostics.record.recorder import Ending, Recorder
from tests.fakeprovider import Scenario
from tests.proxyproc import new_session
from tests.support import fixture


def split_frames(data: bytes, separator: bytes) -> list[bytes]:
    parts = data.split(separator)
    return [part + separator for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def stream_through(fake, proxy, chunks, path, content_type, query=""):
    prefix = fake.add(Scenario(chunks, content_type=content_type, delay_s=0.001))
    session = new_session()
    with httpx.Client(timeout=10) as client:
        with client.stream("POST", proxy.url("fake") + prefix + path + query,
                           json={"contents": [{"parts": [{"text": "CANARY-PROMPT-e2e"}]}]},
                           headers={"x-streamtap-session": session,
                                    "x-goog-api-key": "AIzaCANARYKEY0123456789abcdef"}) as resp:
            body = b"".join(resp.iter_raw())
    assert body == b"".join(chunks)
    return proxy.record(session)


@pytest.mark.parametrize("form", ["sse", "json-array"])
def test_gemini_stream_record(fake, proxy, form):
    if form == "sse":
        chunks = split_frames(fixture("gemini", "text_complete.sse"), b"\r\n\r\n")
        record = stream_through(fake, proxy, chunks,
                                "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
                                "text/event-stream", "?alt=sse&key=CANARY-QUERY-KEY")
    else:
        data = fixture("gemini", "text_complete.json")
        chunks = [data[i:i + 200] for i in range(0, len(data), 200)]
        record = stream_through(fake, proxy, chunks,
                                "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
                                "application/json")
    assert record["dialect"] == "gemini"
    assert record["request"]["model"] == "gemini-2.5-flash"
    assert record["stream"]["terminal"] == "finishReason"
    assert record["stream"]["finish_reason"] == "STOP"
    assert record["stream"]["event_counts"]["reasoning_delta"] >= 1
    assert record["stream"]["event_counts"]["text_delta"] >= 1
    assert record["stream"]["usage"]["input"] == 31
    assert record["correlation"]["response_id"]
    assert record["outcome"]["boundary"] == "none" and record["outcome"]["phase"] == "complete"
    text = json.dumps(record)
    assert "CANARY" not in text and "AIza" not in text


def test_ollama_ndjson_record(fake, proxy):
    chunks = split_frames(fixture("ollama-ndjson", "chat_complete.ndjson"), b"\n")
    record = stream_through(fake, proxy, chunks, "/api/chat", "application/x-ndjson")
    assert record["dialect"] == "ollama-ndjson"
    assert record["stream"]["terminal"] == "done"
    assert record["stream"]["event_counts"]["reasoning_delta"] >= 1
    assert record["stream"]["usage"]["output"] > 0
    assert record["outcome"]["boundary"] == "none"
    assert "CANARY" not in json.dumps(record)


def test_connect_timeout_is_a_watchdog_before_the_response():
    # A connect timeout cannot be provoked on loopback, so the verdict is checked on the recorder:
    # the proxy reports it as Ending(watchdog_fired="connect") with the connect error.
    recorder = Recorder(trace_id="t", session_id="s", message_id=None, started_at="now",
                        route="openai", provider="openai")
    recorder.on_request("POST", "/v1/chat/completions", [], b'{"stream": true}')
    error = {"where": "upstream_connect", "type": "ConnectionTimeoutError",
             "message": "Connection timeout to host", "code": None, "cause": None}
    record = record_as_dict(recorder.finish(Ending(upstream="error", error=error, watchdog_fired="connect",
                                    downstream_status=502,
                                    watchdog={"connect_timeout_ms": 30000}), 30001.0))
    assert record["outcome"]["boundary"] == "watchdog"
    assert record["outcome"]["phase"] == "before_response"
    assert record["outcome"]["retryable"] is True
    assert "watchdog_connect" in record["outcome"]["evidence"]
