"""The client team's tests: each reproduces a failure seen in production against the real
client code, through streamtap's pytest plugin (no network, no API key)."""

import anthropic
import openai
import pytest

from client import ask_for_tool_call, ask_once_without_retry


@pytest.mark.streamtap(fault="reset; at=event:tool_input_delta:5")
def test_a_reset_mid_tool_call_is_retried(streamtap):
    call, failures = ask_for_tool_call(openai.OpenAI(max_retries=0))  # base URL from the env
    assert call == {"name": "get_weather", "arguments": {"city": "lorem ipsum dolor sit amet"}}
    assert failures == ["APIConnectionError"]
    first, second = streamtap.records()
    streamtap.assert_break(boundary="injected", phase="tool_input", record=first)
    assert first.stream.event_counts["tool_input_delta"] == 5
    assert second.outcome.boundary == "none" and second.outcome.phase == "complete"


def test_a_wrapped_error_chunk_surfaces_as_the_providers_error(streamtap):
    streamtap.fault("error_chunk; style=wrapped; type=server_error; at=event:tool_input_delta:2")
    with pytest.raises(openai.APIError) as raised:
        ask_for_tool_call(openai.OpenAI(max_retries=0))
    assert "streamtap injected error" in str(raised.value)
    record = streamtap.assert_break(boundary="injected", phase="tool_input")
    assert record.fault.action == "error_chunk"


@pytest.mark.streamtap(fault="close; at=event:tool_input_delta:3")
def test_a_clean_early_close_is_noticed(streamtap):
    call, failures = ask_for_tool_call(openai.OpenAI(max_retries=0))
    assert failures == ["StreamIncomplete"]  # the missing finish_reason was noticed
    assert call["name"] == "get_weather"
    first, second = streamtap.records()
    assert first.stream.finish_reason is None and first.fault.action == "close"
    assert second.stream.finish_reason == "tool_calls"


@pytest.mark.streamtap(fault="http_error; status=529; retry_after=0.05")
def test_an_overloaded_529_is_retried_by_the_anthropic_sdk(streamtap):
    client = anthropic.Anthropic(max_retries=2)  # base URL and a placeholder key from the env
    message = client.messages.create(model="claude-test", max_tokens=64,
                                     messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text.startswith("lorem ipsum")
    first, second = streamtap.records()
    assert first.response.status == 529 and first.response.headers["retry-after"] == "0.05"
    assert second.response.status == 200
    assert second.request.headers["x-stainless-retry-count"] == "1"


@pytest.mark.streamtap(fault="close; at=event:tool_input_delta:3")
def test_the_naive_client_is_caught(streamtap):
    call = ask_once_without_retry(openai.OpenAI(max_retries=0))
    assert call["arguments"].endswith("}"), "the tool call's arguments were cut short"
