"""The record's `close` and the marks the silences are measured from, as the Recorder folds them:
who closed, the silence before the close, keep-alives since the last real event (count and
interval), time open after the terminal event; `last_byte` apart from `last_event`."""

from __future__ import annotations

import pytest

from streamtap.diagnostics.record.schema import record_as_dict
from streamtap.diagnostics.record.recorder import Ending, Recorder
from streamtap.diagnostics.verdict.client_defaults import matching_defaults

TEXT = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
DONE = b"data: [DONE]\n\n"
BEAT = b": keepalive\n\n"


def record_of(timed_chunks: list[tuple[float, bytes]], end_ms: float, **ending) -> dict:
    recorder = Recorder(trace_id="t", session_id="s", message_id=None, started_at="now",
                        route="openai", provider="openai")
    recorder.on_request("POST", "/v1/chat/completions", [("content-type", "application/json")],
                        b'{"model":"m","stream":true}')
    recorder.mark("request_sent", 5.0)
    recorder.on_response(200, [("content-type", "text/event-stream")], 400.0)
    for t, chunk in timed_chunks:
        recorder.feed(chunk, t)
    ending = {"upstream": "complete", "upstream_end_ms": end_ms, "downstream_end_ms": end_ms,
              "downstream_status": 200,
              "downstream_bytes": sum(len(chunk) for _, chunk in timed_chunks)} | ending
    return record_as_dict(recorder.finish(Ending(**ending), end_ms))


def test_keepalives_after_the_last_event_are_counted_apart_from_it():
    beats = [(1000.0 + 500.0 * i, BEAT) for i in range(1, 9)]  # 1.5 s .. 5.0 s
    record = record_of([(1000.0, TEXT)] + beats, 5200.0, upstream="complete")
    assert record["timeline"]["last_event"] == 1000.0
    assert record["timeline"]["last_byte"] == 5000.0
    assert record["close"] == {"by": "upstream", "at_ms": 5200.0, "silence_ms": 200.0,
                               "heartbeats_since_event": 8, "heartbeat_interval_ms": 500.0,
                               "open_after_terminal_ms": None}
    assert "heartbeats_only" in record["outcome"]["evidence"]
    assert ("For 4.2 s after the last event only keep-alives arrived (8, every 0.5 s) and no "
            "event") in record["outcome"]["summary"]


def test_an_event_after_keepalives_starts_the_count_again():
    record = record_of([(1000.0, BEAT), (1500.0, BEAT), (2000.0, TEXT)], 2100.0)
    assert record["close"]["heartbeats_since_event"] == 0
    assert record["close"]["heartbeat_interval_ms"] is None
    assert "heartbeats_only" not in record["outcome"]["evidence"]


@pytest.mark.parametrize("upstream", ["complete", "reset", "truncated", "malformed", "error"])
def test_an_upstream_that_ended_by_itself_closed_the_connection(upstream):
    # `malformed` (broken chunked framing, passed on to the client) is the upstream's end too,
    # as the exchange's close_upstream counts it: one list, recorder.UPSTREAM_ENDED.
    record = record_of([(450.0, TEXT)], 900.0, upstream=upstream)
    assert record["close"]["by"] == "upstream"
    assert record_of([(450.0, TEXT)], 900.0, upstream="closed_by_proxy")["close"]["by"] is None


def test_a_client_that_left_after_a_silence_timed_out():
    record = record_of([(450.0, TEXT)], 2460.0, upstream="closed_by_proxy",
                       downstream="client_gone")
    assert record["close"]["by"] == "client"
    assert record["close"]["silence_ms"] == 2010.0
    assert record["outcome"]["evidence"] == ["client_disconnected", "client_timeout"]
    assert "after 2.0 s without a byte: its read timeout, not a cancel" in \
        record["outcome"]["summary"]


def test_headers_then_nothing_is_measured_from_the_headers():
    record = record_of([], 29_400.0, upstream="closed_by_proxy", downstream="client_gone")
    assert record["timeline"]["first_byte"] is None and record["timeline"]["last_byte"] is None
    assert record["close"]["silence_ms"] == 29_000.0  # since the headers, the last sign of life
    assert "headers_then_silence" in record["outcome"]["evidence"]
    assert "openai answered 200 at 0.4 s and then nothing came for 29.0 s." in \
        record["outcome"]["summary"]


def test_a_complete_stream_held_open_stays_a_success_with_a_warning():
    chunks = [(450.0, TEXT), (500.0, FINISH), (12_300.0, DONE), (27_300.0, BEAT),
              (42_300.0, BEAT)]
    record = record_of(chunks, 88_300.0)
    assert record["close"]["open_after_terminal_ms"] == 76_000.0
    assert record["close"]["heartbeats_since_event"] == 2
    assert record["outcome"]["ok"] is True
    assert record["outcome"]["evidence"] == ["terminal_event", "open_after_terminal"]
    assert record["outcome"]["summary"].endswith(
        "Complete at 12.3 s; the connection stayed open 76.0 s more, with 2 keep-alives every "
        "15.0 s, until openai closed it; a client that waits for the close waited too.")


@pytest.mark.parametrize("silence_ms, waiting_for, named", [
    (5_004.0, "body", ["httpx timeout"]),
    (300_020.0, "body", ["Node's fetch bodyTimeout"]),
    (300_020.0, "headers", ["Node's fetch headersTimeout"]),
    (600_300.0, "body", ["the openai Python SDK timeout", "the anthropic Python SDK timeout"]),
    (299_000.0, "body", []),  # a timer never fires before its limit
    (320_000.0, "body", []),  # nor long after it
    (2_004.0, "body", []),  # a timeout the client set itself: said, not named
])
def test_a_silence_names_the_client_default_it_matches(silence_ms, waiting_for, named):
    rows = matching_defaults(silence_ms, waiting_for)
    assert [f"{row.client} {row.setting}" for row in rows] == named
