"""Writing a fake provider's response body: chunks at their times on the loop's clock, then the
ending asked for (a clean close, a FIN mid-body, a reset, a stall), or no response at all. One
implementation for `streamtap replay`, the public FakeProvider and the tests' scripted fake, so a
scripted reset is the same reset a replayed one is."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from aiohttp import web

from streamtap.proxy.connection import sockets
from streamtap.proxy.connection.endings import end_response, stall

# The ends a body can have: end_response's (close, truncate, reset), and a stall, which sends
# nothing more until `stall_s` passed or the client left.
BODY_ENDS = ("close", "truncate", "reset", "stall")


async def sleep_until(deadline: float) -> None:
    """Sleep until `deadline` on the running loop's clock (at once if it passed)."""
    delay = deadline - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)


async def write_at(response: web.StreamResponse, writes: Iterable[tuple[float, bytes]],
                   base: float, scale: float = 1.0) -> None:
    """Write each `(t_ms, data)` at `base + t_ms * scale` ms on the loop's clock: absolute
    deadlines, so a slow write does not push every later one back. Raises ConnectionError when
    the client left."""
    for t_ms, data in writes:
        await sleep_until(base + t_ms / 1000.0 * scale)
        await response.write(data)


async def end_body(response: web.StreamResponse, transport, how: str,
                   stall_s: float | None = None) -> None:
    """End a body already started as `how` says (one of BODY_ENDS); a stall lasts `stall_s`
    (None: until the client leaves, which cancels the handler)."""
    if how == "stall":
        await stall(stall_s)
    elif how in BODY_ENDS:
        await end_response(response, transport, how)
    else:
        raise ValueError(f"unknown ending {how!r}; expected one of {', '.join(BODY_ENDS)}")


def no_response(transport, reset: bool = True) -> web.Response:
    """End the connection before any response byte: a TCP RST, or (`reset=False`) a FIN. The
    Response returned is for aiohttp's handler contract; it is never sent."""
    if reset:
        sockets.reset(transport)
    else:
        sockets.close(transport)
    return web.Response(status=502)
