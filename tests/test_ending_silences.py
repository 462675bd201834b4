"""The silences around an ending, met by real clients through streamtap (issue 23, items 1-4):
a client that gave up is not a client that cancelled, a stall behind keep-alives, headers and
then nothing, a complete stream whose connection stayed open. Each record says what happened."""

import json
import subprocess
import time

import openai
import pytest

from tests.clients import keepalive_stream
from tests.fakeprovider import Scenario
from tests.proxyproc import new_session
from tests.streams import anthropic_text_stream, chat_text_stream
from tests.test_endings import NODE_READER
from tests.test_faults import error_chain, openai_client
from tests.test_sdk_clients import anthropic_client


def drain(stream) -> int:
    return sum(1 for _ in stream)


def seconds_said(record: dict, key: str) -> str:
    """A `close` duration as the summary writes it (`2.0 s`)."""
    return f"{record['close'][key] / 1000:.1f} s"


# -- item 1: a client that gave up is not a client that cancelled -------------------------------
def test_openai_sdk_read_timeout_on_a_stalled_stream_is_a_client_timeout(fake, proxy):
    prefix = fake.add(Scenario(chat_text_stream(3, done=False)[:3], ending="stall", stall_s=30))
    session = new_session()
    client = openai_client(proxy, prefix, session).with_options(timeout=2.0)
    with pytest.raises(openai.APITimeoutError):
        drain(client.chat.completions.create(model="gpt-test", messages=[], stream=True))
    record = proxy.record(session)
    outcome = record["outcome"]
    assert (outcome["boundary"], outcome["phase"]) == ("client_abort", "text")
    assert outcome["evidence"] == ["client_disconnected", "client_timeout"]
    assert record["close"]["by"] == "client"
    assert 1950 <= record["close"]["silence_ms"] <= 3000, record["close"]
    assert (f"after {seconds_said(record, 'silence_ms')} without a byte: its read timeout, not a "
            "cancel") in outcome["summary"]


def test_openai_sdk_stream_close_after_two_chunks_is_a_client_cancel(fake, proxy):
    prefix = fake.add(Scenario(chat_text_stream(40), delay_s=0.05))
    session = new_session()
    client = openai_client(proxy, prefix, session)
    stream = client.chat.completions.create(model="gpt-test", messages=[], stream=True)
    for _, _chunk in zip(range(2), stream):
        pass
    stream.close()  # a deliberate cancel while the model is still writing
    assert fake.last(prefix).client_left.wait(5), "the provider never saw its connection close"
    record = proxy.record(session)
    outcome = record["outcome"]
    assert (outcome["boundary"], outcome["phase"]) == ("client_abort", "text")
    assert outcome["evidence"] == ["client_disconnected", "client_cancel"]
    assert record["close"]["silence_ms"] < 1000, record["close"]
    assert "with bytes still flowing" in outcome["summary"]
    assert "a cancel, not a timeout" in outcome["summary"]


# -- item 2: stalled behind heartbeats ----------------------------------------------------------
STALL_WITH_BEATS = "stall; at=event:text_delta:2; duration_ms=3000; heartbeat_ms=500"


def test_keepalives_during_a_stall_keep_the_openai_sdk_timeout_from_firing(fake, proxy):
    prefix = fake.add(Scenario(chat_text_stream(4)))
    # Without keep-alives the same stall fires the SDK's 1.5 s read timeout ...
    silent = openai_client(proxy, prefix, new_session(), "stall; at=event:text_delta:2; "
                           "duration_ms=3000").with_options(timeout=1.5)
    with pytest.raises(openai.APITimeoutError):
        drain(silent.chat.completions.create(model="gpt-test", messages=[], stream=True))
    # ... with one every 0.5 s it never fires: the client waits out the whole stall.
    session = new_session()
    client = openai_client(proxy, prefix, session, STALL_WITH_BEATS).with_options(timeout=1.5)
    started = time.monotonic()
    drain(client.chat.completions.create(model="gpt-test", messages=[], stream=True))
    assert time.monotonic() - started >= 3.0
    record = proxy.record(session)
    outcome = record["outcome"]
    assert outcome["boundary"] == "injected" and "injected_stall" in outcome["evidence"]
    assert "heartbeats_only" in outcome["evidence"]
    assert record["stream"]["event_counts"]["keepalive"] == 5
    assert record["close"]["heartbeats_since_event"] == 5
    assert record["close"]["heartbeat_interval_ms"] == pytest.approx(500, abs=150)
    assert record["timeline"]["last_byte"] - record["timeline"]["last_event"] >= 2400
    assert "only keep-alives arrived (5, every 0.5 s) and no event: a client whose timer " \
           "resets on any byte never fires." in outcome["summary"]


def test_an_upstream_that_stalls_behind_keepalives_then_closes(fake, proxy):
    chunks = chat_text_stream(2, done=False)[:3] + keepalive_stream(6)
    prefix = fake.add(Scenario(chunks, delay_s=0.4))
    session = new_session()
    client = openai_client(proxy, prefix, session).with_options(timeout=1.5)
    drain(client.chat.completions.create(model="gpt-test", messages=[], stream=True))
    record = proxy.record(session)
    outcome = record["outcome"]
    assert outcome["boundary"] == "provider_close"
    assert "heartbeats_only" in outcome["evidence"]
    assert record["close"]["heartbeats_since_event"] == 6
    assert "only keep-alives arrived (6, every 0.4 s) and no event" in outcome["summary"]


# -- item 3: headers, then silence ---------------------------------------------------------------
def test_headers_then_silence_from_the_upstream_with_the_anthropic_sdk(fake, proxy):
    prefix = fake.add(Scenario([], ending="stall", stall_s=30))
    session = new_session()
    client = anthropic_client(proxy, prefix, session).with_options(timeout=2.0)
    # The headers came, so the SDK returned the stream; its iteration meets the read timeout
    # (raised as the transport's ReadTimeout, not wrapped in APITimeoutError).
    with pytest.raises(Exception) as raised:
        drain(client.messages.create(model="claude-test", max_tokens=5, messages=[],
                                     stream=True))
    assert any(name.endswith(("ReadTimeout", "APITimeoutError"))
               for name in error_chain(raised.value)), error_chain(raised.value)
    record = proxy.record(session)
    outcome = record["outcome"]
    timeline = record["timeline"]
    assert timeline["response_headers"] is not None
    assert timeline["first_byte"] is None and timeline["first_event"] is None
    assert outcome["boundary"] == "client_abort"
    assert outcome["evidence"] == ["client_disconnected", "client_timeout",
                                   "headers_then_silence"]
    gap = (record["close"]["at_ms"] - timeline["response_headers"]) / 1000
    assert (f"fake answered 200 at {timeline['response_headers'] / 1000:.1f} s and then nothing "
            f"came for {gap:.1f} s.") in outcome["summary"]


def test_an_injected_stall_at_headers_with_the_openai_sdk(fake, proxy):
    prefix = fake.add(Scenario(chat_text_stream(3)))
    session = new_session()
    client = openai_client(proxy, prefix, session, "stall; at=headers").with_options(timeout=2.0)
    with pytest.raises(openai.APITimeoutError):
        drain(client.chat.completions.create(model="gpt-test", messages=[], stream=True))
    record = proxy.record(session)
    outcome = record["outcome"]
    assert outcome["boundary"] == "injected"
    assert outcome["evidence"] == ["injected_stall", "client_gave_up", "headers_then_silence"]
    assert record["timeline"]["first_byte"] is None
    assert "The client got 200 at 0.0 s and then nothing came for 2." in outcome["summary"]


# -- item 4: complete, then parked --------------------------------------------------------------
def node_read_timed(node: str, url: str, headers: dict) -> tuple[dict, float]:
    started = time.monotonic()
    out = subprocess.run([node, str(NODE_READER), url, json.dumps(headers)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), time.monotonic() - started


def test_an_injected_hold_after_the_terminal_keeps_node_fetch_waiting(fake, proxy, node):
    prefix = fake.add(Scenario(chat_text_stream(3)))
    session = new_session()
    seen, waited = node_read_timed(node, proxy.url("fake") + prefix + "/v1/chat/completions", {
        "x-streamtap-session": session,
        "x-streamtap-fault": "hold; duration_ms=2500; heartbeat_ms=500"})
    assert seen["error"] is None and seen["status"] == 200
    assert waited >= 2.5  # fetch read to the end: the end came only with the close
    record = proxy.record(session)
    outcome = record["outcome"]
    assert outcome["ok"] is True and outcome["boundary"] == "none"
    assert outcome["evidence"] == ["terminal_event", "open_after_terminal"]
    assert record["stream"]["terminal"] == "[DONE]"
    assert record["close"]["by"] == "streamtap"
    assert 2400 <= record["close"]["open_after_terminal_ms"] <= 4000, record["close"]
    assert record["close"]["heartbeats_since_event"] == 4
    assert (f"the connection stayed open {seconds_said(record, 'open_after_terminal_ms')} more, "
            "with 4 keep-alives every 0.5 s, until streamtap (fault rule `header`) closed it; "
            "a client that waits for the close waited too.") in outcome["summary"]


def test_an_upstream_that_parks_after_message_stop(fake, proxy, node):
    chunks = anthropic_text_stream(2) + keepalive_stream(3)
    prefix = fake.add(Scenario(chunks, delay_s=0.4))
    session = new_session()
    seen, waited = node_read_timed(node, proxy.url("fake") + prefix + "/v1/messages",
                                   {"x-streamtap-session": session})
    assert seen["error"] is None
    record = proxy.record(session)
    outcome = record["outcome"]
    assert outcome["ok"] is True
    assert record["stream"]["terminal"] == "message_stop"
    assert outcome["evidence"] == ["terminal_event", "open_after_terminal"]
    assert record["close"]["by"] == "upstream"
    assert waited * 1000 >= record["close"]["open_after_terminal_ms"] >= 1100
    assert (f"stayed open {seconds_said(record, 'open_after_terminal_ms')} more, with 3 "
            "keep-alives every 0.4 s, until fake closed it") in outcome["summary"]


def test_readme_names_every_ending_code_threshold_and_client_default():
    from streamtap.diagnostics.verdict import silences
    from streamtap.diagnostics.verdict.client_defaults import CLIENT_DEFAULTS
    from tests.readme import section

    text = " ".join(section("What a trace record holds").split())
    for code in ("client_timeout", "client_cancel", "heartbeats_only", "headers_then_silence",
                 "open_after_terminal", "last_byte", "last_event", "close"):
        assert f"`{code}`" in text, code
    assert silences.CLIENT_TIMEOUT_MIN_SILENCE_MS == silences.LONG_STRETCH_MS == 1000
    assert silences.MIN_HEARTBEATS == 2 and "at least two of them" in text
    for row in CLIENT_DEFAULTS:
        assert f"{row.ms / 1000:g} s" in text, row
        assert row.setting == "timeout" or f"`{row.setting}`" in text, row
    faults = " ".join(section("Fault rules: actions, triggers, examples").split())
    assert "`hold`" in faults and "`heartbeat_ms`" in faults
