"""`streamtap replay` end to end: a stream recorded through the proxy, made a sample, replayed and
recorded through the proxy again, looks the same (counts, terminal, boundary, phase, frames,
timing), ends the same way, and real clients fail (or succeed) against it the way they did."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.diagnostics.samples.format import build_sample
from streamtap.proxy.replay.choose import Chooser, read_ask, request_model
from streamtap.proxy.replay.playable import Loaded
from tests.fakeprovider import Scenario
from tests.proxyproc import REPO, ProxyProcess, StreamtapProcess, new_session
from tests.streams import chat_text_stream
from tests.support import fixture
from tests.test_endings import httpx_read, node_read
from tests.test_faults import error_chain

IDLE_TIMEOUT_MS = 600  # the proxy's idle watchdog: what makes a `stalled` sample
CLIENT_PATIENCE_S = 0.35  # a `client_gone` client leaves after this much silence
DELAY_S = 0.03  # between chunks: gaps of tens of ms, so frame timing is measurable


class ReplayProcess(StreamtapProcess):
    """`streamtap replay` as a real subprocess, like ProxyProcess runs `serve`."""

    def __init__(self, workdir: Path, *args: str, port: int = 0):
        super().__init__(workdir, ["replay", *args, "--port", str(port)], "replay",
                         ready="pick one")  # the banner's last line

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- the streams: every dialect, every ending ----------------------------------------------------
def sse_frames(data: bytes) -> list[bytes]:
    return [piece for piece in re.findall(rb".*?(?:\r\n\r\n|\n\n|\Z)", data, re.S) if piece]


def array_elements(data: bytes) -> list[bytes]:
    return [piece for piece in re.split(rb"(?<=\n\},)", data) if piece]


@dataclass(frozen=True)
class Case:
    name: str
    path: str  # after the fake provider's /s/<scenario> prefix
    chunks: tuple[bytes, ...]
    ending: str  # the fake provider's: clean | reset | fin | stall
    expect: str  # the sample's ending
    content_type: str = "text/event-stream"
    status: int = 200
    tools: tuple[str, ...] = ()
    headers: tuple[tuple[str, str], ...] = (("x-request-id", "req_replay_test"),)


STREAMS = {  # dialect: (path, frames of a complete stream, content type, tool names)
    "openai-chat": ("/v1/chat/completions", sse_frames(fixture("openai-chat", "tool_call.sse")),
                    "text/event-stream", ("get_weather",)),
    "openai-responses": ("/v1/responses",
                         sse_frames(fixture("openai-responses", "function_call.sse")),
                         "text/event-stream", ("get_weather",)),
    "anthropic-messages": ("/v1/messages",
                           sse_frames(fixture("anthropic-messages", "tool_complete.sse")),
                           "text/event-stream", ("get_weather",)),
    "gemini": ("/v1beta/models/gemini-2.5-flash:streamGenerateContent",
               sse_frames(fixture("gemini", "text_complete.sse")), "text/event-stream", ()),
    "gemini-array": ("/v1beta/models/gemini-2.5-flash:streamGenerateContent",
                     array_elements(fixture("gemini", "text_complete.json")),
                     "application/json", ()),
    "ollama-ndjson": ("/api/chat",
                      fixture("ollama-ndjson", "chat_tool_calls.ndjson").splitlines(True),
                      "application/x-ndjson", ("get_weather",)),
}
ERRORS = {"openai-chat": ("openai_429_rate_limit.json", 429),
          "openai-responses": ("openai_500.json", 500),
          "anthropic-messages": ("anthropic_529.json", 529),
          "gemini": ("gemini_429.json", 429), "ollama-ndjson": ("ollama_500.json", 500)}


def build_cases() -> list[Case]:
    cases = []
    for dialect, (path, frames, content_type, tools) in STREAMS.items():
        cut = frames[:max(len(frames) // 2, 3)]  # no terminal in the first half
        half = frames[len(cut)][:len(frames[len(cut)]) // 2]
        stream = dict(path=path, content_type=content_type, tools=tools)
        cases += [Case(f"{dialect}__terminal", chunks=tuple(frames), ending="clean",
                       expect="terminal", **stream),
                  Case(f"{dialect}__clean_close", chunks=tuple(cut), ending="clean",
                       expect="clean_close", **stream),
                  Case(f"{dialect}__reset", chunks=tuple(cut), ending="reset", expect="reset",
                       **stream),
                  Case(f"{dialect}__truncated", chunks=(*cut, half), ending="fin",
                       expect="truncated", **stream),
                  Case(f"{dialect}__stalled", chunks=tuple(cut[:3]), ending="stall",
                       expect="stalled", **stream)]
        if dialect in ERRORS:
            name, status = ERRORS[dialect]
            cases.append(Case(f"{dialect}__http_error", path,
                              (fixture("json", name),), "clean", "http_error",
                              "application/json", status,
                              headers=(("retry-after", "7"), ("x-request-id", "req_err"))))
    cases += [
        Case("json__terminal", "/v1/chat/completions",
             (fixture("json", "openai_chat_tool_calls.json"),), "clean", "terminal",
             "application/json"),
        Case("json-anthropic__terminal", "/v1/messages", (fixture("json", "anthropic.json"),),
             "clean", "terminal", "application/json"),
        Case("openai-chat__client_gone", "/v1/chat/completions",
             tuple(chat_text_stream(3, done=False)[:3]), "stall", "client_gone"),
    ]
    return cases


CASES = build_cases()


def request_body(name: str, tools: tuple[str, ...]) -> dict:
    return {"model": name, "stream": True, "messages": [],
            "tools": [{"type": "function", "function": {"name": tool}} for tool in tools]}


def read_stream(url: str, body: dict, session: str, leave_when_silent: bool = False) -> dict:
    """Read a stream with httpx; a `leave_when_silent` client gives up after a short silence."""
    seen = {"bytes": b"", "error": None, "status": None}
    read_timeout = CLIENT_PATIENCE_S if leave_when_silent else 10.0
    try:
        with httpx.Client(timeout=httpx.Timeout(10.0, read=read_timeout)) as client:
            with client.stream("POST", url, json=body,
                               headers={"x-streamtap-session": session}) as resp:
                seen["status"] = resp.status_code
                for chunk in resp.iter_raw():
                    seen["bytes"] += chunk
    except httpx.HTTPError as exc:
        seen["error"] = type(exc).__name__
    return seen


@dataclass
class Trips:
    by_name: dict
    samples_dir: Path
    replay: "ReplayProcess"
    prefixes: dict  # case name -> the fake provider's path prefix it was recorded under


@dataclass
class RoundTrip:
    case: Case
    original: dict  # the sample of the stream from the fake provider
    replayed: dict | None = None  # the sample of the same stream from replay
    client_original: dict | None = None
    client_replayed: dict | None = None


@pytest.fixture(scope="module")
def trips(fake, tmp_path_factory):
    """Every case recorded from the fake provider, written as samples, replayed by one
    `streamtap replay` and recorded again, all through one proxy."""
    work = tmp_path_factory.mktemp("replay")
    replay_port, dead_port = free_port(), free_port()
    proxy = ProxyProcess(work, {"fake": fake.url, "dead": f"http://127.0.0.1:{dead_port}",
                                "rp": f"http://127.0.0.1:{replay_port}"},
                         "--idle-timeout-ms", str(IDLE_TIMEOUT_MS))
    samples_dir = work / "samples"
    samples_dir.mkdir()
    prefixes = {case.name: fake.add(Scenario(list(case.chunks), ending=case.ending,
                                             status=case.status,
                                             content_type=case.content_type,
                                             headers=list(case.headers), delay_s=DELAY_S))
                for case in CASES}

    def record(case: Case) -> RoundTrip:
        session = new_session()
        seen = read_stream(proxy.url("fake") + prefixes[case.name] + case.path,
                           request_body(case.name, case.tools), session,
                           leave_when_silent=case.expect == "client_gone")
        return RoundTrip(case, build_sample(record_from_dict(proxy.record(session))), client_original=seen)

    def no_response() -> RoundTrip:
        session = new_session()
        case = Case("no_response", "/v1/chat/completions", (), "clean", "no_response")
        seen = read_stream(proxy.url("dead") + case.path, request_body(case.name, ()), session)
        return RoundTrip(case, build_sample(record_from_dict(proxy.record(session))), client_original=seen)

    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            results = list(pool.map(record, CASES)) + [no_response()]
        for trip in results:
            path = samples_dir / f"{trip.case.name}.sample.json"
            path.write_text(json.dumps(trip.original))
        replay = ReplayProcess(work, str(samples_dir), port=replay_port)
        try:
            def again(trip: RoundTrip) -> RoundTrip:
                session = new_session()
                prefix = prefixes.get(trip.case.name, "")
                trip.client_replayed = read_stream(
                    proxy.url("rp") + prefix + trip.case.path,
                    request_body(trip.case.name, trip.case.tools), session,
                    leave_when_silent=trip.case.expect == "client_gone")
                trip.replayed = build_sample(record_from_dict(proxy.record(session)))
                return trip

            with ThreadPoolExecutor(max_workers=3) as pool:
                trips = {trip.case.name: trip for trip in pool.map(again, results)}
            yield Trips(trips, samples_dir, replay, prefixes)
        finally:
            replay.stop()
    finally:
        proxy.stop()


def _same_stream(original: dict, replayed: dict) -> None:
    for key in ("event_counts", "terminal", "finish_reason"):
        assert replayed["stream"][key] == original["stream"][key], key
    for key in ("boundary", "phase"):
        assert replayed["outcome"][key] == original["outcome"][key], key
    assert replayed["ending"] == original["ending"]
    assert replayed["status"] == original["status"]
    assert [frame[2] for frame in replayed["frames"]] == \
        [frame[2] for frame in original["frames"]]
    assert [frame[1] for frame in replayed["frames"]] == \
        [frame[1] for frame in original["frames"]], "frames keep their original sizes"


def _same_timing(original: dict, replayed: dict) -> None:
    """Each frame within 20% of the original's time since the headers, plus 20 ms for three
    processes sharing two cores (the original's own timing has that noise too). An unfinished
    frame is timed when the connection ends, which first waits for the peer to acknowledge every
    byte (sockets.drain): a delayed ACK on loopback adds up to 40 ms more."""
    for before, after in zip(original["frames"], replayed["frames"]):
        slack = 60.0 if before[2] == "unterminated" else 20.0
        assert abs(after[0] - before[0]) <= 0.2 * before[0] + slack, (before, after)
    if original["frames"]:  # and the stream as a whole takes as long, gaps and stalls included
        assert abs(replayed["timing"]["end_ms"] - original["timing"]["end_ms"]) <= \
            0.2 * original["timing"]["end_ms"] + 60.0


@pytest.mark.parametrize("name", [case.name for case in CASES] + ["no_response"])
def test_round_trip_through_replay(trips, name):
    trip = trips.by_name[name]
    original, replayed = trip.original, trip.replayed
    assert original["ending"] == trip.case.expect  # the scenario shows the ending it is for
    _same_stream(original, replayed)
    _same_timing(original, replayed)
    if original["ending"] == "http_error":
        assert replayed["error"] == original["error"]  # status, provider error type and code
    seen_before, seen_after = trip.client_original, trip.client_replayed
    assert seen_after["error"] == seen_before["error"]  # the client fails the same way
    assert seen_after["status"] == seen_before["status"]
    assert b"CANARY" not in seen_after["bytes"]  # the replay is made of filler


def test_round_trip_covers_every_dialect_and_ending(trips):
    seen = {(trip.original["dialect"], trip.original["ending"])
            for trip in trips.by_name.values()}
    for dialect in ("openai-chat", "openai-responses", "anthropic-messages", "gemini",
                    "ollama-ndjson"):
        for ending in ("terminal", "clean_close", "reset", "truncated", "stalled"):
            assert (dialect, ending) in seen
    endings = {trip.original["ending"] for trip in trips.by_name.values()}
    assert endings >= {"terminal", "clean_close", "reset", "truncated", "stalled",
                       "client_gone", "http_error", "no_response"}
    assert ("json", "terminal") in seen
    # a stalled stream is long: a stall in the replay is waited, not skipped
    stalled = trips.by_name["openai-chat__stalled"].replayed
    assert stalled["timing"]["end_ms"] >= IDLE_TIMEOUT_MS


def test_replay_sends_the_samples_headers_and_an_honest_length(trips):
    with httpx.Client(timeout=10) as client:
        resp = client.post(trips.replay.url + "/v1/chat/completions",
                           json={"model": "openai-chat__http_error"})
        assert resp.status_code == 429
        assert resp.headers["retry-after"] == "7" and resp.headers["x-request-id"] == "req_err"
        assert resp.json()["error"]["code"] == "rate_limit_exceeded"  # kept by the shape
        assert int(resp.headers["content-length"]) == len(resp.content)
        resp = client.post(trips.replay.url + "/v1/chat/completions",
                           json={"model": "json__terminal"})
        assert resp.headers["content-type"] == "application/json"
        assert int(resp.headers["content-length"]) == len(resp.content)
        assert resp.json()["choices"][0]["finish_reason"] == "tool_calls"
        with client.stream("POST", trips.replay.url + "/v1/chat/completions",
                           json={"model": "openai-chat__terminal"}) as resp:
            body = b"".join(resp.iter_raw())
        assert "content-length" not in resp.headers  # a stream is chunked, as the original
        assert resp.headers["content-type"] == "text/event-stream"
        assert resp.headers["x-request-id"] == "req_replay_test"
        assert body.endswith(b"data: [DONE]\n\n")


def test_speed_scales_the_timing(trips, tmp_path):
    name = "anthropic-messages__terminal"
    sample = trips.by_name[name].original
    duration_ms = sample["frames"][-1][0]
    assert duration_ms > 200
    fast = ReplayProcess(tmp_path, str(trips.samples_dir / f"{name}.sample.json"),
                         "--speed", "4")
    try:
        with httpx.Client(timeout=10) as client:
            started = time.monotonic()
            with client.stream("POST", fast.url + "/v1/messages", json={"stream": True}) as resp:
                body = b"".join(resp.iter_raw())
            took_ms = (time.monotonic() - started) * 1000
    finally:
        fast.stop()
    assert body.endswith(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
    assert duration_ms / 4 * 0.8 <= took_ms <= duration_ms / 4 * 1.2 + 60


# -- real clients against replay -----------------------------------------------------------------
def test_node_fetch_sees_terminated_for_a_replayed_reset(trips, node):
    name = "openai-chat__reset"
    sample = trips.by_name[name].original
    assert sample["ending"] == "reset"
    # no model in the request: the sample is the one recorded for this path
    # the request names the sample in a header (its body names no model)
    seen = node_read(node, trips.replay.url + trips.prefixes[name] + "/v1/chat/completions",
                     {"x-streamtap-sample": name})
    assert seen["status"] == 200
    assert seen["error"]["name"] == "TypeError"
    assert seen["error"]["message"] == "terminated"
    assert seen["error"]["cause"]["code"] in ("ECONNRESET", "UND_ERR_SOCKET")
    assert seen["bytes"] == sum(frame[1] for frame in sample["frames"])


def test_a_replayed_no_response_ends_as_the_original_did(trips, node, tmp_path):
    """A reset before the response is replayed as one (streamtap passes it on as a reset); a
    refused original as a close without headers (which streamtap answers 502, as it did)."""
    refused = trips.by_name["no_response"].original
    assert refused["error"]["code"] == "ECONNREFUSED"
    samples = tmp_path / "samples"
    samples.mkdir()
    (samples / "refused.sample.json").write_text(json.dumps(refused))
    reset = {**refused, "error": {**refused["error"], "where": "upstream_response",
                                  "code": "ECONNRESET"}}
    (samples / "early_reset.sample.json").write_text(json.dumps(reset))
    replay = ReplayProcess(tmp_path, str(samples))
    try:
        seen = {name: node_read(node, replay.url + "/v1/chat/completions",
                                {"x-streamtap-sample": name})
                for name in ("early_reset", "refused")}
    finally:
        replay.stop()
    assert seen["early_reset"]["status"] is None and seen["refused"]["status"] is None
    assert seen["early_reset"]["error"]["cause"]["code"] == "ECONNRESET"
    assert seen["refused"]["error"]["cause"]["code"] == "UND_ERR_SOCKET"  # other side closed


def test_openai_sdk_completes_silently_for_a_replayed_clean_early_close(trips):
    import openai

    name = "openai-chat__clean_close"
    sample = trips.by_name[name].original
    assert sample["ending"] == "clean_close" and sample["stream"]["finish_reason"] is None
    client = openai.OpenAI(base_url=trips.replay.url + "/v1", api_key="sk-test",
                           max_retries=0)
    chunks = list(client.chat.completions.create(model=name, messages=[], stream=True))
    assert len(chunks) == len(sample["frames"])  # no exception, and no finish reason either
    assert all(choice.finish_reason is None for chunk in chunks for choice in chunk.choices)
    calls = [call for chunk in chunks for choice in chunk.choices
             for call in choice.delta.tool_calls or []]
    assert calls and calls[0].id.startswith("call_")  # a call began, and never finished


# -- choosing a sample, the banner, bad files ------------------------------------------------------
def test_banner_names_the_samples(trips):
    banner = trips.replay.banner
    assert banner.startswith(f"streamtap replay listening on http://127.0.0.1:"
                             f"{trips.replay.port}")
    assert f"samples: {len(trips.by_name)} loaded (speed 1); each request gets a complete " \
        "sample of the request's dialect and stream flag" in banner
    assert all(name in banner for name in trips.by_name)


def _served(replay: ReplayProcess, path: str, model: str | None = None) -> str:
    """Which of the two chat samples answered: the reset one, or the clean early close."""
    body = {"stream": True, **({"model": model} if model else {})}
    try:
        with httpx.Client(timeout=10) as client:
            with client.stream("POST", replay.url + path, json=body) as resp:
                data = b"".join(resp.iter_raw())
    except httpx.HTTPError:
        return "reset"
    return "clean_close" if resp.status_code == 200 and data else f"HTTP {resp.status_code}"


def test_requests_pick_by_model_then_path_then_dialect_and_loop(trips, tmp_path):
    files = [str(trips.samples_dir / f"openai-chat__{ending}.sample.json")
             for ending in ("reset", "clean_close")]
    looped = ReplayProcess(tmp_path, *files, "--cycle")
    try:
        chat = "/v1/chat/completions"
        assert _served(looped, "/elsewhere" + chat, "openai-chat__clean_close") == "clean_close"
        assert _served(looped, trips.prefixes["openai-chat__reset"] + chat) == "reset"
        # by dialect, in the order given; --cycle wraps around
        assert [_served(looped, chat) for _ in range(3)] == ["reset", "clean_close", "reset"]
        with httpx.Client(timeout=10) as client:
            resp = client.post(looped.url + "/v1/embeddings", json={"model": "x"})
        assert resp.status_code == 404  # nothing for this path or dialect: say what is loaded
        assert "openai-chat__reset" in resp.json()["error"]["message"]
    finally:
        looped.stop()


def _loaded(name: str, path: str, ending: str = "terminal", stream: object = True,
            tools: bool = False, boundary: str = "none", dialect: str = "openai-chat",
            provider: str = "openai", named_file: bool = False) -> Loaded:
    sample = {"dialect": dialect, "provider": provider, "ending": ending,
              "request": {"path": path, "stream": stream}, "outcome": {"boundary": boundary},
              "stream": {"tool_calls": [{"index": 0}] if tools else []}}
    return Loaded(name, Path(f"{name}.sample.json"), sample, None, [], named_file=named_file)


def _ask(path: str, body: dict, **headers: str):
    return read_ask("POST", path, json.dumps(body).encode(), headers)


def test_the_default_is_a_complete_sample_of_the_dialect_and_stream_flag():
    samples = [_loaded("a-reset", "/v1/chat/completions", "reset"),
               _loaded("b-error-terminal", "/v1/chat/completions", boundary="provider_error"),
               _loaded("c-text", "/v1/chat/completions"),
               _loaded("d-tool", "/v1/chat/completions", tools=True),
               _loaded("e-json", "/v1/chat/completions", stream=False, dialect="json"),
               _loaded("f-responses", "/v1/responses", dialect="openai-responses"),
               _loaded("g-responses-json", "/v1/responses", stream=False, dialect="json")]
    chooser = Chooser(samples)
    chat = "/v1/chat/completions"
    # the same answer every time: never the reset, never the error, never the next one
    picks = {chooser.choose(_ask(chat, {"stream": True})).loaded.name for _ in range(3)}
    assert picks == {"c-text"}
    tools = {"stream": True, "tools": [{"type": "function", "function": {"name": "x"}}]}
    assert chooser.choose(_ask(chat, tools)).loaded.name == "d-tool"
    assert chooser.choose(_ask(chat, {})).loaded.name == "e-json"  # no stream flag: whole
    assert chooser.choose(_ask("/v1/responses", {"stream": True})).loaded.name == "f-responses"
    assert chooser.choose(_ask("/v1/responses", {})).loaded.name == "g-responses-json"
    # another ending only when asked: a sample name or an ending in the header, or the model
    assert chooser.choose(_ask(chat, {"stream": True},
                               **{"x-streamtap-sample": "reset"})).loaded.name == "a-reset"
    assert chooser.choose(_ask(chat, {"stream": True},
                               **{"x-streamtap-sample": "b-error-terminal"})
                          ).loaded.name == "b-error-terminal"
    assert chooser.choose(_ask(chat, {"model": "a-reset"})).loaded.name == "a-reset"
    assert Chooser(samples, ending="reset").choose(_ask(chat, {"stream": True})
                                                   ).loaded.name == "a-reset"
    refused = chooser.choose(_ask(chat, {}, **{"x-streamtap-sample": "nope"}))
    assert "'nope' is neither a loaded sample nor an ending" in refused
    missing = chooser.choose(_ask("/v1/messages", {"stream": True}))
    assert "no complete sample of anthropic-messages (streamed)" in missing


def test_a_file_named_on_the_command_line_answers_its_dialect_whatever_its_ending():
    chat = "/v1/chat/completions"
    samples = [_loaded("a-reset", chat, "reset", named_file=True),
               _loaded("b-json", chat, stream=False, dialect="json", named_file=True),
               _loaded("c-text", chat), _loaded("m-text", "/v1/messages",
                                                dialect="anthropic-messages")]
    chooser = Chooser(samples)
    choice = chooser.choose(_ask(chat, {"stream": True}))
    assert (choice.loaded.name, choice.why) == (
        "a-reset", "named on the command line for openai-chat (streamed)")
    assert chooser.choose(_ask(chat, {})).loaded.name == "b-json"  # the stream flag ranks first
    # another dialect: the folder's complete sample; an ending asked for: that ending
    assert chooser.choose(_ask("/v1/messages", {"stream": True})).loaded.name == "m-text"
    assert chooser.choose(_ask(chat, {"stream": True}, **{"x-streamtap-sample": "complete"})
                          ).loaded.name == "c-text"
    assert Chooser(samples, ending="terminal").choose(_ask(chat, {"stream": True})
                                                      ).loaded.name == "c-text"
    # the one file named, even when the request's stream flag differs from its own
    only = Chooser([_loaded("a-reset", chat, "reset", named_file=True)])
    assert only.choose(_ask(chat, {})).loaded.name == "a-reset"
    assert isinstance(only.choose(_ask("/v1/embeddings", {})), str)


def test_cycle_hands_out_the_next_sample_for_the_path_then_the_dialect():
    samples = [_loaded(name, path) for name, path in (
        ("a", "/v1/chat/completions"), ("b", "/v1/chat/completions"),
        ("c", "/x/v1/chat/completions"), ("m", "/v1/messages"))]
    chooser = Chooser(samples, cycle=True)
    ask = _ask("/v1/chat/completions", {"stream": True})
    assert [chooser.choose(ask).loaded.name for _ in range(3)] == ["a", "b", "a"]
    other = _ask("/y/v1/chat/completions", {})
    assert [chooser.choose(other).loaded.name for _ in range(2)] == ["a", "b"]  # by dialect
    assert chooser.choose(_ask("/v1/chat/completions", {"model": "m"})).loaded.name == "m"
    assert isinstance(chooser.choose(_ask("/v1/embeddings", {})), str)
    assert request_model(b"{}", "/v1beta/models/gem-x:streamGenerateContent") == "gem-x"


@pytest.mark.e2e
def test_bad_input_is_refused_with_the_file_named(tmp_path):
    def replay(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "streamtap", "replay", *args, "--port", "0"],
                              capture_output=True, text=True, timeout=30, cwd=tmp_path,
                              )

    bad = tmp_path / "broken.sample.json"
    bad.write_text('{"schema_version": 1}')
    out = replay(str(bad))
    assert out.returncode == 2
    assert str(bad) in out.stderr and "not a streamtap sample" in out.stderr
    bad.write_text("{not json")
    assert str(bad) in replay(str(bad)).stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    out = replay(str(empty))
    assert out.returncode == 2 and "no *.sample.json files" in out.stderr
    out = replay(str(tmp_path / "missing.sample.json"))
    assert out.returncode == 2 and "no such file" in out.stderr
    out = replay(str(bad), "--speed", "0")
    assert out.returncode == 2 and "--speed" in out.stderr


# -- a sample named as a file is served whatever its ending ---------------------------------------
CORPUS = REPO / "samples"
ANTHROPIC_RESET = "anthropic__anthropic-messages__reset__1"


def _anthropic_stream(replay: ReplayProcess) -> tuple[list[str], Exception | None]:
    """What the official anthropic SDK saw of one streamed message: its event types, and the
    exception that ended the stream (None when it ended normally)."""
    import anthropic

    client = anthropic.Anthropic(base_url=replay.url, api_key="sk-ant-test", max_retries=0)
    seen: list[str] = []
    try:
        with client.messages.stream(model="claude-test", max_tokens=64,
                                    messages=[{"role": "user", "content": "x"}]) as stream:
            for event in stream:
                seen.append(event.type)
    except Exception as exc:  # noqa: BLE001 - the caller asserts which one
        return seen, exc
    return seen, None


@pytest.mark.e2e
def test_a_sample_named_as_a_file_is_served_whatever_its_ending(tmp_path):
    replay = ReplayProcess(tmp_path, str(CORPUS / f"{ANTHROPIC_RESET}.sample.json"),
                           "--speed", "20")
    try:
        assert "each request gets the sample named on the command line for its dialect, " \
               "whatever its ending" in replay.banner
        seen, error = _anthropic_stream(replay)
        # the reset itself, mid tool call (not a 404 `streamtap_no_sample`)
        assert any(name.endswith(".ReadError") for name in error_chain(error)), repr(error)
        assert seen[0] == "message_start" and "content_block_start" in seen
        assert "message_stop" not in seen
    finally:
        replay.stop()
    assert f"-> {ANTHROPIC_RESET} (reset; named on the command line" in replay.log()


@pytest.mark.e2e
def test_a_folder_still_means_complete_by_default(tmp_path):
    folder = tmp_path / "anthropic"
    folder.mkdir()
    for name in (ANTHROPIC_RESET, "anthropic__anthropic-messages__terminal__1"):
        (folder / f"{name}.sample.json").write_bytes((CORPUS / f"{name}.sample.json").read_bytes())
    replay = ReplayProcess(tmp_path, str(folder), "--speed", "20")
    try:
        assert "each request gets a complete sample of the request's dialect and stream " \
               "flag" in replay.banner
        seen, error = _anthropic_stream(replay)
        assert error is None and seen[-1] == "message_stop"
    finally:
        replay.stop()
    # a file and a folder: the file answers its dialect, the folder the others
    chat = CORPUS / "openai__openai-chat__terminal__1.sample.json"
    both = ReplayProcess(tmp_path, str(chat), str(folder), "--speed", "20")
    try:
        assert "named on the command line for its dialect, whatever its ending; else a " \
               "complete sample" in both.banner
        seen, error = _anthropic_stream(both)
        assert error is None and seen[-1] == "message_stop"
        with httpx.Client(timeout=10) as client:
            resp = client.post(both.url + "/v1/chat/completions",
                               json={"stream": True, "messages": []})
        assert resp.status_code == 200 and resp.content.endswith(b"data: [DONE]\n\n")
    finally:
        both.stop()
    log = both.log()
    assert "-> anthropic__anthropic-messages__terminal__1 (terminal; complete sample of " \
           "anthropic-messages (streamed))" in log
    assert "-> openai__openai-chat__terminal__1 (terminal; named on the command line" in log


# -- the predictable default, end to end; --ready-json ---------------------------------------------
def _ready(args: list[str], cwd: Path) -> tuple[subprocess.Popen, dict, Path]:
    """Start `streamtap ARGS --port 0 --ready-json`; its first stdout line, and its stderr file."""
    log = cwd / f"ready-{uuid_hex()}.log"
    process = subprocess.Popen([sys.executable, "-m", "streamtap", *args, "--port", "0",
                                "--ready-json"], cwd=cwd, stdout=subprocess.PIPE,
                               stderr=log.open("wb"))
    line = process.stdout.readline().decode()
    assert line, log.read_text()
    return process, json.loads(line), log


def uuid_hex() -> str:
    import uuid

    return uuid.uuid4().hex[:8]


@pytest.mark.e2e
def test_ready_json_prints_one_line_and_the_banner_goes_to_stderr(tmp_path):
    replay, ready, replay_log = _ready(["replay"], tmp_path)
    try:
        assert ready == {"url": f"http://127.0.0.1:{ready['port']}", "port": ready["port"]}
        assert ready["port"] > 0
        serve, proxy_ready, serve_log = _ready(
            ["serve", "--route", f"openai={ready['url']}", "--trace-dir",
             str(tmp_path / "traces")], tmp_path)
        try:
            assert set(proxy_ready) == {"url", "port"}
            with httpx.Client(timeout=10) as client:
                # no fault, no sample named: a complete stream, the same one every time
                bodies = [client.post(proxy_ready["url"] + "/openai/v1/chat/completions",
                                      json={"model": "gpt-4o-mini", "stream": True,
                                            "messages": []}).content for _ in range(3)]
                assert bodies[0] == bodies[1] == bodies[2]
                assert bodies[0].endswith(b"data: [DONE]\n\n")
                # a Responses stream is a Responses stream (not a JSON body)
                resp = client.post(proxy_ready["url"] + "/openai/v1/responses",
                                   json={"model": "gpt-4o-mini", "stream": True, "input": "x"})
                assert resp.headers["content-type"].startswith("text/event-stream")
                assert b"event: response.completed" in resp.content
                whole = client.post(proxy_ready["url"] + "/openai/v1/responses",
                                    json={"model": "gpt-4o-mini", "input": "x"})
                assert whole.json()["status"] == "completed"
        finally:
            serve.send_signal(signal.SIGTERM)
            serve.wait(15)
        assert serve.stdout.read() == b""  # nothing after the ready line
        assert "streamtap 0.1.0 listening on" in serve_log.read_text()
    finally:
        replay.send_signal(signal.SIGTERM)
        replay.wait(15)
    banner = replay_log.read_text()
    assert "each request gets a complete sample of the request's dialect" in banner
    assert "-> openai__openai-chat__terminal__1 (terminal; complete sample of openai-chat " \
           "(streamed))" in banner
    assert "-> openai__openai-responses__terminal__1 (terminal; complete sample of " \
           "openai-responses (streamed))" in banner
    assert "-> openai__json__terminal__3 (terminal; complete sample of openai-responses " \
           "(whole))" in banner


@pytest.mark.e2e
def test_ending_flag_serves_that_ending_and_refuses_one_no_sample_has(tmp_path):
    replay, ready, _ = _ready(["replay", "--ending", "reset"], tmp_path)
    try:
        received, error = httpx_read(ready["url"] + "/v1/chat/completions",
                                     body={"stream": True, "messages": []})
        assert error is not None and received > 0  # a reset, mid-stream
        with httpx.Client(timeout=10) as client:
            resp = client.post(ready["url"] + "/v1/chat/completions", json={"messages": []})
        assert resp.status_code == 404  # no whole-reply sample ends with a reset: says so
        assert "no `reset` sample of openai-chat (whole)" in resp.json()["error"]["message"]
    finally:
        replay.send_signal(signal.SIGTERM)
        replay.wait(15)
    only_terminal = str(REPO / "samples" / "openai__openai-chat__terminal__1.sample.json")
    out = subprocess.run([sys.executable, "-m", "streamtap", "replay", only_terminal, "--ending",
                          "stalled", "--port", "0"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert "--ending stalled: none of the 1 samples loaded ends `stalled`" in out.stderr
