"""Taking a response body off aiohttp's client parser (proxy/serve/body/tap.py).

The first test is the tripwire for aiohttp upgrades: it names every private piece of aiohttp the
module leans on, so an upgrade that moves one fails here, by name. The others run real aiohttp
requests against a loopback upstream that writes exact bytes, then the whole proxy against it.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import struct
import threading
import time

import aiohttp
import httpx
import pytest
from aiohttp.client_proto import ResponseHandler
from aiohttp.http_parser import HttpResponseParser
from aiohttp.streams import DataQueue, StreamReader

from streamtap.diagnostics.verdict.fingerprints import looks_like_reset
from streamtap.diagnostics.decode.chunked import ChunkedBody, LengthBody, UntilCloseBody
from streamtap.proxy.connection import aiohttp_hooks
from streamtap.proxy.serve.body import tap as bodytap
from streamtap.proxy.serve.upstream import Attempt, open_pool
from tests.proxyproc import ProxyProcess, new_session
from tests.clients import BackgroundRead
from tests.test_endings import node_read

# Every test here starts a server (the upstream aiohttp reads from) or the proxy.
pytestmark = pytest.mark.e2e

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
# Chunk extensions and a trailer: the framing a relay that re-frames would lose.
CHUNKS = b"7;note=x\r\ndata: a\r\n2\r\n\n\n\r\n"
LAST = b"0\r\nx-checksum: 1\r\n\r\n"
PAYLOAD = b"data: a\n\n"
RESET, CLOSE = b"<reset>", b"<close>"
# HOLD: keep the connection open after the answer until the peer closes it (at most 10 s).
# PAUSE inside an answer: 0.2 s between its parts (a head read before its body, say).
HOLD, PAUSE = b"<hold>", b"<pause>"


def test_the_aiohttp_internals_bodytap_relies_on_are_still_there():
    """If this fails after an aiohttp upgrade, proxy/connection/aiohttp_hooks.py must be brought
    up to date (its check() then says `fast_path: off`, and bodies take aiohttp's slower path)."""
    assert aiohttp_hooks.check().body is None
    connector = aiohttp.TCPConnector.__new__(aiohttp.TCPConnector)
    loop = asyncio.new_event_loop()
    try:
        connector = aiohttp.TCPConnector(loop=loop)
        factory = connector._factory
        assert isinstance(factory, functools.partial) and factory.func is ResponseHandler
        assert bodytap.install(connector)
        assert connector._factory.func is bodytap.TappedResponseHandler
        handler = connector._factory()
        for name in ("_payload", "_skip_payload", "_parser", "_read_timeout", "_buffer",
                     "_exception", "_upgraded"):
            assert hasattr(handler, name), f"ResponseHandler has no {name} any more"
        for name in ("set_response_params", "data_received", "connection_lost",
                     "_reschedule_timeout", "force_close", "resume_reading"):
            assert callable(getattr(ResponseHandler, name))
        # A watched body's failure waits until aiohttp's reader holds none of its bytes.
        assert hasattr(StreamReader(handler, 2 ** 16, loop=loop), "_buffer")
        queue = DataQueue(loop)
        queue.feed_data(("message", "payload"), 0)
        assert queue._buffer[-1][0][0] == "message"  # how _split_head finds the parsed head
        loop.run_until_complete(connector.close())
    finally:
        loop.close()


class RawUpstream:
    """A loopback HTTP/1.1 server that answers each request with the next of `answers`, exact
    bytes; an answer ending in `RESET` is followed by a TCP reset, `CLOSE` by a FIN, `HOLD` by
    waiting for the peer to close. The connection is closed after the last answer."""

    def __init__(self, *answers: bytes):
        self.answers = list(answers)
        self.connections = 0
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.answers:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                while self.answers:
                    request = b""
                    while b"\r\n\r\n" not in request:
                        data = conn.recv(65536)
                        if not data:
                            break
                        request += data
                    if not request:
                        break
                    answer = self.answers.pop(0)
                    *first, answer = answer.split(PAUSE)
                    for part in first:
                        conn.sendall(part)
                        time.sleep(0.2)
                    if answer.endswith(HOLD):
                        conn.sendall(answer[:-len(HOLD)])
                        conn.settimeout(10)
                        try:
                            while conn.recv(65536):
                                pass
                        except OSError:
                            pass
                        break
                    if answer.endswith(RESET):
                        conn.sendall(answer[:-len(RESET)])
                        time.sleep(0.05)
                        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                        struct.pack("ii", 1, 0))
                        break
                    if answer.endswith(CLOSE):
                        conn.sendall(answer[:-len(CLOSE)])
                        break
                    conn.sendall(answer)

    def close(self) -> None:
        self.server.close()


class Sink:
    def __init__(self):
        self.reads: list[bytes] = []
        self.ended = asyncio.get_running_loop().create_future()

    def data(self, data: bytes) -> None:
        self.reads.append(data)

    def lost(self, exc) -> None:
        if not self.ended.done():
            self.ended.set_result(exc)


async def send(pool, url: str, raw: bool, method: str = "GET") -> aiohttp.ClientResponse:
    return await pool.send(Attempt(), method, url, raw_body=raw)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_a_held_body_reaches_the_sink_as_sent_and_the_connection_is_reused():
    upstream = RawUpstream(HEAD + CHUNKS + LAST, b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    async def scenario():
        pool = open_pool(5, [])
        try:
            response = await send(pool, upstream.url + "/a", raw=True)
            handler = response.connection.protocol
            assert isinstance(handler, bodytap.TappedResponseHandler) and handler.holding()
            assert isinstance(handler.framing, ChunkedBody)
            sink = Sink()
            handler.attach(sink)
            while not b"".join(sink.reads).endswith(LAST):
                await asyncio.sleep(0.01)
            forward, payload = handler.framing.feed(b"".join(sink.reads))
            assert (forward, payload) == (CHUNKS, PAYLOAD)
            handler.body_done(handler.framing.extra)
            assert response.connection is None  # released: back in the pool
            # The next request on the same connection is aiohttp's own, parsed as usual.
            second = await send(pool, upstream.url + "/b", raw=False)
            assert await second.read() == b"ok"
        finally:
            await pool.close()

    run(scenario())
    upstream.close()
    assert upstream.connections == 1


def test_released_bytes_are_parsed_by_aiohttp_as_if_never_held():
    upstream = RawUpstream(HEAD + CHUNKS + LAST)

    async def scenario():
        pool = open_pool(5, [])
        try:
            response = await send(pool, upstream.url, raw=True)
            handler = response.connection.protocol
            await asyncio.sleep(0.05)  # the body arrives and is held
            assert handler.holding()
            handler.release()
            assert await response.read() == PAYLOAD
        finally:
            await pool.close()

    run(scenario())
    upstream.close()


@pytest.mark.parametrize("answer, framing", [
    (b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", LengthBody),
    (b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nhello" + CLOSE, UntilCloseBody),
    (b"HTTP/1.1 100 Continue\r\n\r\n" + HEAD + CHUNKS + LAST, ChunkedBody),
])
def test_the_framing_is_read_from_the_head_aiohttp_parsed(answer, framing):
    upstream = RawUpstream(answer)

    async def scenario():
        pool = open_pool(5, [])
        try:
            response = await send(pool, upstream.url, raw=True)
            handler = response.connection.protocol
            assert handler.holding() and type(handler.framing) is framing
            response.close()
        finally:
            await pool.close()

    run(scenario())
    upstream.close()


@pytest.mark.parametrize("method, answer", [
    ("HEAD", b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"),
    ("GET", b"HTTP/1.1 204 No Content\r\n\r\n"),
    ("GET", b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
])
def test_a_response_without_a_body_is_left_to_aiohttp(method, answer):
    upstream = RawUpstream(answer)

    async def scenario():
        pool = open_pool(5, [])
        try:
            response = await send(pool, upstream.url, raw=True, method=method)
            assert await response.read() == b""
            assert response.connection is None  # nothing held: released as aiohttp does
        finally:
            await pool.close()

    run(scenario())
    upstream.close()


@pytest.mark.parametrize("ending, reset", [(CLOSE, False), (RESET, True)])
def test_an_upstream_that_dies_inside_the_body_is_reported_to_the_sink(ending, reset):
    upstream = RawUpstream(HEAD + b"7\r\ndata" + ending)

    async def scenario():
        pool = open_pool(5, [])
        try:
            response = await send(pool, upstream.url, raw=True)
            handler = response.connection.protocol
            await asyncio.sleep(0.2)  # the end comes before the sink attaches: told all the same
            sink = Sink()
            handler.attach(sink)
            return await sink.ended, b"".join(sink.reads)
        finally:
            await pool.close()

    exc, reads = run(scenario())
    upstream.close()
    # The same error aiohttp's own reader gets: what the exchange fingerprints and mirrors.
    assert isinstance(exc, aiohttp.ClientPayloadError)
    assert "not completed" in str(exc)
    assert looks_like_reset(exc) is reset  # mirrored to the client as a reset, or a FIN
    assert reads == b"7\r\ndata"


# A good chunk, then (after a pause, so aiohttp has parsed the head first) another one with a
# malformed chunk-size line behind it, in one read; the upstream then keeps the connection open.
GOOD_CHUNK = b"7\r\ndata: a\r\n2\r\n\n\n\r\n"
MALFORMED_BODY = HEAD + PAUSE + GOOD_CHUNK + b"zz\r\n" + HOLD


def test_aiohttps_compiled_parser_is_the_one_in_use():
    """The hang below is the C parser's (the pure-Python one raises): prove it is the one
    loaded, so that the next test would hang without streamtap's own de-framer."""
    assert "AIOHTTP_NO_EXTENSIONS" not in os.environ
    assert HttpResponseParser.__module__ == "aiohttp._http_parser"


def test_a_watched_body_fails_at_a_malformed_chunk_size_line_after_the_bytes_before_it():
    """A body aiohttp's parser reads (raw=False: a fault rule is armed) is de-framed by the tap
    first: the reader gets the bytes before the malformation, then MalformedBodyError, at once,
    although the upstream keeps its connection open."""
    upstream = RawUpstream(MALFORMED_BODY)

    async def scenario():
        pool = open_pool(5, [])
        try:
            response = await send(pool, upstream.url, raw=False)
            read = response.content.readany
            received = b""
            started = time.monotonic()
            with pytest.raises(bodytap.MalformedBodyError) as raised:
                while True:
                    received += await asyncio.wait_for(read(), 3)
            return received, raised.value, time.monotonic() - started
        finally:
            await pool.close()

    received, error, elapsed = run(scenario())
    upstream.close()
    assert received == PAYLOAD  # the good chunk, before the error
    assert error.code == "MALFORMED_CHUNK_SIZE" and error.malformed == b"zz\r\n"
    assert elapsed < 1.0


# -- through the proxy ----------------------------------------------------------------------------
def raw_exchange(port: int, path: str, version: str = "1.1") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/{version}\r\nHost: x\r\nx-streamtap-session: "
                     f"{new_session()}\r\nConnection: close\r\n\r\n".encode())
        received = b""
        while data := sock.recv(65536):
            received += data
    return received


def test_the_client_gets_the_upstreams_own_chunks_extensions_included(tmp_path):
    upstream = RawUpstream(HEAD + CHUNKS + LAST)
    proxy = ProxyProcess(tmp_path, {"raw": upstream.url})
    try:
        received = raw_exchange(proxy.port, "/raw/v1/chat/completions")
    finally:
        proxy.stop()
        upstream.close()
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    # Byte for byte, but for the last chunk: streamtap's server writes its own (no trailer).
    assert body == CHUNKS + b"0\r\n\r\n"


def test_an_http10_client_gets_the_payload_unframed_and_a_close(tmp_path):
    upstream = RawUpstream(HEAD + CHUNKS + LAST)
    proxy = ProxyProcess(tmp_path, {"raw": upstream.url})
    try:
        session = new_session()
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
            sock.sendall(f"GET /raw/v1/chat/completions HTTP/1.0\r\nHost: x\r\n"
                         f"x-streamtap-session: {session}\r\n\r\n".encode())
            received = b""
            while data := sock.recv(65536):  # ends: the proxy closes an HTTP/1.0 answer
                received += data
        record = proxy.record(session)
    finally:
        proxy.stop()
        upstream.close()
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head.lower()
    assert body == PAYLOAD
    assert record["downstream"]["ended"] == "complete"
    assert record["stream"]["bytes"] == len(PAYLOAD) and record["stream"]["frame_count"] == 1
    assert record["downstream"]["bytes"] == len(PAYLOAD)


def test_an_exchange_that_closes_a_held_body_still_tells_aiohttp_the_connection_ended():
    """Lost while held, the end is kept back for the exchange; closing instead of taking the
    body must still end aiohttp's connection bookkeeping (its `closed` future)."""
    upstream = RawUpstream(HEAD + CHUNKS + CLOSE)

    async def scenario():
        pool = open_pool(5, [])
        try:
            response = await send(pool, upstream.url, raw=True)
            handler = response.connection.protocol
            closed = handler.closed
            await asyncio.sleep(0.2)  # the upstream's FIN arrives while the body is held
            assert handler.holding() and not closed.done()
            response.close()
            await asyncio.wait_for(closed, 5)
        finally:
            await pool.close()

    run(scenario())
    upstream.close()


@pytest.mark.parametrize("fault", [None, "close; at=event:text_delta:99"],
                         ids=["relayed", "fault-armed"])
def test_a_malformed_chunk_size_line_fails_the_client_as_it_would_directly(tmp_path, node,
                                                                           fault):
    """Node's fetch and httpx meet the same bytes through streamtap as directly, and fail the same
    way, at once, although the upstream keeps the connection open. With a fault rule armed the
    body takes aiohttp's (C) parser, which alone would wait on that line."""
    upstream = RawUpstream(*[MALFORMED_BODY] * 4)
    proxy = ProxyProcess(tmp_path, {"raw": upstream.url})
    path = "/v1/chat/completions"
    session = new_session()
    headers = {"x-streamtap-session": session, **({"x-streamtap-fault": fault} if fault else {})}
    try:
        direct = node_read(node, upstream.url + path)
        started = time.monotonic()
        proxied = node_read(node, proxy.url("raw") + path, headers)
        elapsed = time.monotonic() - started
        record = proxy.record(session)
        direct_httpx = BackgroundRead(upstream.url + path)
        direct_httpx.join()
        proxied_httpx = BackgroundRead(proxy.url("raw") + path, headers)
        proxied_httpx.join()
    finally:
        proxy.stop()
        upstream.close()
    assert direct["error"]["cause"]["code"] == "HPE_INVALID_CHUNK_SIZE"
    assert proxied == direct  # status, bytes before the error, the error and its cause
    assert elapsed < 5
    assert isinstance(direct_httpx.error, httpx.RemoteProtocolError)
    assert "illegal chunk header" in str(direct_httpx.error)
    assert type(proxied_httpx.error) is type(direct_httpx.error)
    assert str(proxied_httpx.error) == str(direct_httpx.error)
    assert proxied_httpx.received == direct_httpx.received
    assert record["error"]["where"] == "upstream_read"
    assert record["error"]["code"] == "MALFORMED_CHUNK_SIZE"
    outcome = record["outcome"]
    assert outcome["boundary"] == "transport"
    assert outcome["evidence"][:2] == ["upstream_malformed", "malformed_chunk_size"]
    assert "malformed_framing_passed_on" in outcome["evidence"]
    assert "broke on a malformed chunk-size line" in outcome["summary"]
    assert "closed mid-body" not in outcome["summary"]
    assert record["downstream"]["ended"] == "aborted"
    assert record["stream"]["bytes"] == record["downstream"]["bytes"] == len(PAYLOAD)
