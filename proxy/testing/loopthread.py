"""An event loop on a background thread, for running streamtap's aiohttp servers inside a
synchronous test (or beside another event loop) without blocking it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

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
