"""classify.py's rule table, as a table: facts in, the whole verdict out.

Every row names the rule it pins and asserts everything a user is told: boundary, phase,
confidence, evidence, retry advice and the summary sentence. A rule that changes what it says
fails here, not in an end-to-end test that happens to look at one field.
"""

from __future__ import annotations

import msgspec
import pytest

from streamtap.diagnostics.record.schema import record_as_dict
from streamtap.diagnostics.record import recorder as recorder_module
from streamtap.diagnostics.record.recorder import Ending, Recorder
from streamtap.diagnostics.trace_record import Close, ErrorFacts, ServerTool, StreamError, ToolCall
from streamtap.diagnostics.verdict import classify as cl
from streamtap.diagnostics.verdict import columns, conditions
from streamtap.diagnostics.verdict.classify import Facts, classify
from streamtap.diagnostics.verdict.columns import error_retryable
from streamtap.diagnostics.verdict.sentences import doing, trigger_words

APPLY_PATCH = {"index": 0, "name": "apply_patch", "arg_chunks": 5, "completed": False}
UNNAMED = {"index": 1, "name": None, "arg_chunks": 2, "completed": False}
WEATHER_DONE = {"index": 0, "name": "get_weather", "arg_chunks": 3, "completed": True}


# Facts that hold sections of the record, written here as a record file holds them (JSON) and
# read through the record's own types, as the recorder hands them over.
RECORD_SECTIONS = {"error": ErrorFacts | None, "stream_errors": list[StreamError],
                   "open_tools": list[ToolCall], "completed_tools": list[ToolCall],
                   "server_tools": list[ServerTool], "close": Close}


def facts(**changes) -> Facts:
    """A clean, complete openai-chat stream; each row changes what its rule reads."""
    base = dict(provider="openai", dialect="openai-chat", status=200, error=None,
                upstream="complete", downstream="complete", watchdog_fired=None, watchdog={},
                shutdown=False, proxy_reason=None, fault=None, terminal="[DONE]",
                dialect_has_terminal=True, finish_reason="stop", stream_errors=[],
                phase="after_finish", event_counts={}, frame_count=7)
    typed = {name: msgspec.convert(value, RECORD_SECTIONS[name])
             for name, value in changes.items() if name in RECORD_SECTIONS}
    return Facts(**(base | changes | typed))


def verdict(boundary, phase, confidence, evidence, retryable, summary) -> dict:
    return {"ok": boundary == "none", "boundary": boundary, "phase": phase,
            "confidence": confidence, "evidence": evidence, "retryable": retryable,
            "summary": summary}


OPEN = dict(terminal=None, finish_reason=None)  # a stream that had not ended yet
ROWS = {
    # -- injected_fault ------------------------------------------------------------------------
    "injected reset mid tool call": (
        facts(**OPEN, phase="tool_input", open_tools=[APPLY_PATCH],
              fault={"fired": True, "action": "reset", "at": "event:tool_input_delta:5",
                     "name": "cut5"}),
        verdict("injected", "tool_input", "high", ["injected_reset"], None,
                "streamtap injected reset after the 5th tool_input_delta, as configured (rule "
                "`cut5`), while the model was still writing the arguments of tool call "
                "`apply_patch` (5 chunks); the call never completed, so no tool ran. This is "
                "not a real failure.")),
    "injected http_error at 400, client gave up": (
        facts(**OPEN, status=400, downstream="client_gone", phase="before_progress",
              fault={"fired": True, "action": "http_error", "at": "request", "name": "h"}),
        verdict("injected", "before_response", "high", ["injected_http_error", "client_gave_up"],
                None, "streamtap injected http_error before contacting the upstream, as "
                "configured (rule `h`), before the response started. The client gave up first. "
                "This is not a real failure.")),
    "injected close at headers, status 399 is not an error": (
        facts(**OPEN, status=399, phase="before_progress",
              fault={"fired": True, "action": "close", "at": "headers", "name": "c"}),
        verdict("injected", "before_progress", "high", ["injected_close"], None,
                "streamtap injected close right after the response headers, as configured "
                "(rule `c`), before the model produced any output. This is not a real "
                "failure.")),
    "injected before any response": (
        facts(**OPEN, status=None, phase="before_progress",
              fault={"fired": True, "action": "stall", "at": "request", "name": "s"}),
        verdict("injected", "before_response", "high", ["injected_stall"], None,
                "streamtap injected stall before contacting the upstream, as configured (rule "
                "`s`), before the response started. This is not a real failure.")),
    "injected fault that did not fire is no verdict": (
        facts(fault={"fired": False, "action": "reset", "at": "terminal", "name": "r"}),
        verdict("none", "complete", "high", ["terminal_event", "fault_armed_not_fired"], None,
                "The openai stream completed normally: terminal `[DONE]` after 7 frames. Fault "
                "rule `r` was armed for this request but its trigger `terminal` was never "
                "reached, so it did not fire.")),
    "a fired delay only slowed the stream": (
        facts(fault={"fired": True, "action": "delay", "at": "headers", "name": "d"}),
        verdict("none", "complete", "high", ["terminal_event"], None,
                "The openai stream completed normally: terminal `[DONE]` after 7 frames.")),
    "a fired throttle only slowed the stream": (
        facts(fault={"fired": True, "action": "throttle", "at": "headers", "name": "t"}),
        verdict("none", "complete", "high", ["terminal_event"], None,
                "The openai stream completed normally: terminal `[DONE]` after 7 frames.")),
    # -- forced_shutdown -----------------------------------------------------------------------
    "a second signal mid tool call, with side evidence": (
        facts(**OPEN, shutdown_forced=True, phase="tool_input", open_tools=[APPLY_PATCH],
              upstream="closed_by_proxy", downstream="aborted", unterminated=True),
        verdict("proxy", "tool_input", "high", ["shutdown_forced", "unterminated_frame"], True,
                "streamtap was stopped by a second signal and closed both connections at once, "
                "without waiting for the stream to end; neither openai nor the client ended it. "
                "It was cut while the model was still writing the arguments of tool call "
                "`apply_patch` (5 chunks); the call never completed, so no tool ran.")),
    "a second signal while waiting for the response": (
        facts(**OPEN, shutdown_forced=True, status=None, phase="before_progress",
              frame_count=0),
        verdict("proxy", "before_response", "high", ["shutdown_forced"], True,
                "streamtap was stopped by a second signal and closed both connections at once, "
                "without waiting for the stream to end; neither openai nor the client ended it. "
                "It was cut before the response started.")),
    # -- proxy_shutdown ------------------------------------------------------------------------
    "shutdown mid answer, with side evidence": (
        facts(**OPEN, shutdown=True, phase="text", protocol_errors={"bad_json": 1, "a_code": 2},
              unterminated=True),
        verdict("proxy", "text", "high",
                ["proxy_shutdown", "a_code", "bad_json", "unterminated_frame"], True,
                "streamtap was shut down while the model was writing its answer and cut the "
                "stream itself; neither openai nor the client ended it.")),
    # -- proxy_answered ------------------------------------------------------------------------
    "request too large": (
        facts(**OPEN, status=None, proxy_reason="request_too_large", frame_count=0),
        verdict("proxy", "before_response", "high", ["request_too_large"], False,
                "The request body was larger than streamtap's limit, so streamtap answered 413 "
                "and sent nothing upstream.")),
    "request too large, partly streamed upstream": (
        facts(**OPEN, status=None, proxy_reason="request_too_large_partly_sent", frame_count=0),
        verdict("proxy", "before_response", "high", ["request_too_large_partly_sent"], False,
                "The request body outgrew streamtap's limit while it was being streamed "
                "upstream, so streamtap stopped sending it and answered 413; the upstream saw "
                "an incomplete request.")),
    "bad fault header": (
        facts(**OPEN, status=None, proxy_reason="bad_fault_header", frame_count=0),
        verdict("proxy", "before_response", "high", ["bad_fault_header"], False,
                "The x-streamtap-fault header was malformed, so streamtap answered 400 and sent "
                "nothing upstream.")),
    "internal error": (
        facts(**OPEN, proxy_reason="internal_error", phase="reasoning"),
        verdict("proxy", "reasoning", "high", ["internal_error"], None,
                "Streamtap hit an internal error and ended the exchange.")),
    "a reason the table does not know": (
        facts(**OPEN, status=None, proxy_reason="queue_full"),
        verdict("proxy", "before_response", "high", ["queue_full"], False,
                "Streamtap ended the exchange itself (queue_full).")),
    # -- stream_answered_with_json -------------------------------------------------------------
    "stream: true answered with one JSON body": (
        facts(stream_requested=True, content_type="application/json"),
        verdict("protocol", "complete", "high", ["stream_requested_json_answered"], False,
                "The request asked for a stream (`stream: true`) but openai answered with one "
                "JSON body (application/json), not an event stream: a streaming client reads no "
                "events from it and may show an empty reply without an error.")),
    # -- watchdog_fired ------------------------------------------------------------------------
    "connect watchdog is before the response even with a status": (
        facts(**OPEN, watchdog_fired="connect", watchdog={"connect_timeout_ms": 5000},
              phase="text"),
        verdict("watchdog", "before_response", "high", ["watchdog_connect"], True,
                "streamtap's connect watchdog fired after 5000 ms without a connection to "
                "openai before the response started; both sides were aborted.")),
    "idle watchdog while reasoning": (
        facts(**OPEN, watchdog_fired="idle", watchdog={"idle_timeout_ms": 30000},
              phase="reasoning"),
        verdict("watchdog", "reasoning", "high", ["watchdog_idle"], True,
                "streamtap's idle watchdog fired after 30000 ms without a byte from openai "
                "while the model was reasoning; both sides were aborted.")),
    "progress watchdog before any output": (
        facts(**OPEN, watchdog_fired="progress", watchdog={"progress_timeout_ms": 60000},
              phase="before_progress"),
        verdict("watchdog", "before_progress", "high", ["watchdog_progress"], True,
                "streamtap's progress watchdog fired after 60000 ms without model progress from "
                "openai before the model produced any output; both sides were aborted.")),
    "idle watchdog, streamtap itself stalled during the silence": (
        facts(**OPEN, watchdog_fired="idle", watchdog={"idle_timeout_ms": 1000},
              phase="text", end_ms=1500.0, proxy_lag_max_ms=400.0, proxy_lag_at_ms=1100.0),
        verdict("watchdog", "text", "medium", ["watchdog_idle", "proxy_lag"], True,
                "streamtap's idle watchdog fired after 1000 ms without a byte from openai "
                "while the model was writing its answer; both sides were aborted. streamtap "
                "itself stalled for 400 ms during that silence, so part of it was not openai's "
                "doing.")),
    "idle watchdog, streamtap's stall came before the silence": (
        facts(**OPEN, watchdog_fired="idle", watchdog={"idle_timeout_ms": 1000},
              phase="text", end_ms=1500.0, proxy_lag_max_ms=400.0, proxy_lag_at_ms=450.0),
        verdict("watchdog", "text", "high", ["watchdog_idle"], True,
                "streamtap's idle watchdog fired after 1000 ms without a byte from openai "
                "while the model was writing its answer; both sides were aborted.")),
    "progress watchdog, a stall too short to matter": (
        facts(**OPEN, watchdog_fired="progress", watchdog={"progress_timeout_ms": 60000},
              phase="text", end_ms=61000.0, proxy_lag_max_ms=25.0, proxy_lag_at_ms=30000.0),
        verdict("watchdog", "text", "high", ["watchdog_progress"], True,
                "streamtap's progress watchdog fired after 60000 ms without model progress from "
                "openai while the model was writing its answer; both sides were aborted.")),
    # -- client_went_away ----------------------------------------------------------------------
    "client left after a silence streamtap's own stall explains in part": (
        facts(**OPEN, downstream="client_gone", phase="text", last_frame_ms=200.0,
              end_ms=700.0, proxy_lag_max_ms=120.0, proxy_lag_at_ms=650.0),
        verdict("client_abort", "text", "medium", ["client_disconnected", "proxy_lag"], None,
                "The client closed the connection while the model was writing its answer; "
                "streamtap closed the upstream request so openai stopped generating. streamtap "
                "itself stalled for 120 ms during that silence, so part of it was not openai's "
                "doing.")),
    "client left mid answer": (
        facts(**OPEN, downstream="client_gone", phase="text"),
        verdict("client_abort", "text", "high", ["client_disconnected"], None,
                "The client closed the connection while the model was writing its answer; "
                "streamtap closed the upstream request so openai stopped generating.")),
    "client left before the response": (
        facts(**OPEN, status=None, downstream="client_gone", phase="before_progress"),
        verdict("client_abort", "before_response", "high", ["client_disconnected"], None,
                "The client closed the connection before the response started; streamtap "
                "closed the upstream request so openai stopped generating.")),
    "client left after the terminal but before it had every byte": (
        facts(downstream="client_gone", all_forwarded=False),
        verdict("client_abort", "after_finish", "high", ["client_disconnected"], None,
                "The client closed the connection after the model had finished (finish reason "
                "`stop`); streamtap closed the upstream request so openai stopped generating.")),
    # whether it gave up or cancelled: the silence before its close (diagnostics/verdict/silences)
    "client gave up after 2 s without a byte: its read timeout": (
        facts(**OPEN, downstream="client_gone", phase="text", max_gap_ms=40.0,
              close={"by": "client", "at_ms": 2310.0, "silence_ms": 2004.6}),
        verdict("client_abort", "text", "high", ["client_disconnected", "client_timeout"], None,
                "The client closed the connection while the model was writing its answer, after "
                "2.0 s without a byte: its read timeout, not a cancel; streamtap closed the "
                "upstream request so openai stopped generating.")),
    "client gave up after 300 s without a body byte: undici's bodyTimeout": (
        facts(**OPEN, downstream="client_gone", phase="text", max_gap_ms=900.0,
              close={"by": "client", "at_ms": 301_500.0, "silence_ms": 300_004.0}),
        verdict("client_abort", "text", "high", ["client_disconnected", "client_timeout"], None,
                "The client closed the connection while the model was writing its answer, after "
                "300.0 s without a byte: its read timeout, not a cancel (300 s is the default "
                "bodyTimeout of Node's fetch); streamtap closed the upstream request so openai "
                "stopped generating.")),
    "client gave up before the headers after 600 s: the Python SDKs' default": (
        facts(**OPEN, status=None, downstream="client_gone", phase="before_progress",
              close={"by": "client", "at_ms": 600_020.0, "silence_ms": 600_012.0}),
        verdict("client_abort", "before_response", "high",
                ["client_disconnected", "client_timeout"], None,
                "The client closed the connection before the response started, after 600.0 s "
                "without a byte: its read timeout, not a cancel (600 s is the default timeout "
                "of the openai Python SDK or the default timeout of the anthropic Python SDK); "
                "streamtap closed the upstream request so openai stopped generating.")),
    "client closed while bytes were flowing: a cancel": (
        facts(**OPEN, downstream="client_gone", phase="text", max_gap_ms=50.0,
              close={"by": "client", "at_ms": 180.0, "silence_ms": 3.2}),
        verdict("client_abort", "text", "high", ["client_disconnected", "client_cancel"], None,
                "The client closed the connection while the model was writing its answer, with "
                "bytes still flowing (the last one 3 ms before): a cancel, not a timeout; "
                "streamtap closed the upstream request so openai stopped generating.")),
    "a long silence no longer than earlier pauses is not taken for a timeout": (
        facts(**OPEN, downstream="client_gone", phase="reasoning", max_gap_ms=3000.0,
              close={"by": "client", "at_ms": 9000.0, "silence_ms": 1500.0}),
        verdict("client_abort", "reasoning", "high", ["client_disconnected", "client_cancel"],
                None, "The client closed the connection while the model was reasoning, with "
                "bytes still flowing (the last one 1500 ms before): a cancel, not a timeout; "
                "streamtap closed the upstream request so openai stopped generating.")),
    "client left once it had the terminal (SDKs close at [DONE])": (
        facts(downstream="client_gone", all_forwarded=True),
        verdict("none", "complete", "high", ["terminal_event"], None,
                "The openai stream completed normally: terminal `[DONE]` after 7 frames.")),
    "client leaving a 400 is the 400's consequence": (
        facts(**OPEN, status=400, downstream="client_gone", frame_count=0,
              error={"error_type": "invalid_request_error"}),
        verdict("provider_error", "before_response", "high",
                ["http_400", "invalid_request_error", "client_gave_up"], False,
                "openai answered HTTP 400 (invalid_request_error) before the stream started. "
                "Retrying will not help as is.")),
    # -- could_not_connect ---------------------------------------------------------------------
    "connection refused": (
        facts(**OPEN, status=None, frame_count=0,
              error={"where": "upstream_connect", "code": "ECONNREFUSED"}),
        verdict("transport", "before_response", "high",
                ["upstream_connect_error", "econnrefused"], True,
                "streamtap could not connect to openai (ECONNREFUSED); nothing was streamed.")),
    "no response headers": (
        facts(**OPEN, status=None, frame_count=0,
              error={"where": "upstream_response", "type": "ServerDisconnectedError"}),
        verdict("transport", "before_response", "high",
                ["upstream_no_response", "serverdisconnectederror"], True,
                "streamtap got no response headers from openai (ServerDisconnectedError); "
                "nothing was streamed.")),
    "reset before any response byte, mirrored to the client": (
        facts(**OPEN, status=None, frame_count=0, upstream="error", downstream="aborted",
              error={"where": "upstream_response", "code": "ECONNRESET",
                     "message": "the connection was reset by the peer"}),
        verdict("transport", "before_response", "high",
                ["upstream_no_response", "econnreset", "client_connection_reset"], True,
                "streamtap got no response headers from openai: the connection was reset by the "
                "peer (ECONNRESET); nothing was streamed. streamtap reset the client's "
                "connection the same way, before any response byte, as the client would have "
                "seen without streamtap.")),
    "an error elsewhere before the response is not a connect failure": (
        facts(**OPEN, status=None, upstream="error", frame_count=0,
              error={"where": "upstream_body", "code": "EPIPE"}),
        verdict("transport", "before_response", "high", ["upstream_error", "epipe"], True,
                "The connection to openai failed before the response started.")),
    # -- http_error_status ---------------------------------------------------------------------
    "429 rate limit": (
        facts(**OPEN, provider="anthropic", status=429, frame_count=0,
              error={"error_type": "rate_limit_error"}),
        verdict("provider_error", "before_response", "high", ["http_429", "rate_limit_error"],
                True, "anthropic answered HTTP 429 (rate_limit_error) before the stream started."
                " Retrying later may succeed.")),
    "408 timeout is retryable": (
        facts(**OPEN, status=408, frame_count=0),
        verdict("provider_error", "before_response", "high", ["http_408"], True,
                "openai answered HTTP 408 before the stream started. Retrying later may "
                "succeed.")),
    "403 is final": (
        facts(**OPEN, status=403, frame_count=0),
        verdict("provider_error", "before_response", "high", ["http_403"], False,
                "openai answered HTTP 403 before the stream started. Retrying will not help as "
                "is.")),
    "501 is a server error": (
        facts(**OPEN, status=501, frame_count=0),
        verdict("provider_error", "before_response", "high", ["http_501"], True,
                "openai answered HTTP 501 before the stream started. Retrying later may "
                "succeed.")),
    "418 gives no advice": (
        facts(**OPEN, status=418, frame_count=0),
        verdict("provider_error", "before_response", "high", ["http_418"], None,
                "openai answered HTTP 418 before the stream started.")),
    "503 with insufficient_quota is final": (
        facts(**OPEN, status=503, frame_count=0, error={"error_code": "insufficient_quota"}),
        verdict("provider_error", "before_response", "high", ["http_503", "insufficient_quota"],
                False, "openai answered HTTP 503 (insufficient_quota) before the stream started."
                " Retrying will not help as is.")),
    "a final error code outranks a retryable type and status": (
        facts(**OPEN, status=503, frame_count=0,
              error={"error_type": "server_error", "error_code": "insufficient_quota"}),
        verdict("provider_error", "before_response", "high", ["http_503", "server_error"],
                False, "openai answered HTTP 503 (server_error) before the stream started."
                " Retrying will not help as is.")),
    # -- error_in_unknown_shape ----------------------------------------------------------------
    "a code-and-message frame in a Responses stream (issue 23)": (
        facts(**OPEN, dialect="openai-responses", phase="text",
              stream_errors=[{"shape": "error_frame_unknown_shape", "type": None,
                              "code": "InternalError", "message": "peer closed connection"}]),
        verdict("provider_error", "text", "high", ["error_frame_unknown_shape", "InternalError"],
                True, "openai sent an error inside the stream (InternalError) in a frame no "
                "dialect documents (an `error` member, or `code` and `message`), while the model "
                "was writing its answer; a client may have read it as an unknown event, not an "
                "error.")),
    "an SSE error: field line, then a clean close (issue 27)": (
        facts(**OPEN, phase="text",
              stream_errors=[{"shape": "error_frame_unknown_shape", "type": None, "code": None,
                              "message": "failed to decode", "field": "error"}]),
        verdict("provider_error", "text", "high",
                ["error_frame_unknown_shape", "sse_unknown_field"], None,
                "openai sent an error inside the stream on an SSE `error:` line, a field clients "
                "ignore, while the model was writing its answer; no event reached the client, "
                "which saw a stream that just ended.")),
    "an unknown-shape error, then a reset": (
        facts(**OPEN, upstream="reset", phase="before_progress",
              stream_errors=[{"shape": "error_frame_unknown_shape", "type": "invalid_request",
                              "code": 400, "message": None}]),
        verdict("provider_error", "before_progress", "high",
                ["error_frame_unknown_shape", "invalid_request", "upstream_reset"], False,
                "openai sent an error inside the stream (invalid_request) in a frame no dialect "
                "documents (an `error` member, or `code` and `message`), before the model "
                "produced any output; a client may have read it as an unknown event, not an "
                "error.")),
    # -- error_inside_stream -------------------------------------------------------------------
    "anthropic overloaded error event": (
        facts(**OPEN, provider="anthropic", phase="text",
              stream_errors=[{"shape": "error_event", "type": "overloaded_error", "code": None,
                              "message": "Overloaded"}]),
        verdict("provider_error", "text", "high", ["error_event", "overloaded_error"], True,
                "anthropic sent an error inside the stream (overloaded_error), as an error "
                "event, while the model was writing its answer.")),
    "anthropic rate_limit_error in the stream is retryable": (
        facts(**OPEN, provider="anthropic", phase="text",
              stream_errors=[{"shape": "error_event", "type": "rate_limit_error", "code": None,
                              "message": None}]),
        verdict("provider_error", "text", "high", ["error_event", "rate_limit_error"], True,
                "anthropic sent an error inside the stream (rate_limit_error), as an error "
                "event, while the model was writing its answer.")),
    "an error of unknown type gives no retry advice": (
        facts(**OPEN, upstream="reset", phase="before_progress",
              stream_errors=[{"shape": "wrapped_chunk", "type": None, "code": "odd_thing",
                              "message": "something odd"}]),
        verdict("provider_error", "before_progress", "high",
                ["wrapped_chunk", "odd_thing", "upstream_reset"], None,
                "openai sent an error inside the stream (odd_thing), as a wrapped chunk, before "
                "the model produced any output.")),
    "an error with neither type nor code, then truncation": (
        facts(terminal=None, upstream="truncated", phase="after_finish", finish_reason="error",
              stream_errors=[{"shape": "finish_reason_error", "type": None, "code": None,
                              "message": None}]),
        verdict("provider_error", "after_finish", "high",
                ["finish_reason_error", "upstream_truncated"], None,
                "openai sent an error inside the stream, as a finish reason error, after the "
                "model had finished (finish reason `error`).")),
    "the message alone can make it retryable; an upstream error adds nothing": (
        facts(**OPEN, upstream="error", phase="text",
              stream_errors=[{"shape": "error_event", "type": None, "code": None,
                              "message": "The server is Overloaded"},
                             {"shape": "wrapped_chunk", "type": "invalid_request_error",
                              "code": None, "message": None}]),
        verdict("provider_error", "text", "high", ["error_event"], True,
                "openai sent an error inside the stream, as an error event, while the model was "
                "writing its answer.")),
    # -- upstream_broke ------------------------------------------------------------------------
    "reset while writing tool arguments": (
        facts(**OPEN, upstream="reset", phase="tool_input", open_tools=[WEATHER_DONE | {
            "completed": False}, APPLY_PATCH]),
        verdict("transport", "tool_input", "high", ["upstream_reset"], True,
                "The connection to openai was reset while the model was still writing the "
                "arguments of tool call `apply_patch` (5 chunks); the call never completed, so "
                "no tool ran.")),
    "truncated mid answer, with the error code": (
        facts(**OPEN, upstream="truncated", phase="text",
              error={"where": "upstream_body", "code": "ClientPayloadError"}),
        verdict("transport", "text", "high", ["upstream_truncated", "clientpayloaderror"], True,
                "The connection to openai was closed mid-body (no final chunk) while the model "
                "was writing its answer.")),
    "malformed chunk-size line mid answer, passed on to the client": (
        facts(**OPEN, upstream="malformed", phase="text", downstream="aborted",
              error={"where": "upstream_read", "code": "MALFORMED_CHUNK_SIZE"},
              notes=["malformed_framing_passed_on"]),
        verdict("transport", "text", "high",
                ["upstream_malformed", "malformed_chunk_size", "malformed_framing_passed_on"],
                True, "The connection to openai broke on a malformed chunk-size line (the "
                "upstream's HTTP chunked framing was malformed) while the model was writing its "
                "answer. streamtap passed the malformed bytes on to the client and then closed "
                "its connection, so the client's HTTP parser met them as it would have without "
                "streamtap.")),
    "failed while an unnamed tool call was open": (
        facts(**OPEN, upstream="error", phase="tool_input", open_tools=[UNNAMED]),
        verdict("transport", "tool_input", "high", ["upstream_error"], True,
                "The connection to openai failed while the model was still writing the "
                "arguments of tool call #1 (2 chunks); the call never completed, so no tool "
                "ran.")),
    "reset right after a tool call": (
        facts(**OPEN, upstream="reset", phase="after_tool_call", completed_tools=[WEATHER_DONE]),
        verdict("transport", "after_tool_call", "high", ["upstream_reset"], True,
                "The connection to openai was reset right after tool call `get_weather` "
                "completed.")),
    # -- completed_with_terminal ---------------------------------------------------------------
    "complete stream": (
        facts(),
        verdict("none", "complete", "high", ["terminal_event"], None,
                "The openai stream completed normally: terminal `[DONE]` after 7 frames.")),
    "complete JSON reply": (
        facts(terminal="message", frame_count=0),
        verdict("none", "complete", "high", ["terminal_event"], None,
                "The openai stream completed normally: terminal `message` (a JSON reply).")),
    # -- no_dialect_to_judge -------------------------------------------------------------------
    "json body without a terminal": (
        facts(**OPEN, dialect="json", dialect_has_terminal=False, frame_count=0),
        verdict("none", "complete", "low", ["clean_close", "no_terminal_known"], None,
                "The openai response ended cleanly; streamtap has no dialect that tells a "
                "complete json body from a short one.")),
    "a json body cannot be judged even if its dialect has terminal names": (
        facts(**OPEN, dialect="json", dialect_has_terminal=True, frame_count=0),
        verdict("none", "complete", "low", ["clean_close", "no_terminal_known"], None,
                "The openai response ended cleanly; streamtap has no dialect that tells a "
                "complete json body from a short one.")),
    "no dialect at all": (
        facts(**OPEN, dialect=None, dialect_has_terminal=False),
        verdict("none", "complete", "low", ["clean_close", "no_terminal_known"], None,
                "The openai response ended cleanly; streamtap has no dialect that tells a "
                "complete unknown body from a short one.")),
    "the unknown dialect cannot judge even with terminal names": (
        facts(**OPEN, dialect="unknown", dialect_has_terminal=True),
        verdict("none", "complete", "low", ["clean_close", "no_terminal_known"], None,
                "The openai response ended cleanly; streamtap has no dialect that tells a "
                "complete unknown body from a short one.")),
    "plain SSE with frames": (
        facts(**OPEN, dialect="sse", dialect_has_terminal=False, frame_count=3),
        verdict("none", "complete", "low", ["clean_close", "no_terminal_known"], None,
                "The openai response ended cleanly; streamtap has no dialect that tells a "
                "complete sse body from a short one.")),
    # -- closed_without_terminal ---------------------------------------------------------------
    "plain SSE headers then silence": (
        facts(**OPEN, dialect="sse", dialect_has_terminal=False, frame_count=0,
              phase="before_progress"),
        verdict("provider_close", "before_progress", "medium",
                ["clean_close", "no_terminal_event", "no_events"], True,
                "openai (or a gateway in between) closed the stream cleanly, without the "
                "terminal event, before the model produced any output.")),
    "closed after the finish reason": (
        facts(terminal=None, phase="after_finish", finish_reason="stop"),
        verdict("provider_close", "after_finish", "medium",
                ["clean_close", "no_terminal_event", "finish_reason_seen"], False,
                "openai (or a gateway in between) closed the stream cleanly, without the "
                "terminal event, after the model had finished (finish reason `stop`); the answer "
                "is whole; only the end marker or usage is missing.")),
    "closed after a finish without a reason": (
        facts(terminal=None, phase="after_finish", finish_reason=None),
        verdict("provider_close", "after_finish", "medium", ["clean_close", "no_terminal_event"],
                True, "openai (or a gateway in between) closed the stream cleanly, without the "
                "terminal event, after the model had finished.")),
    "closed mid answer although a finish reason was seen earlier": (
        facts(terminal=None, phase="text", finish_reason="length"),
        verdict("provider_close", "text", "medium", ["clean_close", "no_terminal_event"], True,
                "openai (or a gateway in between) closed the stream cleanly, without the "
                "terminal event, while the model was writing its answer.")),
    # -- remarks any verdict gets: the silences around the ending (verdict/silences.py) ---------
    "stalled behind keep-alives, then the provider closed": (
        facts(**OPEN, phase="text", last_event_ms=1200.0, headers_ms=400.0, first_byte_ms=450.0,
              close={"by": "upstream", "at_ms": 301_200.0, "silence_ms": 15_000.0,
                     "heartbeats_since_event": 20, "heartbeat_interval_ms": 15_000.0}),
        verdict("provider_close", "text", "medium",
                ["clean_close", "no_terminal_event", "heartbeats_only"], True,
                "openai (or a gateway in between) closed the stream cleanly, without the "
                "terminal event, while the model was writing its answer. For 300.0 s after the "
                "last event only keep-alives arrived (20, every 15.0 s) and no event: a client "
                "whose timer resets on any byte never fires.")),
    "one keep-alive is not a stall behind keep-alives": (
        facts(**OPEN, phase="text", last_event_ms=1200.0, headers_ms=400.0, first_byte_ms=450.0,
              close={"by": "upstream", "at_ms": 31_200.0, "silence_ms": 15_000.0,
                     "heartbeats_since_event": 1, "heartbeat_interval_ms": None}),
        verdict("provider_close", "text", "medium", ["clean_close", "no_terminal_event"], True,
                "openai (or a gateway in between) closed the stream cleanly, without the "
                "terminal event, while the model was writing its answer.")),
    "headers, then nothing until the client gave up": (
        facts(**OPEN, downstream="client_gone", phase="before_progress", frame_count=0,
              headers_ms=400.0, close={"by": "client", "at_ms": 29_400.0, "silence_ms": 29_000.0}),
        verdict("client_abort", "before_progress", "high",
                ["client_disconnected", "client_timeout", "headers_then_silence"], None,
                "The client closed the connection before the model produced any output, after "
                "29.0 s without a byte: its read timeout, not a cancel; streamtap closed the "
                "upstream request so openai stopped generating. openai answered 200 at 0.4 s "
                "and then nothing came for 29.0 s.")),
    "headers, then only keep-alives until the watchdog": (
        facts(**OPEN, watchdog_fired="progress", watchdog={"progress_timeout_ms": 30_000},
              phase="before_progress", headers_ms=400.0, first_byte_ms=5400.0,
              close={"by": "streamtap", "at_ms": 30_400.0, "silence_ms": 5000.0,
                     "heartbeats_since_event": 6, "heartbeat_interval_ms": 5000.0}),
        verdict("watchdog", "before_progress", "high", ["watchdog_progress", "heartbeats_only"],
                True, "streamtap's progress watchdog fired after 30000 ms without model progress "
                "from openai before the model produced any output; both sides were aborted. For "
                "30.0 s after the headers only keep-alives arrived (6, every 5.0 s) and no "
                "event: a client whose timer resets on any byte never fires.")),
    "complete, then the connection parked with keep-alives": (
        facts(terminal_ms=12_300.0, last_event_ms=12_300.0, headers_ms=400.0,
              first_byte_ms=450.0,
              close={"by": "upstream", "at_ms": 88_300.0, "silence_ms": 1000.0,
                     "heartbeats_since_event": 5, "heartbeat_interval_ms": 15_000.0,
                     "open_after_terminal_ms": 76_000.0}),
        verdict("none", "complete", "high", ["terminal_event", "open_after_terminal"], None,
                "The openai stream completed normally: terminal `[DONE]` after 7 frames. "
                "Complete at 12.3 s; the connection stayed open 76.0 s more, with 5 keep-alives "
                "every 15.0 s, until openai closed it; a client that waits for the close waited "
                "too.")),
    "complete, then parked until the client left": (
        facts(downstream="client_gone", all_forwarded=True, terminal_ms=900.0,
              close={"by": "client", "at_ms": 3900.0, "silence_ms": 3000.0,
                     "heartbeats_since_event": 0, "open_after_terminal_ms": 3000.0}),
        verdict("none", "complete", "high", ["terminal_event", "open_after_terminal"], None,
                "The openai stream completed normally: terminal `[DONE]` after 7 frames. "
                "Complete at 0.9 s; the connection stayed open 3.0 s more until the client "
                "closed it; a client that waits for the close waited too.")),
    "complete, then held open by an injected hold: still a success": (
        facts(terminal_ms=900.0, fault={"fired": True, "action": "hold", "at": "terminal",
                                        "name": "park"},
              close={"by": "streamtap", "at_ms": 4900.0, "silence_ms": 500.0,
                     "heartbeats_since_event": 8, "heartbeat_interval_ms": 500.0,
                     "open_after_terminal_ms": 4000.0}),
        verdict("none", "complete", "high", ["terminal_event", "open_after_terminal"], None,
                "The openai stream completed normally: terminal `[DONE]` after 7 frames. "
                "Complete at 0.9 s; the connection stayed open 4.0 s more, with 8 keep-alives "
                "every 0.5 s, until streamtap (fault rule `park`) closed it; a client that waits "
                "for the close waited too.")),
    "complete and closed at once: no warning": (
        facts(terminal_ms=900.0, close={"by": "upstream", "at_ms": 901.0, "silence_ms": 1.0,
                                        "open_after_terminal_ms": 1.0}),
        verdict("none", "complete", "high", ["terminal_event"], None,
                "The openai stream completed normally: terminal `[DONE]` after 7 frames.")),
}


@pytest.mark.parametrize("row", list(ROWS))
def test_rule_table(row):
    given, expected = ROWS[row]
    assert classify(given) == expected


def test_every_rule_of_the_table_has_a_row():
    spoken = set()
    for given, _ in ROWS.values():
        spoken.add(next(rule.name for rule in cl.RULES if rule.when(given)))
    assert spoken == {rule.name for rule in cl.RULES}


@pytest.mark.parametrize("at, words", [
    ("event:tool_input_delta:1", "after the 1st tool_input_delta"),
    ("event:text_delta:2", "after the 2nd text_delta"),
    ("event:text_delta:3", "after the 3rd text_delta"),
    ("event:text_delta:4", "after the 4th text_delta"),
    ("event:text_delta:10", "after the 10th text_delta"),
    ("event:text_delta:11", "after the 11th text_delta"),
    ("event:text_delta:12", "after the 12th text_delta"),
    ("event:text_delta:13", "after the 13th text_delta"),
    ("event:text_delta:20", "after the 20th text_delta"),
    ("event:text_delta:21", "after the 21st text_delta"),
    ("event:text_delta:22", "after the 22nd text_delta"),
    ("event:text_delta:101", "after the 101st text_delta"),
    ("event:text_delta:111", "after the 111th text_delta"),
    ("event:text_delta:211", "after the 211th text_delta"),  # a teen of any hundred
    ("event:text_delta:x", "at `event:text_delta:x`"),
    ("event:text_delta", "at `event:text_delta`"),
    ("events:3", "after 3 frames"),
    ("bytes:100", "after 100 bytes"),
    ("ms:250", "250 ms after the first byte"),
    ("bytes:x", "at `bytes:x`"),
    ("later:5", "at `later:5`"),
    ("request", "before contacting the upstream"),
    ("headers", "right after the response headers"),
    ("first_progress", "at the first model progress"),
    ("terminal", "in place of the terminal event"),
    ("sometime", "at `sometime`"),
    (None, "at ``"),
])
def test_trigger_words(at, words):
    assert trigger_words(at) == words


@pytest.mark.parametrize("phase, changes, words", [
    ("tool_input", {}, "while the model was writing a tool call"),
    ("after_tool_call", {}, "at an unknown point of the stream"),
    ("complete", {}, "after the stream had completed"),
    ("reasoning", {}, "while the model was reasoning"),
    ("somewhere", {}, "at an unknown point of the stream"),
    (None, {}, "at an unknown point of the stream"),
    ("text", {"open_tools": [APPLY_PATCH]}, "while the model was writing its answer"),
    ("after_tool_call", {"completed_tools": [WEATHER_DONE | {"name": None, "index": 4}]},
     "right after tool call #4 completed"),
])
def test_what_the_model_was_doing(phase, changes, words):
    assert doing(facts(**changes), phase) == words


FINAL = ["context_length_exceeded", "context_window", "insufficient_quota", "quota",
         "invalid_request_error", "authentication_error", "permission_error", "not_found_error",
         "invalid_api_key", "billing_hard_limit", "content_filter"]
RETRY = ["overloaded_error", "server_error", "api_error", "rate_limit_exceeded", "unavailable",
         "internal", "timeout", "E503", "E529", "E500", "E502"]


@pytest.mark.parametrize("status", sorted(columns.RETRYABLE_STATUSES) + [501, 599])
def test_retryable_statuses(status):
    assert error_retryable(status) is True


@pytest.mark.parametrize("status", sorted(columns.NOT_RETRYABLE_STATUSES))
def test_final_statuses(status):
    assert error_retryable(status) is False
    assert error_retryable(status, "overloaded") is False  # the status outranks a retry word


@pytest.mark.parametrize("word", FINAL)
def test_final_words_outrank_a_retryable_status(word):
    assert error_retryable(503, word) is False
    assert error_retryable(None, "Overloaded", word.upper()) is False


@pytest.mark.parametrize("word", RETRY)
def test_retry_words(word):
    assert error_retryable(None, word.upper()) is True
    assert error_retryable(None, None, word) is True  # empty words are skipped, not "None"


def test_what_gives_no_advice():
    assert error_retryable(None) is None
    assert error_retryable(418, "teapot") is None
    assert error_retryable(499) is None
    assert error_retryable(None, None) is None  # "None" is not a word that carries advice


def test_the_retry_sets_are_what_the_providers_document():
    assert columns.RETRYABLE_STATUSES == {408, 409, 425, 429, 500, 502, 503, 504, 529}
    assert columns.NOT_RETRYABLE_STATUSES == {400, 401, 402, 403, 404, 405, 413, 422}
    assert conditions.SLOWING_FAULTS == ("delay", "throttle")


# -- facts_from_record: the facts the rules read are the record's ----------------------------
CHAT = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n")


def finish(data: bytes, *, provider: str = "openai", route: str = "r", downstream_bytes=None,
           **ending) -> tuple[dict, Facts]:
    recorder = Recorder(trace_id="t", session_id="s", message_id=None, started_at="now",
                        route=route, provider=provider)
    recorder.on_request("POST", "/v1/chat/completions", [("content-type", "application/json")],
                        b'{"model":"m","stream":true}')
    recorder.on_response(200, [("content-type", "text/event-stream")], 2.0)
    recorder.feed(data, 3.0)
    captured = {}
    real = recorder_module.facts_from_record

    def spy(record, state, end):
        captured["facts"] = real(record, state, end)
        return captured["facts"]

    recorder_module.facts_from_record = spy
    try:
        record = record_as_dict(recorder.finish(Ending(
            upstream=ending.pop("upstream", "complete"), downstream_status=200,
            downstream_bytes=len(data) if downstream_bytes is None else downstream_bytes,
            **ending), 4.0))
    finally:
        recorder_module.facts_from_record = real
    return record, captured["facts"]


def test_facts_from_a_complete_record():
    record, f = finish(CHAT, downstream="client_gone")
    assert (f.provider, f.dialect, f.status, f.terminal, f.finish_reason) == (
        "openai", "openai-chat", 200, "[DONE]", "stop")
    assert f.dialect_has_terminal is True and f.frame_count == 3 and f.unterminated is False
    assert f.all_forwarded is True  # every byte, exactly: the client left after [DONE]
    assert record["outcome"]["boundary"] == "none"


def test_a_client_one_byte_short_of_the_end_aborted():
    record, f = finish(CHAT, downstream="client_gone", downstream_bytes=len(CHAT) - 1)
    assert f.all_forwarded is False
    assert record["outcome"]["boundary"] == "client_abort"


def test_facts_name_the_route_when_there_is_no_provider_and_see_open_frames():
    record, f = finish(CHAT[:60], provider="", route="myroute", upstream="truncated")
    assert f.provider == "myroute" and f.unterminated is True and f.terminal is None
    assert record["outcome"]["evidence"] == ["upstream_truncated", "unterminated_frame"]
    assert record["outcome"]["summary"] == ("The connection to myroute was closed mid-body (no "
                                            "final chunk) before the model produced any output.")
    _, f = finish(CHAT, provider="", route="")
    assert f.provider == "the provider"


def test_a_forced_shutdown_is_read_from_the_ending_and_keeps_the_frames_seen():
    record, f = finish(CHAT[:-len(b"data: [DONE]\n\n")], upstream="closed_by_proxy",
                       downstream="aborted", shutdown_forced=True)
    assert f.shutdown_forced is True
    assert record["outcome"]["boundary"] == "proxy"
    assert record["outcome"]["evidence"] == ["shutdown_forced"]
    assert record["outcome"]["phase"] == "after_finish"
    assert record["stream"]["frame_count"] == 2 and len(record["frames"]) == 2


def test_tools_split_into_open_and_completed():
    tools = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1",'
             b'"function":{"name":"x","arguments":"{"}}]},"finish_reason":null}]}\n\n')
    _, f = finish(tools, upstream="reset")
    assert [call.index for call in f.open_tools] == [0] and f.completed_tools == []
    assert f.phase == "tool_input"


def test_facts_read_the_proxy_lag_and_the_final_silence():
    record, f = finish(CHAT, downstream="client_gone", downstream_bytes=1,
                       proxy_lag_max_ms=12.34, proxy_lag_at_ms=3.96, downstream_end_ms=3.5)
    assert (record["timeline"]["proxy_lag_max_ms"], record["timeline"]["proxy_lag_at_ms"]) == (
        12.3, 4.0)
    assert (f.proxy_lag_max_ms, f.proxy_lag_at_ms, f.last_frame_ms, f.end_ms) == (
        12.3, 4.0, 3.0, 3.5)
    record, f = finish(CHAT)  # no lag check fell due: the record says so with None
    assert (record["timeline"]["proxy_lag_max_ms"], f.proxy_lag_max_ms, f.end_ms) == (
        None, None, 4.0)
