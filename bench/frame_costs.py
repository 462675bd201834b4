"""What each part of recording costs per frame, measured in this process, one part at a time.

    python bench/frame_costs.py [--frames 20000] [--repeat 5]

bench/run.py says what streamtap costs as a whole, next to nginx and a raw relay; this says where
that cost goes inside streamtap's own code, part by part, for the frames bench/upstream.py sends
(OpenAI Chat Completions chunks of ~300 bytes, one HTTP chunk each). Two columns: one frame per
read (workload (a), paced streams) and 200 frames per read (workload (b), one unpaced stream).
Each figure is the best of `--repeat` runs, in microseconds per frame. The parts:

  chunked de-framing   diagnostics/decode/chunked.py: the relay's copy for the recorder
  SSE decoding         diagnostics/decode/sse.py: bytes to frames
  dialect              diagnostics/dialects/openai_chat.py: a frame to its event kind and facts
  shape                diagnostics/record/shapes.py: a frame to its shape index
  recorder, all        Recorder.feed: decoding, dialect, shapes, the frame table, together
  record per request   Recorder.finish and the JSON the store writes, spread over the frames of
                       a 200-frame stream

Standard library and streamtap only; no sockets, no files.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from upstream import PREFIX, templates  # noqa: E402 - bench/ is not a package

from streamtap.diagnostics.decode.chunked import ChunkedBody  # noqa: E402
from streamtap.diagnostics.decode.sse import SseDecoder  # noqa: E402
from streamtap.diagnostics.dialects.openai_chat import OpenAIChat  # noqa: E402
from streamtap.diagnostics.record.recorder import Ending, Recorder  # noqa: E402
from streamtap.diagnostics.record.schema import encode_record  # noqa: E402
from streamtap.diagnostics.record.shapes import ShapeTable  # noqa: E402
from streamtap.diagnostics.dialects.stream import StreamState  # noqa: E402

PER_READ_BULK = 200


def frames_like_the_bench_upstream() -> tuple[bytes, bytes]:
    """(the role frame, one content frame), as bench/upstream.py writes them."""
    role, content, _ = templates(300)
    stamp = time.time_ns()
    return b"%s%d%s" % (PREFIX, stamp, role), b"%s%d%s" % (PREFIX, stamp, content)


def best(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def new_recorder(role: bytes) -> Recorder:
    recorder = Recorder(trace_id="0" * 16, session_id="bench", message_id=None,
                        started_at="2026-01-01T00:00:00.000Z", route="bench", provider="bench")
    recorder.on_request("POST", "/v1/chat/completions", [("content-type", "application/json")],
                        b'{"model":"bench","stream":true}', True)
    recorder.on_response(200, [("content-type", "text/event-stream")], 1.0)
    recorder.feed(role, 1.5)
    return recorder


def measure(frames: int, repeat: int) -> list[tuple[str, float, float]]:
    role, frame = frames_like_the_bench_upstream()
    http_chunk = b"%x\r\n%b\r\n" % (len(frame), frame)
    reads = {1: frame, PER_READ_BULK: frame * PER_READ_BULK}
    rows = []

    def per_frame(make_run) -> tuple[float, float]:
        out = []
        for per_read, data in reads.items():
            count = frames // per_read
            out.append(best(make_run(data, count), repeat) / (count * per_read) * 1e6)
        return out[0], out[1]

    def chunked(data, count):
        wire = http_chunk * (len(data) // len(frame))  # each frame its own HTTP chunk

        def run():
            feed = ChunkedBody().feed
            for _ in range(count):
                feed(wire)
        return run

    def sse(data, count):
        def run():
            feed = SseDecoder().feed
            for _ in range(count):
                feed(data)
        return run

    parsed = SseDecoder().feed(frame)[0]

    def dialect(data, count):
        def run():
            chat = OpenAIChat(StreamState())
            chat.on_frame(SseDecoder().feed(role)[0], 1.0)  # opens the text block
            on_frame = chat.on_frame
            for _ in range(count * (len(data) // len(frame))):
                on_frame(parsed, 2.0)
        return run

    def shape(data, count):
        def run():
            index_of = ShapeTable().index_of
            for _ in range(count * (len(data) // len(frame))):
                index_of(None, parsed.data, "text_delta")
        return run

    def recorder(data, count):
        def run():
            feed = new_recorder(role).feed
            for i in range(count):
                feed(data, 2.0 + i)
        return run

    rows.append(("chunked de-framing", *per_frame(chunked)))
    rows.append(("SSE decoding", *per_frame(sse)))
    rows.append(("dialect", *per_frame(dialect)))
    rows.append(("shape", *per_frame(shape)))
    rows.append(("recorder, all", *per_frame(recorder)))

    def finish(streams: int) -> float:
        """Seconds to finish `streams` records of PER_READ_BULK frames and encode them (the
        feeding is done before the clock starts)."""
        recorders = []
        for _ in range(streams):
            rec = new_recorder(role)
            for i in range(PER_READ_BULK):
                rec.feed(frame, 2.0 + i)
            recorders.append(rec)
        ending = Ending(upstream="complete", upstream_end_ms=500.0, downstream="complete",
                        downstream_end_ms=500.0)
        started = time.perf_counter()
        for rec in recorders:
            encode_record(rec.finish(ending, 500.0))
        return time.perf_counter() - started

    streams = max(frames // PER_READ_BULK // 4, 5)
    per_record = min(finish(streams) for _ in range(repeat)) / streams
    rows.append(("record per request", per_record / PER_READ_BULK * 1e6,
                 per_record / PER_READ_BULK * 1e6))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20000, help="frames per measurement")
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (the best counts)")
    args = parser.parse_args()
    rows = measure(max(args.frames, PER_READ_BULK), max(args.repeat, 1))
    print(f"{'part':22} {'us/frame, 1 per read':>21} {'us/frame, 200 per read':>23}")
    for name, single, bulk in rows:
        print(f"{name:22} {single:21.2f} {bulk:23.2f}")
    print("(the record per request is spread over a 200-frame stream)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
