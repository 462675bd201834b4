"""A trace directory with one record per boundary, built through the real Recorder with fixed
ids and times, so views of it can be compared with golden files. Every record carries canaries
(prompt, tool arguments, output, key, cookie, query) that no view may show."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from streamtap.diagnostics.record.recorder import Ending, Recorder
from streamtap.diagnostics.record.schema import record_as_dict
from streamtap.diagnostics.verdict.fingerprints import fingerprint
from streamtap.proxy.store import write_record
from tests.streams import chat_text_stream, chat_tool_stream, sse

CANARY_PROMPT = "CANARY-PROMPT-a1f3"
CANARY_KEY = "sk-CANARYKEY0123456789abcdef"
CANARY_COOKIE = "CANARY-COOKIE-c0c0"
CANARY_QUERY = "CANARY-QUERY-9e9e"
CANARIES = (CANARY_PROMPT, CANARY_KEY, CANARY_COOKIE, CANARY_QUERY, "CANARY-OUTPUT-5d1e",
            "CANARY-ARG-77b0")
HOSTILE_MESSAGE = "<script>document.title='pwned'</script> <img src=x onerror=alert(1)>"
# What a record keeps of it (redaction/messages.py cuts quoted spans): still markup, which every
# view must show as text.
HOSTILE_MESSAGE_KEPT = "<script>document.title=[quoted]</script> <img src=x onerror=alert(1)>"
START = datetime(2026, 11, 25, 12, 0, 0, tzinfo=timezone.utc)


def _record(index: int, session: str, chunks: list[bytes], *, status: int = 200,
            step_ms: float = 40.0, ending: Ending | None = None, end_gap_ms: float = 0.0,
            message_id: str | None = None, tools: bool = False,
            connected: bool = True) -> tuple[dict, datetime]:
    started = START + timedelta(minutes=index)
    recorder = Recorder(
        trace_id=f"{index:x}{index:x}c0ffee{index:08d}"[:16], session_id=session,
        message_id=message_id, started_at=started.isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"), route="openai", provider="openai",
        upstream_url="https://api.openai.com:443/v1/chat/completions")
    body = {"model": "gpt-test", "stream": True,
            "messages": [{"role": "user", "content": CANARY_PROMPT}]}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": "apply_patch"}}]
    recorder.on_request("POST", f"/v1/chat/completions?key={CANARY_QUERY}",
                        [("content-type", "application/json"),
                         ("authorization", f"Bearer {CANARY_KEY}"),
                         ("cookie", f"session={CANARY_COOKIE}")], json.dumps(body).encode())
    if connected:
        recorder.mark("upstream_connected", 3.0)
        recorder.mark("request_sent", 3.5)
    t = 120.0
    ending = ending or Ending(upstream="complete")
    if status or chunks:
        content_type = "text/event-stream" if status < 400 else "application/json"
        recorder.on_response(status, [("content-type", content_type),
                                      ("x-request-id", f"req_{index:04d}")], t)
        for chunk in chunks:
            t += step_ms
            recorder.feed(chunk, t)
    t += end_gap_ms
    if ending.upstream_end_ms is None and ending.upstream != "not_started":
        ending.upstream_end_ms = t
    ending.downstream_end_ms = ending.downstream_end_ms or t
    ending.downstream_status = ending.downstream_status or status or None
    return recorder.finish(ending, t + 1.0), started


def _gone() -> BaseException:
    return ConnectionResetError(104, "Connection reset by peer")


def build(trace_dir: Path) -> list[dict]:
    """Write the fixture records into trace_dir; return them in the order written, as their files
    hold them (JSON builtins)."""
    cases = [
        _record(1, "alpha", chat_text_stream(4), message_id="msg-1"),
        _record(2, "alpha", chat_tool_stream(4, finish=False), tools=True, end_gap_ms=900,
                ending=Ending(upstream="reset", downstream="aborted",
                              error=fingerprint("upstream_read", _gone()))),
        _record(3, "alpha", chat_text_stream(3, done=False)[:-1], end_gap_ms=250),
        _record(4, "beta", [json.dumps({"error": {"type": "rate_limit_error",
                                                  "message": HOSTILE_MESSAGE}}).encode()],
                status=429),
        _record(5, "beta", chat_text_stream(2, done=False)[:-1]
                + [sse({"error": {"type": "server_error", "message": HOSTILE_MESSAGE}})]),
        _record(6, "beta", chat_text_stream(6)[:3], end_gap_ms=1500,
                ending=Ending(upstream="closed_by_proxy", downstream="client_gone",
                              error=fingerprint("downstream_write", _gone()))),
        _record(7, "beta", [b": keepalive\n\n"] * 3, step_ms=1000, end_gap_ms=2000,
                ending=Ending(upstream="closed_by_proxy", downstream="aborted",
                              watchdog_fired="progress",
                              watchdog={"progress_timeout_ms": 5000})),
        _record(8, "gamma", chat_text_stream(5)[:4],
                ending=Ending(upstream="closed_by_proxy", downstream="aborted",
                              fault={"name": "cut-5", "action": "reset", "at": "events:4",
                                     "fired": True, "fired_at_ms": 281.0, "frames_before": 4,
                                     "source": "api"})),
        _record(9, "gamma", [], status=0, connected=False,
                ending=Ending(upstream="not_started", proxy_reason="request_too_large",
                              downstream_status=413)),
    ]
    records = []
    for record, started in cases:
        write_record(trace_dir, record, started)
        records.append(record_as_dict(record))
    return records
