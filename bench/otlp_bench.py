"""How many trace records per second streamtap's OTLP exporter turns into spans and sends.

    python bench/otlp_bench.py [--records 500] [--frames 200] [--endpoint URL]
    python bench/otlp_bench.py --sink [--port 0]     # only the discarding receiver (bench/run.py)

Builds `--records` realistic records (a chat stream of `--frames` frames each, through the real
Recorder), then times the exporter (streamtap.proxy.export.otlp) mapping them to spans, encoding
them with the OpenTelemetry SDK and POSTing them in batches. Without `--endpoint` it sends to a
receiver of its own in this process's threads that reads each request and answers 200 without
decoding it, so the figure is streamtap's side. Prints one JSON line. Needs `streamtap[otel]`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import structlog

from streamtap.diagnostics.record.recorder import Ending, Recorder
from streamtap.diagnostics.views.spans import record_to_span
from streamtap.proxy.config import OtlpExport


class _Discard(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real collector

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.server.received += 1  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def start_sink(port: int = 0) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), _Discard)
    server.received = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def chat_stream(frames: int) -> list[bytes]:
    """A content-free OpenAI chat stream: role, `frames` deltas, finish, usage, [DONE]."""
    def chunk(delta: dict, finish=None, **extra) -> bytes:
        return ("data: " + json.dumps({"id": "chatcmpl-b", "object": "chat.completion.chunk",
                                       "model": "gpt-bench", "choices": [{
                                           "index": 0, "delta": delta,
                                           "finish_reason": finish}], **extra}) + "\n\n").encode()
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": "word "}) for _ in range(frames)]
    out.append(chunk({}, "stop"))
    out.append(("data: " + json.dumps({"id": "chatcmpl-b", "choices": [], "usage": {
        "prompt_tokens": 100, "completion_tokens": frames}}) + "\n\n").encode())
    return out + [b"data: [DONE]\n\n"]


def make_records(count: int, frames: int) -> list[dict]:
    stream = chat_stream(frames)
    body = json.dumps({"model": "gpt-bench", "stream": True,
                       "messages": [{"role": "user", "content": "x"}]}).encode()
    records = []
    for index in range(count):
        recorder = Recorder(trace_id=f"{index + 1:016x}", session_id="bench", message_id=None,
                            started_at="2026-01-01T00:00:00.000Z", route="openai",
                            provider="openai")
        recorder.on_request("POST", "/v1/chat/completions",
                            [("content-type", "application/json")], body)
        recorder.on_response(200, [("content-type", "text/event-stream")], 1.0)
        for n, piece in enumerate(stream):
            recorder.feed(piece, 2.0 + n)
        records.append(recorder.finish(Ending(upstream="complete", upstream_end_ms=300.0,
                                              downstream_end_ms=300.0), 300.0))
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--frames", type=int, default=200, help="frames per record")
    parser.add_argument("--batch-size", type=int, default=OtlpExport.batch_size)
    parser.add_argument("--endpoint", help="a real OTLP/HTTP base URL instead of the built-in "
                                           "discarding receiver")
    parser.add_argument("--sink", action="store_true", help="only run the discarding receiver "
                                                            "and print where it listens")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.sink:
        server = start_sink(args.port)
        print(f"otlp sink listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        return 0

    from streamtap.proxy.export.otlp import OtlpExporter

    records = make_records(args.records, args.frames)
    t0 = time.perf_counter()
    for record in records[:500]:
        record_to_span(record)
    map_us = (time.perf_counter() - t0) / min(len(records), 500) * 1e6
    server = None
    endpoint = args.endpoint
    if not endpoint:
        server = start_sink()
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    settings = OtlpExport(endpoint=endpoint, batch_size=args.batch_size,
                          queue_limit=max(args.records, 1))
    exporter = OtlpExporter(settings, structlog.get_logger())
    cpu0, t0 = time.process_time(), time.perf_counter()
    for record in records:
        exporter.offer(record)
    exporter.flush(600)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    exporter.close()
    health = exporter.health()
    print(json.dumps({
        "records": args.records, "frames_per_record": args.frames,
        "frame_events_per_span": min(len(records[0].frames), settings.frame_events),
        "batch_size": args.batch_size, "endpoint": "built-in discarding receiver"
        if server else endpoint,
        "spans_per_s": round(health["exported"] / elapsed, 1),
        "cpu_ms_per_span": round(cpu / max(health["exported"], 1) * 1000, 3),
        "record_to_span_us": round(map_us, 1),
        "exported": health["exported"], "dropped": health["dropped"],
        "elapsed_s": round(elapsed, 2), "cpus": os.cpu_count()}))
    return 0 if health["dropped"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
