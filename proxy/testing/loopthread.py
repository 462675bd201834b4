"""An event loop on a background thread, for running streamtap's aiohttp servers inside a
synchronous test (or beside another event loop) without blocking it; and a fake provider's app
served from one on a free loopback port (the public FakeProvider and the tests' scripted fake)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Self, TypeVar

from aiohttp import web

from streamtap.proxy.replay.server import start_server

T = TypeVar("T")
START_TIMEOUT_S = 30.0


class LoopThread:
    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, make: Callable[[], Awaitable[T]], timeout: float | None = START_TIMEOUT_S) -> T:
        """Run a coroutine on the loop and wait for its result here."""
        async def wrapped() -> T:
            return await make()
        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(timeout)

    def call(self, function: Callable[[], T], timeout: float | None = START_TIMEOUT_S) -> T:
        """Call a plain function on the loop's thread (state the loop owns is touched there)."""
        async def wrapped() -> T:
            return function()
        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(timeout)

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class Background:
    """`with` and `async with` for a server that runs on a LoopThread: the subclass gives
    `start()` (returning itself) and `stop()`; the async forms run them off the caller's loop,
    since both block until the server thread has answered."""

    def start(self):
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    async def __aenter__(self):
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc) -> None:
        await asyncio.to_thread(self.stop)


class LoopbackServer(Background):
    """The aiohttp app `make_app()` returns, served on a free port of `host` from a LoopThread of
    its own: `start()` (returns itself once listening), `stop()`, `url`. `what` names the server
    in its errors."""

    what = "the server"

    def __init__(self, thread_name: str, host: str = "127.0.0.1"):
        self.host = host
        self.port = 0
        self._thread_name = thread_name
        self._thread: LoopThread | None = None
        self._runner: web.AppRunner | None = None

    def make_app(self) -> web.Application:
        raise NotImplementedError

    @property
    def url(self) -> str:
        if not self.port:
            raise RuntimeError(f"{self.what} is not running: use it in a `with` block or "
                               "call start()")
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        if self._thread is not None:
            return self
        self._thread = LoopThread(self._thread_name)
        try:
            self.port = self._thread.run(self._start)
        except BaseException:
            self._thread.stop()
            self._thread = None
            raise
        return self

    async def _start(self) -> int:
        runner, port = await start_server(self.make_app(), self.host, 0)
        if port is None:  # said on stderr; the runner is already cleaned up
            raise RuntimeError(f"{self.what} could not listen on {self.host}")
        self._runner = runner
        return port

    def stop(self) -> None:
        if self._thread is None:
            return
        try:
            if self._runner is not None:
                self._thread.run(self._runner.cleanup)
        finally:
            self._thread.stop()
            self._thread = None
