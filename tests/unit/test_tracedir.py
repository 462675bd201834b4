"""The one reader of a trace folder (proxy/readout/tracedir.py): which folders and files it finds,
what it says about a file it cannot read, and `--since` as every command reads it."""

import json
from datetime import datetime, timezone

import pytest

from streamtap.diagnostics.record.schema import SCHEMA_VERSION, record_from_dict
from streamtap.proxy.readout.tracedir import (TraceError, UnreadableRecord, parse_since,
                                              read_record, read_records, record_files,
                                              session_dirs, since_cutoff, started_since)
from streamtap.proxy.testing.records import read_records as api_records

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)


def record(trace_id: str, started_at: str) -> dict:
    return {"schema_version": SCHEMA_VERSION, "trace_id": trace_id, "session_id": "s",
            "started_at": started_at}


@pytest.fixture
def traces(tmp_path):
    root = tmp_path / "traces"
    for session, name, data in (
            ("b", "20261125T110000.000-t2.json", record("t2", "2026-11-25T11:00:00.000Z")),
            ("a", "20261125T100000.000-t1.json", record("t1", "2026-11-25T10:00:00.000Z")),
            ("a", "20261125T113000.000-t3.json", record("t3", "2026-11-25T11:30:00.000Z"))):
        (root / session).mkdir(parents=True, exist_ok=True)
        (root / session / name).write_text(json.dumps(data))
    (root / "a" / ".20261125T120000.000-t4.json.tmp.json").write_text("{")  # being written
    (root / "a" / "index.jsonl").write_text("")
    (root / "a" / "broken.json").write_text('{"trace_id": ')
    return root


def test_sessions_and_record_files_in_name_order(traces):
    assert [p.name for p in session_dirs(traces)] == ["a", "b"]
    assert [p.name for p in record_files(traces)] == [
        "20261125T100000.000-t1.json", "20261125T113000.000-t3.json", "broken.json",
        "20261125T110000.000-t2.json"]
    assert [p.name for p in record_files(traces, "b")] == ["20261125T110000.000-t2.json"]


def test_a_missing_trace_dir_or_session_says_what_to_pass(traces):
    with pytest.raises(TraceError, match=r"does not exist; pass --trace-dir DIR.*default "
                                         r"\./streamtap-traces"):
        session_dirs(traces / "nope")
    with pytest.raises(TraceError, match=r"no session 'c' in .*; sessions there: a, b$"):
        record_files(traces, "c")


def test_every_unreadable_file_is_named_with_why(traces, tmp_path):
    future = tmp_path / "future.json"
    future.write_text(json.dumps(record("f", "x") | {"schema_version": SCHEMA_VERSION + 1}))
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    cases = {traces / "a" / "broken.json": r"not JSON \(.*\); a record half-written by a crash",
             listed: r"not a streamtap trace record \(no trace_id\)",
             future: r"newer than this streamtap understands .*; upgrade streamtap",
             tmp_path / "gone.json": r"cannot read it: No such file"}
    for path, why in cases.items():
        with pytest.raises(UnreadableRecord, match=why) as caught:
            read_record(path)
        assert str(caught.value).startswith(f"{path}: ") and caught.value.path == path
        [(_, data, said)] = read_records([path])
        assert data is None and said == caught.value.why
    assert isinstance(caught.value, TraceError) and isinstance(caught.value, ValueError)


def test_the_python_api_reads_through_the_same_reader(traces, tmp_path):
    assert [r.trace_id for r in api_records(traces)] == ["t1", "t2", "t3"]  # by start time
    assert [r.trace_id for r in api_records(traces, "b")] == ["t2"]
    # nothing recorded yet is no records, not an error, as documented for Proxy.records()
    assert api_records(tmp_path / "nope") == [] and api_records(traces, "c") == []


@pytest.mark.parametrize("text, expected", [
    ("30m", "2026-11-25T11:30:00.000Z"), ("1h", "2026-11-25T11:00:00.000Z"),
    ("1.5h", "2026-11-25T10:30:00.000Z"), ("2d", "2026-11-23T12:00:00.000Z"),
    ("1w", "2026-11-18T12:00:00.000Z"), (" 10s ", "2026-11-25T11:59:50.000Z"),
    ("2026-11-25T09:00:00Z", "2026-11-25T09:00:00.000Z"),
    ("2026-11-25T09:00:00", "2026-11-25T09:00:00.000Z"),  # no zone: UTC, as records are
    ("2026-11-25T10:00:00+01:00", "2026-11-25T09:00:00.000Z"), ("2026-11-25", "2026-11-25T00:00:00.000Z"),
])
def test_since_reads_durations_and_iso_times(text, expected):
    assert since_cutoff(text, NOW) == expected
    assert parse_since(text, NOW) == datetime.fromisoformat(expected.replace("Z", "+00:00"))


@pytest.mark.parametrize("text", ["yesterday", "1y", "-1h", "", "h"])
def test_a_bad_since_says_how_to_write_one(text):
    with pytest.raises(TraceError, match=r"neither a duration \(30m, 1h, 2d\) nor an ISO time"):
        parse_since(text, NOW)


def test_started_since():
    since = parse_since("1h", NOW)
    assert started_since(record_from_dict(record("t", "2026-11-25T11:00:00.000Z")), since)
    assert not started_since(record_from_dict(record("t", "2026-11-25T10:59:59.999Z")), since)
    unreadable = record_from_dict(record("t", "yesterday"))
    assert not started_since(unreadable, since)  # no readable start: never after anything
    assert started_since(unreadable, None)
