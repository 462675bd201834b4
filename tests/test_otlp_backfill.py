"""`streamtap export --otlp`: records already on disk re-sent as spans (a backfill)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.proxy.store import write_record
from tests.otlpsink import OtlpSink
from tests.unit.test_spans import complete, http_error, reset_mid_tool_call, wrapped_error

# Every test here starts a process or a server (tests/README.md).
pytestmark = pytest.mark.e2e


def export(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run([sys.executable, "-m", "streamtap", "export", "--otlp", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=60, env=env)


def trace_dir_with_records(tmp_path):
    """Four records in two sessions, one a day older, plus a file that is not a record."""
    trace_dir = tmp_path / "traces"
    records = [(complete(), "2026-11-25T10:00:00.250Z"),
               (reset_mid_tool_call(), "2026-11-25T10:00:01.000Z"),
               (wrapped_error(), "2026-11-25T10:00:02.000Z"),
               (http_error(), "2026-11-24T09:00:00.000Z")]
    for index, (record, started) in enumerate(records):
        record.update(started_at=started, trace_id=f"{index + 1:016x}",
                      session_id="old" if started.startswith("2026-11-24") else "team-a")
        write_record(trace_dir, record_from_dict(record), datetime.fromisoformat(started.replace("Z", "+00:00")))
    (trace_dir / "team-a" / "broken.json").write_text("{not json")
    return trace_dir


def test_backfill_sends_every_record_since_a_time_with_stable_ids(tmp_path):
    trace_dir = trace_dir_with_records(tmp_path)
    sink = OtlpSink().start()
    try:
        result = export("--trace-dir", str(trace_dir), "--since", "2026-11-25T00:00:00Z",
                        "--otlp-endpoint", sink.endpoint, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout == ("exported 3 of 3 record(s) as spans; 0 dropped, 0 unmappable, "
                                 "1 older than --since, 1 unreadable file(s) skipped\n")
        assert "skipped" in result.stderr and "broken.json" in result.stderr
        spans = sink.wait_spans(3)
        assert sorted(span["attrs"]["streamtap.boundary"] for span in spans) == \
            ["none", "provider_error", "transport"]
        # The span id is the record's trace id: a re-send carries the same ids.
        ids = {span["attrs"]["streamtap.trace_id"]: span["spanId"] for span in spans}
        assert set(ids) == {"0000000000000001", "0000000000000002", "0000000000000003"}
        again = export("--trace-dir", str(trace_dir), "--session", "old",
                       "--otlp-endpoint", sink.endpoint, cwd=tmp_path)
        assert again.returncode == 0 and again.stdout.startswith("exported 1 of 1 record(s)")
        assert sink.wait_spans(4)[-1]["attrs"][
            "http.response.status_code"] == 429
        start = datetime.fromtimestamp(int(spans[0]["startTimeUnixNano"]) / 1e9, timezone.utc)
        assert start.isoformat().startswith("2026-11-25T10:00:0")  # the record's own time
    finally:
        sink.stop()


def test_backfill_to_a_backend_that_is_down_says_so_and_fails(tmp_path):
    trace_dir = trace_dir_with_records(tmp_path)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    config = tmp_path / "c.toml"
    config.write_text("[export.otlp]\ntimeout_ms = 500\n")
    result = export("--trace-dir", str(trace_dir), "--config", str(config),
                    "--otlp-endpoint", f"http://127.0.0.1:{port}", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith("exported 0 of 4 record(s) as spans; 4 dropped")
    assert "check that it is up at that endpoint and run this again" in result.stderr


def test_backfill_without_an_endpoint_or_trace_dir_says_what_to_pass(tmp_path):
    result = export("--trace-dir", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and "no OTLP endpoint: pass --otlp-endpoint URL" in result.stderr
    result = export("--trace-dir", str(tmp_path / "nope"), "--otlp-endpoint",
                    "http://127.0.0.1:9", cwd=tmp_path)
    assert result.returncode == 2 and "does not exist" in result.stderr
