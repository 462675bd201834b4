"""The request body on its way upstream: small bodies are read whole (and summarised whole); a
large one is streamed as it arrives, so memory stays flat whatever the client sends, and is
summarised from its first and last bytes (the record says `summary_truncated`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from aiohttp import web
from aiohttp.streams import StreamReader

# A request body up to this size is read whole and summarised whole; a larger one is streamed.
SUMMARY_PREFIX_BYTES = 2 * 1024 * 1024
SUMMARY_TAIL_BYTES = 64 * 1024  # where an SDK that writes `model` after the messages puts it
MAX_CAPTURE_BYTES = 64 * 1024 * 1024


class RequestBodyTooLarge(Exception):
    """A streamed request body (no Content-Length) went past max_request_body_bytes."""


async def read_head(request: web.Request, limit: int) -> tuple[bytes, bool] | None:
    """The body's first SUMMARY_PREFIX_BYTES (all of it when shorter) and whether that is the
    whole body; None when it is over `limit` already (nothing is forwarded)."""
    length = request.content_length
    if length is not None and length > limit:
        return None
    head = bytearray()
    content = request.content
    while len(head) <= SUMMARY_PREFIX_BYTES:
        chunk = await content.readany()
        if not chunk:
            return bytes(head), True
        head += chunk
        if len(head) > limit:
            return None
    return bytes(head), False


class StreamedBody:
    """A request body streamed upstream as it arrives: its first bytes (read already), the rest
    chunk by chunk. Its size and last bytes go to the recorder at the end. Past `limit` it stops
    with RequestBodyTooLarge, and `over_limit` says so (the exchange answers 413)."""

    def __init__(self, content: StreamReader, head: bytes, limit: int, recorder,
                 moved: Callable[[], None], capture: bool):
        self.content = content
        self.head = head
        self.limit = limit
        self.recorder = recorder
        self.moved = moved  # a piece went upstream: the idle watchdog's clock, not the upstream's
        self.capture = capture
        self.over_limit = False
        self.captured: bytes | None = None  # the whole body, with --capture-bodies

    async def chunks(self) -> AsyncIterator[bytes]:
        """aiohttp's request body: it sends each piece as this yields it."""
        head, self.head = self.head, b""
        sent = len(head)
        tail = head[-SUMMARY_TAIL_BYTES:]
        capture = bytearray(head) if self.capture else None
        yield head
        del head
        async for chunk in self.content.iter_any():
            sent += len(chunk)
            if sent > self.limit:
                self.over_limit = True
                raise RequestBodyTooLarge(sent)
            tail = (tail + chunk)[-SUMMARY_TAIL_BYTES:]
            if capture is not None and len(capture) < MAX_CAPTURE_BYTES:
                capture += chunk
            self.recorder.request["body_bytes"] = sent
            self.moved()
            yield chunk
        self.recorder.on_request_body_end(sent, tail)
        if capture is not None:
            self.captured = bytes(capture)
