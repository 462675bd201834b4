"""Idle and progress watchdogs: one timer per exchange, not one per chunk.

The copy loop only updates a timestamp per chunk; the timer wakes at the earliest deadline,
re-checks the clocks and either sleeps again or interrupts the exchange. An exchange blocked on
writing to a slow client is not idle: backpressure is the client's doing, not the upstream's.
"""

from __future__ import annotations

import asyncio


class Watchdog:
    def __init__(self, exchange, idle_ms: int, progress_ms: int):
        self.exchange = exchange
        self.idle_ms = idle_ms
        self.progress_ms = progress_ms
        self._handle: asyncio.TimerHandle | None = None
        self._base_ms = 0.0

    @property
    def enabled(self) -> bool:
        return bool(self.idle_ms or self.progress_ms)

    def start(self) -> None:
        if not self.enabled:
            return
        self._base_ms = self.exchange.now()
        self._schedule(min(ms for ms in (self.idle_ms, self.progress_ms) if ms))

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self, delay_ms: float) -> None:
        loop = self.exchange.loop
        self._handle = loop.call_later(max(delay_ms, 1.0) / 1000.0, self._check)

    def _check(self) -> None:
        self._handle = None
        ex = self.exchange
        now = ex.now()
        waits = []
        if self.idle_ms:
            idle_for = now - max(ex.downstream.last_byte_ms, self._base_ms)
            if idle_for >= self.idle_ms and not ex.downstream.writing:
                ex.interrupt("idle")
                return
            waits.append(self.idle_ms - idle_for)
        if self.progress_ms:
            last = ex.recorder.state.last_progress_ms
            quiet_for = now - max(last if last is not None else 0.0, self._base_ms)
            if quiet_for >= self.progress_ms and not ex.downstream.writing:
                ex.interrupt("progress")
                return
            waits.append(self.progress_ms - quiet_for)
        self._schedule(max(min(waits), 1.0))
