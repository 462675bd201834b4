"""In-band errors a client cannot see, end to end with real clients: an error in a frame no dialect
documents (issue 23, item 5) and an error on an SSE `error:` field line (issue 27). The client
ends without an error; the record says the provider sent one."""

import json

from tests.fakeprovider import Scenario
from tests.proxyproc import new_session
from tests.streams import chat_then_error_field, responses_text_stream, sse
from tests.test_endings import node_read
from tests.test_faults import openai_client

# A Responses gateway's error, verbatim: no `type`, no `error` member, only code and message.
PEER_CLOSED = {"code": "InternalError", "message": "peer closed connection without sending "
                                                   "complete message body (incomplete chunked "
                                                   "read)"}


def test_node_fetch_reads_the_error_field_stream_to_its_end_without_an_error(fake, proxy, node):
    chunks = chat_then_error_field()
    prefix = fake.add(Scenario(chunks))
    session = new_session()
    seen = node_read(node, proxy.url("fake") + prefix + "/v1/chat/completions",
                     {"x-streamtap-session": session})
    body = b"".join(chunks)
    assert seen == {"status": 200, "bytes": len(body), "error": None}  # every byte, no error
    record = proxy.record(session)
    outcome, stream = record["outcome"], record["stream"]
    assert (outcome["boundary"], outcome["phase"]) == ("provider_error", "text")
    assert outcome["evidence"] == ["error_frame_unknown_shape", "server_error",
                                   "sse_unknown_field"]
    assert stream["unknown_fields"] == {"error": 1}
    assert [(e["shape"], e["field"], e["code"]) for e in stream["errors"]] == [
        ("error_frame_unknown_shape", "error", "500")]
    assert stream["bytes"] == record["downstream"]["bytes"] == len(body)  # bytes untouched
    assert stream["frame_count"] == len(chunks) - 1  # the line was no event


def test_the_openai_sdk_sees_the_whole_answer_and_no_error(fake, proxy):
    chunks = chat_then_error_field(40_000)
    prefix = fake.add(Scenario(chunks))
    session = new_session()
    client = openai_client(proxy, prefix, session)
    received = list(client.chat.completions.create(model="gpt-test", messages=[], stream=True))
    assert len(received) == len(chunks) - 1  # no exception, and no event for the error line
    record = proxy.record(session)
    assert record["outcome"]["boundary"] == "provider_error"
    assert "a field clients ignore" in record["outcome"]["summary"]


def test_a_code_and_message_frame_in_a_responses_stream(fake, proxy):
    """The frame is no event the SDK knows and carries no `error` member: it raises nothing."""
    chunks = responses_text_stream(4, terminal=False) + [sse(PEER_CLOSED)]
    prefix = fake.add(Scenario(chunks))
    session = new_session()
    client = openai_client(proxy, prefix, session)
    events = list(client.responses.create(model="gpt-test", input="x", stream=True))
    assert events and events[-1].type != "response.completed"
    record = proxy.record(session)
    outcome = record["outcome"]
    assert (outcome["boundary"], outcome["phase"]) == ("provider_error", "text")
    assert outcome["evidence"] == ["error_frame_unknown_shape", "InternalError"]
    assert outcome["retryable"] is True
    assert record["stream"]["errors"][0]["message"] == PEER_CLOSED["message"]


def test_an_injected_body_reproduces_it(fake, proxy):
    prefix = fake.add(Scenario(responses_text_stream(4)))
    session = new_session()
    fault = f"error_chunk; at=event:text_delta:2; body={json.dumps(PEER_CLOSED)}"
    client = openai_client(proxy, prefix, session, fault)
    events = list(client.responses.create(model="gpt-test", input="x", stream=True))
    assert events and events[-1].type != "response.completed"
    record = proxy.record(session)
    assert record["outcome"]["boundary"] == "injected"
    assert record["fault"]["fired"] is True
    assert [(e["shape"], e["code"]) for e in record["stream"]["errors"]] == [
        ("error_frame_unknown_shape", "InternalError")]
