"""Sample files: export trace records as samples into a folder, and load samples back.

Records are read by proxy/readout/tracedir.py, which never stops at one bad file: a file that is
not a record (broken JSON, another tool's file, a record from a newer streamtap) is reported with
what to do and skipped.
Samples of the same structure and ending are written once (the one with the median timing), also
across runs: see diagnostics/samples/dedupe.py.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from streamtap.diagnostics.errors import UserError
from streamtap.diagnostics.samples.dedupe import median_index, structure_key, timing_of
from streamtap.diagnostics.samples.format import (SampleError, answered_by_streamtap,
                                                   build_sample, check_sample, sample_digest,
                                                   sample_stem)
from streamtap.proxy.readout.tracedir import (parse_since, read_record, read_records,
                                              record_files, started_since)

SUFFIX = ".sample.json"
_NUMBERED = re.compile(r"(?P<stem>.+)__(?P<n>\d+)\.sample\.json")


class ExportError(UserError, ValueError):
    """Samples cannot be written to OUT, or a path named as samples holds none; says what to
    do. (A trace dir, session or --since that cannot be read is a TraceError.)"""


@dataclass
class ExportSummary:
    written: list[Path] = field(default_factory=list)
    duplicates: int = 0  # same structure and ending as a sample written (or already there)
    own_answers: int = 0  # requests streamtap answered itself: they describe no provider
    injected_skipped: int = 0
    filtered: int = 0  # older than --since
    unreadable: list[tuple[Path, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        text = [f"wrote {len(self.written)} sample(s)",
                f"skipped {self.duplicates} duplicate(s) of samples already written",
                f"left out {self.injected_skipped} injected fault(s)"
                + (" (--include-injected keeps them)" if self.injected_skipped else "")]
        if self.own_answers:
            text.append(f"left out {self.own_answers} request(s) streamtap answered itself "
                        "(nothing reached a provider)")
        if self.filtered:
            text.append(f"left out {self.filtered} record(s) older than --since")
        text.append(f"skipped {len(self.unreadable)} unreadable file(s)")
        return text


def existing(out: Path) -> tuple[set[str], dict[str, int]]:
    """Structure keys of the samples already in OUT, and the highest `n` used per stem."""
    structures: set[str] = set()
    highest: dict[str, int] = {}
    for path in out.glob(f"*{SUFFIX}"):
        match = _NUMBERED.fullmatch(path.name)
        if match:
            stem = match["stem"]
            highest[stem] = max(highest.get(stem, 0), int(match["n"]))
        try:
            sample = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(sample, dict):
            structures.add(structure_key(sample))
    return structures, highest


def dump_sample(sample: dict) -> str:
    """One top-level key per line and one frame per line: readable, and small diffs."""
    lines = []
    for key, value in sample.items():
        if key in ("frames", "shapes") and value:
            inner = ",\n".join("  " + json.dumps(item, separators=(",", ":")) for item in value)
            text = "[\n" + inner + "\n ]"
        else:
            text = json.dumps(value, separators=(",", ":"))
        lines.append(f" {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write_sample(out: Path, sample: dict, highest: dict[str, int]) -> Path:
    """Write `<stem>__<n>.sample.json` atomically, `n` one past the highest for the stem."""
    stem = sample_stem(sample)
    n = highest.get(stem, 0) + 1
    highest[stem] = n
    final = out / f"{stem}__{n}{SUFFIX}"
    temp = out / f".{final.name}.tmp"
    temp.write_text(dump_sample(sample), encoding="utf-8")
    os.replace(temp, final)
    return final


def export_samples(trace_dir: str | os.PathLike, out: str | os.PathLike, *,
                   session: str | None = None, since: str | None = None,
                   include_injected: bool = False) -> ExportSummary:
    """Export the records of a trace dir as sample files in `out`; see ExportSummary.

    Two passes keep memory small: the first reads each record once and keeps only its structure
    key, timing and path; the second rebuilds the one sample per structure with the median
    timing and writes it."""
    trace_dir, out = Path(trace_dir), Path(out)
    since_at = parse_since(since) if since else None
    files = record_files(trace_dir, session)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create {out}: {exc.strerror or exc}; pick a writable "
                          "folder with -o") from None
    known, highest = existing(out)
    summary = ExportSummary()
    groups: dict[str, list[tuple[tuple[float, float], Path]]] = {}
    for path, record, why in read_records(files):
        if record is None:
            summary.unreadable.append((path, why or "unreadable"))
            continue
        if not started_since(record, since_at):
            summary.filtered += 1
            continue
        if answered_by_streamtap(record):
            summary.own_answers += 1
            continue
        try:
            sample = build_sample(record)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            summary.unreadable.append((path, f"a record this streamtap cannot turn into a "
                                             f"sample ({type(exc).__name__}: {exc})"))
            continue
        if sample["injected"] and not include_injected:
            summary.injected_skipped += 1
            continue
        groups.setdefault(structure_key(sample), []).append((timing_of(sample), path))
    for key, members in groups.items():
        if key in known:
            summary.duplicates += len(members)
            continue
        summary.duplicates += len(members) - 1
        _, path = members[median_index([timing for timing, _ in members])]
        sample = build_sample(read_record(path))
        sample["also_seen"] = len(members) - 1  # records of the same structure not written
        sample["digest"] = sample_digest(sample)
        try:
            summary.written.append(write_sample(out, sample, highest))
        except OSError as exc:
            raise ExportError(f"cannot write into {out}: {exc.strerror or exc}; "
                              f"{len(summary.written)} sample(s) were written before this; "
                              "free some space or pick another folder with -o") from None
    return summary


def sample_files(paths: list[str | os.PathLike]) -> list[Path]:
    """The sample files named by `paths`: folders are searched for `*.sample.json`."""
    found = []
    for item in map(Path, paths):
        if item.is_dir():
            found += sorted(item.rglob(f"*{SUFFIX}"))
        elif item.is_file():
            found.append(item)
        else:
            raise ExportError(f"{item} is neither a folder nor a sample file; export samples "
                              "with `streamtap samples export -o DIR` first")
    return found


def load_samples(paths: list[str | os.PathLike]) -> tuple[list[dict], list[tuple[Path, str]]]:
    """The readable samples under `paths`, and the files skipped with why."""
    samples, skipped = [], []
    for path in sample_files(paths):
        try:
            samples.append(check_sample(json.loads(path.read_bytes())))
        except (OSError, ValueError) as exc:  # SampleError is a ValueError
            reason = str(exc) if isinstance(exc, SampleError) else f"not a sample ({exc})"
            skipped.append((path, reason))
    return samples, skipped
