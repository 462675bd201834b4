"""Exception fingerprints: the class, the errno NAME (never its number) and a message streamtap
builds; a library's own text, which quotes URLs and header lines, is never kept. And the verdict a
user reads for a name that does not resolve."""

import asyncio
import errno
import json
import socket

import aiohttp
import pytest
from aiohttp.client_reqrep import ConnectionKey
from aiohttp.http_exceptions import BadHttpMessage

from streamtap.diagnostics.record.schema import record_as_dict
from streamtap.diagnostics.record.recorder import Ending, Recorder
from streamtap.diagnostics.verdict.fingerprints import describe, errno_name, fingerprint

CANARY = "canary-query-key-5e6f"


def key(host: str) -> ConnectionKey:
    return ConnectionKey(host, 443, True, True, None, None, None)


def test_a_real_dns_failure_is_named_not_numbered():
    async def resolve():
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientConnectorError) as raised:
                await session.get(f"http://nonexistent.invalid/v1?api_key={CANARY}")
            return raised.value

    exc = asyncio.run(resolve())
    found = fingerprint("upstream_connect", exc)
    assert found["code"] == "EAI_NONAME"
    assert found["message"] == "the name nonexistent.invalid could not be resolved"
    assert found["cause"] == {"type": "gaierror", "code": "EAI_NONAME",
                              "message": "the upstream's host name could not be resolved"}
    assert CANARY not in json.dumps(found) and "-2" not in json.dumps(found)


@pytest.mark.parametrize("number, name", [
    (socket.EAI_NONAME, "EAI_NONAME"), (socket.EAI_AGAIN, "EAI_AGAIN"),
    (socket.EAI_FAIL, "EAI_FAIL"), (-999, "EAI_UNKNOWN"),
])
def test_getaddrinfo_numbers_become_names(number, name):
    exc = socket.gaierror(number, "whatever the C library says")
    assert errno_name(exc) == name
    wrapped = aiohttp.ClientConnectorDNSError(key("api.openai.com"), exc)
    assert errno_name(wrapped) == name
    assert describe(wrapped, name) == "the name api.openai.com could not be resolved"


@pytest.mark.parametrize("exc, code, message", [
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "ECONNREFUSED",
     "the connection was refused (nothing listens on that port)"),
    (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), "ECONNRESET",
     "the connection was reset by the peer"),
    (BrokenPipeError(errno.EPIPE, "Broken pipe"), "EPIPE",
     "the connection was closed while streamtap was writing (broken pipe)"),
    (OSError(errno.EHOSTUNREACH, "No route to host"), "EHOSTUNREACH", "the host is unreachable"),
    (OSError(9999, "odd"), "EUNKNOWN", "OSError (its text is not recorded: library messages can "
                                       "quote input)"),
    (ConnectionResetError(), None, "the connection was reset by the peer"),
    (asyncio.TimeoutError(), None, "timed out"),
    (aiohttp.ServerDisconnectedError(), None,
     "the upstream closed the connection before answering"),
    (aiohttp.ClientPayloadError(f"Response payload is not completed: {CANARY}"), None,
     "the response body ended early or was malformed"),
    (aiohttp.InvalidURL(f"http://h/x?api_key={CANARY}"), None, "the upstream URL is not valid"),
    (BadHttpMessage(f"Invalid header value char: x-api-key: {CANARY}"), None,
     "the HTTP message could not be parsed"),
    (KeyError(CANARY), None, "KeyError (its text is not recorded: library messages can quote "
                             "input)"),
])
def test_messages_are_built_by_streamtap(exc, code, message):
    found = fingerprint("upstream_read", exc)
    assert (found["code"], found["message"], found["type"]) == (code, message,
                                                                 type(exc).__name__)
    assert CANARY not in json.dumps(found)


def test_a_response_error_quoting_the_header_line_and_url_keeps_neither():
    """aiohttp's parser error for a bad upstream header quotes the line and the request URL."""
    inner = BadHttpMessage(f"Invalid header: b'X-Leak {CANARY}'")
    exc = aiohttp.ClientResponseError(None, (), status=400,
                                      message=f"{inner} for http://up/v1?api_key={CANARY}")
    exc.__cause__ = inner
    found = fingerprint("upstream_response", exc)
    assert found["message"] == "the upstream's response could not be parsed"
    assert found["cause"]["message"] == "the HTTP message could not be parsed"
    assert CANARY not in json.dumps(found)


def test_a_library_code_is_kept_only_as_a_code_name():
    exc = RuntimeError("x")
    exc.code = "UND_ERR_SOCKET"
    assert fingerprint("upstream_read", exc)["code"] == "UND_ERR_SOCKET"
    exc.code = f"not a code {CANARY}"
    assert fingerprint("upstream_read", exc)["code"] is None


def test_the_dns_verdict_reads_as_a_sentence():
    exc = aiohttp.ClientConnectorDNSError(key("api.openai.com"),
                                          socket.gaierror(socket.EAI_NONAME, "Name not known"))
    recorder = Recorder(trace_id="t", session_id="s", message_id=None, started_at="now",
                        route="openai", provider="openai")
    recorder.on_request("POST", "/v1/chat/completions", [], b"{}")
    ending = Ending(upstream="error", error=fingerprint("upstream_connect", exc),
                    downstream_status=502, upstream_end_ms=3.0)
    outcome = record_as_dict(recorder.finish(ending, 3.0))["outcome"]
    assert outcome["summary"] == (
        "streamtap could not connect to openai: the name api.openai.com could not be resolved "
        "(EAI_NONAME); nothing was streamed. Check the host in the route's URL and this "
        "machine's DNS.")
    assert outcome["evidence"][:2] == ["upstream_connect_error", "eai_noname"]
    assert (outcome["boundary"], outcome["phase"]) == ("transport", "before_response")


def test_a_refused_connection_verdict_names_the_errno():
    exc = aiohttp.ClientConnectorError(key("127.0.0.1"),
                                       ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    recorder = Recorder(trace_id="t", session_id="s", message_id=None, started_at="now",
                        route="local", provider="local")
    recorder.on_request("POST", "/v1/chat/completions", [], b"{}")
    outcome = record_as_dict(recorder.finish(Ending(upstream="error", error=fingerprint("upstream_connect", exc),
                                     upstream_end_ms=1.0), 1.0))["outcome"]
    assert outcome["summary"] == (
        "streamtap could not connect to local: the connection was refused (nothing listens on "
        "that port) (ECONNREFUSED); nothing was streamed.")
