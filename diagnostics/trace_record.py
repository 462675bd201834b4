"""The trace record, typed: one frozen structure per section, in the order a record file holds
them. Written at every stream's end, read by every view, the index line, the log line and the
samples; nothing but the schema (diagnostics/record/schema.py, its reader, writer and upgrades)
reads a record by string key. Data only, so it sits at the bottom of diagnostics/: the verdict's
facts (verdict/classify.py) hold its sections too, though the verdict sits below the recorder.

msgspec's Structs rather than dataclasses: the record is encoded on the proxy's hot path at each
stream end and decoded by every reader, and msgspec does both (with type checks on read) several
times faster than `json` over dicts; a dataclass would need the `json` round trip plus a
hand-written validator. docs/record.md's field table is tested against these types
(tests/unit/test_record_types.py).

Every string field below says why it cannot hold a secret or the user's content; the redaction
layers (diagnostics/redaction/) are what make that true, and the recorder is their one caller.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

T = TypeVar("T")


def stated(value: T | UnsetType) -> T | None:
    """A field that a record holds only where it applies (an HTTP error's `status`, an error's
    `message_dropped`), as None where it does not. Such fields are UNSET rather than None so
    that a record file leaves them out, as version 1 did."""
    return None if value is UNSET else value


class Section(msgspec.Struct, frozen=True, kw_only=True):
    """A part of a record: immutable once written (a changed copy is `msgspec.structs.replace`)."""


class Frame(msgspec.Struct, frozen=True, array_like=True):
    """One SSE frame as `[t_ms, bytes, kind, shape]` (compact: a record holds up to 10,000)."""

    t_ms: float
    bytes: int
    kind: str  # an event kind of diagnostics/dialects/events.py: a fixed word
    shape: int | None = None  # an index into the record's `shapes`; absent in early v1 files


class RequestSummary(Section):
    """What the request said, never what it asked: sizes, counts and the API's own tokens.
    A fact the request did not state is None (version 1 left it out)."""

    method: str | None = None  # an HTTP method
    path: str | None = None  # redacted: ids kept, key-like segments and the query removed
    query_keys: list[str] = []  # the query's names, never its values
    body_bytes: int = 0
    headers: dict[str, str] = {}  # allowlisted headers only (redaction/redact.py)
    summary_truncated: bool = False
    model: str | None = None  # token(): a short identifier or `<redacted>`
    stream: bool | None = None
    message_count: int | None = None
    tool_count: int | None = None
    tool_names: list[str] = []  # names the request defined, as tokens
    tool_choice: str | None = None  # a token
    reasoning: dict[str, Any] | None = None  # effort/budget settings: tokens and numbers
    max_tokens: int | float | None = None
    temperature: int | float | None = None
    include_usage: bool | None = msgspec.field(default=None, name="stream_options.include_usage")


class ResponseSummary(Section):
    status: int
    content_type: str | None = None  # a media type header
    content_encoding: str | None = None
    headers: dict[str, str] = {}  # allowlisted headers only


class Correlation(Section):
    request_id: str | None = None  # the provider's request id header: an id, not content
    response_id: str | None = None  # the stream's own id, passed through token()


class Timeline(Section):
    """Milliseconds since the request arrived; None when never reached."""

    request_received: float | None = 0.0
    upstream_connected: float | None = None
    request_sent: float | None = None
    response_headers: float | None = None
    first_byte: float | None = None
    first_event: float | None = None
    first_progress: float | None = None
    last_progress: float | None = None
    terminal_event: float | None = None
    upstream_end: float | None = None
    downstream_end: float | None = None
    last_byte: float | None = None
    last_event: float | None = None
    max_gap_ms: float = 0.0
    duration_ms: float = 0.0
    proxy_lag_max_ms: float | None = None
    proxy_lag_at_ms: float | None = None


class ToolCall(Section):
    """A call the client runs. Never its arguments: sizes, a parse verdict and a fixed code."""

    index: int
    name: str | None = None  # a tool the request defined, else None (the model's words)
    started_ms: float = 0.0
    arg_chunks: int = 0
    arg_bytes: int = 0
    arg_parsed: bool | None = None
    arg_unchecked: str | None = None  # too_large | not_json_text
    completed: bool = False


class ServerTool(Section):
    """A tool the provider ran itself: its type (`web_search`, a token) and whether it finished."""

    index: int
    type: str | None = None
    started_ms: float = 0.0
    completed: bool = False


class StreamError(Section):
    """An error the provider put inside the stream. `type`/`code` are tokens; `message` went
    through the echo check and the scrubber (redaction/messages.py)."""

    shape: str  # a fixed word: wrapped_chunk, error_event, failed_terminal, ...
    t_ms: float = 0.0
    type: str | None = None
    code: str | int | None = None
    message: str | None = None
    # Only where they apply (see stated()):
    field: str | UnsetType = UNSET  # the unknown SSE field line that carried it, a token
    message_dropped: str | UnsetType = UNSET  # why the message was dropped (a fixed code)


class Stream(Section):
    bytes: int = 0
    frame_count: int = 0
    event_counts: dict[str, int] = {}  # event kinds: fixed words
    delta_keys: list[str] = []  # names of fields that carried content, never the content
    finish_reason: str | None = None  # the provider's own, a token
    usage: dict[str, Any] = {}  # token counts
    terminal: str | None = None  # the terminal event's name (`[DONE]`, `message_stop`, ...)
    unknown_types: list[str] = []  # event types no dialect knows, as tokens
    unknown_fields: dict[str, int] = {}  # SSE field names: short identifiers or `<other>`
    tool_calls: list[ToolCall] = []
    server_tools: list[ServerTool] = []
    errors: list[StreamError] = []
    protocol_errors: dict[str, int] = {}  # fixed codes with counts
    body_shape: int | None = None


class ErrorCause(Section):
    type: str | None = None  # an exception class name
    message: str | None = None  # scrubbed (verdict/fingerprints.py describe())
    code: str | int | None = None  # an errno name or a library code


class ErrorFacts(Section):
    """Where the exchange broke: a transport fingerprint (verdict/fingerprints.py), and for an HTTP
    error the provider's status, type, code and a scrubbed, echo-checked message."""

    where: str | None = None  # upstream_connect | upstream_response | upstream_read | ...
    type: str | None = None
    message: str | None = None
    code: str | int | None = None
    cause: ErrorCause | None = None
    # An HTTP error's (see stated()): its status, and the provider's type, code and message.
    status: int | UnsetType = UNSET
    error_type: str | None | UnsetType = UNSET
    error_code: str | int | None | UnsetType = UNSET
    error_message: str | None | UnsetType = UNSET
    message_dropped: str | UnsetType = UNSET  # why error_message was dropped (a fixed code)


# An exchange without an error, read like an error whose every field is unknown.
NO_ERROR = ErrorFacts()


class Downstream(Section):
    status: int | None = None
    ended: str = "complete"  # complete | aborted | client_gone
    bytes: int = 0


class WatchdogFacts(Section):
    connect_timeout_ms: int | float | None = None
    idle_timeout_ms: int | float | None = None
    progress_timeout_ms: int | float | None = None
    fired: str | None = None  # connect | idle | progress


class FaultFacts(Section):
    """The injected fault: the rule's configured name and action, never request text."""

    name: str | None = None
    action: str | None = None
    at: Any = None  # the rule's trigger as configured
    fired: bool = False
    fired_at_ms: float | None = None
    frames_before: int = 0
    source: str | None = None  # config | header | api
    fallback: str | UnsetType = UNSET  # a fixed code (proxy/faults/inject.py), if it fell back


class UpstreamRetry(Section):
    reason: str  # stale_pooled_connection
    first_error: ErrorFacts | None = None


class Close(Section):
    """How the connection ended as the client saw it: numbers and one fixed word."""

    by: str | None = None  # client | upstream | streamtap
    at_ms: float | None = None
    silence_ms: float | None = None
    heartbeats_since_event: int = 0
    heartbeat_interval_ms: float | None = None
    open_after_terminal_ms: float | None = None


class Outcome(Section):
    """The verdict (diagnostics/verdict/): fixed vocabularies, and a summary built from our own
    sentences, numbers, tokens and the already scrubbed messages."""

    ok: bool
    boundary: str
    phase: str
    confidence: str | None = None
    evidence: list[str] = []
    retryable: bool | None = None
    summary: str = ""
    client_sees: str | None = None
    normalized_finish_reason: str | None = None


class TraceRecord(Section, kw_only=True):
    """One request's record: identity first, then the verdict, then the sections."""

    schema_version: int
    trace_id: str  # streamtap's own id
    session_id: str  # the user's label, kept as given when path-safe (docs/record.md)
    message_id: str | None = None  # the user's label, likewise
    started_at: str  # an ISO time stamp
    route: str | None = None  # the configuration's route name; None for an unknown route
    provider: str | None = None
    dialect: str | None = None  # a dialect's name
    dialect_source: str | None = None  # route | path | sniff | content-type | fallback
    upstream_url: str | None = None  # scheme://host:port/path from the config; never the query
    outcome: Outcome | None = None  # None only while the recorder classifies
    request: RequestSummary = RequestSummary()
    response: ResponseSummary | None = None
    correlation: Correlation = Correlation()
    timeline: Timeline = Timeline()
    frames: list[Frame] = []
    frames_dropped: int = 0
    shapes: list[dict[str, Any]] = []  # frame shapes: key names and kinds (record/shapes.py)
    shapes_dropped: int = 0
    stream: Stream = Stream()
    error: ErrorFacts | None = None
    downstream: Downstream = Downstream()
    watchdog: WatchdogFacts = WatchdogFacts()
    fault: FaultFacts | None = None
    upstream_retry: UpstreamRetry | None = None
    close: Close = Close()
    capture: bool = False
