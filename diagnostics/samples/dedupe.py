"""Which samples are "the same stream": the same content-free structure and the same ending.

Twelve runs of one request differ in timing, in how many text deltas the model wrote, in token
counts and request ids; none of that makes a new kind of stream. A sample's structure is what
stays: provider, dialect, request settings, status, header names, the run of frame kinds and
shapes (a run of equal frames counts once, numbers in shapes are types), the tool calls by name,
the errors' shapes and how it ended. Of a group, the sample with the median timing is kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

# Sample fields that vary from run to run without changing what kind of stream it was.
_VARYING = ("source_trace_id", "digest", "structure", "also_seen", "timing", "headers", "notes",
            "frames", "shapes", "stream", "body_shape")


def _skeleton(value: object) -> object:
    """A shape with every number replaced by its type: `created`, counts, sequence numbers."""
    if isinstance(value, dict):
        return {key: _skeleton(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_skeleton(item) for item in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "$num"
    return value


def _frame_runs(sample: dict) -> list[list]:
    """`[kind, shape skeleton]` per run of equal frames, in stream order."""
    shapes = sample.get("shapes") or []
    runs: list[list] = []
    for entry in sample.get("frames") or []:
        kind = entry[2] if len(entry) > 2 else None
        index = entry[3] if len(entry) > 3 else None
        shape = _skeleton(shapes[index]) if isinstance(index, int) and index < len(shapes) \
            else None
        item = [kind, shape]
        if not runs or runs[-1] != item:
            runs.append(item)
    return runs


def structure_key(sample: dict) -> str:
    """A short digest of what a sample is, regardless of timing, sizes and ids."""
    stream = sample.get("stream") or {}
    body = {key: value for key, value in sample.items() if key not in _VARYING}
    body["header_names"] = sorted(sample.get("headers") or {})
    body["frames"] = _frame_runs(sample)
    body["body_shape"] = _skeleton(sample.get("body_shape"))
    body["stream"] = {
        "terminal": stream.get("terminal"), "finish_reason": stream.get("finish_reason"),
        "kinds": sorted(stream.get("event_counts") or {}),
        "delta_keys": sorted(stream.get("delta_keys") or []),
        "usage_keys": sorted(stream.get("usage") or {}),
        "tools": [[call.get("name"), call.get("completed")]
                  for call in stream.get("tool_calls") or [] if isinstance(call, dict)],
        "errors": _skeleton(stream.get("errors") or []),
        "unknown_types": sorted(stream.get("unknown_types") or []),
    }
    text = json.dumps(body, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def timing_of(sample: dict) -> tuple[float, float]:
    """What "median timing" sorts on: the stream's length, then its time to first byte."""
    timing = sample.get("timing") or {}

    def number(key: str) -> float:
        value = timing.get(key)
        return float(value) if isinstance(value, (int, float)) else 0.0

    return number("end_ms"), number("first_byte_ms")


def median_index(timings: Sequence[tuple[float, float]]) -> int:
    """The index of the median timing (the lower one of an even count)."""
    order = sorted(range(len(timings)), key=lambda i: (timings[i], i))
    return order[(len(order) - 1) // 2]
