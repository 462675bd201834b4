"""A repro: one recorded failure as a repeatable case. It is the trace's content-free sample (the
stream up to where it broke, ending the same way) plus a manifest saying where it broke (frame
index, phase, byte offset), in which dialect, and what the original verdict was.

Pure: a record in, a sample and a manifest out; a manifest and a sample in, a ReproCase out.
Reading and writing the folder is proxy/replay/repro.py's job.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtap.diagnostics.dialects import dialect_for_path
from streamtap.diagnostics.errors import UserError
from streamtap.diagnostics.trace_record import TraceRecord
from streamtap.diagnostics.samples.format import (SampleError, answered_by_streamtap,
                                                   build_sample, check_sample)

REPRO_VERSION = 1
MANIFEST_NAME = "repro.json"
SAMPLE_NAME = "repro.sample.json"  # replay names a sample by its file: a request can say `repro`
# The verdict's fields a manifest keeps: tokens of ours, never the summary (it names routes and
# tools in words) and never a provider's message.
VERDICT_FIELDS = ("ok", "boundary", "phase", "confidence", "evidence", "retryable")


class ReproError(UserError, ValueError):
    """A trace that cannot become a repro, or a folder that is not one; says what to do."""


@dataclass(frozen=True)
class BreakPoint:
    """Where a stream broke, as the client received it: `frames` frames in all, the break at
    frame `frame_index` (a frame cut half-way is the frame that broke; else the break comes where
    the next frame would have started), after `byte_offset` decoded body bytes."""

    frames: int
    frame_index: int
    byte_offset: int
    unterminated: bool  # the last frame was cut before its end


def break_point(record: TraceRecord) -> BreakPoint:
    """The break point of a trace record (counts, not the frame list: a long record keeps only
    the head and tail of its frames). An HTTP error, or no response at all, broke before the
    stream's first byte: its body is an error reply, not a stream (and a sample keeps its shape,
    not its size)."""
    if record.response is None or record.response.status >= 400:
        return BreakPoint(frames=0, frame_index=0, byte_offset=0, unterminated=False)
    kept = record.frames
    frames = record.stream.frame_count
    unterminated = bool(kept) and kept[-1].kind == "unterminated"
    return BreakPoint(frames=frames, frame_index=frames - 1 if unterminated else frames,
                      byte_offset=record.stream.bytes, unterminated=unterminated)


@dataclass(frozen=True)
class ReproCase:
    """A repro folder read back: what `streamtap probe --from DIR` and `replay DIR` serve."""

    trace_id: str  # the original trace's id: streamtap's own random hex
    dialect: str
    ending: str  # how the client saw the stream end (format.SAMPLE_ENDINGS)
    phase: str | None
    point: BreakPoint
    status: int | None
    request_path: str  # the redacted path the original request called
    streams: bool  # whether the original request asked for a stream
    verdict: dict  # VERDICT_FIELDS of the original outcome
    sample: dict  # the checked sample, ready for replay's Loaded.from_sample
    sample_file: str = SAMPLE_NAME  # its file in the repro folder
    notes: tuple[str, ...] = ()


def build_repro(record: TraceRecord) -> tuple[dict, dict]:
    """`(sample, manifest)` for one trace record (any schema version we wrote, as read by the
    schema)."""
    if answered_by_streamtap(record):
        raise ReproError(f"trace {record.trace_id} was answered by streamtap itself "
                         "(nothing reached a provider): there is no provider stream to "
                         "reproduce; pick a trace with `streamtap ls --failed`")
    sample = build_sample(record)
    answers = dialect_for_path((sample.get("request") or {}).get("path") or "")
    if sample.get("dialect") in (None, "unknown") and answers is None:
        raise ReproError(f"trace {record.trace_id} has no dialect streamtap knows, so no "
                         "client request could be answered with it; set the route's dialect "
                         "(`--route NAME=URL` with `dialect = ...` in the config) and record "
                         "it again")
    point = break_point(record)
    outcome = record.outcome
    notes = list(sample.get("notes") or [])
    if sample["ending"] == "terminal" and (outcome is None or outcome.boundary == "none"):
        notes.append("the original stream did not fail: this repro replays a complete stream")
    if sample.get("injected"):
        notes.append("the original failure was injected by a streamtap fault rule; replayed, "
                     "the same ending comes from the upstream, so its boundary reads as the "
                     "upstream's")
    manifest = {
        "repro_version": REPRO_VERSION,
        "trace_id": record.trace_id,  # streamtap's own random hex
        "dialect": sample["dialect"],  # a name from our dialect table
        "ending": sample["ending"],  # a token from format.SAMPLE_ENDINGS
        "phase": outcome.phase if outcome else None,  # a token from the classifier's table
        "frames": point.frames,
        "frame_index": point.frame_index,
        "byte_offset": point.byte_offset,
        "unterminated": point.unterminated,
        # the sample rebuilds every frame at its size, so a replay ends at the same byte
        "bytes_exact": sample["ending"] not in ("http_error", "no_response")
        and not record.frames_dropped
        # a record that predates shapes (no shape table) pads its frames
        and (not record.frames or bool(record.shapes)),
        "status": sample.get("status"),
        # the redacted path (ids and keys in it are masked by redact_path when recorded)
        "request_path": (sample.get("request") or {}).get("path"),
        "stream": bool((sample.get("request") or {}).get("stream", True)),
        "verdict": {key: getattr(outcome, key, None) for key in VERDICT_FIELDS},
        "sample": SAMPLE_NAME,
        "notes": notes,  # sentences of ours, above
    }
    return sample, manifest


def read_case(manifest: object, sample: object) -> ReproCase:
    """A ReproCase from a manifest and its sample as loaded from JSON; says what is wrong."""
    if not isinstance(manifest, dict) or "repro_version" not in manifest:
        raise ReproError(f"{MANIFEST_NAME} is not a streamtap repro manifest (no "
                         "repro_version); make one with `streamtap repro TRACE_ID`")
    version = manifest["repro_version"]
    if not isinstance(version, int) or version > REPRO_VERSION:
        raise ReproError(f"repro_version {version!r} is newer than this streamtap understands "
                         f"({REPRO_VERSION}); upgrade streamtap")
    try:
        sample = check_sample(sample)
    except SampleError as exc:
        raise ReproError(f"{manifest.get('sample', SAMPLE_NAME)}: {exc}") from None
    missing = [key for key in ("trace_id", "dialect", "ending", "frames", "frame_index",
                               "byte_offset") if key not in manifest]
    if missing:
        raise ReproError(f"{MANIFEST_NAME} lacks {', '.join(missing)}; make the repro again "
                         "with `streamtap repro TRACE_ID`")
    if manifest["ending"] != sample["ending"] or manifest["dialect"] != sample.get("dialect"):
        raise ReproError(f"{MANIFEST_NAME} says {manifest['dialect']}/{manifest['ending']} but "
                         f"the sample is {sample.get('dialect')}/{sample['ending']}: the files "
                         "come from different repros; make the repro again")
    point = BreakPoint(manifest["frames"], manifest["frame_index"], manifest["byte_offset"],
                       bool(manifest.get("unterminated")))
    return ReproCase(trace_id=manifest["trace_id"], dialect=manifest["dialect"],
                     ending=manifest["ending"], phase=manifest.get("phase"), point=point,
                     status=manifest.get("status"),
                     request_path=manifest.get("request_path") or "",
                     streams=bool(manifest.get("stream", True)),
                     verdict=dict(manifest.get("verdict") or {}), sample=sample,
                     sample_file=str(manifest.get("sample") or SAMPLE_NAME),
                     notes=tuple(manifest.get("notes") or ()))
