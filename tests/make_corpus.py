"""Build the starter corpus in samples/: content-free samples for every dialect and ending.

A development script that needs a checkout (the fixture streams), so it lives with the tests and
is not part of the installed `streamtap.corpus` package, which holds only the samples.

Made by us, not captured: each sample comes from one of the repo's fixture streams
(`tests/fixtures/streams/`, written from the providers' public docs listed under Sources in
samples/README.md), fed one frame per chunk through the same Recorder the proxy uses, with
deterministic, plausible timing and the ending we ask for, then turned into a sample with
`diagnostics.samples.build_sample`. The matrix table in README.md is regenerated too.

    python tests/make_corpus.py           # rewrite samples/*.sample.json and the README table
    python tests/make_corpus.py --check   # exit 1 if the committed corpus is out of date
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = REPO / "samples"  # the corpus folder


from streamtap.diagnostics.verdict.fingerprints import fingerprint  # noqa: E402
from streamtap.diagnostics.samples.matrix import build_matrix, render_markdown  # noqa: E402
from streamtap.diagnostics.record.recorder import Ending, Recorder  # noqa: E402
from streamtap.diagnostics.samples.format import build_sample  # noqa: E402
from streamtap.proxy.replay.sample_files import SUFFIX, load_samples, write_sample  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "streams"
README = HERE / "README.md"
MATRIX_BEGIN, MATRIX_END = "<!-- matrix:begin -->", "<!-- matrix:end -->"
# A prompt that must never reach a sample: the corpus test looks for it.
PROMPT_CANARY = "CANARY-PROMPT-c0a1"
WATCHDOG = {"connect_timeout_ms": 10000, "idle_timeout_ms": 30000, "progress_timeout_ms": 60000}

PATHS = {"openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses",
         "anthropic-messages": "/v1/messages",
         "gemini": "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
         "gemini-unary": "/v1beta/models/gemini-2.5-flash:generateContent",
         "ollama-ndjson": "/api/chat", "ollama-generate": "/api/generate"}
TYPES = {"sse": "text/event-stream", "ndjson": "application/x-ndjson", "json": "application/json"}


@dataclass(frozen=True)
class Timing:
    """How a provider paces a stream, in ms (illustrative, not measured)."""

    headers: float  # request -> response headers
    first: float  # headers -> first frame
    step: float  # between progress frames
    keepalive: float = 1000.0  # before a keepalive frame
    meta: float = 2.0  # between bookkeeping frames


TIMING = {"openai": Timing(420, 180, 24), "openrouter": Timing(650, 300, 30, keepalive=1500),
          "deepseek": Timing(900, 400, 35, keepalive=2500), "moonshot": Timing(700, 260, 32),
          "anthropic": Timing(520, 240, 28, keepalive=5000), "gemini": Timing(800, 650, 90),
          "ollama": Timing(60, 350, 40)}
TIMING_BY_KIND = {"text_delta": "step", "text_start": "step", "reasoning_delta": "step",
                  "reasoning_start": "step", "tool_input_delta": "step",
                  "tool_input_start": "step", "tool_call": "step", "keepalive": "keepalive",
                  "error": "step"}


@dataclass(frozen=True)
class Entry:
    provider: str
    api: str  # a PATHS key
    source: str  # `<fixture dir>/<file>`, or a name in SYNTHETIC
    ending: str
    cut: str | int | None = None  # frames kept: a count, or `<kind>:<n>` (after its nth frame)
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    request: dict = field(default_factory=dict)


# Streams the fixtures do not hold, written here from the public docs (samples/README.md): OpenRouter's keepalive
# comments while the upstream model has not started (the stall a progress watchdog catches).
SYNTHETIC = {"openrouter_processing_only": [b": OPENROUTER PROCESSING\n\n"] * 6}
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {}}}
         for name in ("apply_patch", "read_file", "get_weather", "get_time")]


def request_body(entry: Entry) -> dict:
    """A request like the one a client would send (the prompt is a canary)."""
    messages = [{"role": "user", "content": PROMPT_CANARY}]
    if entry.api.startswith("gemini"):
        body: dict = {"contents": [{"role": "user", "parts": [{"text": PROMPT_CANARY}]}],
                      "tools": [{"functionDeclarations": [{"name": "get_weather"}]}]}
    elif entry.api.startswith("ollama"):
        body = {"model": "qwen3:8b", "messages": messages, "think": True, "tools": TOOLS}
    elif entry.api == "anthropic-messages":
        body = {"model": "claude-sonnet-4-5", "max_tokens": 4096, "stream": True,
                "messages": messages, "thinking": {"type": "enabled", "budget_tokens": 2048},
                "tools": [{"name": "apply_patch", "input_schema": {}}]}
    elif entry.api == "openai-responses":
        body = {"model": "gpt-5-mini", "input": PROMPT_CANARY, "stream": True,
                "reasoning": {"effort": "low"}, "tools": [
                    {"type": "function", "name": "apply_patch", "parameters": {}}]}
    else:
        model = {"openrouter": "openai/gpt-5-mini", "deepseek": "deepseek-reasoner",
                 "moonshot": "kimi-k2-thinking"}.get(entry.provider, "gpt-4o-mini")
        body = {"model": model, "messages": messages, "stream": True, "tools": TOOLS,
                "stream_options": {"include_usage": True}}
    body.update(entry.request)
    return body


def frames_of(data: bytes, kind: str) -> list[bytes]:
    """Cut a fixture into one chunk per frame (SSE event, NDJSON line, or JSON array element)."""
    if kind == "ndjson":
        return data.splitlines(keepends=True)
    if kind == "json-array":
        starts = [0] + [match.start() + 1 for match in re.finditer(rb"\n\{", data)]
        return [data[a:b] for a, b in zip(starts, starts[1:] + [len(data)])]
    pieces = re.findall(rb".*?(?:\r\n\r\n|\n\n)", data, re.S)
    rest = data[sum(map(len, pieces)):]
    return pieces + ([rest] if rest.strip() else [])


def load(entry: Entry) -> tuple[list[bytes], str]:
    if entry.source in SYNTHETIC:
        return list(SYNTHETIC[entry.source]), TYPES["sse"]
    path = FIXTURES / entry.source
    data = path.read_bytes()
    if entry.status >= 400 or path.parent.name == "json":
        return [data], TYPES["json"]
    if path.suffix == ".json":
        return frames_of(data, "json-array"), TYPES["json"]
    if path.suffix == ".ndjson":
        return frames_of(data, "ndjson"), TYPES["ndjson"]
    return frames_of(data, "sse"), TYPES["sse"]


def new_recorder(entry: Entry, trace_id: str) -> Recorder:
    recorder = Recorder(trace_id=trace_id, session_id="corpus", message_id=None,
                        started_at="2025-06-01T12:00:00.000Z", route=entry.provider,
                        provider=entry.provider)
    body = json.dumps(request_body(entry)).encode()
    recorder.on_request("POST", PATHS[entry.api],
                        [("content-type", "application/json"),
                         ("user-agent", "streamtap-corpus/1")], body)
    return recorder


def kinds_of(entry: Entry, chunks: list[bytes], content_type: str) -> list[str]:
    """The frame kind of each chunk, from a dry run (a chunk is one frame)."""
    recorder = new_recorder(entry, "dry")
    recorder.on_response(200, [("content-type", content_type)], 0.0)
    kinds = []
    for chunk in chunks:
        before = recorder.frame_count
        recorder.feed(chunk, 0.0)
        frames = recorder._head + list(recorder._tail)  # noqa: SLF001 - a dry run, read only
        kinds.append(frames[-1][2] if recorder.frame_count > before else "partial")
    return kinds


def keep_count(entry: Entry, kinds: list[str]) -> int:
    """How many frames a cut ending keeps."""
    if isinstance(entry.cut, int):
        return entry.cut
    if isinstance(entry.cut, str):
        kind, n = entry.cut.rsplit(":", 1)
        seen = 0
        for index, name in enumerate(kinds):
            seen += name == kind
            if seen == int(n):
                return index + 1
        raise SystemExit(f"{entry.source} has fewer than {n} {kind} frames")
    return max(2, round(len(kinds) * 0.6))


def times(entry: Entry, kinds: list[str]) -> list[float]:
    """When each frame arrives: per-kind gaps with a deterministic +-25% jitter."""
    timing = TIMING[entry.provider]
    rng = random.Random(f"{entry.provider}/{entry.source}/{entry.ending}")
    t = timing.headers
    out = []
    for index, kind in enumerate(kinds):
        gap = timing.first if index == 0 else getattr(timing, TIMING_BY_KIND.get(kind, "meta"))
        t += gap * rng.uniform(0.75, 1.25)
        out.append(round(t, 1))
    return out


def record(entry: Entry, trace_id: str) -> dict:
    chunks, content_type = load(entry)
    recorder = new_recorder(entry, trace_id)
    timing = TIMING[entry.provider]
    recorder.mark("upstream_connected", round(timing.headers * 0.3, 1))
    recorder.mark("request_sent", round(timing.headers * 0.31, 1))
    if entry.ending == "no_response":
        refused = ConnectionRefusedError(111, "Connect call failed")
        t = round(timing.headers * 0.3, 1)
        ending = Ending(upstream="error", error=fingerprint("upstream_connect", refused),
                        upstream_end_ms=t, downstream_end_ms=t + 0.4, downstream_status=502,
                        downstream_bytes=180, watchdog=WATCHDOG)
        return recorder.finish(ending, t + 0.4)
    status = entry.status
    headers = [("content-type", content_type), ("x-request-id", f"req_{trace_id}"),
               *entry.headers]
    recorder.on_response(status, headers, timing.headers)
    kinds = kinds_of(entry, chunks, content_type) if status < 400 else ["body"]
    at = times(entry, kinds)
    keep = len(chunks) if entry.ending in ("terminal", "http_error") else keep_count(entry, kinds)
    keep = min(keep, len(chunks))
    for chunk, t in zip(chunks[:keep], at):
        recorder.feed(chunk, t)
    last = at[keep - 1] if keep else timing.headers
    if entry.ending == "truncated" and keep < len(chunks):  # FIN in the middle of a frame
        last += timing.step
        recorder.feed(chunks[keep][: len(chunks[keep]) // 2], last)
    ending = Ending(upstream="complete", downstream_status=status, upstream_end_ms=last + 0.5,
                    downstream_end_ms=last + 0.6, watchdog=WATCHDOG,
                    downstream_bytes=sum(map(len, chunks[:keep])))
    if entry.ending == "reset":
        reset = ConnectionResetError(104, "Connection reset by peer")
        ending.upstream, ending.downstream = "reset", "aborted"
        ending.error = fingerprint("upstream_read", reset)
    elif entry.ending == "truncated":
        ending.upstream, ending.downstream = "truncated", "aborted"
        ending.error = fingerprint("upstream_read", EOFError("Response payload is not completed"))
    elif entry.ending == "stalled":
        # Keepalives are not progress: a stream of pings or comments stalls the progress clock.
        fired = "progress" if entry.provider in ("anthropic", "openrouter") else "idle"
        since = last if fired == "idle" else (recorder.state.last_progress_ms or timing.headers)
        end = max(since + WATCHDOG[f"{fired}_timeout_ms"], last + 1.0)
        ending.upstream, ending.downstream = "closed_by_proxy", "aborted"
        ending.watchdog_fired = fired
        ending.upstream_end_ms, ending.downstream_end_ms = end, end + 0.2
    elif entry.ending == "client_gone":
        end = last + timing.step * 3
        ending.upstream, ending.downstream = "closed_by_proxy", "client_gone"
        ending.error = fingerprint("downstream_write", ConnectionResetError(
            104, "Cannot write to closing transport"))
        ending.upstream_end_ms, ending.downstream_end_ms = end, end
    return recorder.finish(ending, ending.downstream_end_ms or last)


def streaming_entries(provider: str, api: str, main: str, tool: str, cut_tool: str,
                      error_fixture: str, error_status: int, *, stall: str | None = None,
                      headers: tuple = ()) -> list[Entry]:
    """Every ending for one streaming dialect: complete, cut cleanly, reset and FIN inside a
    tool call, stalled, abandoned by the client, refused with an HTTP error, never answered."""
    return [
        Entry(provider, api, main, "terminal"),
        Entry(provider, api, tool, "terminal"),
        Entry(provider, api, main, "clean_close"),
        Entry(provider, api, tool, "reset", cut=cut_tool),
        Entry(provider, api, tool, "truncated", cut=cut_tool),
        Entry(provider, api, main, "reset"),
        Entry(provider, api, stall or main, "stalled", cut=None if stall is None else 99),
        Entry(provider, api, main, "client_gone"),
        Entry(provider, api, f"json/{error_fixture}", "http_error", status=error_status,
              headers=headers),
        Entry(provider, api, main, "no_response"),
    ]


def corpus() -> list[Entry]:
    """The corpus, in file order: each dialect with every ending, then provider variants."""
    entries = []
    # The tool call comes in 12 argument pieces, so README's `at=event:tool_input_delta:5`
    # against `streamtap replay` cuts in the middle of its arguments.
    entries += streaming_entries("openai", "openai-chat", "openai-chat/text_complete.sse",
                                 "openai-chat/tool_call_pieces.sse", "tool_input_delta:3",
                                 "openai_429_rate_limit.json", 429,
                                 headers=(("retry-after", "2"),))
    entries += [Entry("openai", "openai-chat", "openai-chat/two_tools.sse", "terminal"),
                Entry("openai", "openai-chat", "openai-chat/tool_length.sse", "terminal"),
                Entry("openai", "openai-chat", "openai-chat/openai_error_chunk.sse",
                      "clean_close", cut=99)]
    entries += streaming_entries("openai", "openai-responses",
                                 "openai-responses/text_complete.sse",
                                 "openai-responses/function_call.sse", "tool_input_delta:2",
                                 "openai_500.json", 500)
    entries += [Entry("openai", "openai-responses", "openai-responses/incomplete.sse",
                      "terminal"),
                Entry("openai", "openai-responses", "openai-responses/failed.sse", "terminal"),
                Entry("openai", "openai-responses", "openai-responses/error_flat.sse",
                      "clean_close", cut=99),
                Entry("openai", "openai-responses", "openai-responses/wrapped_error.sse",
                      "clean_close", cut=99)]
    entries += streaming_entries("anthropic", "anthropic-messages",
                                 "anthropic-messages/text_complete.sse",
                                 "anthropic-messages/tool_complete.sse", "tool_input_delta:3",
                                 "anthropic_529.json", 529,
                                 stall="anthropic-messages/pings_only.sse")
    entries += [Entry("anthropic", "anthropic-messages",
                      "anthropic-messages/overloaded_mid_thinking.sse", "clean_close", cut=99),
                Entry("anthropic", "anthropic-messages", "anthropic-messages/after_finish_cut.sse",
                      "clean_close", cut=99)]
    entries += streaming_entries("gemini", "gemini", "gemini/text_complete.sse",
                                 "gemini/streamed_args_complete.sse", "tool_input_delta:2",
                                 "gemini_429.json", 429)
    entries += [Entry("gemini", "gemini", "gemini/function_call_complete.sse", "terminal"),
                Entry("gemini", "gemini", "gemini/text_complete.json", "terminal"),
                Entry("gemini", "gemini", "gemini/error_mid_stream.sse", "clean_close", cut=99)]
    entries += streaming_entries("ollama", "ollama-ndjson", "ollama-ndjson/chat_complete.ndjson",
                                 "ollama-ndjson/chat_tool_calls.ndjson", "tool_call:1",
                                 "ollama_500.json", 500)
    entries += [Entry("ollama", "ollama-generate", "ollama-ndjson/generate_complete.ndjson",
                      "terminal"),
                Entry("ollama", "ollama-ndjson", "ollama-ndjson/chat_error.ndjson",
                      "clean_close", cut=99),
                Entry("ollama", "openai-chat", "openai-chat/ollama_whole_call.sse", "terminal")]
    # OpenAI-compatible providers: where reasoning and usage travel differs.
    entries += [
        Entry("openrouter", "openai-chat", "openai-chat/reasoning_openrouter.sse", "terminal"),
        Entry("openrouter", "openai-chat", "openai-chat/reasoning_openrouter.sse", "reset"),
        Entry("openrouter", "openai-chat", "openai-chat/openrouter_error_finish.sse",
              "clean_close", cut=99),
        Entry("openrouter", "openai-chat", "openrouter_processing_only", "stalled", cut=99),
        Entry("openrouter", "openai-chat", "json/openrouter_429.json", "http_error", status=429,
              headers=(("retry-after", "30"),)),
        Entry("deepseek", "openai-chat", "openai-chat/reasoning_deepseek.sse", "terminal"),
        Entry("deepseek", "openai-chat", "openai-chat/reasoning_deepseek.sse", "truncated"),
        Entry("moonshot", "openai-chat", "openai-chat/moonshot_usage.sse", "terminal"),
    ]
    # Whole JSON replies (no streaming), and how they break.
    unary = {"stream": False}
    entries += [
        Entry("openai", "openai-chat", "json/openai_chat.json", "terminal", request=unary),
        Entry("openai", "openai-chat", "json/openai_chat_tool_calls.json", "terminal",
              request=unary),
        Entry("openai", "openai-responses", "json/openai_responses.json", "terminal",
              request=unary),
        Entry("openai", "openai-responses", "json/openai_responses_incomplete.json", "terminal",
              request=unary),
        Entry("openai", "openai-chat", "json/openai_400_context.json", "http_error", status=400,
              request=unary),
        Entry("openai", "openai-chat", "json/openai_chat.json", "truncated", cut=0,
              request=unary),
        Entry("anthropic", "anthropic-messages", "json/anthropic.json", "terminal",
              request=unary),
        Entry("gemini", "gemini-unary", "json/gemini.json", "terminal"),
        Entry("ollama", "ollama-ndjson", "json/ollama_chat.json", "terminal", request=unary),
    ]
    return entries


def build(out: Path) -> list[Path]:
    """Write the corpus into `out` (which should hold no samples yet)."""
    written = []
    highest: dict[str, int] = {}
    for index, entry in enumerate(corpus(), 1):
        sample = build_sample(record(entry, f"corpus{index:03d}"))
        written.append(write_sample(out, sample, highest))
    return written


def matrix_section(folder: Path) -> str:
    samples, skipped = load_samples([folder])
    if skipped:
        raise SystemExit(f"unreadable samples: {skipped}")
    return f"{MATRIX_BEGIN}\n{render_markdown(build_matrix(samples))}{MATRIX_END}"


def with_matrix(readme: str, section: str) -> str:
    pattern = re.compile(re.escape(MATRIX_BEGIN) + ".*?" + re.escape(MATRIX_END), re.S)
    if not pattern.search(readme):
        raise SystemExit(f"{README} has no {MATRIX_BEGIN} ... {MATRIX_END} section")
    return pattern.sub(lambda _: section, readme)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed corpus instead of writing")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as temp:
        fresh = Path(temp)
        build(fresh)
        readme = with_matrix(README.read_text(), matrix_section(fresh))
        new = {path.name: path.read_text() for path in fresh.glob(f"*{SUFFIX}")}
        old = {path.name: path.read_text() for path in HERE.glob(f"*{SUFFIX}")}
        if args.check:
            stale = sorted(name for name in new.keys() | old.keys()
                           if new.get(name) != old.get(name))
            if readme != README.read_text():
                stale.append("README.md (matrix table)")
            for name in stale:
                print(f"out of date: samples/{name}", file=sys.stderr)
            if stale:
                print("run `python tests/make_corpus.py` and commit the result",
                      file=sys.stderr)
            return 1 if stale else 0
        for name in old.keys() - new.keys():
            (HERE / name).unlink()
        for name, text in new.items():
            (HERE / name).write_text(text)
        README.write_text(readme)
    print(f"wrote {len(new)} samples to {HERE} and the matrix to {README.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
