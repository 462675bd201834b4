"""The words of the verdict table: for each row of classify.RULES, the sentence that says its
verdict, and the remarks any verdict can end with (notes, an armed fault that did not fire,
streamtap's own stall).

A row's sentence is called once the row's condition held and its verdict was read; it gets the
facts and that verdict (phase, retry advice) and decides nothing itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamtap.diagnostics.decode.chunked import MALFORMATIONS
from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.dialects.arguments import TOO_LARGE
from streamtap.diagnostics.trace_record import NO_ERROR, ToolCall, stated
from streamtap.diagnostics.verdict import silences
from streamtap.diagnostics.verdict.columns import http_error_kind

if TYPE_CHECKING:  # pragma: no cover
    from streamtap.diagnostics.verdict.classify import Facts, Verdict


# -- what the model was doing, and where a fault was triggered --------------------------------
def doing(f: Facts, phase: str | None) -> str:
    """What the model was doing, as a clause a sentence can end with."""
    if phase == ev.TOOL_INPUT and f.open_tools:
        return open_tool_call(f, f.open_tools[-1])
    if phase == ev.AFTER_TOOL_CALL and f.completed_tools:
        call = f.completed_tools[-1]
        name = f"`{call.name}`" if call.name else f"#{call.index}"
        return f"right after tool call {name} completed"
    if phase in (ev.SERVER_TOOL, ev.AFTER_SERVER_TOOL):
        running = [tool for tool in f.server_tools if not tool.completed]
        last = (running or f.server_tools or [None])[-1]
        label = ev.server_tool_label(last.type if last else None)
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


def open_tool_call(f: Facts, call: ToolCall) -> str:
    """Where a call that never completed stood: its arguments still coming, or already whole
    (the client held parseable arguments, only the call's end was missing)."""
    name = f"`{call.name}`" if call.name else f"#{call.index}"
    chunks = f"{call.arg_chunks} chunks"
    if call.arg_parsed:  # records before this field have none: they read as unknown
        missing = f": no {f.tool_call_end}" if f.tool_call_end else ""
        return (f"when the arguments of tool call {name} had arrived whole "
                f"({call.arg_bytes} bytes in {chunks}) but the call was never "
                f"finalized{missing}, so no tool ran")
    if call.arg_unchecked == TOO_LARGE:
        chunks += (f", {call.arg_bytes} bytes: too many for streamtap to check whether "
                   "they had arrived whole")
    return (f"while the model was still writing the arguments of tool call {name} "
            f"({chunks}); the call never completed, so no tool ran")


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


# -- one sentence per row of the table, in the table's order ----------------------------------
def injected_fault(f: Facts, v: Verdict) -> str:
    fault = f.fault
    gave_up = " The client gave up first." if f.downstream == "client_gone" else ""
    return (f"streamtap injected {fault.get('action')} {trigger_words(fault.get('at'))}, as "
            f"configured (rule `{fault.get('name')}`), {doing(f, v.phase)}.{gave_up} "
            "This is not a real failure.")


def forced_shutdown(f: Facts, v: Verdict) -> str:
    return ("streamtap was stopped by a second signal and closed both connections at once, "
            f"without waiting for the stream to end; neither {f.provider} nor the client ended "
            f"it. It was cut {doing(f, v.phase)}.")


def proxy_shutdown(f: Facts, v: Verdict) -> str:
    return (f"streamtap was shut down {doing(f, v.phase)} and cut the stream itself; neither "
            f"{f.provider} nor the client ended it.")


def proxy_answered(f: Facts, v: Verdict) -> str:
    reason = f.proxy_reason
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
    return text[0].upper() + text[1:] + "."


def watchdog_fired(f: Facts, v: Verdict) -> str:
    kind = f.watchdog_fired
    limit = f.watchdog.get(f"{kind}_timeout_ms")
    what = {"connect": "without a connection to", "idle": "without a byte from",
            "progress": "without model progress from"}[kind]
    return (f"streamtap's {kind} watchdog fired after {limit} ms {what} {f.provider} "
            f"{doing(f, v.phase)}; both sides were aborted.")


def client_went_away(f: Facts, v: Verdict) -> str:
    how = silences.client_close(f)
    when = f", {how[1]}" if how else ""
    return (f"The client closed the connection {doing(f, v.phase)}{when}; streamtap closed the "
            f"upstream request so {f.provider} stopped generating.")


def could_not_connect(f: Facts, v: Verdict) -> str:
    error = f.error or NO_ERROR
    code = error.code or error.type
    connect = error.where == "upstream_connect"
    what = "could not connect to" if connect else "got no response headers from"
    # the message is built by streamtap from the errno name (verdict/fingerprints.py), never a
    # library's text: "the name api.openai.com could not be resolved"
    message = error.message
    why = f": {message} ({code})" if message else f" ({code})"
    hint = (" Check the host in the route's URL and this machine's DNS."
            if str(code).startswith("EAI_") else "")
    mirrored = ""
    if f.downstream == "aborted":
        mirrored = (" streamtap reset the client's connection the same way, before any response "
                    "byte, as the client would have seen without streamtap.")
    return f"streamtap {what} {f.provider}{why}; nothing was streamed.{hint}{mirrored}"


def http_error_status(f: Facts, v: Verdict) -> str:
    kind = http_error_kind(f)
    detail = f" ({kind})" if kind else ""
    advice = {True: " Retrying later may succeed.", False: " Retrying will not help as is."}
    return (f"{f.provider} answered HTTP {f.status}{detail} before the stream started."
            f"{advice.get(v.retryable, '')}")


def error_in_unknown_shape(f: Facts, v: Verdict) -> str:
    first = f.stream_errors[0]
    kind = first.type or first.code
    field = stated(first.field)
    detail = f" ({kind})" if kind else ""
    if field:
        carrier = (f"on an SSE `{field}:` line, a field clients ignore, {doing(f, v.phase)}; no "
                   "event reached the client, which saw a stream that just ended")
    else:
        carrier = (f"in a frame no dialect documents (an `error` member, or `code` and "
                   f"`message`), {doing(f, v.phase)}; a client may have read it as an unknown "
                   "event, not an error")
    return f"{f.provider} sent an error inside the stream{detail} {carrier}."


def error_inside_stream(f: Facts, v: Verdict) -> str:
    first = f.stream_errors[0]
    shape = first.shape
    kind = first.type or first.code
    detail = f" ({kind})" if kind else ""
    return (f"{f.provider} sent an error inside the stream{detail}, as "
            f"{'an' if shape[0] in 'aeiou' else 'a'} {shape.replace('_', ' ')}, "
            f"{doing(f, v.phase)}.")


def upstream_broke(f: Facts, v: Verdict) -> str:
    malformation = MALFORMATIONS.get((f.error or NO_ERROR).code, "malformed framing")
    how = {"reset": "was reset", "truncated": "was closed mid-body (no final chunk)",
           "malformed": f"broke on a {malformation} (the upstream's HTTP chunked framing was "
                        "malformed)",
           "error": "failed"}[f.upstream]
    return f"The connection to {f.provider} {how} {doing(f, v.phase)}."


def stream_answered_with_json(f: Facts, v: Verdict) -> str:
    return (f"The request asked for a stream (`stream: true`) but {f.provider} answered with one "
            "JSON body (application/json), not an event stream: a streaming client reads no "
            "events from it and may show an empty reply without an error.")


def completed_with_terminal(f: Facts, v: Verdict) -> str:
    frames = f"after {f.frame_count} frames" if f.frame_count else "(a JSON reply)"
    return f"The {f.provider} stream completed normally: terminal `{f.terminal}` {frames}."


def no_dialect_to_judge(f: Facts, v: Verdict) -> str:
    return (f"The {f.provider} response ended cleanly; streamtap has no dialect that tells a "
            f"complete {f.dialect or 'unknown'} body from a short one.")


def closed_without_terminal(f: Facts, v: Verdict) -> str:
    # What a client made of a short answer is said once, by the client_sees sentence the
    # recorder appends (verdict/outward.py); only a whole answer needs saying here.
    whole = f.finish_reason is not None and v.phase == ev.AFTER_FINISH
    tail = "; the answer is whole; only the end marker or usage is missing" if whole else ""
    return (f"{f.provider} (or a gateway in between) closed the stream cleanly, without the "
            f"terminal event, {doing(f, v.phase)}{tail}.")


# -- remarks any verdict can end with ---------------------------------------------------------
def stalled(f: Facts) -> str:
    """Said when streamtap's own event-loop stall covers a part of the silence a verdict rests
    on (classify.rests_on_silence)."""
    return (f"streamtap itself stalled for {f.proxy_lag_max_ms:.0f} ms during that silence, so "
            f"part of it was not {f.provider}'s doing.")


NOTE_SENTENCES = {
    "malformed_framing_passed_on": "streamtap passed the malformed bytes on to the client and "
                                   "then closed its connection, so the client's HTTP parser met "
                                   "them as it would have without streamtap.",
    "path_repeats_route_prefix": "The forwarded path repeats the route URL's own path prefix "
                                 "(such as `/v1/v1/`): the client's base URL adds a prefix the "
                                 "route URL already ends with.",
}


def note(code: str) -> str:
    """The sentence of one of the proxy's own observations (Ending.notes)."""
    return NOTE_SENTENCES.get(code, f"({code})")


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
