"""Folds one exchange into a trace record as it happens: the proxy calls it at a few named points
(request, response headers, each body chunk, the end) with timestamps, and gets a record back.

The recorder knows dialects and the record schema; the proxy knows neither. `feed()` is the hot
path: one call per upstream chunk, a few microseconds per frame.
"""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass

import msgspec

from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.verdict.classify import classify
from streamtap.diagnostics.dialects import SOURCE_CONTENT_TYPE, SOURCE_FALLBACK, choose
from streamtap.diagnostics.dialects.sniff import SniffingSse
from streamtap.diagnostics.dialects.base import (FRAMING_BODY, FRAMING_NONE, Dialect,
                                                  field_line_error, frame_decoder)
from streamtap.diagnostics.dialects.json_body import JsonBody, provider_error_summary
from streamtap.diagnostics.redaction.echoes import RequestEchoes, remove_credentials_everywhere
from streamtap.diagnostics.redaction.messages import settle_messages
from streamtap.diagnostics.record.schema import SCHEMA_VERSION
from streamtap.diagnostics.record.ending import Ending, close_facts, proxy_lag
from streamtap.diagnostics.record.facts import facts_from_record
from streamtap.diagnostics.trace_record import Outcome, TraceRecord
from streamtap.diagnostics.redaction.redact import (REQUEST_HEADERS_KEPT, RESPONSE_HEADERS_KEPT,
                                                    find_request_id, keep_headers, query_keys,
                                                    redact_path)
from streamtap.diagnostics.record.request_summary import (keys_from_tail, summarize_partial_body,
                                                            summarize_request)
from streamtap.diagnostics.record.shapes import DEFAULT_MAX_SHAPES, ShapeTable
from streamtap.diagnostics.decode.sse import DEFAULT_MAX_LINE, OTHER_FIELD
from streamtap.diagnostics.dialects.stream import StreamState, token
from streamtap.diagnostics.verdict.outward import with_client_view

TIMELINE_MARKS = ("request_received", "upstream_connected", "request_sent", "response_headers",
                  "first_byte", "first_event", "first_progress", "last_progress", "terminal_event",
                  "upstream_end", "downstream_end", "last_byte", "last_event")



@dataclass(frozen=True)
class Limits:
    max_frames: int = 10_000
    max_line: int = DEFAULT_MAX_LINE
    max_body_parse: int = 8 * 1024 * 1024  # a JSON body larger than this is counted, not parsed
    max_shapes: int = DEFAULT_MAX_SHAPES
    keep_ratelimit_headers: bool = False


class Recorder:
    def __init__(self, *, trace_id: str, session_id: str, message_id: str | None,
                 started_at: str, route: str, provider: str, configured_dialect: str | None = None,
                 limits: Limits = Limits(), capture: bool = False,
                 upstream_url: str | None = None):
        self.limits = limits
        self.trace_id = trace_id
        self.session_id = session_id
        self.message_id = message_id
        self.started_at = started_at
        self.route = route
        self.provider = provider
        # scheme://host:port/path from the route's configured URL and the redacted request path:
        # never the query (where `?key=` API keys travel), so it holds no secret and no content.
        self.upstream_url = upstream_url
        self.configured_dialect = configured_dialect
        self.capture = capture
        self.marks: dict[str, float | None] = dict.fromkeys(TIMELINE_MARKS)
        self.marks["request_received"] = 0.0
        self.request: dict = {}
        # The request's credentials and body, to remove what the answer quotes back of them.
        self.echoes = RequestEchoes()
        self._real_path = ""
        self._partial_json = False  # a streamed JSON request body: its tail may name the model
        self.response: dict | None = None
        self.request_id: str | None = None
        self.state = StreamState()
        self.shapes = ShapeTable(max_shapes=limits.max_shapes)
        self.body_shape: int | None = None  # the shape of a whole JSON body (json dialect)
        self.dialect: Dialect | None = None
        # How the dialect was chosen: one of the fixed DIALECT_SOURCES names, never request text.
        self.dialect_source: str | None = None
        self._decoder = None  # SseDecoder | NdjsonDecoder | JsonArrayDecoder
        self._decompress = None
        self._body: bytearray | None = None
        self._stream_closed = False
        self.stream_bytes = 0
        self.frame_count = 0
        self._head: list[list] = []
        self._tail: deque[list] = deque(maxlen=max(limits.max_frames - limits.max_frames // 2, 0))
        self._head_cap = limits.max_frames // 2
        self._last_frame_ms: float | None = None
        self._last_byte_ms: float | None = None
        self.max_gap_ms = 0.0

    # -- the named points -----------------------------------------------------------------
    def on_request(self, method: str, raw_path: str, headers, body: bytes,
                   complete: bool = True) -> None:
        """`body` is the whole request body, or (`complete` False) the first bytes of one too
        large to hold: it is streamed upstream and `on_request_body_end` tells its end."""
        path, _, query = raw_path.partition("?")
        headers = list(headers)
        # The dialect is chosen from the real path: the recorded one may have a segment redacted.
        # Kept in memory only, never written to the record.
        self._real_path = path
        self.request = {
            "method": method,
            "path": redact_path(path),
            "query_keys": query_keys(query) if query else [],
            "body_bytes": len(body),
            "headers": keep_headers(headers, REQUEST_HEADERS_KEPT),
        }
        self._partial_json = not complete and body.lstrip()[:1] == b"{"
        if complete:
            self.request.update(summarize_request(body, path))
        else:
            self.request.update(summarize_partial_body(body, path))
        names = self.request.get("tool_names") or ()
        self.state.defined_tool_names = self.shapes.defined_tool_names = frozenset(names)
        # The model and tool names are in the record anyway: a message naming them keeps them.
        self.echoes = RequestEchoes.from_request(headers, query, body, complete,
                                                 kept=[self.request.get("model") or "", *names])

    def on_request_body_end(self, body_bytes: int, tail: bytes) -> None:
        """A streamed request body was sent whole: its size, and its last bytes (a model key an
        SDK writes after the messages is found there)."""
        self.request["body_bytes"] = body_bytes
        if self._partial_json:
            for key, value in keys_from_tail(tail).items():
                self.request.setdefault(key, value)

    def on_exchange_end(self, ending: Ending, duration_ms: float) -> None:
        """The proxy is done; the record is finished later, on the store's thread, where records
        wait when the disk is slow. None of them may hold a request body there: the stream is
        closed now, and the provider's messages (the only strings checked against the request)
        are looked up in the body before it is let go."""
        self._close_stream(self._end_ms(ending, duration_ms))
        texts = list(self.state.error_texts)
        if isinstance(self.dialect, JsonBody) and self.dialect.error is not None:
            texts.append(self.dialect.error.get("message"))
        self.echoes.check_early(texts)

    def mark(self, name: str, t_ms: float) -> None:
        """Set a timeline mark once: the first time is the one that counts."""
        if self.marks.get(name) is None:
            self.marks[name] = t_ms

    def on_response(self, status: int, headers, t_ms: float) -> None:
        self.mark("response_headers", t_ms)
        kept = keep_headers(headers, RESPONSE_HEADERS_KEPT, self.limits.keep_ratelimit_headers)
        content_type = kept.get("content-type")
        encoding = kept.get("content-encoding")
        self.response = {"status": status, "content_type": content_type,
                         "content_encoding": encoding, "headers": kept}
        self.request_id = find_request_id(kept)
        dialect_class, self.dialect_source = choose(self.configured_dialect, self._real_path,
                                                    content_type)
        if status >= 400 and dialect_class.framing != FRAMING_BODY:
            dialect_class = JsonBody  # an error body is JSON whatever the route streams
            self.dialect_source = (SOURCE_CONTENT_TYPE if "json" in (content_type or "")
                                   else SOURCE_FALLBACK)
        self.dialect = dialect_class(self.state)
        framing = dialect_class.framing
        if framing == FRAMING_BODY:
            self._body = bytearray()
        else:
            self._decoder = frame_decoder(framing, self.limits.max_line, keep_fields=True)
        if encoding and framing != FRAMING_NONE:
            self._setup_decompression(encoding.lower())

    def _setup_decompression(self, encoding: str) -> None:
        if encoding in ("gzip", "x-gzip", "deflate"):
            self._decompress = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header
        elif encoding != "identity":
            # br, zstd: bytes still pass through; we just cannot look inside.
            self.state.protocol_error("undecoded_encoding")
            self._decoder = None
            self._body = None

    def feed(self, chunk: bytes, t_ms: float) -> None:
        """One upstream body chunk, as on the wire."""
        self.stream_bytes += len(chunk)
        self._last_byte_ms = t_ms
        if self.marks["first_byte"] is None:
            self.marks["first_byte"] = t_ms
        if self._decompress is not None:
            try:
                chunk = self._decompress.decompress(chunk)
            except zlib.error:
                self.state.protocol_error("decode_error")
                self._decompress = self._decoder = self._body = None
                return
        if self._decoder is not None:
            frames = self._decoder.feed(chunk)
            if frames:
                self._on_frames(frames, t_ms)
            self._on_field_lines(t_ms)
        elif self._body is not None:
            if len(self._body) + len(chunk) <= self.limits.max_body_parse:
                self._body += chunk
            else:
                self.state.protocol_error("body_too_large_to_parse")
                self._body = None

    def _on_frames(self, frames: list, t_ms: float) -> None:
        """The frames one chunk completed; they share its arrival time (so one gap check)."""
        last = self._last_frame_ms
        if last is None:
            last = self.marks["response_headers"] or t_ms
        if t_ms - last > self.max_gap_ms:
            self.max_gap_ms = t_ms - last
        self._last_frame_ms = t_ms
        self.frame_count += len(frames)
        dialect_frame = self.dialect.on_frame
        shape_of = self.shapes.index_of
        head, tail, head_cap = self._head, self._tail, self._head_cap
        for frame in frames:
            if frame.comment:
                self.state.emit(ev.KEEPALIVE, t_ms)
                kind = ev.KEEPALIVE
                shape = shape_of(None, frame.data, kind)
            elif frame.unterminated:
                kind = ev.UNTERMINATED  # not interpreted: clients drop it too
                shape = None
            elif frame.oversized:  # its data was not kept (memory is bounded): nothing to read
                kind = ev.UNKNOWN
                shape = None
            else:
                kind = dialect_frame(frame, t_ms)
                shape = shape_of(frame.event, frame.data, kind)
            if len(head) < head_cap:
                head.append((t_ms, frame.size, kind, shape))
            else:
                tail.append((t_ms, frame.size, kind, shape))

    def _on_field_lines(self, t_ms: float) -> None:
        """SSE field lines no client dispatches (`error: {...}`): an error in one is evidence."""
        take = getattr(self._decoder, "take_fields", None)
        if take is not None:
            for name, value in take():
                field_line_error(name, value, self.state, t_ms)

    @staticmethod
    def _end_ms(ending: Ending, duration_ms: float) -> float:
        return ending.upstream_end_ms if ending.upstream_end_ms is not None else duration_ms

    def _close_stream(self, t_ms: float) -> None:
        """End of the body, however it ended: flush the decoder and let the dialect settle.
        Once: the exchange's end closes it, and `finish` only when no exchange did (tests)."""
        if self._stream_closed:
            return
        self._stream_closed = True
        if self._decompress is not None and self._decoder is not None:
            try:
                rest = self._decompress.flush()
            except zlib.error:
                rest = b""
            if rest:
                self._on_frames(self._decoder.feed(rest), t_ms)
        if self._decoder is not None:
            leftover = self._decoder.close()
            if leftover:
                self._on_frames(leftover, t_ms)
            self._on_field_lines(t_ms)
            if self._decoder.overlong_lines:
                self.state.protocol_errors["line_too_long"] = self._decoder.overlong_lines
            if getattr(self._decoder, "oversized_events", 0):
                self.state.protocol_errors["event_too_long"] = self._decoder.oversized_events
        if self._body is not None and self.dialect is not None:
            body = bytes(self._body)
            self.dialect.on_body(body, t_ms)
            if body.strip():
                self.body_shape = self.shapes.index_of(None, body, "body")
        if self.dialect is not None:
            self.dialect.on_end(t_ms)

    def _unknown_fields(self) -> dict[str, int]:
        """Counts of SSE field names clients ignore. A name is one identifier of at most 32
        characters before a colon (decode/sse.py: no sentence, never the value), and must pass
        `token()` (the secret scrubber) too, or it counts as `<other>`."""
        counts: dict[str, int] = {}
        for name, count in getattr(self._decoder, "unknown_fields", {}).items():
            label = name if token(name) == name else OTHER_FIELD
            counts[label] = counts.get(label, 0) + count
        return counts

    def _source(self) -> str | None:
        """A sniffed stream whose frames proved no dialect fell back to plain `sse`."""
        if isinstance(self.dialect, SniffingSse) and self.dialect.sniffed is None:
            return SOURCE_FALLBACK
        return self.dialect_source if self.dialect is not None else None

    # -- the end ------------------------------------------------------------------------------
    def finish(self, ending: Ending, duration_ms: float) -> TraceRecord:
        """Close the books and return the trace record."""
        end_ms = self._end_ms(ending, duration_ms)
        self._close_stream(end_ms)
        state = self.state
        marks = self.marks
        marks["first_event"] = state.first_event_ms
        marks["first_progress"] = state.first_progress_ms
        marks["last_progress"] = state.last_progress_ms
        marks["terminal_event"] = state.terminal_ms
        marks["upstream_end"] = ending.upstream_end_ms
        marks["downstream_end"] = ending.downstream_end_ms
        marks["last_byte"] = self._last_byte_ms
        marks["last_event"] = state.last_event_ms
        status = self.response["status"] if self.response else None
        error = dict(ending.error) if ending.error else None
        provider_error = None
        if isinstance(self.dialect, JsonBody) and self.dialect.error is not None:
            if status is not None and status >= 400:
                provider_error = provider_error_summary(self.dialect.error)
            else:  # an error body inside a 200: the stream's own error
                fields = self.dialect.error
                state.stream_error("wrapped_chunk", end_ms, fields.get("type"),
                                   fields.get("code"), fields.get("message"))
        if status is not None and status >= 400:
            error = error or {"where": "upstream_response", "type": "HTTPError",
                              "message": None, "code": None, "cause": None}
            error["status"] = status
            error.update(provider_error or
                         {"error_type": None, "error_code": None, "error_message": None})
        slots = [(entry, "message", text) for entry, text in zip(state.errors, state.error_texts)]
        if provider_error:
            slots.append((error, "error_message", self.dialect.error.get("message")))
        settle_messages(slots, self.echoes)
        frames = [[round(t, 1), size, kind, shape]
                  for t, size, kind, shape in (*self._head, *self._tail)]
        sections = {
            "request": self.request,
            "response": self.response,
            "correlation": {"request_id": self.request_id, "response_id": state.response_id},
            "timeline": {
                **{name: (round(value, 1) if value is not None else None)
                   for name, value in marks.items()},
                "max_gap_ms": round(self.max_gap_ms, 1),
                "duration_ms": round(duration_ms, 1),
                **proxy_lag(ending),
            },
            "frames_dropped": self.frame_count - len(frames),
            "shapes": self.shapes.shapes,
            "shapes_dropped": self.shapes.dropped,
            "stream": {
                "bytes": self.stream_bytes,
                "frame_count": self.frame_count,
                "event_counts": dict(state.event_counts),
                "delta_keys": list(state.delta_keys),
                "finish_reason": state.finish_reason,
                "usage": dict(state.usage),
                "terminal": state.terminal,
                "unknown_types": list(state.unknown_types),
                "unknown_fields": self._unknown_fields(),
                "tool_calls": [call.as_dict() for call in state.tool_calls.values()],
                "server_tools": [tool.as_dict() for tool in state.server_tools.values()],
                "errors": list(state.errors),
                "protocol_errors": dict(state.protocol_errors),
                "body_shape": self.body_shape,
            },
            "error": error,
            "downstream": {
                "status": ending.downstream_status,
                "ended": ending.downstream,
                "bytes": ending.downstream_bytes,
            },
            "watchdog": {**ending.watchdog, "fired": ending.watchdog_fired},
            "fault": ending.fault,
            "upstream_retry": ending.upstream_retry,
            "close": close_facts(ending, marks, state, duration_ms),
            "capture": self.capture,
        }
        # A request's credential is removed wherever it landed (a path segment, an error code, a
        # response header the provider echoed it in), and so from the index and the log line.
        # Left alone: the identity (streamtap's own values, the configuration's names, which may
        # share a placeholder key's word such as `ollama`, and the user's labels kept as given)
        # and the frames (numbers and event kinds).
        record = msgspec.convert({
            "schema_version": SCHEMA_VERSION,
            "trace_id": self.trace_id,
            "session_id": self.session_id,
            "message_id": self.message_id,
            "started_at": self.started_at,
            "route": self.route,
            "provider": self.provider,
            "dialect": self.dialect.name if self.dialect else None,
            "dialect_source": self._source(),
            "upstream_url": remove_credentials_everywhere(self.upstream_url, self.echoes),
            **remove_credentials_everywhere(sections, self.echoes),
            "frames": frames,
        }, TraceRecord)
        stream = record.stream
        outcome = with_client_view(classify(facts_from_record(record, state, ending)),
                                   record.dialect, stream.finish_reason,
                                   any(call.completed for call in stream.tool_calls))
        outcome = remove_credentials_everywhere(outcome, self.echoes)
        return msgspec.structs.replace(record, outcome=msgspec.convert(outcome, Outcome))
