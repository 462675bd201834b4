"""streamtap's own event-loop lag, measured while any exchange is open.

A timer due every CHECK_EVERY_S notes how late it ran: the loop was stopped for that long (a
garbage collection, a slow callback, another thread holding the GIL) and every frame that
arrived meanwhile got a late timestamp. Each open exchange keeps the worst lateness it saw and
when, for its record (`timeline.proxy_lag_max_ms`). No timer runs while no exchange is open.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

CHECK_EVERY_S = 0.02  # 50 wake-ups a second while busy: a few microseconds each


class LoopLag:
    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 every_s: float = CHECK_EVERY_S):
        self._clock = clock  # the exchanges' clock, so `at` times share their origin
        self._every_s = every_s
        # per open exchange: [worst lag ms (-1: no check yet), clock when seen, its t0]
        self._open: dict[object, list[float]] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def open(self, key: object, t0: float) -> None:
        """An exchange starts (`t0`: its start on the clock); checks run until it closes."""
        self._open[key] = [-1.0, 0.0, t0]
        if self._handle is None:
            self._schedule()

    def close(self, key: object) -> tuple[float | None, float | None]:
        """The worst lag seen while `key` was open (ms) and when it ended (ms since its t0);
        (None, None) when no check fell due before it closed."""
        seen = self._open.pop(key, None)
        now = self._clock()
        if seen is not None and self._handle is not None and now >= self._due:
            # A check overdue right now counts: the loop is late at this very moment.
            self._note(seen, (now - self._due) * 1000.0, now)
        if not self._open and self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if seen is None or seen[0] < 0:
            return None, None
        return seen[0], (seen[1] - seen[2]) * 1000.0

    def _schedule(self) -> None:
        self._due = self._clock() + self._every_s
        self._handle = asyncio.get_running_loop().call_later(self._every_s, self._check)

    @staticmethod
    def _note(seen: list[float], lag_ms: float, now: float) -> None:
        if lag_ms > seen[0]:
            seen[0], seen[1] = lag_ms, now

    def _check(self) -> None:
        now = self._clock()
        lag_ms = max(now - self._due, 0.0) * 1000.0  # a timer may run a hair early
        for seen in self._open.values():
            self._note(seen, lag_ms, now)
        self._schedule()
