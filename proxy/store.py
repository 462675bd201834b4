"""Trace files: one JSON record per request in a folder per session, plus an index line.

Writes happen on one background thread, so the event loop never waits on a disk, and a record can
be handed over synchronously even from a cancelled handler. A write that fails (unwritable dir,
full disk) is dropped, said once per kind in the log and reported by health: the proxy is a guest
on the user's traffic, and forwarding never depends on the trace store. Every folder made is 0700.
"""

from __future__ import annotations

import errno
import json
import os
import queue
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from streamtap.diagnostics.record.schema import encode_record, index_line
from streamtap.diagnostics.trace_record import TraceRecord

QUEUE_LIMIT = 10_000  # records waiting for the disk; past this they are dropped and logged
REPORT_EVERY_S = 60.0  # while writes keep failing, one line a minute with the count
_STOP = object()


def record_stem(started: datetime, trace_id: str) -> str:
    """`<UTC yyyymmddThhmmss.fff>-<trace_id>`: sorts by time, unique by id."""
    return f"{started.strftime('%Y%m%dT%H%M%S')}.{started.microsecond // 1000:03d}-{trace_id}"


def make_private_dirs(path: Path) -> None:
    """mkdir -p where every folder made is 0700 (Path.mkdir gives parents the umask's 0755)."""
    missing = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            if not folder.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(folder)) from None


def _write_all(fd: int, data: bytes, write: Callable[[int, bytes], int]) -> None:
    view = memoryview(data)
    while view:
        written = write(fd, view)
        view = view[written:]


def _write_private(path: Path, data: bytes, write: Callable = os.write) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        _write_all(fd, data, write)
    finally:
        os.close(fd)


def _last_newline_end(fd: int, end: int) -> int:
    """Where the file's last complete line ends (0 if it has none)."""
    position = end
    while position > 0:
        start = max(0, position - 65536)
        block = os.pread(fd, position - start, start)
        cut = block.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        position = start
    return 0


def append_line(path: Path, line: bytes, write: Callable = os.write) -> None:
    """Append one whole line or nothing: one `write` of the complete line on an O_APPEND
    descriptor; after a partial write (a full disk) the file is cut back to its last newline, so
    a reader never sees half a line or two glued together."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        end = os.fstat(fd).st_size
        if end and os.pread(fd, 1, end - 1) != b"\n":  # left half-written by an earlier crash
            end = _last_newline_end(fd, end)
            os.ftruncate(fd, end)
        try:
            written = write(fd, line)
        except OSError:
            os.ftruncate(fd, end)
            raise
        if written != len(line):
            os.ftruncate(fd, end)
            raise OSError(errno.ENOSPC, "no space left for a whole index line", str(path))
    finally:
        os.close(fd)


def write_record(trace_dir: Path, record: TraceRecord, started: datetime,
                 captured: dict[str, bytes] | None = None,
                 known_dirs: set[Path] | None = None, write: Callable = os.write) -> Path:
    """Write one record atomically (temp file + rename) and append its index line: both land or
    neither does (a record whose index line failed is removed), so the index and the files agree.

    `known_dirs` remembers session folders already made, to spare a mkdir per record; `write` is
    the one system call that fills the disk (tests pass one that fails like a full disk).
    """
    session_dir = trace_dir / record.session_id
    if known_dirs is None or session_dir not in known_dirs:
        make_private_dirs(session_dir)
        if known_dirs is not None:
            known_dirs.add(session_dir)
    stem = record_stem(started, record.trace_id)
    final = session_dir / f"{stem}.json"
    temp = session_dir / f".{stem}.json.tmp"
    written: list[Path] = []
    try:
        written.append(temp)
        _write_private(temp, encode_record(record), write)
        os.replace(temp, final)
        written[-1] = final
        if captured:
            for side, body in captured.items():
                written.append(session_dir / f"{stem}.{side}.body")
                _write_private(written[-1], body, write)
        line = json.dumps(index_line(record, final.name), separators=(",", ":")) + "\n"
        append_line(session_dir / "index.jsonl", line.encode(), write)
    except BaseException:
        for path in written:
            try:
                path.unlink()
            except OSError:
                pass
        raise
    return final


def failure_kind(exc: OSError) -> str:
    """A failure's kind for the log and health: the errno's name (ENOSPC, EACCES, ENOTDIR...)."""
    return errno.errorcode.get(exc.errno or 0, type(exc).__name__)


class WriteFailures:
    """Says a failure once per kind, then a count a minute while it lasts, then that writing
    resumed; what health reports. Used by the writer thread only, read by health."""

    def __init__(self, log, trace_dir: Path, clock: Callable[[], float] = time.monotonic):
        self.log = log
        self.trace_dir = trace_dir
        self.clock = clock
        self.kind: str | None = None  # the failure going on now, if any
        self.reason: str | None = None
        self.total = 0
        self._said: set[str] = set()
        self._since_report = 0
        self._reported_at = 0.0

    def failed(self, kind: str, reason: str) -> None:
        self.total += 1
        self._since_report += 1
        self.kind, self.reason = kind, reason
        if kind not in self._said:
            self._said.add(kind)
            self._since_report = 0
            self._reported_at = self.clock()
            self.log.error("trace_write_failed", kind=kind, reason=reason,
                           trace_dir=str(self.trace_dir),
                           hint="check that --trace-dir is a writable folder with room; traffic "
                                "is unaffected; further failures are counted once a minute")
        else:
            self.tick()

    def tick(self) -> None:
        """Once a minute while failing: how many records failed since the last line."""
        if self.kind is not None and self._since_report and \
                self.clock() - self._reported_at >= REPORT_EVERY_S:
            self.log.error("trace_writes_still_failing", kind=self.kind, reason=self.reason,
                           failed=self._since_report, failed_total=self.total)
            self._since_report = 0
            self._reported_at = self.clock()

    def succeeded(self) -> None:
        if self.kind is not None:
            self.log.info("trace_writing_resumed", after_kind=self.kind,
                          failed_total=self.total, trace_dir=str(self.trace_dir))
            self.kind = self.reason = None
            self._said.clear()
            self._since_report = 0


class TraceStore:
    def __init__(self, trace_dir: str | os.PathLike, log, write: Callable = os.write,
                 clock: Callable[[], float] = time.monotonic):
        self.trace_dir = Path(trace_dir)
        self.log = log
        self.submitted = 0  # records handed over: each ends written, failed, or still pending
        self.written = 0  # records on disk with their index line (never one without the other)
        self.failed = 0
        self.dropped = 0  # records dropped since the queue last filled up (the disk is slow)
        self.unusable: str | None = None  # why the trace dir failed the start-up check
        self.failures = WriteFailures(log, self.trace_dir, clock)
        self._write = write
        self._known_dirs: set[Path] = set()  # touched by the writer thread only
        self._queue: queue.Queue = queue.Queue(QUEUE_LIMIT)
        self._thread = threading.Thread(target=self._drain, name="streamtap-store", daemon=True)
        self._thread.start()

    def check(self) -> str | None:
        """Try to create the trace dir now; return why it is unusable, or None."""
        try:
            make_private_dirs(self.trace_dir)
            if not os.access(self.trace_dir, os.W_OK | os.X_OK):
                self.unusable = f"{self.trace_dir} is not writable"
        except OSError as exc:
            self.unusable = f"cannot create {self.trace_dir}: {exc.strerror or exc}"
        return self.unusable

    def health(self) -> dict:
        """`degraded` with the reason while records fail (or the trace dir failed its check and
        nothing was written since); the counts are of records on disk and records lost."""
        reason = self.failures.reason or (self.unusable if not self.written else None)
        if reason is None and self.dropped:
            reason = f"the disk is too slow: {self.dropped} records were dropped"
        health: dict = {"status": "degraded" if reason else "ok"}
        if reason:
            health["reason"] = f"trace records are failing: {reason}"
        health.update(records_written=self.written, records_failed=self.failed)
        return health
    def submit(self, record: TraceRecord | Callable[[], TraceRecord], started: datetime,
               captured: dict[str, bytes] | None = None,
               then: Callable[[dict, Path | None], None] | None = None) -> None:
        """Hand a record over without blocking; never raises.

        `record` may be a function that builds it: then it is built on the writer thread, off
        the event loop (finishing a record costs a fraction of a millisecond, which adds up when
        hundreds of streams end at once). `then` is called with the record once it is written, and
        the record's path (None when it could not be written).
        """
        self.submitted += 1
        try:
            self._queue.put_nowait((record, started, captured, then))
        except queue.Full:
            self.failed += 1
            self.dropped += 1
            if self.dropped == 1:  # said once; the writer thread says when it caught up
                self.log.error("trace_dropped", reason=f"{QUEUE_LIMIT} records are waiting for "
                                                        "the disk; further ones are dropped "
                                                        "and counted")

    def pending(self) -> int:
        """Records handed over and neither written nor failed yet (queued, or being written)."""
        return max(self.submitted - self.written - self.failed, 0)

    def close(self, timeout: float = 10.0) -> int:
        """Write what is queued, then stop the writer thread; return (and log) how many records
        were left unwritten when `timeout` ran out (a disk that hangs)."""
        deadline = time.monotonic() + timeout
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:  # the writer is stuck: nothing more will be written in time
            pass
        else:
            # Joined in short steps: the main thread runs a Python signal handler between them
            # (a third Ctrl-C while a forced exit writes its records, proxy/serve/forced.py).
            while self._thread.is_alive() and time.monotonic() < deadline:
                self._thread.join(min(0.05, max(deadline - time.monotonic(), 0)))
        left = self.pending()
        if left:
            self.log.error("records_not_written", count=left,
                           reason=f"the trace dir took no more within {timeout:g} s",
                           hint="check that --trace-dir is a writable folder with room")
        return left

    def _drain(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=REPORT_EVERY_S / 4)
            except queue.Empty:
                self.failures.tick()
                continue
            if item is _STOP:
                return
            if self.dropped and self._queue.empty():
                self.log.info("trace_queue_caught_up", dropped=self.dropped)
                self.dropped = 0
            record, started, captured, then = item
            if callable(record):
                try:
                    record = record()
                except Exception:  # a bug in building it must not kill the writer thread
                    self.failed += 1
                    self.log.exception("record_failed")
                    continue
            path = self._store(record, started, captured)
            if then is not None:
                try:
                    then(record, path)
                except Exception:
                    self.log.exception("record_log_failed", trace_id=record.trace_id)

    def _store(self, record: TraceRecord, started: datetime,
               captured: dict[str, bytes] | None) -> Path | None:
        """Write one record; its path, or None when it could not be written."""
        for attempt in (1, 2):
            try:
                path = write_record(self.trace_dir, record, started, captured, self._known_dirs,
                             self._write)
            except FileNotFoundError:
                # The trace dir (or a session folder) was removed under us: make it again and
                # retry once, so the first record after a `rm -rf` is not lost.
                self._known_dirs.clear()
                if attempt == 1:
                    continue
                self._failed("ENOENT", f"{self.trace_dir} keeps disappearing")
            except OSError as exc:
                self._known_dirs.clear()
                self._failed(failure_kind(exc), exc.strerror or type(exc).__name__)
            except Exception:  # a bug here must not kill the writer thread
                self.failed += 1
                self.log.exception("trace_write_failed", trace_id=record.trace_id)
            else:
                self.written += 1
                self.failures.succeeded()
                return path
            return None
        return None

    def _failed(self, kind: str, reason: str) -> None:
        self.failed += 1
        self.failures.failed(kind, reason)
