"""Samples: content-free skeletons of real streams, built from trace records, that replay can play.

A sample keeps what a stream looked like (status, allowlisted headers, frame timing, sizes, kinds
and shapes) and how it ended, never a word of content: it is made only of record fields that are
content-free by construction (see shapes.py and redact.py). A sample describes the decoded stream
(a gzip stream replays uncompressed) and, for an injected fault, what the client saw.
"""

from __future__ import annotations

import hashlib
import json

from streamtap.diagnostics.dialects import dialect_for_path
from streamtap.diagnostics.errors import UserError
from streamtap.diagnostics.record.schema import upgrade

SAMPLE_SCHEMA_VERSION = 1
ENDINGS = ("terminal", "clean_close", "reset", "truncated", "stalled", "client_gone",
           "http_error", "no_response")
# What each injected action looked like to the client.
_INJECTED_ENDINGS = {"reset": "reset", "truncate": "truncated", "close": "clean_close",
                     "drop_terminal": "clean_close", "error_chunk": "clean_close",
                     "stall": "stalled", "http_error": "http_error",
                     "bad_chunk_size": "truncated"}
# Request summary fields a sample keeps: flags, counts and settings, never content.
REQUEST_FIELDS = ("method", "path", "model", "stream", "message_count", "tool_count",
                  "tool_names", "tool_choice", "reasoning", "max_tokens", "temperature",
                  "stream_options.include_usage")
# Headers that describe the wire encoding of the original, not the decoded stream a sample holds.
_WIRE_HEADERS = ("content-encoding", "content-length")


class SampleError(UserError, ValueError):
    pass


def sample_ending(record: dict) -> str:
    """How the stream ended, as the client saw it."""
    fault = record.get("fault") or {}
    if fault.get("fired") and fault.get("action") in _INJECTED_ENDINGS:
        if record["downstream"]["ended"] == "client_gone":
            return "client_gone"
        return _INJECTED_ENDINGS[fault["action"]]
    response = record.get("response")
    if response is None:
        return "no_response"
    if response["status"] >= 400:
        return "http_error"
    if record["downstream"]["ended"] == "client_gone":
        return "client_gone"
    if (record.get("watchdog") or {}).get("fired"):
        return "stalled"
    upstream_error = (record.get("error") or {}).get("where") == "upstream_read"
    evidence = (record.get("outcome") or {}).get("evidence") or []
    if "upstream_reset" in evidence or "shutdown_forced" in evidence:  # forced: the client is reset
        return "reset"
    if "upstream_truncated" in evidence or upstream_error or "proxy_shutdown" in evidence:
        return "truncated"
    return "terminal" if record["stream"].get("terminal") else "clean_close"


def answered_by_streamtap(record: dict) -> bool:
    """streamtap refused the request itself (no such route, a bad fault header, too large, a
    header too long): nothing reached a provider, so the record says nothing about one."""
    outcome = record.get("outcome") or {}
    return outcome.get("boundary") == "proxy" and not record.get("response")


def sample_dialect(record: dict) -> str | None:
    return streamed_dialect(record.get("dialect"), (record.get("response") or {}).get("status"),
                            record.get("request") or {})


def streamed_dialect(dialect: str | None, status: int | None, request: dict) -> str | None:
    """An HTTP error body (read as `json`) or no response belongs to the dialect the request
    streams, so replay can answer that dialect's requests with it."""
    if dialect not in (None, "json") or (status is not None and status < 400):
        return dialect
    by_path = dialect_for_path(request.get("path") or "")
    streaming = request.get("stream") is True or by_path == "gemini" or (
        by_path == "ollama-ndjson" and request.get("stream") is not False)
    return by_path if by_path and streaming else dialect


def build_sample(record: dict) -> dict:
    """A sample from a trace record of any schema version we wrote."""
    record = upgrade(record)
    notes = []
    response = record.get("response") or {}
    start = (record.get("timeline") or {}).get("response_headers") or 0.0
    frames = []
    for entry in record.get("frames") or []:
        shape = entry[3] if len(entry) > 3 else None
        frames.append([round(entry[0] - start, 1), entry[1], entry[2], shape])
    if frames and all(len(entry) <= 3 for entry in record["frames"]):
        notes.append("frames have no shapes: the record predates shapes; replay pads frames "
                     "with comments")
    if record.get("frames_dropped"):
        notes.append(f"{record['frames_dropped']} frames were dropped from the record's middle; "
                     "the sample holds its head and tail")
    encoding = response.get("content_encoding")
    if encoding:
        notes.append(f"the original body was {encoding}-encoded; the sample describes the "
                     "decoded stream and replays it uncompressed")
    headers = {name: value for name, value in (response.get("headers") or {}).items()
               if name not in _WIRE_HEADERS}
    request = record.get("request") or {}
    error = record.get("error") or {}
    timeline = record.get("timeline") or {}
    end_ms = timeline.get("upstream_end") or timeline.get("downstream_end") or 0.0
    sample = {
        "schema_version": SAMPLE_SCHEMA_VERSION,
        "source_trace_id": record["trace_id"],
        "provider": record.get("provider"),
        "route": record.get("route"),
        "dialect": sample_dialect(record),
        "model": request.get("model"),
        "request": {key: request[key] for key in REQUEST_FIELDS if key in request},
        "status": response.get("status"),
        "content_type": response.get("content_type"),
        "headers": headers,
        "decoded": True,
        "original_encoding": encoding,
        # Kinds and codes only: a provider's error message can echo its input.
        "error": {key: error.get(key) for key in ("where", "type", "code", "status",
                                                   "error_type", "error_code")}
        if error else None,
        "frames": frames,
        "shapes": record.get("shapes") or [],
        "body_shape": record["stream"].get("body_shape"),
        "timing": {"response_headers_ms": start, "end_ms": round(max(end_ms - start, 0.0), 1),
                   "first_byte_ms": timeline.get("first_byte"),
                   "first_progress_ms": timeline.get("first_progress"),
                   "max_gap_ms": timeline.get("max_gap_ms")},
        "stream": {**{key: record["stream"].get(key) for key in
                      ("bytes", "terminal", "finish_reason", "event_counts", "delta_keys",
                       "usage", "tool_calls", "unknown_types")},
                   # the shape of each in-stream error, never its message (it can echo input)
                   "errors": [{key: value for key, value in error.items() if key != "message"}
                              for error in record["stream"].get("errors") or []]},
        "ending": sample_ending(record),
        "outcome": {key: (record.get("outcome") or {}).get(key)
                    for key in ("boundary", "phase", "evidence")},
        "injected": bool((record.get("fault") or {}).get("fired")),
        "notes": notes,
    }
    return sample


def sample_digest(sample: dict) -> str:
    """Identity of a sample's content: the same stream exported twice is written once."""
    body = {key: value for key, value in sample.items() if key != "source_trace_id"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def sample_stem(sample: dict) -> str:
    """`<provider>__<dialect>__<ending>`; the exporter appends `__<n>.sample.json`."""
    def part(value: object) -> str:
        text = str(value or "unknown")
        return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in text)[:48]

    return f"{part(sample['provider'])}__{part(sample['dialect'])}__{part(sample['ending'])}"


def check_sample(sample: object) -> dict:
    """Validate a loaded sample; refuse one from a newer streamtap with what to do."""
    if not isinstance(sample, dict) or "frames" not in sample or "ending" not in sample:
        raise SampleError("not a streamtap sample (no frames/ending); export one with "
                          "`streamtap samples export`")
    version = sample.get("schema_version")
    if not isinstance(version, int) or version > SAMPLE_SCHEMA_VERSION:
        raise SampleError(f"sample schema_version {version!r} is newer than this streamtap "
                          f"understands ({SAMPLE_SCHEMA_VERSION}); upgrade streamtap")
    if sample["ending"] not in ENDINGS:
        raise SampleError(f"unknown ending {sample['ending']!r}; expected one of "
                          f"{', '.join(ENDINGS)}")
    return sample
