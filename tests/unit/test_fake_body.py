"""proxy/replay/body.py: how every fake provider (streamtap replay, the public FakeProvider, the
tests' scripted fake) writes a body and ends it; and the endings the tests' fake accepts."""

from __future__ import annotations

import asyncio

import pytest

from streamtap.proxy.replay.body import BODY_ENDS, end_body, write_at
from tests.fakeprovider import FakeProvider, Scenario


class SlowResponse:
    """Stands for a StreamResponse whose every write takes `write_s`: remembers when each began."""

    def __init__(self, write_s: float):
        self.write_s = write_s
        self.began: list[tuple[float, bytes]] = []

    async def write(self, data: bytes) -> None:
        self.began.append((asyncio.get_running_loop().time(), data))
        await asyncio.sleep(self.write_s)


def test_writes_keep_their_times_however_long_a_write_takes():
    async def play() -> tuple[float, SlowResponse]:
        response = SlowResponse(write_s=0.05)
        base = asyncio.get_running_loop().time()
        await write_at(response, [(0.0, b"a"), (60.0, b"b"), (120.0, b"c")], base)
        return base, response

    base, response = asyncio.run(play())
    assert [data for _, data in response.began] == [b"a", b"b", b"c"]
    starts = [at - base for at, _ in response.began]
    # On deadlines: 0, 60, 120 ms. A pause after each write would start them at 0, 110, 220.
    assert starts[1] >= 0.06 and starts[2] >= 0.12
    assert starts[2] < 0.2


def test_writes_are_scaled():
    async def play() -> tuple[float, SlowResponse]:
        response = SlowResponse(write_s=0.0)
        base = asyncio.get_running_loop().time()
        await write_at(response, [(0.0, b"a"), (100.0, b"b")], base, scale=0.5)
        return base, response

    base, response = asyncio.run(play())
    assert 0.05 <= response.began[1][0] - base < 0.09


def test_an_unknown_ending_is_refused_with_the_ones_there_are():
    with pytest.raises(ValueError, match="unknown ending 'fin'.*close, truncate, reset, stall"):
        asyncio.run(end_body(None, None, "fin"))  # type: ignore[arg-type]
    assert BODY_ENDS == ("close", "truncate", "reset", "stall")


def test_the_tests_fake_refuses_a_scenario_ending_it_cannot_play():
    fake = FakeProvider()  # not started: add() only registers
    with pytest.raises(ValueError, match="unknown Scenario ending 'rest'.*clean, reset, fin"):
        fake.add(Scenario([], ending="rest"))
    for ending in ("clean", "reset", "fin", "stall", "reset_before_response"):
        assert fake.add(Scenario([], ending=ending)).startswith("/s/sc")
