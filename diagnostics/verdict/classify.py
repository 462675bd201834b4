"""Who ended the stream, and what the model was doing: one ordered table of rules, kept as data.

RULES below is the table. Each row asks one yes/no question of the facts of an exchange (what the
wire showed, how each side ended) and, when the answer is yes, gives the verdict: the boundary
(who ended the stream), the phase (what the model was doing), how sure streamtap is, the evidence
codes, the retry advice, and the sentence that says it. The first row that holds decides, so the
table reads top to bottom like a decision list: injected faults and streamtap's own actions first,
then the client, the transport, the provider's errors, and last the ways a stream can end cleanly.

The questions are in conditions.py, the columns read from the facts in columns.py and the
sentences in sentences.py; this module holds the facts, the table and the function that applies it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from streamtap.diagnostics.dialects import events as ev
from streamtap.diagnostics.trace_record import Close, ErrorFacts, ServerTool, StreamError, ToolCall
from streamtap.diagnostics.verdict import conditions as when
from streamtap.diagnostics.verdict import sentences as say
from streamtap.diagnostics.verdict import silences
from streamtap.diagnostics.verdict.columns import (
    client_codes, closed_codes, closed_retryable, connect_codes, fault_codes, fault_phase,
    http_codes, http_retryable, proxy_reason_code, proxy_retryable, since_last_frame,
    stream_error_codes, stream_phase, stream_retryable, unknown_shape_codes, upstream_codes,
    watchdog_code, watchdog_phase, watchdog_silence)
from streamtap.diagnostics.verdict.proxylag import lag_explains


@dataclass
class Facts:
    """Everything a rule may read. Built from the record so that rules never touch I/O."""

    provider: str
    dialect: str | None
    status: int | None
    error: ErrorFacts | None
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
    stream_errors: list[StreamError]
    phase: str
    event_counts: dict[str, int]
    frame_count: int
    open_tools: list[ToolCall] = field(default_factory=list)
    completed_tools: list[ToolCall] = field(default_factory=list)
    protocol_errors: dict[str, int] = field(default_factory=dict)
    unterminated: bool = False
    max_gap_ms: float = 0.0
    all_forwarded: bool = False  # the client was sent every byte the upstream sent
    server_tools: list[ServerTool] = field(default_factory=list)  # tools the provider ran itself
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
    close: Close = Close()
    # streamtap's own worst event-loop lag while the exchange was open, and when it ended
    # (proxylag.py); None in records from before it was measured.
    proxy_lag_max_ms: float | None = None
    proxy_lag_at_ms: float | None = None
    last_frame_ms: float = 0.0  # the last frame, else the response headers: a final silence's start
    end_ms: float = 0.0  # when the exchange ended (downstream end, else upstream end, else duration)




def media_type(content_type: str | None) -> str | None:
    return content_type.split(";", 1)[0].strip().lower() if content_type else None


@dataclass
class Verdict:
    boundary: str
    phase: str | None
    confidence: str
    evidence: list[str]
    retryable: bool | None
    summary: str


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of the table. `when` is its condition: facts in, yes or no out. The verdict's
    columns are each a fixed value or a function of the facts (columns.py); `says` puts the
    verdict into words (sentences.py). A verdict that rests on a silence names where the silence
    began (`silence_from`), so that a stall of streamtap's own inside it lowers the confidence."""

    when: Callable[[Facts], bool]
    boundary: str
    phase: str | Callable[[Facts], str]
    confidence: str
    says: Callable[[Facts, Verdict], str]
    retryable: bool | None | Callable[[Facts], bool | None]
    evidence: tuple[str, ...] | Callable[[Facts], list[str]]
    silence_from: Callable[[Facts], float] | None = None

    @property
    def name(self) -> str:
        return self.when.__name__

    def verdict(self, f: Facts) -> Verdict:
        """The verdict this row gives for facts its condition holds for."""
        verdict = Verdict(self.boundary, read(self.phase, f), self.confidence,
                          list(read(self.evidence, f)) + side_evidence(f),
                          read(self.retryable, f), "")
        verdict.summary = self.says(f, verdict)
        if self.silence_from is not None:
            verdict = rests_on_silence(verdict, f, self.silence_from(f))
        return verdict


def read(column: object, f: Facts) -> object:
    """A column's value for these facts: the function's answer, or the fixed value itself."""
    return column(f) if callable(column) else column


BEFORE_RESPONSE, COMPLETE = ev.BEFORE_RESPONSE, ev.COMPLETE

# The table, two lines a row. The first row whose condition holds decides; the last always holds.
#        condition: facts -> yes/no      boundary           phase             confidence
#        sentence                        retryable          evidence codes    silence from
RULES: tuple[Rule, ...] = (
    Rule(when.injected_fault,            "injected",        fault_phase,      "high",
         say.injected_fault,             None,              fault_codes),
    Rule(when.forced_shutdown,           "proxy",           stream_phase,     "high",
         say.forced_shutdown,            True,              ("shutdown_forced",)),
    Rule(when.proxy_shutdown,            "proxy",           stream_phase,     "high",
         say.proxy_shutdown,             True,              ("proxy_shutdown",)),
    Rule(when.proxy_answered,            "proxy",           stream_phase,     "high",
         say.proxy_answered,             proxy_retryable,   proxy_reason_code),
    Rule(when.watchdog_fired,            "watchdog",        watchdog_phase,   "high",
         say.watchdog_fired,             True,              watchdog_code,    watchdog_silence),
    Rule(when.client_went_away,          "client_abort",    stream_phase,     "high",
         say.client_went_away,           None,              client_codes,     since_last_frame),
    Rule(when.could_not_connect,         "transport",       BEFORE_RESPONSE,  "high",
         say.could_not_connect,          True,              connect_codes),
    Rule(when.http_error_status,         "provider_error",  BEFORE_RESPONSE,  "high",
         say.http_error_status,          http_retryable,    http_codes),
    Rule(when.error_in_unknown_shape,    "provider_error",  stream_phase,     "high",
         say.error_in_unknown_shape,     stream_retryable,  unknown_shape_codes),
    Rule(when.error_inside_stream,       "provider_error",  stream_phase,     "high",
         say.error_inside_stream,        stream_retryable,  stream_error_codes),
    Rule(when.upstream_broke,            "transport",       stream_phase,     "high",
         say.upstream_broke,             True,              upstream_codes),
    Rule(when.stream_answered_with_json, "protocol",        COMPLETE,         "high",
         say.stream_answered_with_json,  False,             ("stream_requested_json_answered",)),
    Rule(when.completed_with_terminal,   "none",            COMPLETE,         "high",
         say.completed_with_terminal,    None,              ("terminal_event",)),
    Rule(when.no_dialect_to_judge,       "none",            COMPLETE,         "low",
         say.no_dialect_to_judge,        None,              ("clean_close", "no_terminal_known")),
    Rule(when.closed_without_terminal,   "provider_close",  stream_phase,     "medium",
         say.closed_without_terminal,    closed_retryable,  closed_codes),
)


def side_evidence(f: Facts) -> list[str]:
    """Evidence that does not decide the verdict but belongs in it (bad frames, open frames)."""
    extra = sorted(f.protocol_errors)
    if f.unterminated:
        extra.append("unterminated_frame")
    if f.upstream_retried:
        extra.append("upstream_retry")
    return extra


LOWER_CONFIDENCE = {"high": "medium", "medium": "low", "low": "low"}


def rests_on_silence(verdict: Verdict, f: Facts, start_ms: float) -> Verdict:
    """A verdict that rests on a silence (from `start_ms` to the exchange's end) is one step less
    sure when streamtap's own event-loop stall covers a part of it, and says so."""
    if not lag_explains(f.proxy_lag_max_ms, f.proxy_lag_at_ms, start_ms, f.end_ms):
        return verdict
    verdict.confidence = LOWER_CONFIDENCE[verdict.confidence]
    verdict.evidence.append("proxy_lag")
    verdict.summary += " " + say.stalled(f)
    return verdict


def classify(f: Facts, table: tuple[Rule, ...] = RULES) -> dict:
    """The record's `outcome`: the first row of the table whose condition holds decides (the
    last row always holds), then the remarks any verdict gets."""
    verdict = next(row for row in table if row.when(f)).verdict(f)
    for code, sentence in silences.remarks(f):
        verdict.evidence.append(code)
        verdict.summary += " " + sentence
    for code in f.notes:
        verdict.evidence.append(code)
        verdict.summary += " " + say.note(code)
    armed = say.armed_not_fired(f)
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
