"""Helpers for the pure tests: feed a stream to a Recorder in any chunking and get its record."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable
from pathlib import Path

from streamtap.diagnostics.record.recorder import Ending, Recorder
from streamtap.diagnostics.record.schema import record_as_dict

FIXTURES = Path(__file__).parent / "fixtures" / "streams"


def fixture(dialect: str, name: str) -> bytes:
    """The raw bytes of `tests/fixtures/streams/<dialect>/<name>` (written by us, content-free)."""
    return (FIXTURES / dialect / name).read_bytes()


def first_frames(data: bytes, n: int) -> bytes:
    """An LF-separated SSE stream cut right after its first `n` blocks (comments count)."""
    return b"".join(part + b"\n\n" for part in data.split(b"\n\n")[:n])


def chunked(data: bytes, sizes: Iterable[int] | str = "whole") -> list[bytes]:
    """Cut `data` whole, byte by byte, or into the given sizes (the rest as a last chunk)."""
    if sizes == "whole":
        return [data]
    if sizes == "bytewise":
        return [data[i:i + 1] for i in range(len(data))]
    chunks, pos = [], 0
    for size in sizes:  # type: ignore[union-attr]
        if pos >= len(data):
            break
        chunks.append(data[pos:pos + max(size, 1)])
        pos += max(size, 1)
    if pos < len(data):
        chunks.append(data[pos:])
    return chunks


def record_stream(data: bytes, *, path: str, content_type: str = "text/event-stream",
                  dialect: str | None = None, request: dict | None = None,
                  chunks: Iterable[int] | str = "whole", status: int = 200,
                  upstream: str = "complete", downstream: str = "complete",
                  error: dict | None = None, watchdog_fired: str | None = None,
                  provider: str = "openai", headers: list | None = None,
                  t_step: float = 0.0) -> dict:
    """Run one exchange through a Recorder as the proxy would and return the trace record as
    its file holds it (JSON builtins; `record_from_dict` gives the typed record back).

    `upstream` is how the body ended (complete | reset | truncated | error); every chunk arrives
    `t_step` ms after the previous one (0 keeps records identical across chunkings).
    """
    recorder = Recorder(trace_id="t", session_id="s", message_id=None, started_at="now",
                        route=provider, provider=provider, configured_dialect=dialect)
    body = json.dumps(request or {"model": "m", "stream": True}).encode()
    recorder.on_request("POST", path, [("content-type", "application/json")], body)
    recorder.mark("upstream_connected", 1.0)
    recorder.on_response(status, headers or [("content-type", content_type)], 2.0)
    t = 2.0
    for chunk in chunked(data, chunks):
        t += t_step
        recorder.feed(chunk, t)
    ending = Ending(upstream=upstream, downstream=downstream, error=error,
                    watchdog_fired=watchdog_fired, upstream_end_ms=t, downstream_end_ms=t,
                    downstream_status=status, downstream_bytes=len(data))
    return record_as_dict(recorder.finish(ending, t))


def comparable(record: dict) -> dict:
    """What must not depend on chunking: frames, counts, tools, errors, outcome."""
    return {key: record[key] for key in ("frames", "stream", "outcome", "correlation", "dialect")}


def port_free(port: int) -> bool:
    """Whether a server could listen on `port` of 127.0.0.1 now. SO_REUSEADDR, as every server sets
    it: a port whose last connections are only in TIME_WAIT (for 60 s after a test's server
    closed them) is free; one with a listener is not."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
