"""A fake LLM provider for the end-to-end tests: a real aiohttp server on loopback, in its own
thread, that plays scripted responses and ends them the way a test asks (clean, reset, FIN
mid-body, stall), and remembers what it received and whether the client went away.

The thread and the server are streamtap's LoopbackServer and the body is written and ended by
`proxy/replay/body.py`, as for the public FakeProvider and `streamtap replay`; what stays here
is what only tests ask for: raw chunks (not samples), gzip and Content-Length framing, and the
requests remembered whole."""

from __future__ import annotations

import asyncio
import itertools
import threading
import zlib
from dataclasses import dataclass, field

from aiohttp import web

from streamtap.proxy.replay.body import end_body, no_response, write_at
from streamtap.proxy.serve.passthrough import PassThroughResponse
from streamtap.proxy.testing.loopthread import LoopbackServer

# A Scenario's ending -> how replay/body.py ends the body.
_HOW = {"clean": "close", "reset": "reset", "fin": "truncate", "stall": "stall"}


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


class FakeProvider(LoopbackServer):
    what = "the tests' fake provider"

    def __init__(self):
        super().__init__("fake-provider")
        self.scenarios: dict[str, Scenario] = {}
        self.seen: dict[str, list[Seen]] = {}
        self._names = itertools.count(1)

    def add(self, scenario: Scenario, name: str | None = None) -> str:
        """Register a scenario; requests to `/s/<name>/...` play it. Returns the path prefix."""
        if scenario.ending not in (*_HOW, "reset_before_response"):
            raise ValueError(f"unknown Scenario ending {scenario.ending!r}; expected one of "
                             f"{', '.join(_HOW)}, reset_before_response")
        name = name or f"sc{next(self._names)}"
        self.scenarios[name] = scenario
        self.seen[name] = []
        return f"/s/{name}"

    def last(self, prefix: str) -> Seen:
        return self.seen[prefix.rsplit("/", 1)[-1]][-1]

    def make_app(self) -> web.Application:
        # Bodies as large as streamtap forwards by default (aiohttp's own limit is 1 MiB).
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/s/{name}/{rest:.*}", self._handle)
        app.router.add_route("*", "/s/{name}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        scenario = self.scenarios[name]
        seen = Seen(request.raw_path, request.method, list(request.headers.items()),
                    await request.read())
        self.seen[name].append(seen)
        if scenario.ending == "reset_before_response":  # a TCP RST, and not one response byte
            refused = no_response(request.transport)
            seen.finished.set()
            return refused
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
            base = asyncio.get_running_loop().time()
            writes = [(index * scenario.delay_s * 1000.0, chunk)
                      for index, chunk in enumerate(chunks)]
            await write_at(response, writes, base)
            await end_body(response, request.transport, _HOW[scenario.ending], scenario.stall_s)
        except (asyncio.CancelledError, ConnectionError):
            seen.client_left.set()
            raise
        finally:
            seen.finished.set()
        return response
