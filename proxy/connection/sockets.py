"""Ending a client connection the way an upstream ended ours: a reset is a reset, a FIN is a FIN.

A reset (SO_LINGER 0) discards bytes still queued in the kernel, so before resetting we let the
write buffer and the kernel send queue drain: the client must receive every byte the upstream sent
before it died, then see the same kind of error it would have seen directly.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys

try:  # Linux: bytes in the send queue not yet acknowledged by the peer
    import fcntl
    import termios

    _TIOCOUTQ = termios.TIOCOUTQ
except (ImportError, AttributeError):  # pragma: no cover - not Linux
    fcntl = None  # type: ignore[assignment]
    _TIOCOUTQ = None

DRAIN_LIMIT_S = 2.0  # a client that stopped reading cannot hold a reset back for longer


def unsent_bytes(sock) -> int:
    if fcntl is None or _TIOCOUTQ is None or sock is None or sys.platform != "linux":
        return 0
    try:
        raw = fcntl.ioctl(sock.fileno(), _TIOCOUTQ, b"\0\0\0\0")
    except OSError:
        return 0
    return struct.unpack("i", raw)[0]


async def drain(transport: asyncio.BaseTransport | None, limit_s: float = DRAIN_LIMIT_S) -> None:
    """Wait until everything written to `transport` has left this host (or `limit_s` passed)."""
    if transport is None or transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while loop.time() < deadline and not transport.is_closing():
        if transport.get_write_buffer_size() == 0 and unsent_bytes(sock) == 0:
            return
        await asyncio.sleep(0.002)


def reset(transport: asyncio.BaseTransport | None) -> None:
    """Abort with a TCP RST (SO_LINGER 0), not a FIN."""
    if transport is None or transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass  # the socket is already gone; abort below still ends the connection
    transport.abort()


def close(transport: asyncio.BaseTransport | None) -> None:
    """End with a FIN after the buffered bytes are sent (and no HTTP terminator after them)."""
    if transport is not None and not transport.is_closing():
        transport.close()


def abort(transport: asyncio.BaseTransport | None) -> None:
    """Drop the connection now, buffered bytes and all (streamtap's own aborts)."""
    if transport is not None and not transport.is_closing():
        transport.abort()
