"""The keep-alives a `stall` or a `hold` sends with `heartbeat_ms`: an SSE comment, a blank line
for NDJSON (which has no comments), nothing without the option; and the stall's beat rhythm."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from streamtap.proxy.connection.endings import stall
from streamtap.proxy.faults.inject import FaultRun
from streamtap.diagnostics.faults.rules import parse_fault_header


def beats_sent(header: str, framing: str) -> list[bytes]:
    sent: list[bytes] = []

    async def send(data: bytes, _t: float) -> None:
        sent.append(data)

    exchange = SimpleNamespace(recorder=SimpleNamespace(dialect=SimpleNamespace(framing=framing)),
                               downstream=SimpleNamespace(send=send), now=lambda: 0.0)
    beat = FaultRun(exchange, parse_fault_header(header)).heartbeat()
    if beat is not None:
        asyncio.run(beat())
    return sent


def test_an_sse_stream_gets_a_comment():
    assert beats_sent("stall; heartbeat_ms=500", "sse") == [b": keepalive\n\n"]


def test_an_ndjson_stream_gets_a_blank_line():
    assert beats_sent("hold; heartbeat_ms=500", "ndjson") == [b"\n"]


def test_without_heartbeat_ms_a_stall_is_silent():
    assert beats_sent("stall", "sse") == []


def test_a_stall_beats_every_interval_until_its_end():
    async def run() -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        count = 0

        async def beat() -> None:
            nonlocal count
            count += 1
        start = loop.time()
        await stall(0.5, beat, 0.12)
        return count, loop.time() - start

    count, took = asyncio.run(run())
    assert took >= 0.5
    assert 3 <= count <= 4  # at 0.12, 0.24, 0.36, 0.48 s; a late wake-up may skip the last
