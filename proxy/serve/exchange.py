"""The pass-through: one Exchange per proxied request.

It sends the client's request upstream as received, copies each upstream chunk downstream as it
arrives (a slow client slows upstream reads), mirrors how the upstream ended (a reset is a reset,
a FIN is a FIN, a clean end is a clean end), and tells the recorder what happened at a few named
points. It knows nothing about JSON or dialects. Every exchange ends in exactly one trace record,
whatever happens, including client aborts, watchdogs and shutdown.

`_exchange` reads top to bottom as the life of a request. The response body takes one of two
paths, the relay (body/relay.py, from the upstream connection's callback) or the await loop
(`_copy_awaiting`, with a fault's stage in it when a rule is armed), and both hand every piece
the client is sent to the one sink, `Downstream` (body/downstream.py). Collaborators get the
small state they need: the relay and the fault stage the sink, a streamed upload its own
`StreamedBody`, the pool an `Attempt`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from datetime import datetime, timezone

import aiohttp
from aiohttp import hdrs, web
from yarl import URL

from streamtap.diagnostics.verdict.fingerprints import fingerprint, looks_like_reset
from streamtap.diagnostics.record.ending import UPSTREAM_ENDED, Ending
from streamtap.diagnostics.record.recorder import Limits, Recorder
from streamtap.diagnostics.redaction.redact import safe_id

from streamtap.proxy.connection import sockets
from streamtap.proxy.connection.endings import break_framing, end_response
from streamtap.proxy.serve import upload
from streamtap.proxy.serve.body import relay
from streamtap.proxy.serve.body import tap as bodytap
from streamtap.proxy.serve.body.downstream import Downstream
from streamtap.proxy.serve.passthrough import (PassThroughResponse, downstream_response_headers,
                                                has_dot_dot_segment, proxy_error_response,
                                                session_id_for, upstream_request_headers,
                                                upstream_url_for)
from streamtap.diagnostics.faults.rules import FAULT_HEADER, FaultError, parse_fault_header
from streamtap.proxy.faults.inject import FaultRun
from streamtap.proxy.serve.upstream import Attempt
from streamtap.proxy.serve.watchdog import Watchdog

# An upstream body that fails on its way in: mirrored to the client (never a clean short body).
UPSTREAM_FAILURES = (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, OSError)
# aiohttp adds these to an upstream request unless told not to; the proxy adds nothing of its own.
SKIP_AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
TRACE_ID_HEADER = "x-streamtap-trace-id"  # added to every answer only with trace_header = true


class Exchange:
    """One client request and its upstream response, from arrival to trace record."""

    def __init__(self, proxy, request: web.Request, route, rest: str):
        self.proxy = proxy
        self.request = request
        self.route = route
        self.rest = rest or "/"
        config = proxy.config
        self.loop = asyncio.get_running_loop()
        # perf_counter, not loop.time(): uvloop's clock moves once per loop iteration, in whole
        # milliseconds, and frame times are what a record is for.
        self.clock = time.perf_counter
        self.t0 = self.clock()
        self.task = asyncio.current_task()
        self.interrupted: str | None = None  # shutdown | idle | progress
        self.recorded = False  # its one record is handed over (by run's end, or by force_end)
        self.upstream: aiohttp.ClientResponse | None = None
        self.response: web.StreamResponse | None = None
        self.fault: FaultRun | None = None
        self.request_body = b""  # a body read whole (kept for --capture-bodies)
        self.upload: upload.StreamedBody | None = None  # a body streamed as it arrives
        now = datetime.now(timezone.utc)
        self.started = now
        wd = config.watchdog
        self.ending = Ending(watchdog={"connect_timeout_ms": wd.connect_timeout_ms,
                                       "idle_timeout_ms": wd.idle_timeout_ms,
                                       "progress_timeout_ms": wd.progress_timeout_ms})
        headers = request.headers
        self.recorder = Recorder(
            trace_id=secrets.token_hex(8),
            session_id=session_id_for(headers, config.session_headers, config.session),
            message_id=safe_id(headers.get("x-streamtap-message")
                               or headers.get("x-opencode-request")),
            started_at=now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            route=route.name, provider=route.name, configured_dialect=route.dialect,
            limits=Limits(max_frames=config.max_frames, max_line=config.max_line_bytes,
                          max_shapes=config.max_shapes,
                          keep_ratelimit_headers=config.keep_ratelimit_headers),
            capture=config.capture_bodies,
            upstream_url=upstream_url_for(route.url, self.rest))
        # Where the response body goes, and the record of what the client was sent.
        self.downstream = Downstream(self.recorder.feed,
                                     bytearray() if config.capture_bodies else None)
        # The request on its way upstream: filled by the pool (a stale-connection retry); tells
        # the timeline when a connection was had and when the request went out.
        self.attempt = Attempt(connected=self._connected, sent=self._sent)
        self.trace_header = config.trace_header
        self.watchdog = Watchdog(self, wd.idle_timeout_ms, wd.progress_timeout_ms)

    def now(self) -> float:
        """Milliseconds since the request arrived."""
        return (self.clock() - self.t0) * 1000.0

    def note(self, note: str) -> None:
        """A fact for the record's `notes` (a fixed word of ours)."""
        self.ending.notes.append(note)

    def interrupt(self, reason: str) -> None:
        """streamtap ends this exchange itself (shutdown, a watchdog): cancel whatever it awaits."""
        if self.interrupted is None and self.task is not None and not self.task.done():
            self.interrupted = reason
            self.task.cancel()

    def force_end(self) -> None:
        """A second stop signal: the process is about to exit, so nothing is awaited. Close the
        upstream, reset the client (it must see an error, never a clean end) and hand the record
        over with what was seen until now (if its task runs again, it writes no second record)."""
        if self.recorded:
            return
        self.ending.shutdown_forced = True
        self.close_upstream()
        sockets.reset(self.request.transport)
        self.ending.downstream = "aborted"
        self.ending.downstream_end_ms = self.now()
        self._write_record(finish_now=True)

    # -- the exchange -------------------------------------------------------------------------
    async def run(self) -> web.StreamResponse:
        self.proxy.inflight.add(self)
        self.proxy.loop_lag.open(self, self.t0)
        try:
            answer = await self._run()
            if self.trace_header and answer is not None and not answer.prepared:
                # streamtap's own answers and injected ones, not yet sent: name the record too.
                answer.headers[TRACE_ID_HEADER] = self.recorder.trace_id
            return answer
        finally:
            self.proxy.inflight.discard(self)
            self.watchdog.stop()
            self.ending.proxy_lag_max_ms, self.ending.proxy_lag_at_ms = \
                self.proxy.loop_lag.close(self)
            self._write_record()

    async def _run(self) -> web.StreamResponse:
        try:
            return await self._exchange()
        except asyncio.CancelledError:
            if self.interrupted is None:
                # aiohttp cancels the handler when the client disconnects.
                self.ending.downstream = "client_gone"
                self.ending.downstream_end_ms = self.now()  # the silence before it is evidence
                self.close_upstream()
                raise
            self.task.uncancel()
            return self._interrupted()
        except Exception as exc:  # a bug of ours must not lose the record or hang the client
            self.proxy.log.exception("proxy_internal_error", route=self.route.name)
            self.ending.proxy_reason = "internal_error"
            self.ending.error = fingerprint("proxy", exc)
            self.close_upstream()
            if self.response is not None and self.response.prepared:
                sockets.abort(self.request.transport)
                self.ending.downstream = "aborted"
                return self.response
            return self._answer(500, "streamtap_internal_error",
                                f"streamtap failed while proxying: {type(exc).__name__}")

    async def _exchange(self) -> web.StreamResponse:
        """The life of a request: read and check it, choose its fault, send it upstream, answer
        with the upstream's head, then copy the body until it ends one way or another. Each
        step returns the answer when the exchange ends there."""
        refused = await self._take_request()
        if refused is not None:
            return refused
        refused = self._arm_fault()
        if refused is not None:
            return refused
        self.watchdog.start()
        if self.fault is not None:
            answered = await self.fault.before_upstream()
            if answered is not None:
                return answered
        upstream = await self._send()
        if upstream is None:
            return self.response  # type: ignore[return-value]
        response = self._head_from(upstream)
        ended = await self._send_head(upstream, response)
        if ended is not None:
            return ended
        return await self._copy_body(upstream, response)

    async def _take_request(self) -> web.Response | None:
        """Read the request's head (a body past SUMMARY_PREFIX_BYTES is streamed later, as it
        arrives) for the recorder; the refusal when it is too large or its path leaves the
        route."""
        request, ending = self.request, self.ending
        limit = self.proxy.config.max_request_body_bytes
        head = await upload.read_head(request, limit)
        body, complete = head if head is not None else (b"", True)
        self.recorder.on_request(request.method, self.rest, request.headers.items(), body,
                                 complete)
        if head is None:
            return self._too_large()
        if has_dot_dot_segment(self.rest):
            # Refused, not normalised: a client sending `..` is broken or probing, and the
            # record says so (proxy_reason) rather than hiding it by fixing the path.
            ending.proxy_reason = "path_dot_segments_refused"
            return self._answer(400, "streamtap_bad_path",
                                "the path has a `..` segment, which would leave the route's base "
                                f"path ({self.route.url}); streamtap refuses it, nothing was "
                                "forwarded")
        if complete:
            self.request_body = body
        else:  # streamed: sent as it arrives, never held whole
            self.upload = upload.StreamedBody(request.content, body, limit, self.recorder,
                                              self._moved, self.downstream.capture is not None)
        return None

    def _arm_fault(self) -> web.Response | None:
        """The fault this request gets (`self.fault`); a 400 for a fault header that does not
        parse."""
        try:
            self.fault = self._choose_fault()
        except FaultError as exc:
            self.ending.proxy_reason = "bad_fault_header"
            return self._answer(400, "streamtap_bad_fault", f"{exc}")
        return None

    def _head_from(self, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
        """The upstream answered: the client's answer gets its status and headers."""
        self.upstream = upstream
        t = self.now()
        self.downstream.last_byte_ms = t
        self.recorder.on_response(upstream.status, upstream.headers.items(), t)
        response = PassThroughResponse(status=upstream.status, reason=upstream.reason,
                                       headers=downstream_response_headers(upstream.headers))
        if self.trace_header:
            response.headers[TRACE_ID_HEADER] = self.recorder.trace_id
        self.response = self.downstream.response = response
        self.ending.downstream_status = upstream.status
        return response

    async def _send_head(self, upstream: aiohttp.ClientResponse,
                         response: web.StreamResponse) -> web.StreamResponse | None:
        """Send the answer's head (a fault at `headers` acts first); the answer when the exchange
        ends here."""
        try:
            if self.fault is not None:
                answered = await self.fault.after_headers(upstream, response)
                if answered is not None:
                    return answered
            if not response.prepared:
                await response.prepare(self.request)
        except ConnectionError as exc:
            return self._client_gone(exc)
        except UPSTREAM_FAILURES as exc:
            return await self._mirror_upstream_failure(exc)
        return None

    async def _copy_body(self, upstream: aiohttp.ClientResponse,
                         response: web.StreamResponse) -> web.StreamResponse:
        """The relay when it can take the body (no fault armed), else the await loop, through
        the fault's stage when it still has work in the body."""
        if self.fault is not None:
            return await self._copy_awaiting(upstream, response, self.fault.stage())
        body = relay.start(upstream, response, self.request.writer, self.downstream, self.now)
        if body is None:
            return await self._copy_awaiting(upstream, response, None)
        return await self._relayed(body, upstream, response)

    def _choose_fault(self) -> FaultRun | None:
        """The fault this request gets: its own header's rule, else an armed rule that matches."""
        header = self.request.headers.get(FAULT_HEADER)
        header_rule = parse_fault_header(header) if header else None
        recorder = self.recorder
        rule = self.proxy.faults.choose(header_rule, self.route.name,
                                        recorder.request.get("path", ""),
                                        recorder.request.get("model"), recorder.session_id)
        return FaultRun(self, rule) if rule is not None else None

    def _connected(self) -> None:
        self.recorder.mark("upstream_connected", self.now())

    def _sent(self) -> None:
        # The last piece of the body wins: the request is sent when all of it is.
        self.recorder.marks["request_sent"] = self.now()

    def _moved(self) -> None:
        """A piece of a streamed upload went upstream: not upstream idleness."""
        self.downstream.last_byte_ms = self.now()

    # -- answers a fault gives instead of the upstream's -----------------------------------------
    def answer_whole(self, status: int, headers: dict, body: bytes) -> web.Response:
        """A whole answer (an injected HTTP error), recorded as if the upstream had sent it."""
        t = self.now()
        self.recorder.on_response(status, headers.items(), t)
        self.recorder.feed(body, t)
        self.ending.downstream_status = status
        self.downstream.bytes = len(body)
        return web.Response(status=status, body=body, headers=headers)

    async def answer_stream(self, response: web.StreamResponse) -> web.StreamResponse:
        """The head of a streamed answer no upstream gave, sent now; its body goes through
        `downstream` like any other."""
        self.recorder.on_response(response.status, response.headers.items(), self.now())
        self.response = self.downstream.response = response
        self.ending.downstream_status = response.status
        await response.prepare(self.request)
        return response

    async def end_downstream(self, how: str) -> web.StreamResponse:
        """End the client's response as `how` says (connection/endings.py), and record it."""
        self.ending.downstream = await end_response(self.response, self.request.transport, how)
        self.ending.downstream_end_ms = self.now()
        return self.response  # type: ignore[return-value]

    async def finish_upstream_clean(self, upstream: aiohttp.ClientResponse,
                                    response: web.StreamResponse,
                                    linger=None) -> web.StreamResponse:
        """The upstream ended cleanly: end the client's response cleanly too (after `linger()`,
        a `hold` fault's wait, when given)."""
        ending = self.ending
        ending.upstream = "complete"
        ending.upstream_end_ms = self.now()
        upstream.release()
        if linger is not None:
            await linger()
        await response.write_eof()
        ending.downstream_end_ms = self.now()
        return response

    def _too_large(self, partly_sent: bool = False) -> web.Response:
        """413. A body streamed upstream as it arrived (past 2 MiB) may outgrow the limit after
        its first bytes went out: then the upstream saw a request cut short, and the answer and
        the record say so rather than "nothing was sent"."""
        limit = self.proxy.config.max_request_body_bytes
        self.ending.proxy_reason = ("request_too_large_partly_sent" if partly_sent
                                    else "request_too_large")
        sent = (" Its first bytes had already been streamed upstream, which saw an incomplete "
                "request." if partly_sent else "")
        return self._answer(413, "streamtap_request_too_large",
                            f"the request body is larger than streamtap's limit of {limit} "
                            "bytes (max_request_body_bytes); raise it in the config if the "
                            f"provider accepts such bodies.{sent}")

    async def _send(self) -> aiohttp.ClientResponse | None:
        """The request, sent upstream; None when that failed (`self.response` holds the answer:
        a 502, a reset, a 413 for a streamed body that outgrew the limit)."""
        request = self.request
        url = URL(self.route.url + self.rest, encoded=True)
        try:
            headers = upstream_request_headers(request.headers)
            if self.fault is not None and self.fault.cuts_body:
                # A fault that cuts on frames must read them: ask for an uncompressed body.
                headers.popall(hdrs.ACCEPT_ENCODING, None)
            if self.upload is not None:
                data = self.upload.chunks()
                if request.content_length is not None:  # keep it: no chunked upload then
                    headers[hdrs.CONTENT_LENGTH] = str(request.content_length)
            else:
                body = self.request_body
                data = body if (body or request.content_length is not None) else None
            # A fault reads the body through aiohttp (it cuts on frames, stalls, rewrites); any
            # other body is held raw for the relay.
            return await self.proxy.upstream.send(
                self.attempt, request.method, url, headers=headers, data=data,
                raw_body=self.fault is None, allow_redirects=False,
                skip_auto_headers=SKIP_AUTO_HEADERS)
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            if self.upload is not None and self.upload.over_limit:
                self.response = self._too_large(partly_sent=True)
                return None
            connect = isinstance(exc, (aiohttp.ClientConnectorError,
                                       aiohttp.ConnectionTimeoutError))
            if isinstance(exc, aiohttp.ConnectionTimeoutError):
                self.ending.watchdog_fired = "connect"
            self.ending.upstream = "error"
            self.ending.upstream_end_ms = self.now()
            self.ending.error = fingerprint("upstream_connect" if connect else
                                            "upstream_response", exc)
            if (not connect and looks_like_reset(exc)
                    and not self.proxy.config.answer_502_on_upstream_reset):
                # A direct client sees a connection error here, which fetch rejects and SDKs
                # retry; a 502 would be a response to them. So the client's connection is reset
                # as the upstream's was.
                self.response = self.reset_client()
                return None
            what = "connect to" if connect else "get a response from"
            error = self.ending.error  # built by streamtap: str(exc) can quote the URL's query
            self.response = self._answer(
                502, "streamtap_upstream_error",
                f"streamtap could not {what} the upstream of route `{self.route.name}` "
                f"({self.route.url}): {error['message']} ({error['code'] or error['type']})")
            return None

    async def _relayed(self, body: relay.Relay, upstream: aiohttp.ClientResponse,
                       response: web.StreamResponse) -> web.StreamResponse:
        """The hot path: each read of the upstream body is timestamped, recorded and written
        downstream from the upstream connection's callback (body/relay.py), with no await per
        read; this awaits the body's end and ends the exchange the way it ended."""
        try:
            how, exc = await body.ended
        finally:
            body.detach()
        if how == relay.EOF:
            try:
                return await self.finish_upstream_clean(upstream, response)
            except ConnectionError as gone:
                return self._client_gone(gone)
        if how == relay.CLIENT_GONE:
            return self._client_gone(exc)
        if how == relay.UPSTREAM_FAILED and isinstance(exc, UPSTREAM_FAILURES):
            return await self._mirror_upstream_failure(exc)
        raise exc  # a bug of ours, or an error the await loop would not catch either

    async def _copy_awaiting(self, upstream: aiohttp.ClientResponse,
                             response: web.StreamResponse, stage) -> web.StreamResponse:
        """The await loop: read a chunk, timestamp it, pass it through the fault's stage (when
        one is armed) to the sink. The relay's fallback, and the path of every fault."""
        read = upstream.content.readany
        downstream = self.downstream
        send, now = downstream.send, self.now
        try:
            while True:
                try:
                    chunk = await read()
                except UPSTREAM_FAILURES as exc:
                    if stage is not None:
                        await stage.flush()  # what arrived before it broke
                    return await self._mirror_upstream_failure(exc)
                if not chunk:
                    break
                t = now()
                downstream.last_byte_ms = t
                if stage is None:
                    await send(chunk, t)
                    continue
                answered = await stage.passed(chunk, t)
                if answered is not None:
                    return answered
            linger = None
            if stage is not None:
                await stage.flush()
                linger = stage.linger()
            return await self.finish_upstream_clean(upstream, response, linger)
        except ConnectionError as exc:
            return self._client_gone(exc)

    async def _mirror_upstream_failure(self, exc: BaseException) -> web.StreamResponse:
        """The upstream died mid-body: end the client's connection the same way, with no final
        chunk, so it sees an error (never a clean but short body)."""
        ending = self.ending
        ending.upstream_end_ms = self.now()
        ending.error = fingerprint("upstream_read", exc)
        transport = self.request.transport
        self.close_upstream()
        if isinstance(exc, bodytap.MalformedBodyError):
            ending.upstream = "malformed"
            # The client's parser meets the upstream's own broken bytes, as it would directly.
            if break_framing(self.response, transport, exc.malformed):
                ending.notes.append("malformed_framing_passed_on")
        await sockets.drain(transport)
        if ending.upstream == "malformed":
            sockets.close(transport)
        elif looks_like_reset(exc):
            ending.upstream = "reset"
            sockets.reset(transport)
        else:
            ending.upstream = "truncated"
            sockets.close(transport)
        ending.downstream = "aborted"
        ending.downstream_end_ms = self.now()
        return self.response  # type: ignore[return-value]

    def reset_client(self) -> web.StreamResponse:
        """Reset the client's connection before any response byte reached it: what a client
        talking to an upstream that reset sees. Returns a response for aiohttp that can never be
        sent (its connection is gone); the record has no downstream status."""
        self.close_upstream()
        sockets.reset(self.request.transport)
        self.ending.downstream = "aborted"
        self.ending.downstream_status = None
        self.ending.downstream_end_ms = self.now()
        return web.Response(status=502)

    def _client_gone(self, exc: BaseException) -> web.StreamResponse:
        self.ending.downstream = "client_gone"
        self.ending.downstream_end_ms = self.now()
        if self.ending.error is None:
            self.ending.error = fingerprint("downstream_write", exc)
        self.close_upstream()
        return self.response  # type: ignore[return-value]

    def _interrupted(self) -> web.StreamResponse:
        """After streamtap's own cancel: abort both sides, no awaiting."""
        reason = self.interrupted
        if reason == "shutdown":
            self.ending.shutdown = True
        else:
            self.ending.watchdog_fired = reason
        self.close_upstream()
        if self.response is not None and self.response.prepared:
            sockets.abort(self.request.transport)
            self.ending.downstream = "aborted"
            self.ending.downstream_end_ms = self.now()
            return self.response
        if reason == "shutdown":
            return self._answer(503, "streamtap_shutdown",
                                "streamtap is shutting down; the request was not completed")
        return self._answer(504, f"streamtap_watchdog_{reason}",
                            f"streamtap's {reason} watchdog fired before the response started")

    def close_upstream(self) -> None:
        """Close (not release) the upstream connection, so the provider stops generating."""
        if self.upstream is not None and not self.upstream.closed:
            if self.ending.upstream not in UPSTREAM_ENDED:
                self.ending.upstream = "closed_by_proxy"
                self.ending.upstream_end_ms = self.now()
            self.upstream.close()

    def _answer(self, status: int, code: str, message: str) -> web.Response:
        self.ending.downstream_status = status
        self.ending.downstream_end_ms = self.now()
        response = proxy_error_response(status, code, message)
        self.downstream.bytes = len(response.body)  # type: ignore[arg-type]
        return response

    # -- the record ------------------------------------------------------------------------------
    def _write_record(self, finish_now: bool = False) -> None:
        """Finish the record and hand it to the store, once. Synchronous: this runs even after a
        cancel. `finish_now` finishes it here: the loop may run on after a forced end and touch
        `ending`, so the store's thread must not read it then."""
        if self.recorded:
            return
        self.recorded = True
        try:
            self.ending.downstream_bytes = self.downstream.bytes
            self.ending.upstream_retry = self.attempt.retry
            if self.fault is not None:
                self.ending.fault = self.fault.as_record()
            if (self.ending.downstream_status is None and self.response is not None
                    and self.response.prepared):  # a status line the client was sent
                self.ending.downstream_status = self.response.status
            recorder, ending, duration = self.recorder, self.ending, self.now()
            recorder.on_exchange_end(ending, duration)
            captured = None
            capture = self.downstream.capture
            if capture is not None:
                streamed = self.upload.captured if self.upload is not None else None
                captured = {"request": self.request_body if streamed is None else streamed,
                            "response": bytes(capture)}
            # The exchange is over: nothing touches recorder or ending again, so the record can
            # be finished on the store's thread rather than here on the event loop.
            record = recorder.finish(ending, duration) if finish_now else (
                lambda: recorder.finish(ending, duration))
            self.proxy.store.submit(record, self.started, captured, then=self.proxy.finished)
        except Exception:  # never let bookkeeping break the client's response
            self.proxy.log.exception("record_failed", route=self.route.name)
