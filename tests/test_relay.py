"""The zero-await body relay (proxy/serve/body/relay.py): a slow client slows the upstream
without the proxy buffering the difference, big streams pass byte for byte, Content-Length
responses keep their framing and keep-alive, and a client that leaves mid-body closes the
upstream."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import io
import os
import threading
import time

import pytest
import structlog
from aiohttp import web

from streamtap.proxy.serve.body import relay
from streamtap.proxy.serve.app import build_app
from streamtap.proxy.config import Config, make_route
from streamtap.proxy.store import TraceStore
from tests.clients import RawClient, wait_for
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream

BLOCK = os.urandom(64 * 1024)


def sha256(chunks) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("content_length", [False, True], ids=["chunked", "content-length"])
def test_slow_client_slows_the_upstream_and_the_proxy_buffers_nothing(fake, proxy,
                                                                       content_length):
    # 128 MiB: more than every socket buffer on the way can hold (the proxy's upstream receive
    # buffer can grow to tcp_rmem's max, 32 MiB here), so the provider must block.
    chunks = [BLOCK] * 2048
    prefix = fake.add(Scenario(chunks, content_type="application/octet-stream",
                               content_length=content_length))
    session = new_session()
    client = RawClient(proxy.port, rcvbuf=64 * 1024)
    try:
        before = rss_kib(proxy.process.pid)
        client.request(f"/fake{prefix}/bulk", session)
        status, headers = client.head()
        assert status == 200
        body = client.body(headers)
        digest = hashlib.sha256(next(body))
        # The client stops reading for 2 s: the provider's writes must block meanwhile.
        peak = before
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            peak = max(peak, rss_kib(proxy.process.pid))
            time.sleep(0.05)
        seen = fake.last(prefix)
        assert not seen.finished.is_set(), "the provider sent everything to a client that " \
                                           "stopped reading: no backpressure"
        assert peak - before < 24 * 1024, f"the proxy's RSS grew by {peak - before} KiB"
        for piece in body:
            digest.update(piece)
    finally:
        client.close()
    assert digest.hexdigest() == sha256(chunks)
    assert seen.finished.wait(10) and not seen.client_left.is_set()
    record = proxy.record(session)
    assert record["downstream"]["ended"] == "complete"
    assert record["downstream"]["bytes"] == record["stream"]["bytes"] == len(BLOCK) * 2048
    assert record["outcome"]["boundary"] == "none"


def test_a_large_unpaced_stream_is_byte_identical(fake, proxy):
    for gzip in (False, True):
        stream = chat_text_stream(20000)
        prefix = fake.add(Scenario(stream, gzip=gzip))
        path = prefix + "/v1/chat/completions"
        session = new_session()
        direct = RawClient(fake.port)
        direct.request(path, "direct")
        _, direct_headers = direct.head()
        direct_sha = sha256(direct.body(direct_headers))
        direct.close()
        client = RawClient(proxy.port)
        client.request("/fake" + path, session)
        status, headers = client.head()
        proxied = list(client.body(headers))
        client.close()
        assert status == 200 and headers.get("transfer-encoding") == "chunked"
        assert headers.get("content-encoding") == ("gzip" if gzip else None)
        assert sha256(proxied) == direct_sha
        record = proxy.record(session)
        assert record["stream"]["bytes"] == record["downstream"]["bytes"] == sum(map(len, proxied))
        assert record["stream"]["frame_count"] == 20003  # role, 20,000 words, finish, [DONE]
        assert record["stream"]["terminal"] == "[DONE]"
        assert record["outcome"]["boundary"] == "none"


def test_content_length_and_chunked_responses_keep_their_framing_and_keep_alive(fake, proxy):
    stream = chat_text_stream(30)
    plain = fake.add(Scenario(stream, delay_s=0.002))
    sized = fake.add(Scenario(stream, delay_s=0.002, content_length=True))
    client = RawClient(proxy.port)
    sessions = []
    try:
        # One connection, four responses in turn: each ends exactly where its framing says, so
        # aiohttp's writer state after the relay is right for the next response.
        for prefix in (sized, plain, sized, plain):
            session = new_session()
            sessions.append(session)
            client.request(f"/fake{prefix}/v1/chat/completions", session)
            status, headers = client.head()
            assert status == 200
            if prefix == sized:
                assert headers["content-length"] == str(sum(map(len, stream)))
                assert "transfer-encoding" not in headers
            else:
                assert headers["transfer-encoding"] == "chunked"
                assert "content-length" not in headers
            assert b"".join(client.body(headers)) == b"".join(stream)
    finally:
        client.close()
    for session in sessions:
        record = proxy.record(session)
        assert record["downstream"]["ended"] == "complete"
        assert record["downstream"]["bytes"] == sum(map(len, stream))
        assert record["outcome"]["boundary"] == "none"


def test_client_leaving_mid_relay_closes_the_upstream_and_is_recorded(fake, proxy):
    stream = chat_text_stream(400)
    prefix = fake.add(Scenario(stream, delay_s=0.01))  # about 4 s if nobody leaves
    session = new_session()
    client = RawClient(proxy.port)
    client.request(f"/fake{prefix}/v1/chat/completions", session)
    _, headers = client.head()
    body = client.body(headers)
    got = sum(len(next(body)) for _ in range(5))
    client.close()
    seen = fake.last(prefix)
    assert seen.client_left.wait(5), "the provider never saw its connection close"
    record = proxy.record(session)
    assert record["outcome"]["boundary"] == "client_abort"
    assert record["downstream"]["ended"] == "client_gone"
    assert got <= record["downstream"]["bytes"] < sum(map(len, stream))


def test_backpressure_is_not_upstream_idleness(fake, tmp_path):
    """A client that stops reading for longer than the idle watchdog does not trip it."""
    idle = ProxyProcess(tmp_path, {"fake": fake.url}, "--idle-timeout-ms", "300")
    try:
        chunks = [BLOCK] * 2048
        prefix = fake.add(Scenario(chunks, content_type="application/octet-stream"))
        session = new_session()
        client = RawClient(idle.port, rcvbuf=64 * 1024)
        try:
            client.request(f"/fake{prefix}/bulk", session)
            _, headers = client.head()
            body = client.body(headers)
            digest = hashlib.sha256(next(body))
            time.sleep(1.0)  # held up by the client, not by the provider
            for piece in body:
                digest.update(piece)
        finally:
            client.close()
        assert digest.hexdigest() == sha256(chunks)
        record = idle.record(session)
        assert record["watchdog"]["fired"] is None
        assert record["downstream"]["ended"] == "complete"
    finally:
        idle.stop()


# -- in-process: the relay really is what copies the body -----------------------------------------
@pytest.fixture(scope="module")
def inprocess(fake, tmp_path_factory):
    """The proxy app (capture mode on) on its own uvloop thread in this process, with
    relay.start observed."""
    import uvloop

    trace_dir = tmp_path_factory.mktemp("inprocess")
    config = dataclasses.replace(Config(), trace_dir=str(trace_dir), capture_bodies=True,
                                 routes={"fake": make_route("fake", fake.url)})
    # A logger of its own: configure_logging() would set up logging for this whole process.
    log = structlog.wrap_logger(structlog.PrintLogger(io.StringIO()),
                                processors=[structlog.processors.format_exc_info,
                                            structlog.processors.JSONRenderer()])
    store = TraceStore(str(trace_dir), log)
    started: list[relay.Relay | None] = []
    original = relay.start

    def observed(*args, **kwargs):
        result = original(*args, **kwargs)
        started.append(result)
        return result

    relay.start = observed
    loop = uvloop.new_event_loop()
    ready = threading.Event()
    state: dict = {}

    def run() -> None:
        asyncio.set_event_loop(loop)
        runner = web.AppRunner(build_app(config, store, log), handler_cancellation=True,
                               access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        state["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=run, name="inprocess-proxy", daemon=True)
    thread.start()
    assert ready.wait(10)
    yield state["port"], started
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    relay.start = original
    store.close()


@pytest.mark.parametrize("kind", ["chunked", "content-length", "gzip"])
def test_the_relay_copies_the_body_not_the_await_loop(fake, inprocess, kind):
    port, started = inprocess
    stream = chat_text_stream(50)
    prefix = fake.add(Scenario(stream, delay_s=0.001, gzip=kind == "gzip",
                               content_length=kind == "content-length"))
    started.clear()
    client = RawClient(port)
    try:
        client.request(f"/fake{prefix}/v1/chat/completions", new_session())
        _, headers = client.head()
        body = b"".join(client.body(headers))
    finally:
        client.close()
    assert len(started) == 1 and isinstance(started[0], relay.Relay)
    assert wait_for(lambda: started[0].finished, 5)
    assert started[0].as_is  # both sides framed alike: the upstream's own bytes went out
    assert bytes(started[0].downstream.capture) == body  # capture mode keeps the body as on the wire
    if kind != "gzip":
        assert body == b"".join(stream)


def test_the_relay_holds_the_upstream_while_the_client_is_slow(fake, inprocess):
    port, started = inprocess
    prefix = fake.add(Scenario([BLOCK] * 256, content_type="application/octet-stream"))
    started.clear()
    client = RawClient(port, rcvbuf=64 * 1024)
    try:
        client.request(f"/fake{prefix}/bulk", new_session())
        _, headers = client.head()
        body = client.body(headers)
        digest = hashlib.sha256(next(body))
        time.sleep(0.5)
        held = started[0].held  # read from another thread: a snapshot is enough here
        buffered = started[0].transport.get_write_buffer_size()
        for piece in body:
            digest.update(piece)
    finally:
        client.close()
    assert held, "the relay did not pause the upstream for a client that stopped reading"
    assert buffered < 1024 * 1024, f"{buffered} bytes queued for a client that stopped reading"
    assert digest.hexdigest() == sha256([BLOCK] * 256)


@pytest.mark.parametrize("ending, seen_by_client", [("reset", ConnectionResetError),
                                                    ("fin", EOFError)])
def test_the_relay_mirrors_an_upstream_that_dies_mid_body(fake, inprocess, ending,
                                                          seen_by_client):
    port, started = inprocess
    stream = chat_text_stream(10, done=False)
    prefix = fake.add(Scenario(stream, delay_s=0.01, ending=ending))
    started.clear()
    client = RawClient(port)
    received = []
    try:
        client.request(f"/fake{prefix}/v1/chat/completions", new_session())
        _, headers = client.head()
        with pytest.raises(seen_by_client):  # never a final chunk: never a clean short body
            for piece in client.body(headers):
                received.append(piece)
    finally:
        client.close()
    assert isinstance(started[0], relay.Relay)
    assert b"".join(received) == b"".join(stream)  # every byte sent before the upstream died
