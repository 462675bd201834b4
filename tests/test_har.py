"""`streamtap export --har`: HAR 1.2 with the fields browsers' importers require, timings that obey
the spec, frames as `_eventSourceMessages` holding shapes (never content), the outcome in
`comment` and `_streamtap`, and bodies only for records made with --capture-bodies. Checked field
by field and parsed by an independent HAR library (haralyzer)."""

import json
import subprocess
import sys
from datetime import datetime

import pytest
from haralyzer import HarEntry, HarParser

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.proxy.store import write_record
from tests.tracefixtures import START, build

# Every test here starts a process or a server (tests/README.md).
pytestmark = pytest.mark.e2e

ENTRY_FIELDS = {"startedDateTime", "time", "request", "response", "cache", "timings"}
REQUEST_FIELDS = {"method", "url", "httpVersion", "cookies", "headers", "queryString",
                  "headersSize", "bodySize"}
RESPONSE_FIELDS = {"status", "statusText", "httpVersion", "cookies", "headers", "content",
                   "redirectURL", "headersSize", "bodySize"}


def export(trace_dir, out, *flags) -> dict:
    subprocess.run([sys.executable, "-m", "streamtap", "export", "--har", "--trace-dir",
                    str(trace_dir), "-o", str(out), *flags], check=True, capture_output=True)
    return json.loads(out.read_text())


def test_har_has_the_required_fields_and_legal_timings(tmp_path):
    records = build(tmp_path / "traces")
    har = export(tmp_path / "traces", tmp_path / "all.har")
    log = har["log"]
    assert log["version"] == "1.2" and log["pages"] == [] and log["creator"]["name"] == "streamtap"
    entries = log["entries"]
    assert [e["_streamtap"]["trace_id"] for e in entries] == [r["trace_id"] for r in records]
    for entry, record in zip(entries, records):
        assert ENTRY_FIELDS <= set(entry)
        assert REQUEST_FIELDS <= set(entry["request"])
        assert RESPONSE_FIELDS <= set(entry["response"])
        assert {"size", "mimeType"} <= set(entry["response"]["content"])
        datetime.fromisoformat(entry["startedDateTime"].replace("Z", "+00:00"))
        timings = entry["timings"]
        assert all(timings[name] == -1 for name in ("blocked", "dns", "connect", "ssl"))
        assert all(timings[name] >= 0 for name in ("send", "wait", "receive"))
        assert entry["time"] == round(timings["send"] + timings["wait"] + timings["receive"], 3)
        assert entry["time"] == record["timeline"]["duration_ms"]
        outcome = record["outcome"]
        assert entry["_streamtap"]["outcome"] == outcome
        assert entry["comment"].endswith(outcome["summary"])
        assert "text" not in entry["response"]["content"] and "postData" not in entry["request"]
        assert len(entry["_eventSourceMessages"]) == len(record["frames"])
    reset = entries[1]
    assert reset["comment"].startswith("FAIL transport/tool_input: ")
    assert reset["request"]["queryString"] == [{"name": "key", "value": "",
                                                 "comment": "value not recorded"}]
    message = reset["_eventSourceMessages"][1]
    assert set(message) == {"time", "eventName", "eventId", "data"}
    data = json.loads(message["data"])
    assert data["kind"] == "tool_input_delta"
    assert data["shape"]["json"]["choices"][0]["delta"]["tool_calls"][0]["function"] == \
        {"arguments": "$str"}
    started = datetime.fromisoformat(records[1]["started_at"].replace("Z", "+00:00"))
    assert message["time"] == round(started.timestamp() + records[1]["frames"][1][0] / 1000, 6)


def test_an_independent_har_reader_reads_every_entry(tmp_path):
    records = build(tmp_path / "traces")
    har = export(tmp_path / "traces", tmp_path / "failed.har", "--failed", "--session", "beta")
    parser = HarParser(har)
    entries = [HarEntry(raw) for raw in parser.har_data["entries"]]
    beta_failed = [r for r in records if r["session_id"] == "beta" and not r["outcome"]["ok"]]
    assert len(entries) == len(beta_failed) == 4
    assert [e.status for e in entries] == [r["downstream"]["status"] for r in beta_failed]
    assert {e.request.method for e in entries} == {"POST"}
    assert entries[0].url == "https://api.openai.com:443/v1/chat/completions"
    assert entries[0].response.mimeType == "application/json"  # the HTTP 429 body
    assert [e.time for e in entries] == [r["timeline"]["duration_ms"] for r in beta_failed]


def test_bodies_only_for_a_record_made_with_capture(tmp_path):
    records = build(tmp_path / "traces")
    captured = dict(records[0], capture=True, trace_id="cafecafecafecafe")
    body = b'data: {"choices":[]}\n\n'
    write_record(tmp_path / "traces", record_from_dict(captured), START, {"request": b'{"model":"m"}',
                                                        "response": body})
    har = export(tmp_path / "traces", tmp_path / "c.har", "--session", "alpha")
    by_id = {e["_streamtap"]["trace_id"]: e for e in har["log"]["entries"]}
    assert by_id["cafecafecafecafe"]["response"]["content"]["text"] == body.decode()
    assert by_id["cafecafecafecafe"]["request"]["postData"]["text"] == '{"model":"m"}'
    assert "text" not in by_id[records[0]["trace_id"]]["response"]["content"]
