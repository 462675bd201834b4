"""Finished-request summaries for whoever follows the proxy (`streamtap tail`, the live page).

The store's writer thread publishes each index line once its record is on disk; subscribers are
bounded queues on the event loop. A subscriber that does not keep up loses events (counted),
never the proxy's memory.
"""

from __future__ import annotations

import asyncio

SUBSCRIBER_QUEUE = 256  # summaries waiting for one slow follower; past this they are dropped
_CLOSED = object()


class Subscription:
    def __init__(self) -> None:
        self.queue: asyncio.Queue = asyncio.Queue(SUBSCRIBER_QUEUE)
        self.dropped = 0

    async def next(self, timeout: float) -> dict | None:
        """The next summary; None after `timeout` seconds; raises EOFError once the feed closed."""
        try:
            item = await asyncio.wait_for(self.queue.get(), timeout)
        except asyncio.TimeoutError:
            return None
        if item is _CLOSED:
            raise EOFError
        return item


class Feed:
    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.subscribers: set[Subscription] = set()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def publish(self, summary: dict) -> None:
        """Thread-safe: called from the store's writer thread."""
        loop = self.loop
        if loop is None or not self.subscribers or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._fan_out, summary)
        except RuntimeError:  # the loop closed between the check and the call
            pass

    def _fan_out(self, summary: dict) -> None:
        for subscription in self.subscribers:
            try:
                subscription.queue.put_nowait(summary)
            except asyncio.QueueFull:
                subscription.dropped += 1

    def subscribe(self) -> Subscription:
        subscription = Subscription()
        self.subscribers.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self.subscribers.discard(subscription)

    def close(self) -> None:
        """At shutdown: end every follower's stream, so the server need not wait for them."""
        for subscription in self.subscribers:
            while True:
                try:
                    subscription.queue.put_nowait(_CLOSED)
                    break
                except asyncio.QueueFull:
                    subscription.queue.get_nowait()
