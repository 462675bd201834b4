"""The request body on its way upstream: small bodies are read whole (and summarised whole); a
large one is streamed as it arrives, so memory stays flat whatever the client sends, and is
summarised from its first and last bytes (the record says `summary_truncated`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

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


async def stream(exchange, head: bytes) -> AsyncIterator[bytes]:
    """The request body for the upstream, as it arrives: the head already read, then the rest
    chunk by chunk; its size and last bytes go to the recorder at the end. Past the limit it
    stops with RequestBodyTooLarge (and says so on the exchange, which answers 413)."""
    limit = exchange.proxy.config.max_request_body_bytes
    sent = len(head)
    tail = head[-SUMMARY_TAIL_BYTES:]
    exchange.body_head = b""
    capture = bytearray(head) if exchange.capture is not None else None
    yield head
    del head
    async for chunk in exchange.request.content.iter_any():
        sent += len(chunk)
        if sent > limit:
            exchange.body_over_limit = True
            raise RequestBodyTooLarge(sent)
        tail = (tail + chunk)[-SUMMARY_TAIL_BYTES:]
        if capture is not None and len(capture) < MAX_CAPTURE_BYTES:
            capture += chunk
        exchange.recorder.request["body_bytes"] = sent
        # The idle watchdog waits for the upstream; a long upload is not the upstream idling.
        exchange.last_byte_ms = exchange.now()
        yield chunk
    exchange.recorder.on_request_body_end(sent, tail)
    if capture is not None:
        exchange.request_body = bytes(capture)
