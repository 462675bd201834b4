"""`streamtap stats`: the index line carries what stats reads (the same silence `show` names), the
command counts traffic with known endings sent through a real proxy, and a broken or foreign index
line is counted and named, never fatal."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx

from streamtap.diagnostics.record.index_fields import FieldReader
from streamtap.diagnostics.record.schema import INDEX_KEYS
from streamtap.diagnostics.views.model import build_view
from streamtap.proxy.readout.traces import load_record, read_index, record_path, select
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream, sse
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
        view = build_view(load_record(record_path(line)))
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
