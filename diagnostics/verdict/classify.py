"""Who ended the stream, and what the model was doing: one ordered rule table.

Each rule reads the facts of an exchange (what the wire showed, how each side ended) and either
returns a verdict or passes. The first verdict wins, so the table reads top to bottom like a
decision list: injected faults and streamtap's own actions first, then the client, the transport,
the provider's errors, and last the ways a stream can end cleanly. Each verdict names the evidence
codes it used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from streamtap.diagnostics.decode.chunked import MALFORMATIONS
from streamtap.diagnostics.dialects import dialect_class as registered_dialect
from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.dialects.arguments import TOO_LARGE
from streamtap.diagnostics.dialects.base import UNKNOWN_SHAPE
from streamtap.diagnostics.verdict import silences
from streamtap.diagnostics.verdict.proxylag import lag_explains

SLOWING_FAULTS = ("delay", "throttle")
# Faults that leave the answer whole: the stream's own verdict stands (`hold` keeps the
# connection open after the terminal event, and says so as a warning).
ANSWER_KEEPING_FAULTS = SLOWING_FAULTS + ("hold",)
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
NOT_RETRYABLE_STATUSES = frozenset({400, 401, 402, 403, 404, 405, 413, 422})
RETRYABLE_ERROR_WORDS = ("overloaded", "server_error", "api_error", "rate_limit", "unavailable",
                         "internal", "timeout", "503", "529", "500", "502")
FINAL_ERROR_WORDS = ("context_length", "context_window", "insufficient_quota", "quota",
                     "invalid_request", "authentication", "permission", "not_found",
                     "invalid_api_key", "billing", "content_filter")


@dataclass
class Facts:
    """Everything a rule may read. Built from the record so that rules never touch I/O."""

    provider: str
    dialect: str | None
    status: int | None
    error: dict | None
    upstream: str
    downstream: str
    watchdog_fired: str | None
    watchdog: dict
    shutdown: bool
    proxy_reason: str | None
    fault: dict | None
    terminal: str | None
    dialect_has_terminal: bool
    finish_reason: str | None
    stream_errors: list[dict]
    phase: str
    event_counts: dict[str, int]
    frame_count: int
    open_tools: list[dict] = field(default_factory=list)
    completed_tools: list[dict] = field(default_factory=list)
    protocol_errors: dict[str, int] = field(default_factory=dict)
    unterminated: bool = False
    max_gap_ms: float = 0.0
    all_forwarded: bool = False  # the client was sent every byte the upstream sent
    server_tools: list[dict] = field(default_factory=list)  # tools the provider ran itself
    upstream_retried: bool = False  # a stale pooled connection was retried on a fresh one
    stream_requested: bool = False  # the request body said `"stream": true`
    content_type: str | None = None  # the response's media type, lower case, no parameters
    notes: list[str] = field(default_factory=list)  # the proxy's own observations (Ending.notes)
    tool_call_end: str | None = None  # what finalizes a tool call in this dialect (base.py)
    shutdown_forced: bool = False  # a second stop signal ended it at once (Ending.shutdown_forced)
    # Timeline marks the silences are measured from (ms since the request), and the record's
    # `close` (who closed, the silence before, keep-alives since the last event, time open after
    # the terminal event); empty for records written before it was kept.
    headers_ms: float | None = None
    first_byte_ms: float | None = None
    last_event_ms: float | None = None
    terminal_ms: float | None = None
    close: dict = field(default_factory=dict)
    # streamtap's own worst event-loop lag while the exchange was open, and when it ended
    # (proxylag.py); None in records from before it was measured.
    proxy_lag_max_ms: float | None = None
    proxy_lag_at_ms: float | None = None
    last_frame_ms: float = 0.0  # the last frame, else the response headers: a final silence's start
    end_ms: float = 0.0  # when the exchange ended (downstream end, else upstream end, else duration)


@dataclass
class Verdict:
    boundary: str
    phase: str | None
    confidence: str
    evidence: list[str]
    retryable: bool | None
    summary: str


Rule = Callable[[Facts], "Verdict | None"]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


# -- helpers the rules share ------------------------------------------------------------------
def media_type(content_type: str | None) -> str | None:
    return content_type.split(";", 1)[0].strip().lower() if content_type else None


def stream_phase(f: Facts) -> str:
    return ev.BEFORE_RESPONSE if f.status is None else f.phase


def doing(f: Facts, phase: str | None) -> str:
    """What the model was doing, as a clause a sentence can end with."""
    if phase == ev.TOOL_INPUT and f.open_tools:
        return open_tool_call(f, f.open_tools[-1])
    if phase == ev.AFTER_TOOL_CALL and f.completed_tools:
        call = f.completed_tools[-1]
        name = f"`{call['name']}`" if call["name"] else f"#{call['index']}"
        return f"right after tool call {name} completed"
    if phase in (ev.SERVER_TOOL, ev.AFTER_SERVER_TOOL):
        running = [tool for tool in f.server_tools if not tool["completed"]]
        last = (running or f.server_tools or [{"type": None}])[-1]
        label = ev.server_tool_label(last["type"])
        if phase == ev.SERVER_TOOL:
            return f"while the provider was running its {label}"
        return f"right after the provider's {label} returned its result"
    if phase == ev.AFTER_FINISH:
        reason = f" (finish reason `{f.finish_reason}`)" if f.finish_reason else ""
        return f"after the model had finished{reason}"
    return {
        ev.BEFORE_RESPONSE: "before the response started",
        ev.BEFORE_PROGRESS: "before the model produced any output",
        ev.REASONING: "while the model was reasoning",
        ev.TEXT: "while the model was writing its answer",
        ev.TOOL_INPUT: "while the model was writing a tool call",
        ev.COMPLETE: "after the stream had completed",
    }.get(phase or "", "at an unknown point of the stream")


def open_tool_call(f: Facts, call: dict) -> str:
    """Where a call that never completed stood: its arguments still coming, or already whole
    (the client held parseable arguments, only the call's end was missing)."""
    name = f"`{call['name']}`" if call["name"] else f"#{call['index']}"
    chunks = f"{call['arg_chunks']} chunks"
    if call.get("arg_parsed"):  # records before this field have none: they read as unknown
        missing = f": no {f.tool_call_end}" if f.tool_call_end else ""
        return (f"when the arguments of tool call {name} had arrived whole "
                f"({call.get('arg_bytes')} bytes in {chunks}) but the call was never "
                f"finalized{missing}, so no tool ran")
    if call.get("arg_unchecked") == TOO_LARGE:
        chunks += (f", {call.get('arg_bytes')} bytes: too many for streamtap to check whether "
                   "they had arrived whole")
    return (f"while the model was still writing the arguments of tool call {name} "
            f"({chunks}); the call never completed, so no tool ran")


LOWER_CONFIDENCE = {"high": "medium", "medium": "low", "low": "low"}


def rests_on_silence(verdict: Verdict, f: Facts, start_ms: float) -> Verdict:
    """A verdict that rests on a silence (from `start_ms` to the exchange's end) is one step less
    sure when streamtap's own event-loop stall covers a part of it, and says so."""
    lag = f.proxy_lag_max_ms
    if not lag_explains(lag, f.proxy_lag_at_ms, start_ms, f.end_ms):
        return verdict
    verdict.confidence = LOWER_CONFIDENCE[verdict.confidence]
    verdict.evidence.append("proxy_lag")
    verdict.summary += (f" streamtap itself stalled for {lag:.0f} ms during that silence, so "
                        f"part of it was not {f.provider}'s doing.")
    return verdict


def side_evidence(f: Facts) -> list[str]:
    """Evidence that does not decide the verdict but belongs in it (bad frames, open frames)."""
    extra = sorted(f.protocol_errors)
    if f.unterminated:
        extra.append("unterminated_frame")
    if f.upstream_retried:
        extra.append("upstream_retry")
    return extra


def error_retryable(status: int | None, *words: object) -> bool | None:
    text = " ".join(str(word).lower() for word in words if word)
    if any(word in text for word in FINAL_ERROR_WORDS):
        return False
    if status in NOT_RETRYABLE_STATUSES:
        return False
    if status in RETRYABLE_STATUSES or (status is not None and status >= 500):
        return True
    if any(word in text for word in RETRYABLE_ERROR_WORDS):
        return True
    return None


# -- the table --------------------------------------------------------------------------------
def trigger_words(at: str | None) -> str:
    """`event:tool_input_delta:5` -> `after the 5th tool_input_delta`, and so on."""
    at = at or ""
    parts = at.split(":")
    if parts[0] == "event" and len(parts) == 3 and parts[2].isdigit():
        n = int(parts[2])
        suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return f"after the {n}{suffix} {parts[1]}"
    if len(parts) == 2 and parts[1].isdigit():
        return {"events": f"after {parts[1]} frames", "bytes": f"after {parts[1]} bytes",
                "ms": f"{parts[1]} ms after the first byte"}.get(parts[0], f"at `{at}`")
    return {"request": "before contacting the upstream",
            "headers": "right after the response headers",
            "first_progress": "at the first model progress",
            "terminal": "in place of the terminal event"}.get(at, f"at `{at}`")


@rule
def injected_fault(f: Facts) -> Verdict | None:
    fault = f.fault
    if not fault or not fault.get("fired") or fault.get("action") in ANSWER_KEEPING_FAULTS:
        return None
    action = fault.get("action")
    evidence = [f"injected_{action}"]
    if f.downstream == "client_gone":
        evidence.append("client_gave_up")
    phase = ev.BEFORE_RESPONSE if (f.status or 0) >= 400 else stream_phase(f)
    gave_up = " The client gave up first." if f.downstream == "client_gone" else ""
    return Verdict("injected", phase, "high", evidence + side_evidence(f), None,
                   f"streamtap injected {action} {trigger_words(fault.get('at'))}, as "
                   f"configured (rule `{fault.get('name')}`), {doing(f, phase)}.{gave_up} "
                   "This is not a real failure.")


@rule
def forced_shutdown(f: Facts) -> Verdict | None:
    if not f.shutdown_forced:
        return None
    phase = stream_phase(f)
    return Verdict("proxy", phase, "high", ["shutdown_forced"] + side_evidence(f), True,
                   "streamtap was stopped by a second signal and closed both connections at "
                   f"once, without waiting for the stream to end; neither {f.provider} nor the "
                   f"client ended it. It was cut {doing(f, phase)}.")


@rule
def proxy_shutdown(f: Facts) -> Verdict | None:
    if not f.shutdown:
        return None
    phase = stream_phase(f)
    return Verdict("proxy", phase, "high", ["proxy_shutdown"] + side_evidence(f), True,
                   f"streamtap was shut down {doing(f, phase)} and cut the stream itself; "
                   f"neither {f.provider} nor the client ended it.")


@rule
def proxy_answered(f: Facts) -> Verdict | None:
    if not f.proxy_reason:
        return None
    reason = f.proxy_reason
    retryable = None if reason == "internal_error" else False
    text = {
        "unknown_route": f"no route `{f.provider}` is configured, so streamtap answered 404 and "
                         "sent nothing upstream; the first path segment of a base URL names the "
                         "route (see the routes streamtap prints at start)",
        "header_too_long": "a request header (or the request line) was longer than streamtap's "
                           "max_header_bytes, so streamtap answered 431 and sent nothing "
                           "upstream",
        "malformed_request": "streamtap could not parse the request, so it answered 400 and "
                             "sent nothing upstream",
        "request_too_large": "the request body was larger than streamtap's limit, so streamtap "
                             "answered 413 and sent nothing upstream",
        "request_too_large_partly_sent": "the request body outgrew streamtap's limit while it was "
                                         "being streamed upstream, so streamtap stopped sending "
                                         "it and answered 413; the upstream saw an incomplete "
                                         "request",
        "internal_error": "streamtap hit an internal error and ended the exchange",
        "bad_fault_header": "the x-streamtap-fault header was malformed, so streamtap answered "
                            "400 and sent nothing upstream",
        "path_dot_segments_refused": "the path had a `..` segment that would leave the route's "
                                     "base path, so streamtap answered 400 and sent nothing "
                                     "upstream",
    }.get(reason, f"streamtap ended the exchange itself ({reason})")
    return Verdict("proxy", stream_phase(f), "high", [reason] + side_evidence(f), retryable,
                   text[0].upper() + text[1:] + ".")


@rule
def watchdog_fired(f: Facts) -> Verdict | None:
    kind = f.watchdog_fired
    if not kind:
        return None
    phase = ev.BEFORE_RESPONSE if kind == "connect" else stream_phase(f)
    limit = f.watchdog.get(f"{kind}_timeout_ms")
    what = {"connect": "without a connection to", "idle": "without a byte from",
            "progress": "without model progress from"}[kind]
    verdict = Verdict("watchdog", phase, "high", [f"watchdog_{kind}"] + side_evidence(f), True,
                      f"streamtap's {kind} watchdog fired after {limit} ms {what} {f.provider} "
                      f"{doing(f, phase)}; both sides were aborted.")
    return rests_on_silence(verdict, f, f.end_ms - (limit or 0))


@rule
def client_went_away(f: Facts) -> Verdict | None:
    if f.downstream != "client_gone" or (f.status or 0) >= 400:
        return None  # an HTTP error came first: the client leaving is its consequence
    if f.terminal is not None and f.all_forwarded:
        return None  # it left after it had the terminal event: SDKs close at `[DONE]`
    phase = stream_phase(f)
    # One boundary, two evidence codes: whether the client gave up (a timeout) or cancelled is
    # read from the silence before its close, which is a guess from the wire, not a fact.
    how = silences.client_close(f)
    evidence = ["client_disconnected"] + ([how[0]] if how else [])
    when = f", {how[1]}" if how else ""
    verdict = Verdict("client_abort", phase, "high", evidence + side_evidence(f), None,
                      f"The client closed the connection {doing(f, phase)}{when}; streamtap "
                      f"closed the upstream request so {f.provider} stopped generating.")
    return rests_on_silence(verdict, f, f.last_frame_ms)  # a client timeout after a silence


@rule
def could_not_connect(f: Facts) -> Verdict | None:
    error = f.error or {}
    if f.status is not None or error.get("where") not in ("upstream_connect", "upstream_response"):
        return None
    code = error.get("code") or error.get("type")
    connect = error.get("where") == "upstream_connect"
    evidence = ["upstream_connect_error" if connect else "upstream_no_response"]
    if code:
        evidence.append(str(code).lower())
    what = "could not connect to" if connect else "got no response headers from"
    # the message is built by streamtap from the errno name (verdict/errors.py), never a
    # library's text: "the name api.openai.com could not be resolved"
    message = error.get("message")
    why = f": {message} ({code})" if message else f" ({code})"
    hint = (" Check the host in the route's URL and this machine's DNS."
            if str(code).startswith("EAI_") else "")
    mirrored = ""
    if f.downstream == "aborted":  # no status line: the client's connection was reset instead
        evidence.append("client_connection_reset")
        mirrored = (" streamtap reset the client's connection the same way, before any response "
                    "byte, as the client would have seen without streamtap.")
    return Verdict("transport", ev.BEFORE_RESPONSE, "high", evidence + side_evidence(f), True,
                   f"streamtap {what} {f.provider}{why}; nothing was streamed.{hint}{mirrored}")


@rule
def http_error_status(f: Facts) -> Verdict | None:
    if f.status is None or f.status < 400:
        return None
    error = f.error or {}
    kind = error.get("error_type") or error.get("error_code")
    evidence = [f"http_{f.status}"] + ([str(kind)] if kind else [])
    if f.downstream == "client_gone":
        evidence.append("client_gave_up")
    retryable = error_retryable(f.status, kind, error.get("error_code"))
    detail = f" ({kind})" if kind else ""
    advice = {True: " Retrying later may succeed.", False: " Retrying will not help as is."}
    return Verdict("provider_error", ev.BEFORE_RESPONSE, "high", evidence + side_evidence(f),
                   retryable, f"{f.provider} answered HTTP {f.status}{detail} before the stream "
                   f"started.{advice.get(retryable, '')}")


@rule
def error_in_unknown_shape(f: Facts) -> Verdict | None:
    """An error-like object in a frame no dialect documents, or on an SSE field line clients
    ignore (GPUStack's `error: {...}`): the client saw at most an unknown event, maybe nothing."""
    first = f.stream_errors[0] if f.stream_errors else {}
    if first.get("shape") != UNKNOWN_SHAPE:
        return None
    kind = first.get("type") or first.get("code")
    phase = stream_phase(f)
    field = first.get("field")
    evidence = [UNKNOWN_SHAPE] + ([str(kind)] if kind else []) + (
        ["sse_unknown_field"] if field else [])
    if f.upstream in ("reset", "truncated"):
        evidence.append(f"upstream_{f.upstream}")
    retryable = error_retryable(None, first.get("type"), first.get("code"), first.get("message"))
    detail = f" ({kind})" if kind else ""
    if field:
        carrier = (f"on an SSE `{field}:` line, a field clients ignore, {doing(f, phase)}; no "
                   "event reached the client, which saw a stream that just ended")
    else:
        carrier = (f"in a frame no dialect documents (an `error` member, or `code` and "
                   f"`message`), {doing(f, phase)}; a client may have read it as an unknown "
                   "event, not an error")
    return Verdict("provider_error", phase, "high", evidence + side_evidence(f), retryable,
                   f"{f.provider} sent an error inside the stream{detail} {carrier}.")


@rule
def error_inside_stream(f: Facts) -> Verdict | None:
    if not f.stream_errors:
        return None
    first = f.stream_errors[0]
    shape = first["shape"]
    kind = first.get("type") or first.get("code")
    phase = stream_phase(f)
    evidence = [shape] + ([str(kind)] if kind else [])
    if f.upstream in ("reset", "truncated"):
        evidence.append(f"upstream_{f.upstream}")
    retryable = error_retryable(None, first.get("type"), first.get("code"), first.get("message"))
    detail = f" ({kind})" if kind else ""
    return Verdict("provider_error", phase, "high", evidence + side_evidence(f), retryable,
                   f"{f.provider} sent an error inside the stream{detail}, as "
                   f"{'an' if shape[0] in 'aeiou' else 'a'} {shape.replace('_', ' ')}, "
                   f"{doing(f, phase)}.")


@rule
def upstream_broke(f: Facts) -> Verdict | None:
    if f.upstream not in ("reset", "truncated", "malformed", "error"):
        return None
    phase = stream_phase(f)
    code = (f.error or {}).get("code")
    malformation = MALFORMATIONS.get(code, "malformed framing")
    how = {"reset": "was reset", "truncated": "was closed mid-body (no final chunk)",
           "malformed": f"broke on a {malformation} (the upstream's HTTP chunked framing was "
                        "malformed)",
           "error": "failed"}[f.upstream]
    evidence = [f"upstream_{f.upstream}"]
    if code:
        evidence.append(str(code).lower())
    return Verdict("transport", phase, "high", evidence + side_evidence(f), True,
                   f"The connection to {f.provider} {how} {doing(f, phase)}.")


@rule
def stream_answered_with_json(f: Facts) -> Verdict | None:
    """`stream: true` answered by one JSON body: an SDK iterating the stream yields no event and
    raises nothing, the "empty reply" this tool exists to explain."""
    if not f.stream_requested or f.status is None or f.status >= 400:
        return None
    if f.content_type != "application/json":
        return None
    return Verdict("protocol", ev.COMPLETE, "high",
                   ["stream_requested_json_answered"] + side_evidence(f), False,
                   f"The request asked for a stream (`stream: true`) but {f.provider} answered "
                   "with one JSON body (application/json), not an event stream: a streaming "
                   "client reads no events from it and may show an empty reply without an "
                   "error.")


@rule
def completed_with_terminal(f: Facts) -> Verdict | None:
    if f.terminal is None:
        return None
    frames = f"after {f.frame_count} frames" if f.frame_count else "(a JSON reply)"
    return Verdict("none", ev.COMPLETE, "high", ["terminal_event"] + side_evidence(f), None,
                   f"The {f.provider} stream completed normally: terminal `{f.terminal}` "
                   f"{frames}.")


@rule
def no_dialect_to_judge(f: Facts) -> Verdict | None:
    if f.dialect_has_terminal and f.dialect not in (None, "json", "unknown"):
        return None
    if f.dialect == "sse" and f.frame_count == 0:
        return None  # headers then silence: the provider_close rule below says it better
    return Verdict("none", ev.COMPLETE, "low", ["clean_close", "no_terminal_known"]
                   + side_evidence(f), None,
                   f"The {f.provider} response ended cleanly; streamtap has no dialect that "
                   f"tells a complete {f.dialect or 'unknown'} body from a short one.")


@rule
def closed_without_terminal(f: Facts) -> Verdict | None:
    phase = stream_phase(f)
    after_finish = f.finish_reason is not None and phase == ev.AFTER_FINISH
    evidence = ["clean_close", "no_terminal_event"]
    if after_finish:
        evidence.append("finish_reason_seen")
    if f.frame_count == 0:
        evidence.append("no_events")
    # What a client made of a short answer is said once, by the client_sees sentence the
    # recorder appends (verdict/outward.py); only a whole answer needs saying here.
    tail = "; the answer is whole; only the end marker or usage is missing" if after_finish else ""
    return Verdict("provider_close", phase, "medium", evidence + side_evidence(f),
                   not after_finish,
                   f"{f.provider} (or a gateway in between) closed the stream cleanly, "
                   f"without the terminal event, {doing(f, phase)}{tail}.")


NOTE_SENTENCES = {
    "malformed_framing_passed_on": "streamtap passed the malformed bytes on to the client and "
                                   "then closed its connection, so the client's HTTP parser met "
                                   "them as it would have without streamtap.",
    "path_repeats_route_prefix": "The forwarded path repeats the route URL's own path prefix "
                                 "(such as `/v1/v1/`): the client's base URL adds a prefix the "
                                 "route URL already ends with.",
}


# Why an armed rule did not fire although its trigger may have come: the record's
# `fault.fallback` (proxy/faults/inject.py), said in words.
FAULT_FALLBACK_SENTENCES = {
    "rule_spent_by_a_concurrent_request": "but another request running at the same time used "
                                          "its last fire (`times`) first, so it did not fire "
                                          "here.",
    "frame_too_large_forwarded_unbuffered": "but a frame grew past what streamtap holds back "
                                            "(max_line_bytes), so it forwarded the rest "
                                            "unbuffered and did not fire.",
}


def armed_not_fired(f: Facts) -> str | None:
    """A rule chosen for the request that did not fire: said, with why, so that a "completed
    normally" is not read as "the fault did not work"."""
    fault = f.fault
    if not fault or fault.get("fired"):
        return None
    armed = f"Fault rule `{fault.get('name')}` was armed for this request"
    why = FAULT_FALLBACK_SENTENCES.get(fault.get("fallback"))
    if why is not None:
        return f"{armed}, {why}"
    return f"{armed} but its trigger `{fault.get('at')}` was never reached, so it did not fire."


def classify(f: Facts) -> dict:
    """The record's `outcome`: the first rule that speaks decides."""
    for check in RULES:
        verdict = check(f)
        if verdict is not None:
            break
    else:  # pragma: no cover - closed_without_terminal always speaks
        verdict = Verdict("unknown", None, "low", [], None, "streamtap could not tell.")
    for code, sentence in silences.remarks(f):
        verdict.evidence.append(code)
        verdict.summary += " " + sentence
    for code in f.notes:
        verdict.evidence.append(code)
        verdict.summary += " " + NOTE_SENTENCES.get(code, f"({code})")
    armed = armed_not_fired(f)
    if armed:
        verdict.evidence.append("fault_armed_not_fired")
        verdict.summary += " " + armed
    return {
        "ok": verdict.boundary == "none",
        "boundary": verdict.boundary,
        "phase": verdict.phase,
        "confidence": verdict.confidence,
        "evidence": verdict.evidence,
        "retryable": verdict.retryable,
        "summary": verdict.summary,
    }
