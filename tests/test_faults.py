"""Fault injection: the proof is a real client's error."""

import json
import subprocess
import sys

import anthropic
import httpx
import openai
import pytest

from tests.fakeprovider import Scenario
from tests.proxyproc import REPO, new_session
from tests.streams import (CANARY_ARG, anthropic_text_stream, chat_text_stream,
                           chat_tool_stream, responses_text_stream)
from tests.test_endings import node_read

TOOLS = [{"type": "function", "function": {"name": "apply_patch", "parameters": {}}}]


def openai_client(proxy, prefix: str, session: str, fault: str | None = None) -> openai.OpenAI:
    headers = {"x-streamtap-session": session}
    if fault:
        headers["x-streamtap-fault"] = fault
    return openai.OpenAI(base_url=proxy.url("fake") + prefix + "/v1", api_key="sk-test",
                         default_headers=headers, max_retries=0, timeout=10)


def error_chain(exc: BaseException | None) -> list[str]:
    """Class names down the cause chain (newer openai SDKs use an httpx fork, `httpx2`)."""
    names = []
    while exc is not None and len(names) < 8:
        names.append(f"{type(exc).__module__.split('.')[0]}.{type(exc).__name__}")
        exc = exc.__cause__ or exc.__context__
    return names


def drain_chat(client: openai.OpenAI, tools=None) -> list:
    stream = client.chat.completions.create(model="gpt-test", messages=[], stream=True,
                                            **({"tools": tools} if tools else {}))
    return list(stream)


@pytest.mark.parametrize("action", ["reset", "truncate"])
def test_cut_at_the_fifth_tool_input_delta_fails_node_fetch(fake, proxy, node, action):
    prefix = fake.add(Scenario(chat_tool_stream(8)))
    session = new_session()
    result = node_read(node, proxy.url("fake") + prefix + "/v1/chat/completions",
                       {"x-streamtap-session": session,
                        "x-streamtap-fault": f"{action}; at=event:tool_input_delta:5"})
    assert result["error"]["name"] == "TypeError" and result["error"]["message"] == "terminated"
    assert result["error"]["cause"]["code"] in ("UND_ERR_SOCKET", "ECONNRESET")
    record = proxy.record(session)
    assert record["outcome"]["boundary"] == "injected" and record["outcome"]["ok"] is False
    assert record["outcome"]["phase"] == "tool_input"
    assert record["fault"]["fired"] is True and record["fault"]["source"] == "header"
    assert record["fault"]["frames_before"] == 6  # the role chunk and five argument deltas
    assert record["stream"]["event_counts"]["tool_input_delta"] == 5
    assert "after the 5th tool_input_delta" in record["outcome"]["summary"]


def test_injected_reset_raises_what_a_real_reset_raises_in_the_openai_sdk(fake, proxy):
    real = fake.add(Scenario(chat_tool_stream(5, finish=False), ending="reset"))
    full = fake.add(Scenario(chat_tool_stream(8)))
    with pytest.raises(Exception) as direct:
        drain_chat(openai.OpenAI(base_url=fake.url + real + "/v1", api_key="sk-test",
                                 max_retries=0))
    session = new_session()
    with pytest.raises(Exception) as injected:
        drain_chat(openai_client(proxy, full, session, "reset; at=event:tool_input_delta:5"),
                   TOOLS)
    assert type(injected.value) is type(direct.value)
    # The SDK wraps it (APIConnectionError); the transport errors underneath are the same.
    assert error_chain(injected.value) == error_chain(direct.value)
    assert any(name.endswith(".ReadError") for name in error_chain(injected.value))
    record = proxy.record(session)
    assert record["stream"]["tool_calls"][0]["name"] == "apply_patch"
    assert record["stream"]["tool_calls"][0]["completed"] is False


def test_a_reset_after_the_last_argument_piece_says_the_arguments_had_arrived_whole(fake, proxy):
    """Five pieces that are the whole arguments, then the cut: the SDK's caller already holds
    arguments that parse; only the finish that would let it run the tool never came."""
    prefix = fake.add(Scenario(chat_tool_stream(5)))
    session = new_session()
    held = ""
    stream = openai_client(proxy, prefix, session, "reset; at=event:tool_input_delta:5").chat \
        .completions.create(model="gpt-test", messages=[], stream=True, tools=TOOLS)
    with pytest.raises(openai.APIConnectionError):
        for chunk in stream:
            for call in chunk.choices[0].delta.tool_calls or []:
                held += call.function.arguments or ""
    assert json.loads(held)["patch"]  # what the client held parses
    record = proxy.record(session)
    [call] = record["stream"]["tool_calls"]
    assert (call["arg_chunks"], call["arg_bytes"], call["arg_parsed"], call["completed"]) == (
        5, len(held.encode()), True, False)
    assert (f"when the arguments of tool call `apply_patch` had arrived whole ({len(held)} bytes "
            "in 5 chunks) but the call was never finalized: no finish_reason, so no tool ran. "
            "This is not a real failure.") in record["outcome"]["summary"]
    assert CANARY_ARG not in json.dumps(record)


@pytest.mark.parametrize("action", ["close", "drop_terminal"])
def test_silent_early_ends_on_chat_pass_the_openai_sdk_but_not_the_record(fake, proxy, action):
    prefix = fake.add(Scenario(chat_text_stream(5)))
    session = new_session()
    chunks = drain_chat(openai_client(proxy, prefix, session, action))  # no error: the silent case
    record = proxy.record(session)
    assert record["stream"]["terminal"] is None  # the client never saw [DONE]
    assert record["outcome"]["boundary"] == "injected"
    assert record["fault"]["action"] == action
    if action == "drop_terminal":
        assert chunks[-1].choices[0].finish_reason == "stop"
        assert record["outcome"]["phase"] == "after_finish"
    else:
        assert record["outcome"]["phase"] == "text"


@pytest.mark.parametrize("action", ["close", "drop_terminal"])
def test_silent_early_ends_on_responses(fake, proxy, action):
    prefix = fake.add(Scenario(responses_text_stream(4)))
    session = new_session()
    client = openai_client(proxy, prefix, session, action)
    events = list(client.responses.create(model="gpt-test", input="x", stream=True))
    assert events and events[-1].type != "response.completed"
    record = proxy.record(session)
    assert record["stream"]["terminal"] is None
    assert record["outcome"]["boundary"] == "injected"


def test_wrapped_error_chunk_on_responses_raises_api_error(fake, proxy):
    prefix = fake.add(Scenario(responses_text_stream(4)))
    session = new_session()
    client = openai_client(proxy, prefix, session,
                           "error_chunk; style=wrapped; type=server_error; "
                           "message=gateway went away")
    with pytest.raises(openai.APIError):
        list(client.responses.create(model="gpt-test", input="x", stream=True))
    record = proxy.record(session)
    assert [error["shape"] for error in record["stream"]["errors"]] == ["wrapped_chunk"]
    assert record["stream"]["errors"][0]["type"] == "server_error"
    assert record["outcome"]["boundary"] == "injected"


def test_native_error_event_on_anthropic_raises(fake, proxy):
    prefix = fake.add(Scenario(anthropic_text_stream(4)))
    session = new_session()
    client = anthropic.Anthropic(base_url=proxy.url("fake") + prefix, api_key="sk-ant-test",
                                 max_retries=0, default_headers={
                                     "x-streamtap-session": session,
                                     "x-streamtap-fault": "error_chunk; at=event:text_delta:2"})
    with pytest.raises(anthropic.APIStatusError) as raised:
        with client.messages.stream(model="claude-test", max_tokens=10, messages=[]) as stream:
            for _ in stream:
                pass
    assert "overloaded_error" in str(raised.value)
    record = proxy.record(session)
    assert record["stream"]["errors"][0]["shape"] == "error_event"
    assert record["stream"]["errors"][0]["type"] == "overloaded_error"
    assert record["outcome"]["phase"] == "text"


def test_stall_until_the_client_gives_up(fake, proxy):
    prefix = fake.add(Scenario(chat_text_stream(5)))
    session = new_session()
    with pytest.raises(httpx.ReadTimeout):
        with httpx.Client(timeout=httpx.Timeout(5, read=1.0)) as client:
            with client.stream("POST", proxy.url("fake") + prefix + "/v1/chat/completions",
                               json={"stream": True},
                               headers={"x-streamtap-session": session,
                                        "x-streamtap-fault": "stall"}) as resp:
                for _ in resp.iter_raw():
                    pass
    record = proxy.record(session)
    assert record["outcome"]["boundary"] == "injected"
    assert "injected_stall" in record["outcome"]["evidence"]
    assert "client_gave_up" in record["outcome"]["evidence"]
    assert record["downstream"]["ended"] == "client_gone"


def test_http_529_makes_the_anthropic_sdk_retry(fake, proxy):
    prefix = fake.add(Scenario(anthropic_text_stream(2)))
    session = new_session()
    client = anthropic.Anthropic(base_url=proxy.url("fake") + prefix, api_key="sk-ant-test",
                                 max_retries=2, default_headers={
                                     "x-streamtap-session": session,
                                     "x-streamtap-fault": "http_error; status=529; "
                                                          "retry_after=0.05"})
    with pytest.raises(anthropic.APIStatusError) as raised:
        client.messages.create(model="claude-test", max_tokens=10, messages=[], stream=True)
    assert raised.value.status_code == 529
    records = proxy.records(session, 3)
    retries = [int(r["request"]["headers"]["x-stainless-retry-count"]) for r in records]
    assert retries == [0, 1, 2]
    assert all(r["outcome"]["boundary"] == "injected" for r in records)
    assert all(r["response"]["status"] == 529 for r in records)
    assert not fake.seen[prefix.rsplit("/", 1)[-1]]  # the upstream was never contacted


@pytest.mark.parametrize("at, upstream_calls", [("request", 0), ("headers", 3)])
def test_reset_at_request_or_headers_is_a_reset_before_any_response_byte(fake, proxy, node, at,
                                                                         upstream_calls):
    """As an upstream reset before its response: fetch rejects (`fetch failed`), and the SDK
    retries the connection error, which a reset after a 200 and its headers never gets."""
    real = fake.add(Scenario([], ending="reset_before_response"))
    prefix = fake.add(Scenario(chat_text_stream(3)))
    fault = f"reset; at={at}"
    direct = node_read(node, fake.url + real + "/v1/chat/completions")
    fetched = node_read(node, proxy.url("fake") + prefix + "/v1/chat/completions",
                        {"x-streamtap-fault": fault})
    assert fetched["status"] is None and direct["status"] is None
    assert (fetched["error"]["message"], fetched["error"]["cause"]["code"]) == \
        (direct["error"]["message"], direct["error"]["cause"]["code"]) == \
        ("fetch failed", "ECONNRESET")
    name = prefix.rsplit("/", 1)[-1]
    before = len(fake.seen[name])
    session = new_session()
    client = openai.OpenAI(base_url=proxy.url("fake") + prefix + "/v1", api_key="sk-test",
                           max_retries=2, timeout=10, default_headers={
                               "x-streamtap-session": session, "x-streamtap-fault": fault})
    with pytest.raises(openai.APIConnectionError):
        drain_chat(client)
    assert len(fake.seen[name]) - before == upstream_calls  # 3 at `headers`: 1 + 2 retries
    records = proxy.records(session, 3)
    assert sorted(r["request"]["headers"]["x-stainless-retry-count"] for r in records) == \
        ["0", "1", "2"]
    for record in records:
        assert record["downstream"] == {"status": None, "ended": "aborted", "bytes": 0}
        assert record["fault"]["fired"] is True and record["fault"]["at"] == at
        assert record["outcome"]["boundary"] == "injected"
        assert "injected_reset" in record["outcome"]["evidence"]


def test_seeded_probability_repeats_its_pattern(fake, proxy):
    prefix = fake.add(Scenario(chat_text_stream(1)))
    url = proxy.url("fake") + prefix + "/v1/chat/completions"
    patterns = []
    for _ in range(2):
        session = new_session()
        rule = {"name": "coin", "action": "http_error", "status": 503, "probability": 0.5,
                "seed": 42, "times": 0, "match": {"session": session}}
        assert httpx.post(proxy.url("_streamtap/faults"), json=rule).status_code == 201
        statuses = [httpx.post(url, json={"stream": True},
                               headers={"x-streamtap-session": session}).status_code
                    for _ in range(20)]
        patterns.append(statuses)
        httpx.delete(proxy.url("_streamtap/faults/coin"))
    assert patterns[0] == patterns[1]
    assert 3 <= patterns[0].count(503) <= 17  # a real coin, not always or never


def test_api_arming_times_and_removal(fake, proxy):
    prefix = fake.add(Scenario(chat_text_stream(1)))
    url = proxy.url("fake") + prefix + "/v1/chat/completions"
    session = new_session()
    created = httpx.post(proxy.url("_streamtap/faults"), json={
        "name": "once", "action": "http_error", "status": 429, "match": {"session": session}})
    assert created.status_code == 201 and created.json()["faults"][0]["times"] == 1
    listed = httpx.get(proxy.url("_streamtap/faults")).json()["faults"]
    assert [rule["name"] for rule in listed] == ["once"]
    headers = {"x-streamtap-session": session}
    assert httpx.post(url, json={}, headers=headers).status_code == 429
    assert httpx.post(url, json={}, headers=headers).status_code == 200  # disarmed after once
    assert httpx.delete(proxy.url("_streamtap/faults/once")).status_code == 200
    assert httpx.delete(proxy.url("_streamtap/faults/once")).status_code == 404
    assert httpx.get(proxy.url("_streamtap/faults")).json()["faults"] == []


@pytest.mark.parametrize("rule, field", [
    ({"action": "explode"}, "action"),
    ({"action": "reset", "at": "event:tool_delta:5"}, "at"),
    ({"action": "reset", "probability": 2}, "probability"),
    ({"action": "http_error", "status": 200}, "status"),
    ({"action": "reset", "tmes": 2}, "tmes"),
])
def test_bad_rules_are_rejected_naming_the_field(proxy, rule, field):
    resp = httpx.post(proxy.url("_streamtap/faults"), json=rule)
    assert resp.status_code == 400
    assert resp.json()["error"]["field"] == field
    assert field in resp.json()["error"]["message"]


def test_malformed_fault_header_is_a_400_naming_the_problem(fake, proxy):
    prefix = fake.add(Scenario(chat_text_stream(1)))
    resp = httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions", json={},
                      headers={"x-streamtap-fault": "reset; at=soon"})
    assert resp.status_code == 400
    assert "unknown trigger `soon`" in resp.json()["error"]["message"]
    assert not fake.seen[prefix.rsplit("/", 1)[-1]]


def test_cli_arms_lists_and_clears(fake, proxy):
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "streamtap", "fault", *args,
                               "--proxy", proxy.url()], capture_output=True, text=True,
                              timeout=30, cwd=REPO)

    added = cli("add", "--name", "cli-reset", "--action", "reset",
                "--at", "event:text_delta:2", "--match", "route=fake", "--set", "mid_frame=true")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["faults"][0]["mid_frame"] is True
    listed = json.loads(cli("list").stdout)["faults"]
    assert [rule["name"] for rule in listed] == ["cli-reset"]
    bad = cli("add", "--action", "reset", "--at", "later")
    assert bad.returncode == 1 and "field `at`" in bad.stderr
    assert cli("clear").returncode == 0
    assert json.loads(cli("list").stdout)["faults"] == []


def test_delay_once_at_headers_and_throttle_slow_but_do_not_break(fake, proxy):
    import time

    prefix = fake.add(Scenario(chat_text_stream(5)))
    url = proxy.url("fake") + prefix + "/v1/chat/completions"
    for fault, at_least_s in (("delay; latency_ms=400", 0.4),
                              ("delay; at=first_progress; latency_ms=100; per_frame=true", 0.5),
                              ("throttle; at=headers; bytes_per_s=2000", 0.3)):
        session = new_session()
        started = time.monotonic()
        received, error = httpx_read_all(url, {"x-streamtap-session": session,
                                               "x-streamtap-fault": fault})
        elapsed = time.monotonic() - started
        assert error is None and received > 0
        assert elapsed >= at_least_s, (fault, elapsed)
        record = proxy.record(session)
        assert record["fault"]["fired"] is True
        assert record["outcome"]["boundary"] == "none"  # slowed, not broken
        assert record["stream"]["terminal"] == "[DONE]"


def httpx_read_all(url: str, headers: dict) -> tuple[int, Exception | None]:
    received = 0
    try:
        with httpx.Client(timeout=10) as client:
            with client.stream("POST", url, json={"stream": True}, headers=headers) as resp:
                for chunk in resp.iter_raw():
                    received += len(chunk)
    except httpx.HTTPError as exc:
        return received, exc
    return received, None


@pytest.mark.parametrize("fault", ["delay; at=terminal; latency_ms=50",
                                   "throttle; at=terminal; bytes_per_s=100000"])
def test_a_slowing_fault_at_the_terminal_still_delivers_it(fake, proxy, fault):
    # `terminal` marks where the terminal frame starts; only drop_terminal may leave it out.
    prefix = fake.add(Scenario(chat_text_stream(3)))
    session = new_session()
    client = openai_client(proxy, prefix, session, fault)
    chunks = drain_chat(client)
    assert chunks[-1].choices[0].finish_reason == "stop"
    record = proxy.record(session)
    assert record["fault"]["fired"] is True
    assert record["stream"]["terminal"] == "[DONE]"
    assert record["outcome"]["boundary"] == "none"
