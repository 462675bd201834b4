"""How a response ends, carried out on a real connection: cleanly, with a FIN mid-body, with a
reset, or after a stall. Shared by fault injection and replay, so a replayed reset is the same
reset an injected one is."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import hdrs, web

from streamtap.proxy.connection import sockets

STALL_FOREVER_S = 24 * 3600.0  # "until the client gives up": the client's leaving cancels us
ENDS = ("close", "truncate", "reset", "malformed")
# What `bad_chunk_size` writes where the client's parser expects the next chunk's size line: not
# hex, so undici (HPE_INVALID_CHUNK_SIZE), httpx/h11 ("illegal chunk header") and aiohttp fail on
# it as on a gateway's broken framing (the raw relay passes such upstream bytes on as they came).
MALFORMED_CHUNK_SIZE = b"zz\r\n"


async def stall(duration_s: float | None, beat: Callable[[], Awaitable[None]] | None = None,
                every_s: float = 0.0) -> None:
    """Send nothing for `duration_s` (None: until the client leaves, which cancels the handler),
    or nothing but `beat()` every `every_s`: a stall behind keep-alives, which resets a client's
    idle timer on every beat."""
    total = duration_s if duration_s else STALL_FOREVER_S
    if beat is None or every_s <= 0:
        await asyncio.sleep(total)
        return
    loop = asyncio.get_running_loop()
    end = loop.time() + total
    while (left := end - loop.time()) > 0:
        await asyncio.sleep(min(every_s, left))
        if end - loop.time() > 0:
            await beat()


async def end_response(response: web.StreamResponse, transport, how: str) -> str:
    """End `response` as `how` says; return what the client saw (complete | aborted)."""
    if how == "close":
        await response.write_eof()
        return "complete"
    await sockets.drain(transport)
    if how == "malformed":
        break_framing(response, transport, MALFORMED_CHUNK_SIZE)
        sockets.close(transport)  # an answer that is not chunked can only be cut: a FIN
    elif how == "reset":
        sockets.reset(transport)
    elif how == "truncate":
        sockets.close(transport)  # a FIN with no final chunk
    else:
        raise ValueError(f"unknown ending {how!r}; expected one of {', '.join(ENDS)}")
    return "aborted"


def break_framing(response: web.StreamResponse | None, transport, data: bytes) -> bool:
    """Write `data` where the client's HTTP parser expects the next chunk's size line, past
    aiohttp's chunk writer on purpose, so the client fails on broken framing as it would have
    without streamtap. Only a chunked answer has chunks to break (an HTTP/1.0 client's body ends
    with the connection): False when nothing was written."""
    if (not data or response is None or transport is None or transport.is_closing()
            or response.headers.get(hdrs.TRANSFER_ENCODING, "").lower() != "chunked"):
        return False
    transport.write(data)
    return True
