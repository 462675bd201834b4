"""A recorded stream failure made repeatable by `streamtap repro`: this test serves it with
`streamtap replay` (the sample and repro.json next to this file) and checks that a client meets
the same ending the original did, at the same byte.

The client is the dialect's official Python SDK when it is installed (openai, anthropic), else
httpx. Edit `call` to drive your own client code instead, and `EXPECTED` to what it should do.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
MANIFEST = json.loads((HERE / "repro.json").read_text(encoding="utf-8"))
SAMPLE = json.loads((HERE / MANIFEST["sample"]).read_text(encoding="utf-8"))
READ_TIMEOUT_S = 2.0  # how long a client waits on a silent stream before it gives up

# What each client raises for each ending (a class name somewhere in the exception's class
# hierarchy; None: it raises nothing), measured with openai 3.57, anthropic 2.14 and httpx 0.28.
# `error_event`: the stream carried the provider's own error event (see expected_ending).
_STALL = {"openai": "APITimeoutError", "anthropic": "ReadTimeout", "httpx": "ReadTimeout"}
EXPECTED = {
    "openai": {"reset": "APIConnectionError", "truncated": "APIConnectionError",
               "no_response": "APIConnectionError", "http_error": "APIStatusError",
               "error_event": "APIError", "clean_close": None, "terminal": None},
    "anthropic": {"reset": "ReadError", "truncated": "RemoteProtocolError",
                  "no_response": "APIConnectionError", "http_error": "APIStatusError",
                  "error_event": "APIStatusError", "clean_close": None, "terminal": None},
    "httpx": {"reset": "ReadError", "truncated": "RemoteProtocolError",
              "no_response": "RemoteProtocolError", "http_error": "HTTPStatusError",
              "clean_close": None, "terminal": None},
}
for _client, _name in _STALL.items():  # the client's own read timeout ends a silent stream
    EXPECTED[_client].update(stalled=_name, client_gone=_name)


@pytest.fixture(scope="module")
def replay_url():
    """`streamtap replay` on this folder, on a free port: it serves the repro to any request of
    its dialect."""
    child = subprocess.Popen([sys.executable, "-m", "streamtap", "replay", str(HERE),
                              "--port", "0", "--ready-json"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = child.stdout.readline()
        if not line:
            pytest.fail(f"streamtap replay {HERE} did not start (exit {child.wait()})")
        yield json.loads(line)["url"]
    finally:
        child.terminate()
        child.wait(10)


def client_for(dialect: str) -> str:
    sdk = {"openai-chat": "openai", "openai-responses": "openai",
           "anthropic-messages": "anthropic"}.get(dialect)
    for name in (sdk, "httpx"):
        if name is None:
            continue
        try:
            __import__(name)
        except ImportError:
            continue
        return name
    pytest.skip("neither the dialect's SDK nor httpx is installed")


def call(client: str, url: str) -> int:
    """One request the way the client makes it, read to its end; the body bytes it read (-1 when
    the client does not tell)."""
    stream, dialect = MANIFEST["stream"], MANIFEST["dialect"]
    messages = [{"role": "user", "content": "repro"}]
    if client == "openai":
        import openai

        sdk = openai.OpenAI(base_url=url + "/v1", api_key="sk-repro", max_retries=0,
                            timeout=READ_TIMEOUT_S)
        if dialect == "openai-responses":
            reply = sdk.responses.create(model="repro", input="repro", stream=stream)
        else:
            reply = sdk.chat.completions.create(model="repro", messages=messages, stream=stream)
        if stream:
            for _ in reply:
                pass
        return -1
    if client == "anthropic":
        import anthropic

        sdk = anthropic.Anthropic(base_url=url, api_key="sk-repro", max_retries=0,
                                  timeout=READ_TIMEOUT_S)
        reply = sdk.messages.create(model="repro", max_tokens=16, messages=messages,
                                    stream=stream)
        if stream:
            for _ in reply:
                pass
        return -1
    import httpx

    received = 0
    with httpx.Client(timeout=httpx.Timeout(10.0, read=READ_TIMEOUT_S)) as http:
        with http.stream("POST", url + MANIFEST["request_path"],
                         json={"model": "repro", "stream": stream, "messages": messages}) as reply:
            for chunk in reply.iter_bytes():
                received += len(chunk)
            reply.raise_for_status()
    return received


def expected_ending(client: str) -> str:
    """The recorded ending, or `error_event` for an SDK when the stream carried the provider's
    error: the SDK raises on the event itself, whatever came after it (httpx sees only bytes)."""
    if client != "httpx" and SAMPLE["stream"].get("errors"):
        return "error_event"
    return MANIFEST["ending"]


def test_the_client_meets_the_recorded_ending(replay_url):
    client = client_for(MANIFEST["dialect"])
    ending = expected_ending(client)
    expected = EXPECTED[client][ending]
    try:
        received = call(client, replay_url)
    except Exception as exc:  # noqa: BLE001 - which exception is what the test checks
        names = [cls.__name__ for cls in type(exc).__mro__]
        assert expected is not None, (f"{client} raised {type(exc).__name__}: {exc}, but the "
                                      f"recorded stream ended `{ending}`, which it accepts")
        assert expected in names, (f"{client} raised {type(exc).__name__} for a `{ending}` "
                                   f"ending; expected {expected}")
        return
    assert expected is None, f"{client} raised nothing for a `{ending}` ending; expected {expected}"
    if received >= 0 and ending in ("clean_close", "terminal") and MANIFEST["bytes_exact"]:
        assert received == MANIFEST["byte_offset"], "the stream ends at the recorded byte"
