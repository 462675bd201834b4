"""`streamtap stats`: the index line carries what stats reads (the same silence `show` names), the
command counts traffic with known endings sent through a real proxy, and a broken or foreign index
line is counted and named, never fatal. Then the tally and its fast index reader, pure:
percentiles, rates, the endings a client took for success, old and foreign index lines, and the
fast path reading exactly what json.loads reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.diagnostics.record.index_fields import (ABSENT, FieldReader, NotAnIndexLine,
                                                       decode)
from streamtap.diagnostics.record.schema import INDEX_KEYS, index_line
from streamtap.diagnostics.views.model import build_view
from streamtap.diagnostics.views.stats import Tally, percentile, tally_lines
from streamtap.diagnostics.views.stats_text import (as_json, client_sees_cells, markdown,
                                                    outcome_cells, rate, text_table, timing_cells)
from streamtap.diagnostics.views.text import plain
from streamtap.proxy.readout.tracedir import read_record
from streamtap.proxy.readout.traces import read_index, record_path, select
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_chunk, chat_text_stream, responses_event, responses_text_stream, sse
from tests.support import record_stream
from tests.tracefixtures import build


def streamtap(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamtap", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "NO_COLOR": "1"})


def test_index_lines_carry_what_stats_reads(tmp_path):
    records = {record["trace_id"]: record for record in build(tmp_path)}
    lines = {line["trace_id"]: line for line in select(read_index(tmp_path))}
    assert lines.keys() == records.keys()
    for trace_id, line in lines.items():
        record = records[trace_id]
        view = build_view(read_record(record_path(line)))
        silence = view.longest_silence.ms if view.longest_silence else None
        assert line["silence_ms"] == silence, trace_id  # the silence `show` names
        assert line["evidence"] == record["outcome"]["evidence"][0]
        assert line["upstream_host"] == "api.openai.com:443"
        assert line["headers_ms"] == record["timeline"]["response_headers"]
        assert line["first_event_ms"] == record["timeline"]["first_event"]
    reset = next(line for line in lines.values() if line["boundary"] == "transport")
    assert (reset["silence_ms"], reset["terminal"], reset["evidence"]) == (901.0, False,
                                                                           "upstream_reset")
    refused = next(line for line in lines.values() if line["boundary"] == "proxy")
    assert (refused["headers_ms"], refused["silence_ms"]) == (None, None)
    # Lines as the store writes them are read without a JSON parse (raw text back).
    read = FieldReader(INDEX_KEYS).read
    raws = [raw for index in tmp_path.glob("*/index.jsonl")
            for raw in index.read_bytes().splitlines()]
    assert len(raws) == 9 and all(isinstance(read(raw)[0], bytes) for raw in raws)


@pytest.mark.e2e
def test_a_broken_or_foreign_index_line_is_counted_and_named(tmp_path):
    build(tmp_path)
    index = tmp_path / "beta" / "index.jsonl"
    with open(index, "a") as out:
        out.write('{"started_at": "2026-11-25T12:30:00.000Z", "hello": "another tool"}\n')
        out.write('{"trace_id": "half-writ\n')
    lines = len(index.read_text().splitlines())
    result = streamtap("stats", "--trace-dir", str(tmp_path), "--format", "json")
    assert result.returncode == 0, result.stderr
    table = json.loads(result.stdout)
    assert table["total"]["requests"] == 9
    assert table["skipped"]["count"] == 2 and sorted(table["skipped"]["lines"]) == [
        f"{index}:{lines - 1}: JSON, but not a streamtap index line (no trace_id)",
        f"{index}:{lines}: no started_at: not a streamtap index line"]
    assert f"{index}:{lines}" in result.stderr and "skipped 2 index line(s)" in result.stderr
    result = streamtap("stats", "--trace-dir", str(tmp_path))
    assert result.returncode == 0 and result.stdout.startswith("9 requests by route")


def _send(url: str, session: str, fault: str | None = None) -> str:
    headers = {"x-streamtap-session": session}
    if fault:
        headers["x-streamtap-fault"] = fault
    try:
        with httpx.stream("POST", url, json={"model": "gpt-stats", "stream": True},
                          headers=headers, timeout=10) as response:
            return response.read().decode(errors="replace")
    except httpx.HTTPError as exc:
        return type(exc).__name__


def test_stats_counts_endings_sent_through_a_real_proxy(fake, tmp_path):
    complete = fake.add(Scenario(chat_text_stream(3)))
    # A gateway that ends the stream cleanly before the finish chunk and [DONE].
    bare_end = fake.add(Scenario(chat_text_stream(3, done=False)[:-1]))
    # A gateway that writes [DONE] after the provider's error.
    done_after_error = fake.add(Scenario(chat_text_stream(2, done=False)[:-1] + [
        sse({"error": {"type": "server_error", "message": "upstream failed"}}),
        b"data: [DONE]\n\n"]))
    reset = fake.add(Scenario(chat_text_stream(3, done=False)[:-1], ending="reset"))
    proxy = ProxyProcess(tmp_path, {"direct": fake.url, "gateway": fake.url})
    session = new_session()
    try:
        injected_close = "close; at=event:text_delta:2"
        # complete, but the connection stays open after [DONE]: a client reading to the close hangs
        held = "hold; duration_ms=1100"
        sent = [("direct", complete, None)] * 6 + [("direct", complete, injected_close)]
        sent += [("direct", complete, held)]
        sent += [("gateway", complete, None)] * 3 + [("gateway", bare_end, None)] * 2
        sent += [("gateway", done_after_error, None), ("gateway", reset, None)]
        seen = [_send(proxy.url(route) + prefix + "/v1/chat/completions", session, fault)
                for route, prefix, fault in sent]
        assert seen[-1] in ("RemoteProtocolError", "ReadError")  # the reset reached the client
        assert "[DONE]" in seen[-2]  # the client got its terminal event after the error
        proxy.records(session, len(sent))
        result = streamtap("stats", "--trace-dir", str(proxy.trace_dir), "--session", session,
                           "--format", "json")
        assert result.returncode == 0, result.stderr
        table = json.loads(result.stdout)
        groups = {group["key"]: group for group in table["groups"]}
        direct, gateway = groups["direct"], groups["gateway"]
        assert (direct["requests"], direct["completed"]["count"]) == (8, 7)
        assert direct["boundaries"]["injected"] == {"count": 1, "rate": round(1 / 8, 6)}
        assert direct["endings"]["clean_close_no_terminal"]["count"] == 1  # the injected close
        seen_by_client = {group: {sees: share["count"] for sees, share in
                                  groups[group]["client_sees"].items() if share["count"]}
                          for group in groups}
        # the held request completed, yet its client hung; the injected close cut it short
        assert seen_by_client["direct"] == {"success": 6, "silent_truncation": 1, "hang": 1}
        assert seen_by_client["gateway"] == {"success": 3, "silent_truncation": 2,
                                             "in_band_error": 1, "error": 1}
        assert table["unknown_client_sees"] == 0
        assert (gateway["requests"], gateway["completed"]["count"]) == (7, 3)
        assert {name: share["count"] for name, share in gateway["boundaries"].items()} == {
            "transport": 1, "provider_close": 2, "provider_error": 1, "injected": 0}
        assert gateway["endings"] == {
            "clean_close_no_terminal": {"count": 2, "rate": round(2 / 7, 6)},
            "terminal_after_error": {"count": 1, "rate": round(1 / 7, 6)}}
        assert gateway["timings_ms"]["headers"]["n"] == 7
        assert 0 < gateway["timings_ms"]["first_event"]["p50"] <= \
            gateway["timings_ms"]["duration"]["p99"]
        result = streamtap("stats", "--trace-dir", str(proxy.trace_dir), "--session", session,
                           "--by", "upstream", "--format", "md")
        port = fake.url.rsplit(":", 1)[1]
        assert f"| 127.0.0.1:{port} | 15 | 10 (66.7%) |" in result.stdout
        assert f"| 127.0.0.1:{port} | 1 (6.7%) | 1 (6.7%) | 3 (20.0%) | 1 (6.7%) | 9 (60.0%) |" \
            in result.stdout  # error, in_band_error, silent_truncation, hang, success
    finally:
        proxy.stop()


@pytest.mark.e2e
def test_since_and_session_narrow_what_stats_counts(tmp_path):
    build(tmp_path)  # one request a minute from 12:01 (alpha 1-3, beta 4-7, gamma 8-9)
    result = streamtap("stats", "--trace-dir", str(tmp_path), "--since", "2026-11-25T12:05:00Z",
                       "--by", "session", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert {group["key"]: group["requests"] for group in json.loads(result.stdout)["groups"]} == {
        "beta": 3, "gamma": 2}
    result = streamtap("stats", "--trace-dir", str(tmp_path), "--session", "alpha", "--by",
                       "boundary", "--format", "json")
    assert [group["key"] for group in json.loads(result.stdout)["groups"]] == [
        "none", "provider_close", "transport"]
    result = streamtap("stats", "--trace-dir", str(tmp_path), "--since", "yesterday")
    assert result.returncode == 2 and "30m, 1h, 2d" in result.stderr


# -- the tally and the fast index reader, pure ----------------------------------------------------
def line(n: int = 0, **fields) -> dict:
    """An index line as index_line() writes it for a completed request, with `fields` changed."""
    base = dict.fromkeys(INDEX_KEYS)
    base.update(schema_version=1, trace_id=f"{n:016x}", started_at="2026-11-25T12:00:00.000Z",
                session_id="s1", route="openai", provider="openai",
                upstream_host="api.openai.com:443", model="gpt-a", ok=True, boundary="none",
                phase="complete", evidence="terminal_event", client_sees="success",
                terminal=True, terminal_after_error=False, headers_ms=100.0, first_event_ms=120.0,
                duration_ms=1000.0, silence_ms=50.0, summary="The openai stream completed.")
    base.update(fields)
    return base


def raw(entry: dict) -> bytes:
    return json.dumps(entry, separators=(",", ":")).encode()


def test_nearest_rank_percentiles_are_values_that_were_seen():
    values = [float(v) for v in range(1, 101)]
    assert [percentile(values, p) for p in (50, 90, 99)] == [50.0, 90.0, 99.0]
    assert [percentile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], p)
            for p in (50, 90, 99)] == [5.0, 9.0, 10.0]
    assert percentile([7.0], 99) == 7.0 and percentile([], 50) is None
    assert percentile([float(v) for v in range(1, 1001)], 50) == 500.0
    timing = tally_lines([line(n, headers_ms=float(n)) for n in range(1, 101)]).total.timings
    assert (timing["headers"].p50, timing["headers"].p90, timing["headers"].p99) == (50, 90, 99)


def test_rates_are_per_mille_when_small():
    assert rate(23, 13_312) == "1.7‰"  # the gateway: 23 bare ends in 13,312 requests
    assert rate(1, 100_000) == "0.01‰"
    assert rate(1, 4) == "25.0%" and rate(1, 100) == "1.0%" and rate(0, 0) == "0‰"
    assert rate(1, 1000) == "1.0‰" and rate(5, 10_000) == "0.5‰"


def test_counts_rates_and_the_endings_a_client_took_for_success():
    lines = [line(n) for n in range(6)]
    lines += [line(10, ok=False, boundary="provider_close", phase="text", evidence="clean_close",
                   terminal=False, route="gateway", upstream_host="gw.example:443")]
    lines += [line(11, ok=False, boundary="provider_error", phase="text",
                   evidence="wrapped_chunk", terminal_after_error=True, route="gateway",
                   upstream_host="gw.example:443")]
    lines += [line(12, ok=False, boundary="injected", phase="text", evidence="injected_close",
                   terminal=False)]
    lines += [line(13, ok=False, boundary="injected", phase="text", evidence="injected_reset",
                   terminal=False)]
    lines += [line(14, ok=False, boundary="injected", phase="complete",
                   evidence="injected_drop_terminal", terminal=False)]
    lines += [line(15, ok=False, boundary=None, phase=None, evidence=None)]
    table = tally_lines(lines, "route")
    by_key = {group.key: group for group in table.groups}
    assert [group.key for group in table.groups] == ["openai", "gateway"]  # most requests first
    openai, gateway = by_key["openai"], by_key["gateway"]
    assert (openai.requests, openai.completed) == (10, 6)
    assert openai.boundaries == {"injected": 3, "unknown": 1}  # a line without a boundary
    # the injected close and drop_terminal, not the reset
    assert openai.endings == {"clean_close_no_terminal": 2}
    assert gateway.boundaries == {"provider_close": 1, "provider_error": 1}
    assert gateway.endings == {"clean_close_no_terminal": 1, "terminal_after_error": 1}
    assert table.total.requests == 12 and table.total.endings == {"clean_close_no_terminal": 3,
                                                                   "terminal_after_error": 1}
    assert table.boundaries == ("provider_close", "provider_error", "injected", "unknown")
    header, rows = outcome_cells(table)
    assert header == ["ROUTE", "REQUESTS", "COMPLETED", "PROVIDER_CLOSE", "PROVIDER_ERROR",
                      "INJECTED", "UNKNOWN", "CLEAN CLOSE, NO TERMINAL", "TERMINAL AFTER ERROR"]
    assert rows[0] == ["openai", "10", "6 (60.0%)", "0", "0", "3 (30.0%)", "1 (10.0%)",
                       "2 (20.0%)", "0"]
    assert rows[1] == ["gateway", "2", "0", "1 (50.0%)", "1 (50.0%)", "0", "0", "1 (50.0%)",
                       "1 (50.0%)"]
    assert rows[2][:3] == ["all", "12", "6 (50.0%)"]
    by_upstream = tally_lines(lines, "upstream")
    assert {g.key: g.requests for g in by_upstream.groups} == {"api.openai.com:443": 10,
                                                               "gw.example:443": 2}
    shown = as_json(table, ["x/index.jsonl:3: not JSON"], 4)
    assert shown["skipped"] == {"count": 4, "lines": ["x/index.jsonl:3: not JSON"]}
    assert (shown["by"], shown["percentiles"], shown["unknown_endings"]) == ("route",
                                                                             "nearest-rank", 0)
    gateway_json = shown["groups"][1]
    assert (gateway_json["key"], gateway_json["requests"]) == ("gateway", 2)
    assert gateway_json["completed"] == {"count": 0, "rate": 0.0}
    assert gateway_json["boundaries"]["injected"] == {"count": 0, "rate": 0.0}
    assert gateway_json["boundaries"]["provider_close"] == {"count": 1, "rate": 0.5}
    assert gateway_json["endings"] == {"clean_close_no_terminal": {"count": 1, "rate": 0.5},
                                       "terminal_after_error": {"count": 1, "rate": 0.5}}
    assert gateway_json["timings_ms"]["headers"] == {"p50": 100.0, "p90": 100.0, "p99": 100.0,
                                                     "n": 2}
    assert shown["total"]["requests"] == 12 and set(shown["endings"]) == {
        "clean_close_no_terminal", "terminal_after_error"}
    assert shown["groups"][0]["endings"]["terminal_after_error"] == {"count": 0, "rate": 0.0}
    assert shown["groups"][0]["boundaries"]["injected"] == {"count": 3, "rate": 0.3}
    seventh = as_json(tally_lines([line(n, ok=n > 0) for n in range(7)]))["total"]
    assert seventh["completed"] == {"count": 6, "rate": 0.857143}
    assert as_json(tally_lines([]))["total"]["completed"] == {"count": 0, "rate": 0.0}


def test_timings_skip_stages_never_reached_and_group_by_any_field():
    lines = [line(n, headers_ms=float(n), first_event_ms=None if n % 2 else float(n * 10))
             for n in range(1, 11)]
    table = tally_lines(lines, "boundary")
    timings = table.groups[0].timings
    assert table.groups[0].key == "none"
    assert (timings["headers"].p50, timings["headers"].p90, timings["headers"].n) == (5.0, 9.0, 10)
    assert (timings["first_event"].p50, timings["first_event"].n) == (60.0, 5)
    assert "5.0 ms / 9.0 ms / 10 ms" in plain(text_table(table))
    assert len(outcome_cells(table)[1]) == 1  # one group: no `all` row repeating it


def test_the_terminal_and_markdown_tables_are_aligned_and_name_their_columns():
    lines = [line(1, model="a"), line(2, model="bb", ok=False, boundary="provider_close",
                                      evidence="clean_close", client_sees="silent_truncation",
                                      first_event_ms=None)]
    table = tally_lines(lines, "model")
    assert timing_cells(table)[0] == ["MODEL", "TIME TO HEADERS p50 / p90 / p99",
                                      "TIME TO FIRST EVENT p50 / p90 / p99",
                                      "DURATION p50 / p90 / p99",
                                      "LONGEST SILENCE p50 / p90 / p99"]
    text = plain(text_table(table)).splitlines()
    assert text[:6] == [
        "2 requests by model", "",
        "MODEL  REQUESTS   COMPLETED  PROVIDER_CLOSE  CLEAN CLOSE, NO TERMINAL  TERMINAL AFTER ERROR",
        "a             1  1 (100.0%)               0                         0                     0",
        "bb            1           0      1 (100.0%)                1 (100.0%)                     0",
        "all           2   1 (50.0%)       1 (50.0%)                 1 (50.0%)                     0"]
    assert text[7:11] == [
        "MODEL  CLIENT SEES ERROR  CLIENT SEES IN_BAND_ERROR  CLIENT SEES SILENT_TRUNCATION  "
        "CLIENT SEES HANG  CLIENT SEES SUCCESS",
        "a                      0                          0                              0  "
        "               0           1 (100.0%)",
        "bb                     0                          0                     1 (100.0%)  "
        "               0                    0",
        "all                    0                          0                      1 (50.0%)  "
        "               0            1 (50.0%)"]
    assert text[13].startswith("a             100 ms / 100 ms / 100 ms             120 ms / ")
    assert text[14].startswith("bb            100 ms / 100 ms / 100 ms" + " " * 36 + "-  1000 ms")
    assert text[-4].startswith("clean close, no terminal: ended cleanly without the terminal")
    assert text[-2].startswith("A client most likely took both for success.")
    assert text[-1].startswith("client sees: what a client made of the ending")
    md = markdown(table).splitlines()
    assert md[:4] == ["**2 requests by model**", "",
                      "| MODEL | REQUESTS | COMPLETED | PROVIDER_CLOSE | CLEAN CLOSE, NO TERMINAL "
                      "| TERMINAL AFTER ERROR |",
                      "| --- | ---: | ---: | ---: | ---: | ---: |"]
    assert md[4] == "| a | 1 | 1 (100.0%) | 0 | 0 | 0 |"
    assert md[8:10] == ["| MODEL | CLIENT SEES ERROR | CLIENT SEES IN_BAND_ERROR | "
                        "CLIENT SEES SILENT_TRUNCATION | CLIENT SEES HANG | CLIENT SEES SUCCESS |",
                        "| --- | ---: | ---: | ---: | ---: | ---: |"]
    assert md[11] == "| bb | 0 | 0 | 1 (100.0%) | 0 | 0 |"
    assert md[-2].startswith("- A client most likely took both for success.")


def test_a_line_keeps_its_own_group_whatever_its_folder():
    tally = Tally("route")
    tally.add(tally.reader.of(line(1, route="gateway")), "folder-name")
    tally.add(tally.reader.of(line(2, route="")), "folder-name")
    assert [group.key for group in tally.table().groups] == ["-", "gateway"]


def test_old_index_lines_count_as_unknown_never_crash():
    old = {key: value for key, value in line(1, ok=False, boundary="injected", phase="text")
           .items() if key not in ("upstream_host", "evidence", "terminal", "terminal_after_error",
                                   "headers_ms", "first_event_ms", "silence_ms", "session_id")}
    tally = Tally("session")
    tally.add(tally.reader.read(raw(old)), "folder-name")
    tally.add(tally.reader.read(raw(line(2))), "s1")
    tally.add(tally.reader.read(raw(line(3))), "s1")
    table = tally.table()
    assert {group.key: group.requests for group in table.groups} == {"folder-name": 1, "s1": 2}
    assert table.unknown == 1
    assert table.total.timings["headers"].n == 2 and table.total.timings["duration"].n == 3
    assert "1 index line(s) from an older streamtap" in plain(text_table(table))
    assert tally_lines([old], "upstream").groups[0].key == "-"


def test_what_the_client_saw_per_group_even_behind_ok():
    lines = [line(n) for n in range(5)]
    # ok verdicts the client did not take as one: a connection held after [DONE], an `error:`
    # line no EventSource dispatches
    lines += [line(10, evidence="terminal_event", client_sees="hang")]
    lines += [line(11, evidence="terminal_event", client_sees="silent_truncation")]
    lines += [line(12, route="gateway", ok=False, boundary="provider_close",
                   evidence="clean_close", client_sees="silent_truncation")]
    lines += [line(13, route="gateway", ok=False, boundary="provider_error",
                   evidence="wrapped_chunk", client_sees="in_band_error")]
    lines += [line(14, route="gateway", ok=False, boundary="transport",
                   evidence="upstream_reset", client_sees="error")]
    table = tally_lines(lines, "route")
    openai, gateway = table.groups
    assert (openai.key, openai.completed) == ("openai", 7)  # the verdict says ok...
    assert openai.client_sees == {"success": 5, "hang": 1, "silent_truncation": 1}  # ...not all
    assert gateway.client_sees == {"silent_truncation": 1, "in_band_error": 1, "error": 1}
    assert table.total.client_sees == {"success": 5, "hang": 1, "silent_truncation": 2,
                                       "in_band_error": 1, "error": 1}
    assert (table.client_sees, table.unknown_client_sees) == (
        ("error", "in_band_error", "silent_truncation", "hang", "success"), 0)
    header, rows = client_sees_cells(table)
    assert header == ["ROUTE", "CLIENT SEES ERROR", "CLIENT SEES IN_BAND_ERROR",
                      "CLIENT SEES SILENT_TRUNCATION", "CLIENT SEES HANG", "CLIENT SEES SUCCESS"]
    assert rows == [["openai", "0", "0", "1 (14.3%)", "1 (14.3%)", "5 (71.4%)"],
                    ["gateway", "1 (33.3%)", "1 (33.3%)", "1 (33.3%)", "0", "0"],
                    ["all", "1 (10.0%)", "1 (10.0%)", "2 (20.0%)", "1 (10.0%)", "5 (50.0%)"]]
    shown = as_json(table)
    assert shown["unknown_client_sees"] == 0
    assert shown["groups"][0]["client_sees"] == {
        "error": {"count": 0, "rate": 0.0}, "in_band_error": {"count": 0, "rate": 0.0},
        "silent_truncation": {"count": 1, "rate": 0.142857},
        "hang": {"count": 1, "rate": 0.142857}, "success": {"count": 5, "rate": 0.714286},
        "unknown": {"count": 0, "rate": 0.0}}
    assert shown["total"]["client_sees"]["silent_truncation"] == {"count": 2, "rate": 0.2}
    assert "do not say what the client saw" not in plain(text_table(table))


def test_lines_without_client_sees_count_as_unknown_never_crash():
    """Lines written before index lines carried client_sees (they have evidence and timings),
    a word no streamtap writes, and a hand-edited list: unknown, in a column of their own."""
    before = {key: value for key, value in line(1).items() if key != "client_sees"}
    tally = Tally("route")
    for entry in (before, line(2, client_sees="maybe"), line(3, client_sees=["hang"]),
                  line(4, client_sees="hang"), line(5, route=["gw"], ok={"a": 1})):
        tally.add(tally.reader.read(raw(entry)))
    table = tally.table()
    assert table.unknown_client_sees == 3 and table.unknown == 0
    assert table.client_sees[-1] == "unknown"
    assert {group.key: group.client_sees for group in table.groups} == {
        "openai": {"unknown": 3, "hang": 1}, '["gw"]': {"success": 1}}
    assert table.total.requests == 5 and table.total.completed == 4
    text = plain(text_table(table))
    assert "CLIENT SEES UNKNOWN" in text
    assert "3 index line(s) do not say what the client saw" in text
    assert as_json(table)["total"]["client_sees"]["unknown"] == {"count": 3, "rate": 0.6}


def test_foreign_and_broken_lines_are_refused_with_why():
    fields = FieldReader(INDEX_KEYS)
    for bad, why in ((b'{"trace_id": "half-writ', "not JSON"), (b"[1, 2]", "no trace_id"),
                     (b'{"started_at": "2026-11-25T12:00:00Z", "hello": 1}', "no trace_id")):
        with pytest.raises(NotAnIndexLine, match=why):
            fields.read(bad)


def test_fields_must_be_asked_in_index_order():
    with pytest.raises(ValueError, match="INDEX_KEYS order"):
        FieldReader(("route", "session_id"))


def test_index_line_writes_index_keys_in_order():
    record = {"schema_version": 1, "trace_id": "t", "session_id": "s", "started_at": "x",
              "route": "r"}
    assert tuple(index_line(record_from_dict(record))) == INDEX_KEYS


def test_the_fast_path_reads_todays_lines_without_json():
    values = FieldReader(INDEX_KEYS).read(raw(line(1, model="gpt|4")))
    assert len(values) == len(INDEX_KEYS)
    assert all(isinstance(value, bytes) for value in values)  # raw JSON text: no parse
    assert markdown(tally_lines([line(1, model="gpt|4")], "model")).count("gpt\\|4") == 3


_text = st.one_of(st.none(), st.text(max_size=12),
                  st.sampled_from(["openai", "a\"b", "back\\slash", "ünï", "tab\there", ""]))
_number = st.one_of(st.none(), st.integers(-10**6, 10**9),
                    st.floats(allow_nan=False, allow_infinity=False, width=32))
_flag = st.one_of(st.none(), st.booleans())


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({
    "route": _text, "model": _text, "upstream_host": _text, "boundary": _text, "phase": _text,
    "evidence": _text, "summary": _text, "session_id": _text, "client_sees": _text,
    "ok": _flag, "terminal_after_error": _flag, "terminal": _flag,
    "headers_ms": _number, "first_event_ms": _number, "duration_ms": _number,
    "silence_ms": _number, "status": _number}))
def test_the_fast_path_reads_what_json_reads(fields):
    entry = line(7, **fields)
    text = raw(entry)
    fast = tuple(decode(value) for value in FieldReader(INDEX_KEYS).read(text))
    assert fast == tuple(json.loads(text).get(key, ABSENT) for key in INDEX_KEYS)


def test_a_timing_that_is_no_number_is_left_out_not_fatal():
    lines = [line(1, headers_ms="soon", first_event_ms=True), line(2, headers_ms=7.0)]
    timings = tally_lines(lines).total.timings
    assert (timings["headers"].n, timings["headers"].p50) == (1, 7.0)
    assert timings["first_event"].n == 1 and timings["duration"].n == 2


def _recorded(chunks: list[bytes], path: str) -> dict:
    return record_stream(b"".join(chunks), path=path, chunks=[len(c) for c in chunks], t_step=10)


def test_terminal_after_error_is_a_terminal_a_client_took_for_success():
    error = sse({"error": {"type": "server_error", "message": "upstream failed"}})
    chat, done, text = "/v1/chat/completions", b"data: [DONE]\n\n", chat_text_stream(2)[:-2]
    done_after_error = _recorded(text + [error, done], chat)
    finish_error = _recorded(text + [chat_chunk({}, "error"), done], chat)
    plain_done = _recorded(chat_text_stream(2), chat)
    no_terminal = _recorded(text + [error], chat)
    seq = [100]
    failed = _recorded(responses_text_stream(2, terminal=False) + [responses_event(
        {"type": "response.failed", "response": {"id": "resp_e2e1", "status": "failed",
                                                 "error": {"code": "server_error"}}}, seq)],
        "/v1/responses")
    assert [index_line(record_from_dict(record))["terminal_after_error"] for record in (
        done_after_error, finish_error, plain_done, no_terminal, failed)] == [
        True, True, False, False, False]
    # response.failed is the terminal and the error at once: the client was told it failed
    assert failed["stream"]["terminal"] == "response.failed"
    assert [error["shape"] for error in failed["stream"]["errors"]] == ["failed_terminal"]
