"""A fake LLM provider for the end-to-end tests: a real aiohttp server on loopback, in its own
thread, that plays scripted responses and ends them the way a test asks (clean, reset, FIN
mid-body, stall), and remembers what it received and whether the client went away."""

from __future__ import annotations

import asyncio
import itertools
import threading
import zlib
from dataclasses import dataclass, field

from aiohttp import web

from streamtap.proxy.connection import sockets
from streamtap.proxy.serve.passthrough import PassThroughResponse


@dataclass
class Scenario:
    chunks: list[bytes]
    ending: str = "clean"  # clean | reset | fin | stall | reset_before_response
    status: int = 200
    content_type: str | None = "text/event-stream"
    headers: list[tuple[str, str]] = field(default_factory=list)
    delay_s: float = 0.0  # pause before each chunk after the first
    gzip: bool = False
    content_length: bool = False  # send Content-Length instead of chunked encoding
    stall_s: float = 30.0  # how long a stall lasts at most


@dataclass
class Seen:
    """One request the fake provider received."""

    raw_path: str
    method: str
    headers: list[tuple[str, str]]
    body: bytes
    client_left: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)


def gzip_chunks(chunks: list[bytes]) -> list[bytes]:
    """gzip a stream chunk by chunk (sync-flushed), as a streaming server would."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    out = [packer.compress(chunk) + packer.flush(zlib.Z_SYNC_FLUSH) for chunk in chunks]
    out[-1] += packer.flush()
    return out


class FakeProvider:
    def __init__(self):
        self.scenarios: dict[str, Scenario] = {}
        self.seen: dict[str, list[Seen]] = {}
        self._names = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, scenario: Scenario, name: str | None = None) -> str:
        """Register a scenario; requests to `/s/<name>/...` play it. Returns the path prefix."""
        name = name or f"sc{next(self._names)}"
        self.scenarios[name] = scenario
        self.seen[name] = []
        return f"/s/{name}"

    def last(self, prefix: str) -> Seen:
        return self.seen[prefix.rsplit("/", 1)[-1]][-1]

    # -- server -------------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        scenario = self.scenarios[name]
        seen = Seen(request.raw_path, request.method, list(request.headers.items()),
                    await request.read())
        self.seen[name].append(seen)
        if scenario.ending == "reset_before_response":  # a TCP RST, and not one response byte
            sockets.reset(request.transport)
            seen.finished.set()
            return web.Response()
        # Sends only the headers the scenario names (plain aiohttp would add Server, Date...).
        response = PassThroughResponse(status=scenario.status)
        if scenario.content_type:
            response.headers["Content-Type"] = scenario.content_type
        for key, value in scenario.headers:
            response.headers.add(key, value)
        chunks = gzip_chunks(scenario.chunks) if scenario.gzip else list(scenario.chunks)
        if scenario.gzip:
            response.headers["Content-Encoding"] = "gzip"
        if scenario.content_length:
            response.content_length = sum(map(len, chunks))
        try:
            await response.prepare(request)
            for index, chunk in enumerate(chunks):
                if index and scenario.delay_s:
                    await asyncio.sleep(scenario.delay_s)
                await response.write(chunk)
            if scenario.ending == "reset":
                await sockets.drain(request.transport)
                sockets.reset(request.transport)
            elif scenario.ending == "fin":
                await sockets.drain(request.transport)
                sockets.close(request.transport)
            elif scenario.ending == "stall":
                await asyncio.sleep(scenario.stall_s)
            else:
                await response.write_eof()
        except (asyncio.CancelledError, ConnectionError):
            seen.client_left.set()
            raise
        finally:
            seen.finished.set()
        return response

    def start(self) -> "FakeProvider":
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            # Bodies as large as streamtap forwards by default (aiohttp's own limit is 1 MiB).
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.router.add_route("*", "/s/{name}/{rest:.*}", self._handle)
            app.router.add_route("*", "/s/{name}", self._handle)
            self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-provider", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fake provider did not start within 10 s")
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
