"""`streamtap repro` end to end, per dialect: a real failure recorded through streamtap with a real
client, made a repro folder, replayed through streamtap again, gives a record with the same break
(frame index, byte offset, phase), boundary, counts and terminal event, and the client raises the
same error class both times. The folder's own pytest test and node:test file pass, and the folder
holds none of the canaries the client and the provider sent."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import anthropic
import pytest

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.diagnostics.samples.repro import break_point
from streamtap.proxy.replay.repro import load_repro, kit_file_names
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream, chat_tool_stream, sse
from tests.support import fixture
from tests.test_readout_canaries import assert_clean
from tests.test_replay import ReplayProcess, STREAMS, free_port, sse_frames
from tests.tracefixtures import CANARY_KEY, CANARY_PROMPT, CANARY_QUERY

STREAMTAP = Path(sys.executable).parent / "streamtap"
CLIENT_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Failure:
    """A real failure of the fake upstream (or one injected by a fault rule), and the real client
    that meets it."""

    dialect: str
    chunks: tuple[bytes, ...]
    ending: str  # the fake provider's: reset | fin | clean | stall
    expect: str  # the repro's ending
    phase: str  # the phase the original record names
    status: int = 200
    content_type: str | None = None  # default: the dialect's stream type
    fault: str | None = None  # an x-streamtap-fault header for the original request
    dead: bool = False  # the upstream is a port nothing listens on: no response at all


def _cut(dialect: str, half: bool = False) -> tuple[bytes, ...]:
    """The first half of a dialect's complete stream (no terminal event), with half of the next
    frame when `half`."""
    frames = STREAMS[dialect][1]
    cut = frames[:max(len(frames) // 2, 3)]
    return tuple(cut) + ((frames[len(cut)][:len(frames[len(cut)]) // 2],) if half else ())


# One real failure per dialect, then the other endings a generated test must know.
FAILURES = {
    "openai-chat": Failure("openai-chat", tuple(chat_text_stream(6, done=False)[:5]), "reset",
                           "reset", "text"),
    "openai-responses": Failure("openai-responses", _cut("openai-responses", half=True), "fin",
                                "truncated", "tool_input"),
    "anthropic-messages": Failure("anthropic-messages", _cut("anthropic-messages"), "reset",
                                  "reset", "reasoning"),
    "gemini": Failure("gemini", _cut("gemini"), "clean", "clean_close", "text"),
    "ollama-ndjson": Failure("ollama-ndjson", _cut("ollama-ndjson", half=True), "fin",
                             "truncated", "after_tool_call"),
    "openai-chat__http_error": Failure("openai-chat", (fixture("json", "openai_500.json"),),
                                       "clean", "http_error", "before_response", status=500,
                                       content_type="application/json"),
    "anthropic-messages__stall": Failure("anthropic-messages", _cut("anthropic-messages"),
                                         "stall", "client_gone", "reasoning"),
    "anthropic-messages__error_event": Failure(
        "anthropic-messages", tuple(sse_frames(fixture("anthropic-messages",
                                                       "overloaded_mid_thinking.sse"))),
        "clean", "clean_close", "reasoning"),
    "openai-chat__error_event": Failure(
        "openai-chat", (*chat_text_stream(3, done=False)[:3],
                        sse({"error": {"message": "overloaded", "type": "server_error"}})),
        "stall", "client_gone", "text"),  # the SDK raises on the chunk and leaves
    "openai-chat__no_response": Failure("openai-chat", (), "clean", "no_response",
                                        "before_response", dead=True),
    # Injected: streamtap's own fault rule cuts a whole tool call mid-arguments.
    "openai-chat__injected": Failure("openai-chat", tuple(chat_tool_stream(5)), "clean",
                                     "reset", "tool_input",
                                     fault="reset; at=event:tool_input_delta:3"),
}
REAL = [name for name, failure in FAILURES.items() if failure.fault is None]


def call_client(dialect: str, base: str, path: str, session: str,
                fault: str | None = None) -> str | None:
    """The dialect's official SDK (httpx for Gemini and Ollama) reads one stream; the class of
    what it raised, or None. It sends a prompt and a key the repro must not hold."""
    headers = {"x-streamtap-session": session, **({"x-streamtap-fault": fault} if fault else {})}
    messages = [{"role": "user", "content": CANARY_PROMPT}]
    try:
        if dialect.startswith("openai"):
            sdk = openai.OpenAI(base_url=base + "/v1", api_key=CANARY_KEY, max_retries=0,
                                timeout=CLIENT_TIMEOUT_S, default_headers=headers)
            if dialect == "openai-responses":
                reply = sdk.responses.create(model="gpt-test", input=CANARY_PROMPT, stream=True,
                                             tools=[{"type": "function", "name": "get_weather",
                                                     "parameters": {}}])
            else:
                reply = sdk.chat.completions.create(model="gpt-test", messages=messages,
                                                    stream=True)
            for _ in reply:
                pass
        elif dialect == "anthropic-messages":
            sdk = anthropic.Anthropic(base_url=base, api_key=CANARY_KEY, max_retries=0,
                                      timeout=CLIENT_TIMEOUT_S, default_headers=headers)
            for _ in sdk.messages.create(model="claude-test", max_tokens=64, messages=messages,
                                         stream=True):
                pass
        else:
            with httpx.Client(timeout=CLIENT_TIMEOUT_S) as http:
                with http.stream("POST", f"{base}{path}?key={CANARY_QUERY}",
                                 json={"stream": True, "messages": messages},
                                 headers=headers) as resp:
                    for _ in resp.iter_raw():
                        pass
    except Exception as exc:  # noqa: BLE001 - which class is what the test compares
        return type(exc).__name__
    return None


@dataclass
class Trip:
    failure: Failure
    original: dict
    replayed: dict
    error_original: str | None
    error_replayed: str | None
    folder: Path
    cli: subprocess.CompletedProcess
    trace_dir: Path


@pytest.fixture(scope="module")
def trips(fake, tmp_path_factory) -> dict[str, Trip]:
    work = tmp_path_factory.mktemp("repro")
    ports = {name: free_port() for name in FAILURES}
    proxy = ProxyProcess(work, {"fake": fake.url, "dead": f"http://127.0.0.1:{free_port()}", **{
        f"rp-{name}": f"http://127.0.0.1:{port}" for name, port in ports.items()}})
    out: dict[str, Trip] = {}
    try:
        for name, failure in FAILURES.items():
            dialect = failure.dialect
            path, _, content_type, _ = STREAMS[dialect]
            prefix = fake.add(Scenario(list(failure.chunks), ending=failure.ending,
                                       status=failure.status,
                                       content_type=failure.content_type or content_type,
                                       delay_s=0.02))
            session = new_session()
            upstream = proxy.url("dead") if failure.dead else proxy.url("fake") + prefix
            error_original = call_client(dialect, upstream, path, session, failure.fault)
            original = proxy.record(session)
            folder = work / f"repro-{name}"
            cli = subprocess.run([str(STREAMTAP), "repro", original["trace_id"][:10],
                                  "--trace-dir", str(proxy.trace_dir), "--out", str(folder)],
                                 capture_output=True, text=True, timeout=60)
            assert cli.returncode == 0, cli.stderr
            replay = ReplayProcess(work, str(folder), port=ports[name])
            try:
                session = new_session()
                replayed_at = proxy.url(f"rp-{name}") + ("" if failure.dead else prefix)
                error_replayed = call_client(dialect, replayed_at, path, session)
                replayed = proxy.record(session)
            finally:
                replay.stop()
            out[name] = Trip(failure, original, replayed, error_original, error_replayed,
                                folder, cli, proxy.trace_dir)
    finally:
        proxy.stop()
    return out


def _same_break(trip: Trip) -> None:
    original, replayed = trip.original, trip.replayed
    assert original["outcome"]["phase"] == trip.failure.phase  # the failure is the one meant
    assert replayed["outcome"]["phase"] == original["outcome"]["phase"]
    assert break_point(record_from_dict(replayed)) == break_point(record_from_dict(original))  # frame index, byte offset
    for key in ("frame_count", "event_counts", "terminal", "finish_reason"):
        assert replayed["stream"][key] == original["stream"][key], key
    assert [f[2] for f in replayed["frames"]] == [f[2] for f in original["frames"]]
    assert trip.error_replayed == trip.error_original  # the client fails the same way


@pytest.mark.parametrize("name", REAL)
def test_a_replayed_repro_breaks_where_the_original_did(trips, name):
    trip = trips[name]
    _same_break(trip)
    assert trip.replayed["outcome"]["boundary"] == trip.original["outcome"]["boundary"]


def test_a_replayed_injected_fault_breaks_where_the_original_did(trips):
    """The same break, the same client error; the boundary reads as the upstream's (replay cannot
    be streamtap's own fault rule), and the manifest says so."""
    trip = trips["openai-chat__injected"]
    _same_break(trip)
    assert trip.original["outcome"]["boundary"] == "injected"
    assert trip.replayed["outcome"]["boundary"] == "transport"
    assert trip.error_original == "APIConnectionError"
    notes = load_repro(trip.folder).notes
    assert any("injected by a streamtap fault rule" in note for note in notes)


def test_the_endings_cover_what_the_generated_tests_know(trips):
    endings = {load_repro(trip.folder).ending for trip in trips.values()}
    assert endings >= {"reset", "truncated", "clean_close", "http_error", "client_gone",
                       "no_response"}
    event = trips["anthropic-messages__error_event"]
    assert event.original["stream"]["errors"] and event.error_original == "APIStatusError"
    event = trips["openai-chat__error_event"]
    assert event.original["stream"]["errors"] and event.error_original == "APIError"


@pytest.mark.parametrize("name", list(FAILURES))
def test_the_manifest_says_where_and_how_it_broke(trips, name):
    trip = trips[name]
    dialect = trip.failure.dialect
    case = load_repro(trip.folder)
    point = break_point(record_from_dict(trip.original))
    assert (case.dialect, case.ending, case.phase) == (dialect, trip.failure.expect,
                                                       trip.failure.phase)
    assert case.point == point
    if case.ending in ("http_error", "no_response"):  # the break came before the stream
        assert (point.frames, point.byte_offset) == (0, 0)
    else:
        assert point.byte_offset > 0
    assert point.unterminated == (trip.failure.ending == "fin")
    assert case.trace_id == trip.original["trace_id"]
    assert case.verdict["boundary"] == trip.original["outcome"]["boundary"]
    assert case.verdict["evidence"] == trip.original["outcome"]["evidence"]
    assert str(trip.folder) == trip.cli.stdout.strip()
    assert f"{dialect}, ending {case.ending} at frame {point.frame_index}" in trip.cli.stderr


def test_bad_input_is_refused_with_what_to_do(trips, tmp_path, capsys):
    from streamtap.proxy.cli import main

    trip = trips["gemini"]
    trace_dir = str(trip.trace_dir)
    assert main(["repro", "0" * 16, "--trace-dir", trace_dir]) == 2
    assert "no trace id starting with `0000000000000000`" in capsys.readouterr().err
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    assert main(["repro", trip.original["trace_id"], "--trace-dir", trace_dir,
                 "--out", str(taken)]) == 2
    assert f"{taken} holds other files; pick an empty folder with --out" in \
        capsys.readouterr().err
    assert sorted(path.name for path in taken.iterdir()) == ["notes.txt"]  # nothing lost
    other = trips["ollama-ndjson"].folder
    assert main(["repro", trip.original["trace_id"], "--trace-dir", trace_dir,
                 "--out", str(other)]) == 2
    assert f"holds the repro of trace {trips['ollama-ndjson'].original['trace_id']}" in \
        capsys.readouterr().err
    assert load_repro(other).dialect == "ollama-ndjson"  # left as it was
    # a repro folder is written again in place
    assert main(["repro", trip.original["trace_id"], "--trace-dir", trace_dir,
                 "--out", str(trip.folder)]) == 0
    assert load_repro(trip.folder).trace_id == trip.original["trace_id"]


def test_the_repro_folder_holds_no_content_or_secret(trips):
    for trip in trips.values():
        for path in trip.folder.iterdir():
            assert_clean(str(path), path.read_text())


def test_the_generated_pytest_files_pass(trips, tmp_path):
    for dialect, trip in trips.items():
        test_file = trip.folder / kit_file_names(trip.original["trace_id"])[0]
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              str(test_file)], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 0, f"{dialect}:\n{run.stdout}\n{run.stderr}"
        assert "1 passed" in run.stdout, run.stdout


def test_the_generated_node_files_pass(trips, node):
    env = {**os.environ, "STREAMTAP": str(STREAMTAP)}
    for dialect, trip in trips.items():
        test_file = trip.folder / kit_file_names(trip.original["trace_id"])[1]
        run = subprocess.run([node, "--test", str(test_file)], capture_output=True, text=True,
                             timeout=120, env=env)
        assert run.returncode == 0, f"{dialect}:\n{run.stdout}\n{run.stderr}"
        assert "# pass 1" in run.stdout, run.stdout


def test_a_generated_test_fails_when_the_client_meets_another_ending(trips, tmp_path):
    """The generated test is a real check: told that the openai SDK accepts a reset, it fails
    against the replayed reset."""
    trip = trips["openai-chat"]
    folder = tmp_path / "tampered"
    folder.mkdir()
    for path in trip.folder.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    test_file = folder / kit_file_names(trip.original["trace_id"])[0]
    text = test_file.read_text()
    assert text.count('{"reset": "APIConnectionError"') == 1
    test_file.write_text(text.replace('{"reset": "APIConnectionError"', '{"reset": None'))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(test_file)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1, run.stdout
    assert "openai raised APIConnectionError" in run.stdout
