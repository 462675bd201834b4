"""Trace files: one JSON record per request in a folder per session, plus an index line.

Writes happen on one background thread, so the event loop never waits on a disk, and a record can
be handed over synchronously even from a cancelled handler. A write that fails (unwritable dir,
full disk) is logged and dropped: the proxy is a guest on the user's traffic, and forwarding never
depends on the trace store.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from streamtap.diagnostics.record.schema import index_line

QUEUE_LIMIT = 10_000  # records waiting for the disk; past this they are dropped and logged
_STOP = object()


def record_stem(started: datetime, trace_id: str) -> str:
    """`<UTC yyyymmddThhmmss.fff>-<trace_id>`: sorts by time, unique by id."""
    return f"{started.strftime('%Y%m%dT%H%M%S')}.{started.microsecond // 1000:03d}-{trace_id}"


def _write_private(path: Path, data: bytes, append: bool = False) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)


def write_record(trace_dir: Path, record: dict, started: datetime,
                 captured: dict[str, bytes] | None = None,
                 known_dirs: set[Path] | None = None) -> Path:
    """Write one record atomically (temp file + rename) and append its index line.

    `known_dirs` remembers session folders already made, to spare a mkdir per record.
    """
    session_dir = trace_dir / record["session_id"]
    if known_dirs is None or session_dir not in known_dirs:
        session_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if known_dirs is not None:
            known_dirs.add(session_dir)
    stem = record_stem(started, record["trace_id"])
    final = session_dir / f"{stem}.json"
    temp = session_dir / f".{stem}.json.tmp"
    try:
        _write_private(temp, json.dumps(record, separators=(",", ":")).encode())
        os.replace(temp, final)
    except BaseException:
        try:
            temp.unlink()
        except OSError:
            pass
        raise
    if captured:
        for side, body in captured.items():
            _write_private(session_dir / f"{stem}.{side}.body", body)
    line = json.dumps(index_line(record, final.name), separators=(",", ":")) + "\n"
    _write_private(session_dir / "index.jsonl", line.encode(), append=True)
    return final


class TraceStore:
    def __init__(self, trace_dir: str | os.PathLike, log):
        self.trace_dir = Path(trace_dir)
        self.log = log
        self.written = 0
        self.failed = 0
        self._known_dirs: set[Path] = set()  # touched by the writer thread only
        self._queue: queue.Queue = queue.Queue(QUEUE_LIMIT)
        self._thread = threading.Thread(target=self._drain, name="streamtap-store", daemon=True)
        self._thread.start()

    def check(self) -> str | None:
        """Try to create the trace dir now; return why it is unusable, or None."""
        try:
            self.trace_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not os.access(self.trace_dir, os.W_OK | os.X_OK):
                return f"{self.trace_dir} is not writable"
        except OSError as exc:
            return f"cannot create {self.trace_dir}: {exc.strerror or exc}"
        return None

    def submit(self, record: dict | Callable[[], dict], started: datetime,
               captured: dict[str, bytes] | None = None,
               then: Callable[[dict, Path | None], None] | None = None) -> None:
        """Hand a record over without blocking; never raises.

        `record` may be a function that builds it: then it is built on the writer thread, off
        the event loop (finishing a record costs a fraction of a millisecond, which adds up when
        hundreds of streams end at once). `then` is called with the record once it is written, and
        the record's path (None when it could not be written).
        """
        try:
            self._queue.put_nowait((record, started, captured, then))
        except queue.Full:
            self.failed += 1
            self.log.error("trace_dropped", reason=f"{QUEUE_LIMIT} records are waiting for "
                                                    "the disk")

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued, then stop the writer thread."""
        self._queue.put(_STOP)
        self._thread.join(timeout)

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            record, started, captured, then = item
            if callable(record):
                try:
                    record = record()
                except Exception:  # a bug in building it must not kill the writer thread
                    self.failed += 1
                    self.log.exception("record_failed")
                    continue
            path = None
            try:
                path = write_record(self.trace_dir, record, started, captured, self._known_dirs)
                self.written += 1
            except OSError as exc:
                self.failed += 1
                self._known_dirs.clear()  # a folder may have been removed under us
                self.log.error("trace_write_failed", trace_id=record.get("trace_id"),
                               trace_dir=str(self.trace_dir), error=exc.strerror or str(exc),
                               hint="check that --trace-dir is writable and the disk has room; "
                                    "traffic is unaffected")
            except Exception:  # a bug here must not kill the writer thread
                self.failed += 1
                self.log.exception("trace_write_failed", trace_id=record.get("trace_id"))
            if then is not None:
                try:
                    then(record, path)
                except Exception:
                    self.log.exception("record_log_failed", trace_id=record.get("trace_id"))
