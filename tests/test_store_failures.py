"""A trace store that survives a full disk and a deleted directory: index lines whole or not at all,
records and index lines that agree, health that says `degraded` and why, one log line per failure
kind (then a count a minute, then a line when writing resumes), 0700 folders, and a banner that
says records will fail when the trace dir is unusable."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import threading
import time
from datetime import datetime, timezone

import httpx

from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream
from streamtap.diagnostics.record.schema import encode_record, record_from_dict
from streamtap.diagnostics.trace_record import TraceRecord
from streamtap.proxy.store import TraceStore, append_line


class Log:
    """Collects what the store logs, as (level, event, fields)."""

    def __init__(self):
        self.lines: list[tuple[str, str, dict]] = []

    def __getattr__(self, level):
        return lambda event, **fields: self.lines.append((level, event, fields))

    def events(self, event: str) -> list[dict]:
        return [fields for _, name, fields in self.lines if name == event]


class Disk:
    """os.write with a disk that fills up: once `full`, a write puts down `room` bytes at most
    (a short write) and then fails with ENOSPC."""

    def __init__(self):
        self.full = False
        self.room = 0

    def write(self, fd: int, data) -> int:
        if not self.full:
            return os.write(fd, data)
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = os.write(fd, bytes(data[:self.room]))
        self.room -= written
        return written


def record(n: int, session: str = "s") -> TraceRecord:
    return record_from_dict({
        "schema_version": 1, "trace_id": f"{n:016x}", "session_id": session,
        "started_at": "2026-01-01T00:00:00.000Z", "route": "r", "request": {},
        "response": {"status": 200}, "outcome": {"ok": True, "boundary": "none",
                                                 "phase": "complete"}, "timeline": {}})


def fill(store: TraceStore, numbers) -> None:
    for n in numbers:
        store.submit(record(n), datetime(2026, 1, 1, 0, 0, n % 60, tzinfo=timezone.utc))


def settle(store: TraceStore, count: int) -> None:
    deadline = time.monotonic() + 10
    while store.written + store.failed < count and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_full_disk_leaves_whole_index_lines_and_records_that_match_them(tmp_path):
    disk, log, now = Disk(), Log(), [0.0]
    store = TraceStore(tmp_path / "traces", log, write=disk.write, clock=lambda: now[0])
    fill(store, range(5))
    settle(store, 5)
    # Room for one record file and 20 bytes of its index line, then none.
    disk.full = True
    disk.room = len(encode_record(record(5))) + 20
    fill(store, range(5, 35))
    settle(store, 35)
    health = store.health()
    assert health["status"] == "degraded" and "No space left on device" in health["reason"]
    assert health["records_failed"] == 30 and health["records_written"] == 5
    session = tmp_path / "traces" / "s"
    lines = (session / "index.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b""  # ends in a newline: no partial line
    entries = [json.loads(line) for line in lines[:-1]]  # each line parses: none glued
    files = sorted(path.name for path in session.glob("*.json"))
    assert len(entries) == len(files) == store.written == 5
    assert {entry["trace_id"] for entry in entries} == {name[-21:-5] for name in files}
    assert not list(session.glob(".*.tmp"))
    # One line for the kind, not 30; a count once a minute while it lasts; a line on resuming.
    assert [fields["kind"] for fields in log.events("trace_write_failed")] == ["ENOSPC"]
    now[0] += 61
    fill(store, [35])
    settle(store, 36)
    assert log.events("trace_writes_still_failing")[0]["failed"] == 31 - 1
    disk.full = False
    fill(store, [36])
    settle(store, 37)
    assert log.events("trace_writing_resumed")[0]["failed_total"] == 31
    assert store.health()["status"] == "ok" and store.health()["records_failed"] == 31
    store.close()
    assert len(list(session.glob("*.json"))) == len(
        (session / "index.jsonl").read_text().splitlines()) == 6


def test_an_index_left_half_written_is_cut_back_before_the_next_line(tmp_path):
    index = tmp_path / "index.jsonl"
    index.write_bytes(b'{"a":1}\n{"schema_version":1,"trace_id":"c9be')  # a crash mid-line
    append_line(index, b'{"b":2}\n')
    assert index.read_bytes() == b'{"a":1}\n{"b":2}\n'


def test_a_deleted_trace_dir_is_made_again_0700_and_no_record_is_lost(fake, tmp_path):
    trace_dir = tmp_path / "new" / "deep" / "traces"
    proxy = ProxyProcess(tmp_path, {"fake": fake.url}, trace_dir=trace_dir)
    prefix = fake.add(Scenario(chat_text_stream(2)))
    session = new_session()
    try:
        for round_ in range(3):
            if round_:
                shutil.rmtree(tmp_path / "new")
            response = httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions",
                                  json={"stream": True}, timeout=10,
                                  headers={"x-streamtap-session": session})
            assert response.status_code == 200
            assert len(proxy.records(session, 1)) == 1
        for folder in (tmp_path / "new", tmp_path / "new" / "deep", trace_dir,
                       trace_dir / session):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
        health = httpx.get(proxy.url("_streamtap/health"), timeout=5).json()
        assert health["status"] == "ok" and health["records_failed"] == 0
        assert health["records_written"] == 3
    finally:
        proxy.stop()


def test_a_file_for_a_trace_dir_is_said_in_the_banner_and_health(fake, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder\n")
    proxy = ProxyProcess(tmp_path, {"fake": fake.url}, trace_dir=blocker)
    prefix = fake.add(Scenario(chat_text_stream(2)))
    try:
        traces_line = proxy.process.stdout.readline().decode()  # the banner's second line
        assert traces_line.startswith("traces: UNUSABLE") and "records will fail" in traces_line
        health = httpx.get(proxy.url("_streamtap/health"), timeout=5).json()
        assert health["status"] == "degraded" and str(blocker) in health["reason"]
        for _ in range(3):
            response = httpx.post(proxy.url("fake") + prefix + "/v1/chat/completions",
                                  json={"stream": True}, timeout=10)
            assert response.status_code == 200  # traffic is unaffected
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            health = httpx.get(proxy.url("_streamtap/health"), timeout=5).json()
            if health["records_failed"] == 3:
                break
            time.sleep(0.05)
        assert health["status"] == "degraded" and health["records_failed"] == 3
        assert "ENOTDIR" not in health["reason"] and "trace records are failing" in health["reason"]
        failed = [line for line in proxy.log().splitlines() if '"trace_write_failed"' in line]
        assert len(failed) == 1, proxy.log()
    finally:
        assert proxy.stop() == 0


def held_write(gate: threading.Event):
    """os.write on a disk that hangs until the test sets `gate`."""
    def write(fd: int, data) -> int:
        gate.wait(10)
        return os.write(fd, data)
    return write


def test_a_disk_too_slow_for_the_queue_is_said_once_and_in_health(tmp_path, monkeypatch):
    from streamtap.proxy import store as store_module

    monkeypatch.setattr(store_module, "QUEUE_LIMIT", 5)
    gate = threading.Event()
    log = Log()
    store = TraceStore(tmp_path / "traces", log, write=held_write(gate))
    fill(store, range(30))  # one in the writer's hands, five waiting, the rest dropped
    health = store.health()
    assert health["status"] == "degraded" and "too slow" in health["reason"]
    assert len(log.events("trace_dropped")) == 1
    gate.set()
    settle(store, 30)
    store.close()
    # Five waited in the queue (six if the writer had taken one before the queue filled).
    assert store.written in (5, 6) and store.written + store.failed == 30
    assert log.events("trace_queue_caught_up") == [{"dropped": store.failed}]
    assert store.health()["status"] == "ok"


def test_a_disk_that_hangs_at_close_is_left_after_the_timeout_and_said(tmp_path):
    """Closing waits for the queue at most `timeout`, and says how many records it left: a
    forced exit must not hang on a disk that does (proxy/serve/forced.py)."""
    gate = threading.Event()
    log = Log()
    store = TraceStore(tmp_path / "traces", log, write=held_write(gate))
    fill(store, range(4))
    assert store.pending() == 4
    started = time.monotonic()
    assert store.close(timeout=0.3) == 4
    assert time.monotonic() - started < 2
    assert [line["count"] for line in log.events("records_not_written")] == [4]
    gate.set()
