"""The machinery that carries out a fault: cut, stall, inject an error, slow down.

A FaultRun belongs to one Exchange. Before the body it can answer instead of the upstream
(`http_error`, and any action at `request`) or act right after the headers (a `reset` at either
point resets the client's connection before any response byte, as an upstream reset would). In
the body it is a stage the bytes pass through on their way to the exchange's one sink
(`Downstream.send`): it forwards frame-aligned (holding back a frame until it is complete, so a
cut lands on a frame boundary) and acts where the trigger fires. The recorder is fed what the
client received, so an injected record describes what the client saw.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable

from aiohttp import hdrs, web

from streamtap.diagnostics.dialects import dialect_for_path
from streamtap.diagnostics.dialects.base import FRAMING_NDJSON, FRAMING_SSE, frame_decoder
from streamtap.diagnostics.dialects.errorframes import (body_error_frame, error_body,
                                                         native_error_frame, wrapped_error_frame)
from streamtap.diagnostics.faults.rules import FaultRule
from streamtap.diagnostics.faults.triggers import FrameScanner

from streamtap.proxy.connection.endings import stall


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

    def heartbeat(self) -> Callable[[], Awaitable[None]] | None:
        """What a stall or a hold sends every `heartbeat_ms`, or None for silence."""
        if not self.rule.heartbeat_ms:
            return None
        dialect = self.ex.recorder.dialect
        # NDJSON has no comment: a blank line is what its readers skip.
        frame = b"\n" if dialect is not None and dialect.framing == "ndjson" else b": keepalive\n\n"
        ex = self.ex

        async def beat() -> None:
            await ex.downstream.send(frame, ex.now())
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
            # Recorded as if the provider had answered: the record shows what the client saw,
            # and `fault` says who really did.
            return ex.answer_whole(rule.status, headers, json.dumps(body).encode())
        # Any other action before a response exists: answer headers of a stream, then act.
        await ex.answer_stream(web.StreamResponse(status=200, headers={
            hdrs.CONTENT_TYPE: "text/event-stream; charset=utf-8"}))
        return await self._act(b"")

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
        return await self._act(b"")

    def stage(self) -> FaultStage | None:
        """The stage the body passes through, or None when nothing is left to do in it (a delay
        at `request` or `headers` has fired: the body flows as it comes)."""
        if self.fired and not self.slows_every_chunk:
            return None
        return FaultStage(self)

    async def _act(self, head: bytes) -> web.StreamResponse:
        """Deliver `head`, then end or alter the stream as the rule says."""
        ex, rule = self.ex, self.rule
        if head:
            await ex.downstream.send(head, ex.now())
        ex.close_upstream()
        action = rule.action
        if action == "stall":
            await stall(rule.duration_ms / 1000.0, self.heartbeat(), rule.heartbeat_ms / 1000.0)
            action = rule.then
        if action == "error_chunk":
            await ex.downstream.send(self.error_frame(), ex.now())
        how = {"reset": "reset", "truncate": "truncate", "bad_chunk_size": "malformed"}.get(
            action, "close")
        return await ex.end_downstream(how)

    async def linger(self) -> None:
        """`hold`: the upstream ended after its terminal event; keep the client's connection open
        `duration_ms` (0: until the client leaves), with keep-alives if asked."""
        rule = self.rule
        await stall(rule.duration_ms / 1000.0, self.heartbeat(), rule.heartbeat_ms / 1000.0)


class FaultStage:
    """The body on its way through a fault: frame-aligned forwarding until the trigger fires,
    then the rule's action. Each piece goes on to the exchange's sink (`Downstream.send`)."""

    def __init__(self, run: FaultRun):
        self.run = run
        ex = run.ex
        self.ex = ex
        self.send = ex.downstream.send
        recorder = ex.recorder
        dialect_class = type(recorder.dialect) if recorder.dialect else None
        # Never hold back more than one frame the decoders would keep: past it the frame is
        # unreadable anyway, so the rule falls back to forwarding instead of buffering it.
        self.hold_limit = recorder.limits.max_line
        self.scanner = FrameScanner(dialect_class, run.trigger, run.rule.mid_frame,
                                    self.hold_limit) \
            if dialect_class is not None and not run.fired else None
        self.pending = bytearray()
        self.offset = 0  # absolute offset of pending[0]
        self.first_byte_ms: float | None = None
        self.frames = None  # the decoder that cuts slowed bytes into frames (delay per frame)
        self.partial = 0  # bytes of the frame it is in, already sent

    async def passed(self, chunk: bytes, t: float) -> web.StreamResponse | None:
        """One read of the body (at `t`): forward what may go, act if the trigger fires (then
        the answer, which ends the exchange; else None)."""
        run, ex = self.run, self.ex
        if self.first_byte_ms is None:
            self.first_byte_ms = t
        if run.fallback is not None:  # gave up on a frame too large: forward as it comes
            await self.send(chunk, ex.now())
            return None
        if run.fired:  # a delay or throttle already fired: the rest flows (slowed or not)
            if run.slows_every_chunk:
                await self._slowly(chunk)
            else:
                await self.send(chunk, ex.now())
            return None
        pending, scanner = self.pending, self.scanner
        pending += chunk
        cut = scanner.feed(chunk, t, t - self.first_byte_ms) if scanner else None
        if cut is None:
            # Forward whole frames only, so that a later cut can land on a boundary.
            if scanner is not None and scanner.decoder is not None:
                ready = scanner.offset - self.offset
            else:
                ready = len(pending)
            if ready > 0:
                await self.send(bytes(pending[:ready]), ex.now())
                del pending[:ready]
                self.offset += ready
            if len(pending) > self.hold_limit:
                # One copy at most: drop the scanner's, then hand the held bytes over in
                # slices, so the recorder's decoder never sees a second copy at once.
                run.fallback = FELL_BACK_FRAME_TOO_LARGE
                self.scanner = None
                held = memoryview(pending)
                for start in range(0, len(held), FALLBACK_SLICE):
                    await self.send(bytes(held[start:start + FALLBACK_SLICE]), ex.now())
                held.release()
                self.pending = bytearray()
            return None
        if not run._fire(scanner.frames_before):  # spent by another request meanwhile
            await self.flush()
            self.scanner = None
            return None  # run.fallback is set: the rest is forwarded as it comes
        head = bytes(pending[:cut - self.offset])
        # A slowing fault delivers everything from the cut on, the terminal frame included
        # (only drop_terminal leaves it out, and it ends the stream in _act).
        rest = bytes(pending[cut - self.offset:])
        action = run.rule.action
        if action == "hold":  # the terminal event goes out; the close waits (linger)
            await self.flush()
            self.scanner = None
            return None
        if action in ("delay", "throttle"):
            await self.send(head, ex.now())
            if run.slows_every_chunk:
                await self._slowly(rest)
            else:
                await asyncio.sleep(run._delay_s())
                await self.send(rest, ex.now())
                self.scanner = None  # the delay happened once: forward the rest as it comes
            pending.clear()
            return None
        return await run._act(head)

    async def flush(self) -> None:
        """Forward what is held back: the body ended, or its read failed."""
        pending, self.pending = bytes(self.pending), bytearray()
        await self.send(pending, self.ex.now())

    def linger(self) -> Callable[[], Awaitable[None]] | None:
        """What the clean end waits for between the upstream's end and the client's."""
        return self.run.linger if self.run.fired and self.run.rule.action == "hold" else None

    async def _slowly(self, data: bytes) -> None:
        run, rule, ex = self.run, self.run.rule, self.ex
        if rule.action == "delay":
            for piece in self._frame_pieces(data):
                await asyncio.sleep(run._delay_s())
                await self.send(piece, ex.now())
            return
        step = max(1, rule.bytes_per_s // 20)  # 50 ms slices
        for start in range(0, len(data), step):
            piece = data[start:start + step]
            await self.send(piece, ex.now())
            await asyncio.sleep(len(piece) / rule.bytes_per_s)

    def _frame_pieces(self, data: bytes) -> list[bytes]:
        """`data` cut after each frame that ends in it, as the recorder's decoder frames the
        stream (SSE by the WHATWG rules, NDJSON by lines); the bytes of a frame not yet ended
        follow as one piece. Pieces add up to `data`."""
        if self.frames is None:
            dialect = self.ex.recorder.dialect
            framing = dialect.framing if dialect is not None else FRAMING_SSE
            self.frames = frame_decoder(framing if framing == FRAMING_NDJSON else FRAMING_SSE,
                                        self.hold_limit)
        pieces, start = [], 0
        for frame in self.frames.feed(data):
            end = start + frame.size - self.partial
            self.partial = 0
            pieces.append(data[start:end])
            start = end
        if start < len(data):
            pieces.append(data[start:])
            self.partial += len(data) - start
        return pieces
