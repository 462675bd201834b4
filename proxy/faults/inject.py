"""The machinery that carries out a fault: cut, stall, inject an error, slow down.

A FaultRun belongs to one Exchange. Before the body it can answer instead of the upstream
(`http_error`, and any action at `request`) or act right after the headers (a `reset` at either
point resets the client's connection before any response byte, as an upstream reset would); in the body it
forwards frame-aligned (holding back a frame until it is complete, so a cut lands on a frame
boundary) and acts where the trigger fires. The recorder is fed what the client received, so an
injected record describes what the client saw.
"""

from __future__ import annotations

import asyncio
import json
import random

from aiohttp import hdrs, web

from streamtap.diagnostics.dialects import dialect_for_path
from streamtap.diagnostics.dialects.errorframes import (body_error_frame, error_body,
                                                         native_error_frame, wrapped_error_frame)
from streamtap.diagnostics.faults.rules import FaultRule
from streamtap.diagnostics.faults.triggers import FrameScanner

from streamtap.proxy.connection.endings import end_response, stall


# The record's `fault.fallback` when a frame outgrew what may be held back: the rule did not fire.
FELL_BACK_FRAME_TOO_LARGE = "frame_too_large_forwarded_unbuffered"
# ... and when a rule with `times` was chosen by requests running at once and another of them
# used its last fire before this one reached the trigger: the rule did not fire here.
SPENT_BY_ANOTHER_REQUEST = "rule_spent_by_a_concurrent_request"
FALLBACK_SLICE = 256 * 1024


class FaultRun:
    def __init__(self, exchange, rule: FaultRule):
        self.ex = exchange
        self.rule = rule
        self.trigger = rule.trigger
        self.fired = False
        self.fired_at_ms: float | None = None
        self.frames_before = 0
        # Why the rule gave up and forwarded the rest unbuffered (a constant of ours, never
        # upstream text): FELL_BACK_FRAME_TOO_LARGE, SPENT_BY_ANOTHER_REQUEST.
        self.fallback: str | None = None
        self._jitter = random.Random(rule.seed)

    def as_record(self) -> dict:
        rule = self.rule
        record = {"name": rule.name, "action": rule.action, "at": rule.at, "fired": self.fired,
                  "fired_at_ms": round(self.fired_at_ms, 1) if self.fired_at_ms is not None
                  else None, "frames_before": self.frames_before, "source": rule.source}
        if self.fallback is not None:
            record["fallback"] = self.fallback
        return record

    @property
    def cuts_body(self) -> bool:
        """Whether the fault needs to read the body frame by frame (so: uncompressed)."""
        return not self.trigger.before_body

    @property
    def slows_every_chunk(self) -> bool:
        """Once fired, whether every later chunk is slowed (throttle, delay per frame)."""
        return self.rule.action == "throttle" or (self.rule.action == "delay"
                                                  and self.rule.per_frame)

    def _fire(self, frames_before: int = 0) -> bool:
        """Count the fire, or decline it (False) if the rule got spent meanwhile: a rule is chosen
        when a request starts, but `times` counts fires, and concurrent requests can reach the
        trigger after another one used the last. Checked and counted with no await between."""
        if self.rule.spent:
            self.fallback = SPENT_BY_ANOTHER_REQUEST
            return False
        self.fired = True
        self.rule.fired += 1  # `times` counts fires: a rule spent only by requests it acted on
        self.fired_at_ms = self.ex.now()
        self.frames_before = frames_before
        return True

    def _delay_s(self) -> float:
        jitter = self._jitter.uniform(0, self.rule.jitter_ms) if self.rule.jitter_ms else 0.0
        return (self.rule.latency_ms + jitter) / 1000.0

    def _dialect(self) -> str | None:
        recorder = self.ex.recorder
        if recorder.dialect is not None and recorder.dialect.name not in ("json", "unknown",
                                                                            "sse"):
            return recorder.dialect.name
        return self.ex.route.dialect or dialect_for_path(recorder.request.get("path", ""))

    def heartbeat(self, response: web.StreamResponse):
        """What a stall or a hold sends every `heartbeat_ms`, or None for silence."""
        if not self.rule.heartbeat_ms:
            return None
        dialect = self.ex.recorder.dialect
        # NDJSON has no comment: a blank line is what its readers skip.
        frame = b"\n" if dialect is not None and dialect.framing == "ndjson" else b": keepalive\n\n"

        async def beat() -> None:
            await self.ex.deliver(response, frame)
        return beat

    def error_frame(self) -> bytes:
        rule = self.rule
        dialect = self._dialect() or "openai-chat"
        if rule.body is not None:
            return body_error_frame(dialect, rule.body)
        build = wrapped_error_frame if rule.style == "wrapped" else native_error_frame
        return build(dialect, rule.type, rule.code, rule.message)

    # -- before the body ----------------------------------------------------------------------
    async def before_upstream(self) -> web.StreamResponse | None:
        """At `request`: act instead of contacting the upstream; None lets the request go on."""
        if self.trigger.kind != "request":
            return None
        rule, ex = self.rule, self.ex
        if not self._fire():
            return None
        if rule.action == "delay":
            await asyncio.sleep(self._delay_s())
            return None
        if rule.action == "throttle":
            return None  # throttling starts with the first byte of the body
        if rule.action == "reset":  # before any response byte, as an upstream reset would be
            return ex.reset_client()
        if rule.action == "http_error":
            body = error_body(self._dialect(), rule.status, rule.type, rule.code, rule.message)
            headers = {hdrs.CONTENT_TYPE: "application/json"}
            if rule.retry_after:
                headers[hdrs.RETRY_AFTER] = rule.retry_after
            payload = json.dumps(body).encode()
            response = web.Response(status=rule.status, body=payload, headers=headers)
            # Feed the recorder as if the provider had answered: the record shows what the
            # client saw, and `fault` says who really did.
            t = ex.now()
            ex.recorder.on_response(rule.status, headers.items(), t)
            ex.recorder.feed(payload, t)
            ex.ending.downstream_status = rule.status
            ex.downstream_bytes = len(payload)
            return response
        # Any other action before a response exists: answer headers of a stream, then act.
        response = web.StreamResponse(status=200, headers={
            hdrs.CONTENT_TYPE: "text/event-stream; charset=utf-8"})
        ex.recorder.on_response(200, response.headers.items(), ex.now())
        ex.response = response
        ex.ending.downstream_status = 200
        await response.prepare(ex.request)
        return await self._act(response, b"", upstream=None)

    async def after_headers(self, upstream, response: web.StreamResponse
                            ) -> web.StreamResponse | None:
        """At `headers` (before they go out for a delay, right after them for the rest)."""
        if self.trigger.kind != "headers" or not self._fire():
            return None
        if self.rule.action == "delay":
            await asyncio.sleep(self._delay_s())
            return None
        if self.rule.action == "throttle":
            return None
        if self.rule.action == "reset" and not response.prepared:
            return self.ex.reset_client()  # the client never gets the headers, as at `request`
        await response.prepare(self.ex.request)
        return await self._act(response, b"", upstream)

    # -- in the body ----------------------------------------------------------------------------
    async def copy(self, upstream, response: web.StreamResponse) -> web.StreamResponse:
        """The fault-mode copy loop: frame-aligned forwarding until the trigger fires."""
        ex = self.ex
        dialect_class = type(ex.recorder.dialect) if ex.recorder.dialect else None
        # Never hold back more than one frame the decoders would keep: past it the frame is
        # unreadable anyway, so the rule falls back to forwarding instead of buffering it.
        hold_limit = ex.recorder.limits.max_line
        scanner = FrameScanner(dialect_class, self.trigger, self.rule.mid_frame, hold_limit) \
            if dialect_class is not None and not self.fired else None
        pending = bytearray()
        delivered = 0  # absolute offset of pending[0]
        first_byte_ms: float | None = None
        read = upstream.content.readany
        while True:
            try:
                chunk = await read()
            except Exception:
                await ex.deliver(response, bytes(pending))  # what arrived before it broke
                raise
            if not chunk:
                break
            t = ex.now()
            if first_byte_ms is None:
                first_byte_ms = t
            ex.last_byte_ms = t
            if self.fallback is not None:  # gave up on a frame too large: forward as it comes
                await ex.deliver(response, chunk)
                continue
            if self.fired:  # a delay or throttle already fired: the rest flows (slowed or not)
                if self.slows_every_chunk:
                    await self._slow_write(response, chunk)
                else:
                    await ex.deliver(response, chunk)
                continue
            pending += chunk
            cut = scanner.feed(chunk, t, t - first_byte_ms) if scanner else None
            if cut is None:
                # Forward whole frames only, so that a later cut can land on a boundary.
                if scanner is not None and scanner.decoder is not None:
                    ready = scanner.offset - delivered
                else:
                    ready = len(pending)
                if ready > 0:
                    await ex.deliver(response, bytes(pending[:ready]))
                    del pending[:ready]
                    delivered += ready
                if len(pending) > hold_limit:
                    # One copy at most: drop the scanner's, then hand the held bytes over in
                    # slices, so the recorder's decoder never sees a second copy at once.
                    self.fallback = FELL_BACK_FRAME_TOO_LARGE
                    scanner = None
                    held = memoryview(pending)
                    for start in range(0, len(held), FALLBACK_SLICE):
                        await ex.deliver(response, bytes(held[start:start + FALLBACK_SLICE]))
                    held.release()
                    pending = bytearray()
                continue
            if not self._fire(scanner.frames_before):  # spent by another request meanwhile
                await ex.deliver(response, bytes(pending))
                pending.clear()
                scanner = None
                continue  # self.fallback is set: the rest is forwarded as it comes
            head = bytes(pending[:cut - delivered])
            # A slowing fault delivers everything from the cut on, the terminal frame included
            # (only drop_terminal leaves it out, and it ends the stream in _act).
            rest = bytes(pending[cut - delivered:])
            if self.rule.action == "hold":  # the terminal event goes out; the close waits
                await ex.deliver(response, bytes(pending))
                pending.clear()
                scanner = None
                continue
            if self.rule.action in ("delay", "throttle"):
                await ex.deliver(response, head)
                if self.slows_every_chunk:
                    await self._slow_write(response, rest)
                else:
                    await asyncio.sleep(self._delay_s())
                    await ex.deliver(response, rest)
                    scanner = None  # the delay happened once: forward the rest as it comes
                pending.clear()
                continue
            return await self._act(response, head, upstream)
        await ex.deliver(response, bytes(pending))
        if self.fired and self.rule.action == "hold":
            return await self._hold(upstream, response)
        return await ex.finish_upstream_clean(upstream, response)

    async def _hold(self, upstream, response: web.StreamResponse) -> web.StreamResponse:
        """The upstream ended after its terminal event; keep the client's connection open
        `duration_ms` (0: until the client leaves), with keep-alives if asked, then end it."""
        ex, rule = self.ex, self.rule
        ex.ending.upstream = "complete"
        ex.ending.upstream_end_ms = ex.now()
        upstream.release()
        await stall(rule.duration_ms / 1000.0, self.heartbeat(response),
                    rule.heartbeat_ms / 1000.0)
        await response.write_eof()
        ex.ending.downstream_end_ms = ex.now()
        return response

    def _frame_pieces(self, data: bytes) -> list[bytes]:
        """`data` cut after each frame end (a blank line; a line for NDJSON), for per-frame delays."""
        dialect = self.ex.recorder.dialect
        if dialect is not None and dialect.framing == "ndjson":
            separator = b"\n"
        else:  # Gemini ends its events with CRLF CRLF
            separator = b"\r\n\r\n" if b"\r\n\r\n" in data else b"\n\n"
        pieces, start = [], 0
        while (end := data.find(separator, start)) >= 0:
            pieces.append(data[start:end + len(separator)])
            start = end + len(separator)
        if start < len(data):
            pieces.append(data[start:])
        return pieces

    async def _slow_write(self, response: web.StreamResponse, data: bytes) -> None:
        ex, rule = self.ex, self.rule
        if rule.action == "delay":
            for piece in self._frame_pieces(data):
                await asyncio.sleep(self._delay_s())
                await ex.deliver(response, piece)
            return
        step = max(1, rule.bytes_per_s // 20)  # 50 ms slices
        for start in range(0, len(data), step):
            piece = data[start:start + step]
            await ex.deliver(response, piece)
            await asyncio.sleep(len(piece) / rule.bytes_per_s)

    async def _act(self, response: web.StreamResponse, head: bytes,
                   upstream) -> web.StreamResponse:
        """Deliver `head`, then end or alter the stream as the rule says."""
        ex, rule = self.ex, self.rule
        if head:
            await ex.deliver(response, head)
        ex.close_upstream()
        action = rule.action
        if action == "stall":
            await stall(rule.duration_ms / 1000.0, self.heartbeat(response),
                        rule.heartbeat_ms / 1000.0)
            action = rule.then
        if action == "error_chunk":
            await ex.deliver(response, self.error_frame())
        how = {"reset": "reset", "truncate": "truncate", "bad_chunk_size": "malformed"}.get(
            action, "close")
        ex.ending.downstream = await end_response(response, ex.request.transport, how)
        ex.ending.downstream_end_ms = ex.now()
        return response
