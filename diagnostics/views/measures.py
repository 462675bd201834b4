"""What one finished record adds to the metrics: its labels, and its timings in seconds.

Pure: a record in, numbers out. The Prometheus endpoint and the OTLP metrics read the same
Measures, so they cannot disagree. Label values are bounded by a LabelCap: a client that sends a
new model name with every request grows no series past the cap.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtap.diagnostics.record.schema import longest_silence_ms
from streamtap.diagnostics.trace_record import TraceRecord
from streamtap.diagnostics.views import genai_conventions as sc
from streamtap.diagnostics.views.spans import error_type, operation_name

# The dimensions of the request counter. Every value comes from the record: route and provider are
# names from the config or the URL's first segment, model is the request body's `model` (the
# record keeps it too), the rest are the classifier's closed lists; none can hold a key or content.
REQUEST_LABELS = ("route", "provider", "model", "boundary", "phase", "outcome")
TIMING_LABELS = ("route", "provider", "model")
OTHER = "other"  # every value past a label's cap
MISSING = "unknown"  # a record without the field (a refused request has no model)
MAX_LABEL_CHARS = 128  # a longer value is cut: a 10 kB model name must not become a 10 kB label


class LabelCap:
    """The first `limit` distinct values of each label name, then `other`. Thread-safe enough
    for its one writer (the store's thread): a set per name, only ever added to."""

    def __init__(self, limit: int):
        self.limit = limit
        self._seen: dict[str, set[str]] = {}

    def __call__(self, name: str, value: object) -> str:
        text = str(value)[:MAX_LABEL_CHARS] if value not in (None, "") else MISSING
        seen = self._seen.setdefault(name, set())
        if text in seen:
            return text
        if len(seen) >= self.limit:
            return OTHER
        seen.add(text)
        return text


@dataclass(frozen=True, slots=True)
class Measures:
    labels: dict[str, str]  # REQUEST_LABELS, capped
    operation: str  # gen_ai.operation.name, from the path
    provider_name: str  # gen_ai.provider.name (the well-known name for a default route), capped
    error_type: str | None  # documented closed list (spans.error_type); None when it did not fail
    time_to_headers_s: float | None
    time_to_first_event_s: float | None  # None for a whole JSON body: it has no first chunk
    duration_s: float | None
    longest_silence_s: float | None
    gaps_s: tuple[float, ...]  # between consecutive frames after the first (chunk to chunk)

    @property
    def timing_labels(self) -> dict[str, str]:
        return {name: self.labels[name] for name in TIMING_LABELS}


def _seconds(value: object) -> float | None:
    return value / 1000 if isinstance(value, (int, float)) and value >= 0 else None


def frame_gaps(record: TraceRecord) -> tuple[float, ...]:
    """Seconds between consecutive kept frames. A record keeps the head and the tail of a long
    stream (`frames_dropped` in between): the step across that hole is not a gap, so it is left
    out, and the number of gaps is bounded by the record's own frame cap."""
    frames = record.frames
    skip = len(frames) // 2 if record.frames_dropped else -1
    gaps = []
    previous = None
    for index, frame in enumerate(frames):
        t_ms = frame.t_ms
        if previous is not None and index != skip and t_ms >= previous:
            gaps.append((t_ms - previous) / 1000)
        previous = t_ms
    return tuple(gaps)


def measures(record: TraceRecord, cap: LabelCap) -> Measures:
    request = record.request
    outcome = record.outcome
    timeline = record.timeline
    route = record.route
    provider = record.provider or route
    labels = {
        "route": cap("route", route),
        "provider": cap("provider", provider),
        "model": cap("model", request.model),
        "boundary": cap("boundary", outcome.boundary if outcome else None),
        "phase": cap("phase", outcome.phase if outcome else None),
        "outcome": "ok" if outcome and outcome.ok else "failed",
    }
    streamed = record.dialect != "json"
    return Measures(
        labels=labels,
        operation=operation_name(request.path),
        provider_name=cap("gen_ai.provider.name",
                          sc.PROVIDER_BY_ROUTE.get(provider or "", provider)),
        error_type=error_type(outcome),
        time_to_headers_s=_seconds(timeline.response_headers),
        time_to_first_event_s=_seconds(timeline.first_event) if streamed else None,
        duration_s=_seconds(timeline.duration_ms),
        # The silence `show` and `stats` name (the end counts too), so the three never disagree.
        longest_silence_s=_seconds(longest_silence_ms(timeline, record.frames)),
        gaps_s=frame_gaps(record) if streamed else (),
    )
