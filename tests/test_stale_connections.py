"""Issue 11 class 6: a pooled upstream connection the far side closed while idle is streamtap's
problem, not the provider's. Before a byte of the request was written on a reused connection,
streamtap retries once on a fresh one and records the retry; after bytes were sent, never."""

from __future__ import annotations

import asyncio
import json
import select
import socket
import threading
import time

import aiohttp
import httpx
import pytest

from streamtap.proxy.serve.upstream import (KEEPALIVE_TIMEOUT_S, STALE_REASON, Attempt,
                                            open_pool)
from tests.proxyproc import ProxyProcess, new_session

BODY = (b'data: {"id":"chatcmpl-stale","object":"chat.completion.chunk","choices":[{"index":0,'
        b'"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
RESPONSE = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"content-length: %d\r\n\r\n" % len(BODY)) + BODY


class IdleClosingUpstream:
    """An HTTP/1.1 keep-alive server that closes a connection idle for `idle_s`, as provider
    front ends do (after tens of seconds; here 50 ms to keep the test short). Like a real server
    it decides to close only when nothing has arrived: request bytes that reach it first reset
    the idle timer. `mode` "answer" answers each request; "swallow" reads a request whole and
    closes without answering (a provider that received the request), from the second request
    on (so that one comes on a reused connection)."""

    def __init__(self, idle_s: float | None = 0.05, mode: str = "answer"):
        self.idle_s = idle_s
        self.mode = mode
        self.requests = 0
        self.connections = 0
        self.idle_closes = 0
        self.transports: list[asyncio.Transport] = []
        self.open: set[_Connection] = set()

    def close_idle(self) -> None:
        """Close every connection idle right now (the idle timer firing for all of them)."""
        for connection in list(self.open):
            connection._idle()

    def protocol(self) -> asyncio.Protocol:
        return _Connection(self)

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(self.protocol, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]


class _Connection(asyncio.Protocol):
    def __init__(self, upstream: IdleClosingUpstream):
        self.upstream = upstream
        self.buffer = b""
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.upstream.connections += 1
        self.upstream.transports.append(transport)
        self.upstream.open.add(self)
        self._arm()

    def _arm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.upstream.idle_s is not None:
            self.timer = asyncio.get_running_loop().call_later(self.upstream.idle_s, self._idle)

    def _idle(self) -> None:
        """Close if still idle: bytes already here (or in the socket) are a request that came
        in time, which a server answers rather than drops."""
        sock = self.transport.get_extra_info("socket")
        if self.buffer or self.transport.is_closing() or select.select([sock], [], [], 0)[0]:
            self._arm()
            return
        self.upstream.idle_closes += 1
        # The FIN now, not on asyncio's next loop turn: a request sent after this sees it.
        sock.shutdown(socket.SHUT_WR)
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        self._arm()
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, _, rest = self.buffer.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if len(rest) < length:
                return
            self.buffer = rest[length:]
            self.upstream.requests += 1
            if self.upstream.mode == "swallow" and self.upstream.requests > 1:
                self.transport.close()
                return
            self.transport.write(RESPONSE)

    def connection_lost(self, exc) -> None:
        self.upstream.open.discard(self)
        if self.timer is not None:
            self.timer.cancel()


def serve_in_thread(upstream: IdleClosingUpstream) -> tuple[int, asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    port: list[int] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        port.append(loop.run_until_complete(upstream.start()))
        loop.run_forever()

    threading.Thread(target=run, daemon=True).start()
    deadline = time.monotonic() + 5
    while not port and time.monotonic() < deadline:
        time.sleep(0.01)
    return port[0], loop


# A long conversation: ~1.4 MB of JSON (under the 2 MiB streamtap holds whole), which keeps
# streamtap busy reading and summarising it well past the upstream's idle close 3 ms after the
# client's last byte: with ~0.5 MB an idle, fast machine sometimes wrote the request first, and
# the close then met a request in flight (a different race, which no client may retry).
LONG_REQUEST = {"model": "m", "stream": True,
                "messages": [{"role": "user", "content": "w" * 20} for _ in range(30_000)]}


# -- end to end: httpx through the proxy ------------------------------------------------------
@pytest.mark.e2e
def test_no_502_across_100_requests_when_the_upstream_closes_idle_connections(tmp_path):
    """After each answer the upstream's connection sits idle in streamtap's pool; the upstream
    closes it (its idle timeout firing) while streamtap is still reading the next request, a
    long one, so the close reaches streamtap after it took the connection from the pool and
    before it wrote a byte. With a wall-clock timer (50 ms, say) this moment comes only now and
    then, so the idle timeout is fired on cue: 3 ms after the client sent its last byte.
    Before the fix, most of the 100 requests got streamtap's 502 (`transport` /
    `before_response`, "Cannot write to closing transport")."""
    upstream = IdleClosingUpstream(idle_s=None)
    port, loop = serve_in_thread(upstream)
    proxy = ProxyProcess(tmp_path, {"up": f"http://127.0.0.1:{port}"})
    session = new_session()
    body = json.dumps(LONG_REQUEST).encode()

    def request_body():
        yield body
        # the client has handed over the whole request: the upstream's idle timer fires
        loop.call_soon_threadsafe(loop.call_later, 0.003, upstream.close_idle)

    statuses = []
    try:
        with httpx.Client(timeout=10) as client:
            for _ in range(100):
                response = client.post(proxy.url("up") + "/v1/chat/completions",
                                       content=request_body(),
                                       headers={"x-streamtap-session": session,
                                                "content-type": "application/json",
                                                "content-length": str(len(body))})
                statuses.append(response.status_code)
        records = proxy.records(session, 100)
    finally:
        proxy.stop()
        loop.call_soon_threadsafe(loop.stop)
    assert [status for status in statuses if status != 200] == []
    retried = [record for record in records if record["upstream_retry"]]
    assert len(retried) >= 25, "few requests met a stale connection: the race was not hit"
    for record in retried:
        assert record["upstream_retry"]["reason"] == STALE_REASON
        first_error = record["upstream_retry"]["first_error"]
        assert first_error["type"] in ("ClientOSError", "ServerDisconnectedError")
        assert first_error["cause"] is None or first_error["cause"]["type"] in (
            "ClientConnectionResetError", "StaleConnectionError")
        assert record["outcome"]["boundary"] == "none"
        assert "upstream_retry" in record["outcome"]["evidence"]
    assert all(record["upstream_retry"] is None for record in records if record not in retried)
    # every request reached the upstream exactly once: no retry sent a request twice
    assert upstream.requests == 100
    assert upstream.idle_closes >= 25  # the upstream really did close idle connections


# -- the pool itself, deterministic ---------------------------------------------------------------
def closing_on_reuse(upstream: IdleClosingUpstream, noticed: bool) -> aiohttp.TraceConfig:
    """The race made deterministic: the upstream closes the idle connection at the very moment
    the pool hands it out. `noticed`: the event loop reads the FIN before aiohttp writes (the
    transport is gone); else the FIN sits unread in the socket when the write comes."""
    config = aiohttp.TraceConfig()

    async def reused(session, ctx, params) -> None:
        for transport in upstream.transports:
            transport.get_extra_info("socket").shutdown(socket.SHUT_WR)
            transport.close()
        if noticed:
            await asyncio.sleep(0.02)

    config.on_connection_reuseconn.append(reused)
    return config


async def two_requests(upstream: IdleClosingUpstream, url: str, noticed: bool) -> tuple:
    pool = open_pool(5.0, [closing_on_reuse(upstream, noticed)])
    try:
        first = Attempt()
        response = await pool.send(first, "POST", url, data=b'{"stream":true}')
        assert await response.read() == BODY
        second = Attempt()
        try:
            response = await pool.send(second, "POST", url, data=b'{"stream":true}')
            outcome = await response.read()
        except aiohttp.ClientError as exc:
            outcome = exc
        return first, second, outcome, pool.retries
    finally:
        await pool.close()


@pytest.mark.parametrize("noticed, first_error", [
    (True, {"type": "ServerDisconnectedError", "cause": None}),
    (False, {"type": "ClientOSError", "cause": "StaleConnectionError"}),
])
@pytest.mark.e2e
def test_a_stale_reused_connection_is_retried_once_on_a_fresh_one(noticed, first_error):
    async def main():
        upstream = IdleClosingUpstream(idle_s=None)
        port = await upstream.start()
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        result = await two_requests(upstream, url, noticed)
        upstream.server.close()
        return upstream, result

    upstream, (first, second, outcome, retries) = asyncio.run(main())
    assert first.retry is None and first.tries == 1
    assert outcome == BODY
    assert second.tries == 2 and retries == 1
    assert second.retry["reason"] == STALE_REASON
    error = second.retry["first_error"]
    assert {"type": error["type"],
            "cause": error["cause"] and error["cause"]["type"]} == first_error
    # the stale try sent nothing: the upstream saw each request once, the retry on a new socket
    assert upstream.requests == 2 and upstream.connections == 2


@pytest.mark.e2e
def test_nothing_is_retried_once_request_bytes_were_sent():
    """On a reused connection the upstream read the whole request, then closed without
    answering: the provider may have started generating, so the failure stands."""
    async def main():
        upstream = IdleClosingUpstream(idle_s=None, mode="swallow")
        port = await upstream.start()
        url = f"http://127.0.0.1:{port}/v1/responses"
        pool = open_pool(5.0, [])
        first = Attempt()
        second = Attempt()
        try:
            response = await pool.send(first, "POST", url, data=b'{"stream":true}')
            assert await response.read() == BODY
            with pytest.raises(aiohttp.ServerDisconnectedError):
                await pool.send(second, "POST", url, data=b'{"stream":true}')
        finally:
            await pool.close()
            upstream.server.close()
        return upstream, second, pool.retries

    upstream, attempt, retries = asyncio.run(main())
    assert attempt.reused and attempt.tries == 1 and attempt.retry is None and retries == 0
    assert upstream.requests == 2 and upstream.connections == 1


def test_the_pool_drops_idle_connections_well_before_provider_front_ends_do():
    assert KEEPALIVE_TIMEOUT_S < 60

    async def main():
        pool = open_pool(5.0, [])
        try:
            return pool.session.connector, pool.fresh.connector
        finally:
            await pool.close()

    pooled, fresh = asyncio.run(main())
    assert pooled._keepalive_timeout == KEEPALIVE_TIMEOUT_S
    assert fresh.force_close
