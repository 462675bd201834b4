"""The typed record: docs/record.md names every field of it, a record survives its own file, and a
version-1 trace folder (tests/fixtures/v1_traces, written by the version-1 writer, plus one record
as the earliest version-1 writers left it) reads, upgraded, into the same views as before."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import msgspec
import pytest

from streamtap.diagnostics import trace_record as types
from streamtap.diagnostics.record.schema import (SCHEMA_VERSION, RecordVersionError,
                                                  encode_record, index_line, record_as_dict,
                                                  record_from_dict)
from streamtap.diagnostics.views import text
from streamtap.diagnostics.views.model import build_view
from streamtap.proxy.logs import canonical_fields
from streamtap.proxy.readout import commands, pages
from tests.tracefixtures import build

REFERENCE = Path(__file__).parents[2] / "docs" / "record.md"
V1_TRACES = Path(__file__).parents[1] / "fixtures" / "v1_traces"

# The section structures and the row of docs/record.md that documents each (nested ones too).
SECTION_ROWS = {
    types.RequestSummary: "request", types.ResponseSummary: "response",
    types.Correlation: "correlation", types.Timeline: "timeline", types.Stream: "stream",
    types.ToolCall: "stream", types.ServerTool: "stream", types.StreamError: "stream",
    types.ErrorFacts: "error", types.ErrorCause: "error", types.Downstream: "downstream",
    types.WatchdogFacts: "watchdog", types.Outcome: "outcome", types.FaultFacts: "fault",
    types.Close: "close", types.UpstreamRetry: "upstream_retry", types.Frame: "frames",
}


def reference_rows() -> dict[str, str]:
    """The record table of docs/record.md: each first-column field name -> its whole row."""
    section = REFERENCE.read_text().split("## What a trace record holds", 1)[1].split("\n## ")[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            for name in re.findall(r"`([^`]+)`", first):
                rows[name] = line
    return rows


def names(cls) -> list[str]:
    return [field.encode_name for field in msgspec.structs.fields(cls)]


def test_every_top_level_field_has_a_row_in_the_record_reference():
    rows = reference_rows()
    missing = [name for name in names(types.TraceRecord) if name not in rows]
    assert not missing, f"docs/record.md has no row for {missing}"


@pytest.mark.parametrize("cls", list(SECTION_ROWS), ids=lambda cls: cls.__name__)
def test_every_field_of_a_section_is_named_in_its_row(cls):
    row = reference_rows()[SECTION_ROWS[cls]]
    documented = set(re.findall(r"`([^`]+)`", row))
    if cls is types.Frame:  # documented as the array `[t_ms, bytes, kind, shape]`
        documented = set(re.findall(r"\w+", " ".join(documented)))
    missing = [name for name in names(cls) if name not in documented]
    assert not missing, f"docs/record.md's `{SECTION_ROWS[cls]}` row does not name {missing}"


def test_the_reference_says_which_version_is_written():
    assert f"## What a trace record holds (schema_version {SCHEMA_VERSION})" in \
        REFERENCE.read_text()


def test_a_record_is_the_same_after_its_own_file(tmp_path):
    for record in build(tmp_path):
        typed = record_from_dict(record)
        assert record_from_dict(json.loads(encode_record(typed))) == typed  # as tracedir reads
        assert record_as_dict(typed) == record


def test_the_file_holds_the_verdict_right_after_the_identity(tmp_path):
    record = record_from_dict(build(tmp_path)[1])
    keys = list(json.loads(encode_record(record)))
    assert keys.index("outcome") == keys.index("upstream_url") + 1


def test_a_field_of_the_wrong_type_is_refused_saying_which():
    record = {"schema_version": 2, "trace_id": "t", "session_id": "s", "started_at": "x",
              "timeline": {"first_byte": "soon"}}
    with pytest.raises(RecordVersionError, match=r"timeline\.first_byte.*edited by hand"):
        record_from_dict(record)


def test_a_newer_record_is_refused_with_what_to_do():
    with pytest.raises(RecordVersionError, match="upgrade streamtap"):
        record_from_dict({"schema_version": SCHEMA_VERSION + 1, "trace_id": "t"})


def v1_files() -> list[Path]:
    return sorted(V1_TRACES.glob("*/*.json"))


def test_the_v1_fixture_is_version_1():
    assert len(v1_files()) == 10
    assert {json.loads(path.read_text())["schema_version"] for path in v1_files()} == {1}


def test_a_v1_record_reads_as_the_same_record_written_today(tmp_path):
    today = {record["trace_id"]: record_from_dict(record) for record in build(tmp_path)}
    for path in v1_files():
        old = record_from_dict(json.loads(path.read_text()))
        assert old.schema_version == SCHEMA_VERSION
        if old.trace_id in today:  # the same exchange, written by version 1 and by version 2
            assert text.show(build_view(old)) == text.show(build_view(today[old.trace_id]))
            assert index_line(old) == index_line(today[old.trace_id])


def test_the_earliest_v1_record_gets_what_its_writer_did_not_know(tmp_path):
    today = {record["trace_id"]: record for record in build(tmp_path)}
    [path] = (V1_TRACES / "early").glob("*.json")
    raw = json.loads(path.read_text())
    assert "close" not in raw and "client_sees" not in raw["outcome"]
    assert all(len(frame) == 3 for frame in raw["frames"])
    record = record_from_dict(raw)
    # derived on upgrade from the verdict and the stream, as the recorder derives it today
    same = today["22c0ffee00000002"]["outcome"]  # the record it was cut down from
    assert (record.outcome.client_sees, record.outcome.normalized_finish_reason) == (
        same["client_sees"], same["normalized_finish_reason"]) == ("error", "error")
    assert all(frame.shape is None for frame in record.frames)
    assert record.close == types.Close()


@pytest.mark.parametrize("command", ["ls", "show", "report"])
def test_ls_show_and_report_open_a_v1_trace_folder(command, tmp_path):
    out = io.StringIO()
    if command == "ls":
        commands.ls(V1_TRACES, out=out)
        listed = out.getvalue()
        assert all(path.stem.split("-")[1][:8] in listed for path in v1_files())
    elif command == "show":
        commands.show(V1_TRACES, "e1c0ffee", out=out)
        assert "tool call" in out.getvalue() and "reset" in out.getvalue()
    else:
        report = tmp_path / "report.html"
        pages.report(V1_TRACES, report)
        page = report.read_text()
        assert all(path.stem.split("-")[1] in page for path in v1_files())


def test_the_log_line_and_the_index_line_agree_on_every_name_they_share(tmp_path):
    """They once disagreed: the log line's `status` was the client's and its session `session`,
    so `ls` and the log showed different statuses for a 413 streamtap answered itself."""
    records = [record_from_dict(record) for record in build(tmp_path)]
    refused = records[-1]  # answered 413 by streamtap: no upstream status, the client's 413
    assert (refused.response, refused.downstream.status) == (None, 413)
    for record in records:
        logged, indexed = canonical_fields(record, "x.json"), index_line(record, "x.json")
        shared = set(logged) & set(indexed)
        assert {"session_id", "status", "downstream_status", "summary"} <= shared
        assert {name: logged[name] for name in shared} == {name: indexed[name] for name in shared}
