"""`streamtap samples export` and `streamtap samples matrix`, on records from a real proxy run and
on the starter corpus in `samples/`; canaries from prompts, tool arguments and output never reach
a sample or the matrix."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import httpx
import pytest

from streamtap.diagnostics.samples.matrix import build_matrix, percentile, render_markdown, stream_dialect
from streamtap.diagnostics.samples.format import (SAMPLE_ENDINGS, SAMPLE_SCHEMA_VERSION,
                                                  check_sample, sample_stem)
from streamtap.proxy.cli import main
from streamtap.proxy.readout.tracedir import TraceError
from streamtap.proxy.replay.sample_files import export_samples, load_samples
from tests.fakeprovider import Scenario
from tests.proxyproc import REPO, new_session
from tests.streams import (CANARY_ARG, CANARY_OUTPUT, anthropic_text_stream, chat_text_stream,
                           chat_tool_stream, responses_text_stream)
from tests.support import fixture

CORPUS = REPO / "samples"
CANARY_PROMPT = "CANARY-PROMPT-9e4f"
CANARY_ARG_KEY = "CANARY-ARGKEY-2c8d"
CANARIES = (CANARY_PROMPT, CANARY_ARG_KEY, CANARY_ARG, CANARY_OUTPUT, "CANARY")
STREAMING = ("openai-chat", "openai-responses", "anthropic-messages", "gemini", "ollama-ndjson")
NAME = re.compile(r"[A-Za-z0-9._-]+__[A-Za-z0-9._-]+__[a-z_]+__\d+\.sample\.json")


def request_body() -> dict:
    """What a client sends: a prompt and a tool schema that must never reach a sample."""
    return {"model": "gpt-test", "stream": True,
            "messages": [{"role": "user", "content": f"{CANARY_PROMPT} please"}],
            "tools": [{"type": "function", "function": {
                "name": "apply_patch",
                "parameters": {"type": "object", "properties": {CANARY_ARG_KEY: {}}}}}]}


def frames(dialect: str, name: str) -> list[bytes]:
    """A fixture cut into one chunk per SSE frame."""
    return re.findall(rb".*?\n\n", fixture(dialect, name), re.S)


def send(proxy, prefix: str, path: str, session: str, fault: str | None = None) -> None:
    """Stream one request through the proxy to the end, whatever the end is."""
    headers = {"x-streamtap-session": session}
    if fault:
        headers["x-streamtap-fault"] = fault
    try:
        with httpx.Client(timeout=10) as client:
            with client.stream("POST", proxy.url("fake") + prefix + path, json=request_body(),
                               headers=headers) as response:
                for _ in response.iter_raw():
                    pass
    except httpx.HTTPError:
        pass  # the reset and FIN cases: the record says what happened


# (scenario, path, fault header) per exchange; the order is the order of the records.
def exchanges(fake) -> list[tuple[str, str, str | None]]:
    chat, responses, messages = "/v1/chat/completions", "/v1/responses", "/v1/messages"
    error_body = json.dumps({"error": {"message": "Rate limit reached", "type": "tokens",
                                       "code": "rate_limit_exceeded"}}).encode()
    return [
        (fake.add(Scenario(chat_text_stream(4))), chat, None),
        (fake.add(Scenario(chat_tool_stream(5, finish=False), ending="reset")), chat, None),
        (fake.add(Scenario(anthropic_text_stream(3), gzip=True)), messages, None),
        (fake.add(Scenario(responses_text_stream(3, terminal=False), ending="fin")), responses,
         None),
        (fake.add(Scenario([error_body], status=429, content_type="application/json")), chat,
         None),
        (fake.add(Scenario(frames("openai-chat", "reasoning_openrouter.sse"))), chat, None),
        (fake.add(Scenario(frames("openai-chat", "reasoning_deepseek.sse"))), chat, None),
        (fake.add(Scenario(chat_text_stream(6))), chat, "reset; at=first_progress"),
    ]


@pytest.fixture(scope="module")
def run(fake, proxy):
    """One proxy session with every kind of exchange, and one other session."""
    session, other = new_session(), new_session()
    plan = exchanges(fake)
    for prefix, path, fault in plan:
        send(proxy, prefix, path, session, fault)
    send(proxy, fake.add(Scenario(chat_text_stream(2))), "/v1/chat/completions", other)
    records = proxy.records(session, len(plan))
    proxy.records(other, 1)
    return {"session": session, "other": other, "records": records,
            "trace_dir": proxy.trace_dir}


def export(run, out: Path, *extra: str) -> int:
    return main(["samples", "export", "--trace-dir", str(run["trace_dir"]), "--session",
                 run["session"], "-o", str(out), *extra])


def written(out: Path) -> dict[str, dict]:
    return {path.name: json.loads(path.read_text()) for path in sorted(out.glob("*.json"))}


# -- export -----------------------------------------------------------------------------------
def test_export_writes_one_named_sample_per_trace(run, tmp_path, capsys):
    assert export(run, tmp_path) == 0
    files = written(tmp_path)
    ids = {record["trace_id"]: record for record in run["records"]}
    assert len(files) == len(ids) - 1  # the injected one is left out
    for name, sample in files.items():
        assert NAME.fullmatch(name), name
        assert name.startswith(sample_stem(sample) + "__")
        assert sample["schema_version"] == SAMPLE_SCHEMA_VERSION
        assert sample["source_trace_id"] in ids
        assert re.fullmatch(r"[0-9a-f]{16}", sample["digest"])
        check_sample(sample)
    endings = sorted(sample["ending"] for sample in files.values())
    assert endings == ["http_error", "reset", "terminal", "terminal", "terminal", "terminal",
                       "truncated"]
    assert {name.split("__")[0] for name in files} == {"fake"}
    stderr = capsys.readouterr().err
    assert "wrote 7 sample(s)" in stderr and "left out 1 injected" in stderr


def test_gzip_stream_is_described_decoded(run, tmp_path):
    export(run, tmp_path)
    (gzipped,) = [s for s in written(tmp_path).values() if s["dialect"] == "anthropic-messages"]
    assert gzipped["original_encoding"] == "gzip" and gzipped["decoded"] is True
    assert "content-encoding" not in gzipped["headers"]
    assert any("gzip" in note and "uncompressed" in note for note in gzipped["notes"])
    assert gzipped["stream"]["terminal"] == "message_stop"
    assert all(len(frame) == 4 and isinstance(frame[3], int) for frame in gzipped["frames"])


def test_other_sessions_are_not_exported(run, tmp_path):
    export(run, tmp_path)
    other = {json.loads(path.read_text())["trace_id"]
             for path in (run["trace_dir"] / run["other"]).glob("*.json")}
    assert other and not other & {s["source_trace_id"] for s in written(tmp_path).values()}


def test_injected_faults_only_when_asked(run, tmp_path):
    plain, everything = tmp_path / "plain", tmp_path / "all"
    export(run, plain)
    assert not any(sample["injected"] for sample in written(plain).values())
    export(run, everything, "--include-injected")
    injected = [s for s in written(everything).values() if s["injected"]]
    assert len(injected) == 1 and len(written(everything)) == len(run["records"])
    # What the client saw: a reset at the first progress, a real failure when replayed.
    assert injected[0]["ending"] == "reset"
    assert injected[0]["outcome"]["boundary"] == "injected"


def test_identical_samples_are_written_once_even_across_runs(run, tmp_path, capsys):
    out = tmp_path / "out"
    export(run, out)
    first = written(out)
    capsys.readouterr()
    assert export(run, out) == 0
    assert written(out) == first
    assert "wrote 0 sample(s); skipped 7 duplicate(s)" in capsys.readouterr().err
    # A copy of a record under another name is the same stream: still one sample.
    trace_dir = tmp_path / "traces"
    shutil.copytree(run["trace_dir"] / run["session"], trace_dir / "s")
    source = sorted((trace_dir / "s").glob("*.json"))[0]
    shutil.copy(source, source.with_name("20990101T000000.000-copy.json"))
    summary = export_samples(trace_dir, tmp_path / "fresh")
    assert summary.duplicates == 1 and len(summary.written) == 7


def test_since_keeps_records_started_at_or_after(run, tmp_path):
    started = sorted(record["started_at"] for record in run["records"]
                     if not record["fault"])
    since = started[3]
    summary = export_samples(run["trace_dir"], tmp_path, session=run["session"], since=since)
    expected = sum(1 for moment in started if moment >= since)
    assert len(summary.written) == expected and 0 < expected < len(started)
    assert summary.filtered + summary.injected_skipped + expected == len(run["records"])
    assert export_samples(run["trace_dir"], tmp_path / "none", session=run["session"],
                          since="2999-01-01").written == []
    # A duration reads as `ls --since` does: every record of this run started within the hour.
    everything = export_samples(run["trace_dir"], tmp_path / "all", session=run["session"])
    hour = export_samples(run["trace_dir"], tmp_path / "hour", session=run["session"],
                          since="1h")
    assert ([path.name for path in hour.written] == [path.name for path in everything.written]
            and hour.filtered == 0)
    with pytest.raises(TraceError, match=r"neither a duration \(30m, 1h, 2d\) nor an ISO"):
        export_samples(run["trace_dir"], tmp_path, since="yesterday")


def test_broken_files_are_reported_and_skipped(run, tmp_path, capsys):
    trace_dir = tmp_path / "traces"
    shutil.copytree(run["trace_dir"] / run["session"], trace_dir / "s")
    (trace_dir / "s" / "broken.json").write_text('{"schema_version": 1, "trace_id": ')
    (trace_dir / "s" / "list.json").write_text("[1, 2]")
    future = dict(run["records"][0], schema_version=99, trace_id="future1")
    (trace_dir / "s" / "future.json").write_text(json.dumps(future))
    assert main(["samples", "export", "--trace-dir", str(trace_dir), "-o",
                 str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"skipped \S*broken\.json: not JSON", err)
    assert re.search(r"skipped \S*list\.json: not a streamtap trace record", err)
    assert re.search(r"skipped \S*future\.json: .*upgrade streamtap", err)
    assert "skipped 3 unreadable file(s)" in err
    assert len(written(tmp_path / "out")) == 7


def test_a_record_from_before_shapes_still_exports(run, tmp_path):
    record = dict(next(r for r in run["records"] if r["stream"]["terminal"] == "[DONE]"))
    record.pop("shapes"), record.pop("shapes_dropped")
    record["frames"] = [frame[:3] for frame in record["frames"]]
    record["stream"] = {k: v for k, v in record["stream"].items() if k != "body_shape"}
    (tmp_path / "traces" / "old").mkdir(parents=True)
    (tmp_path / "traces" / "old" / "20250101T000000.000-old.json").write_text(json.dumps(record))
    summary = export_samples(tmp_path / "traces", tmp_path / "out")
    assert not summary.unreadable and len(summary.written) == 1
    sample = json.loads(summary.written[0].read_text())
    assert sample["shapes"] == [] and all(frame[3] is None for frame in sample["frames"])
    assert any("no shapes" in note for note in sample["notes"])
    assert build_matrix([sample])[0]["terminal"] == {"[DONE]": 1}


def test_export_errors_say_what_to_do(tmp_path, capsys):
    assert main(["samples", "export", "--trace-dir", str(tmp_path / "nope"), "-o",
                 str(tmp_path / "out")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "traces" / "a").mkdir(parents=True)
    assert main(["samples", "export", "--trace-dir", str(tmp_path / "traces"), "--session", "b",
                 "-o", str(tmp_path / "out")]) == 2
    assert "no session 'b'" in capsys.readouterr().err


# -- matrix -----------------------------------------------------------------------------------
def matrix(capsys, *args: str) -> str:
    capsys.readouterr()
    assert main(["samples", "matrix", *args]) == 0
    return capsys.readouterr().out


def row(rows: list[dict], provider: str, dialect: str) -> dict:
    (found,) = [r for r in rows if r["provider"] == provider and r["dialect"] == dialect]
    return found


def test_matrix_of_exported_samples(run, tmp_path, capsys):
    export(run, tmp_path, "--include-injected")
    rows = json.loads(matrix(capsys, str(tmp_path), "--format", "json"))
    chat = row(rows, "fake", "openai-chat")
    assert chat["terminal"] == {"[DONE]": 3}
    assert "comment `: OPENROUTER PROCESSING`" in chat["keepalive"]["styles"]
    assert "comment `: keep-alive`" in chat["keepalive"]["styles"]
    assert {"reasoning_content", "reasoning", "reasoning_details"} <= set(chat["reasoning"])
    assert "HTTP 429 `tokens` `rate_limit_exceeded`" in chat["errors"]  # the 429 counts here
    assert chat["endings"] == {"terminal": 3, "reset": 2, "http_error": 1}
    assert chat["ttfb_ms"]["n"] == 6 and chat["ttfb_ms"]["p50"] <= chat["ttfb_ms"]["p95"]
    anthropic = row(rows, "fake", "anthropic-messages")
    assert anthropic["keepalive"]["styles"] == ["`ping` event"]
    assert anthropic["usage"] == ["`message_delta` (`usage`)", "`message_start` "
                                  "(`message.usage`)"]
    assert row(rows, "fake", "openai-responses")["endings"] == {"truncated": 1}
    md = matrix(capsys, str(tmp_path), "--format", "md")
    assert md.startswith("| provider | dialect | samples |")
    assert re.search(r"^\| fake \| openai-chat \| 6 \|.*`\[DONE\]` ×3", md, re.M)


def test_matrix_of_the_starter_corpus(capsys):
    rows = json.loads(matrix(capsys, str(CORPUS), "--format", "json"))
    assert row(rows, "openai", "openai-chat")["terminal"] == {"[DONE]": 4}
    assert row(rows, "openai", "openai-chat")["usage"] == ["chunk after finish (`usage`)"]
    assert row(rows, "anthropic", "anthropic-messages")["keepalive"]["styles"] == ["`ping` event"]
    assert row(rows, "anthropic", "anthropic-messages")["terminal"] == {"message_stop": 2}
    openrouter = row(rows, "openrouter", "openai-chat")
    assert openrouter["keepalive"]["styles"] == ["comment `: OPENROUTER PROCESSING`"]
    assert openrouter["keepalive"]["period_ms"] > 1000
    assert row(rows, "deepseek", "openai-chat")["reasoning"] == ["reasoning_content"]
    assert row(rows, "moonshot", "openai-chat")["usage"] == ["finish chunk (`choices[].usage`)"]
    assert row(rows, "gemini", "gemini")["usage"] == ["every chunk (`usageMetadata`)"]
    assert row(rows, "gemini", "gemini")["terminal"] == {"finishReason": 4}
    assert row(rows, "ollama", "ollama-ndjson")["reasoning"] == ["thinking"]
    assert "`response.completed` (`response.usage`)" in row(rows, "openai",
                                                           "openai-responses")["usage"]
    md = matrix(capsys, str(CORPUS), "--format", "md")
    assert "| openrouter | openai-chat |" in md and "`: OPENROUTER PROCESSING`" in md
    # The README shows the table the corpus produces.
    assert md in (CORPUS / "README.md").read_text()


def test_matrix_skips_files_that_are_not_samples(tmp_path, capsys):
    shutil.copy(CORPUS / "openai__openai-chat__terminal__1.sample.json", tmp_path)
    (tmp_path / "x.sample.json").write_text('{"frames": [], "ending": "terminal", '
                                            '"schema_version": 7}')
    assert main(["samples", "matrix", str(tmp_path), "--format", "md"]) == 0
    out, err = capsys.readouterr()
    assert "| openai | openai-chat | 1 |" in out
    assert re.search(r"skipped \S*x\.sample\.json: .*upgrade streamtap", err)
    samples, skipped = load_samples([tmp_path])
    assert len(samples) == 1 and "upgrade streamtap" in skipped[0][1]
    assert main(["samples", "matrix", str(tmp_path / "missing")]) == 2


def test_matrix_cells_hold_only_tokens():
    sample = json.loads((CORPUS / "openai__openai-chat__terminal__1.sample.json").read_text())
    sample["stream"]["terminal"] = "free text, with spaces"
    sample["stream"]["delta_keys"] = ["content", "$str"]
    sample["stream"]["errors"] = [{"shape": "wrapped_chunk", "type": "$str", "code": None}]
    (result,) = build_matrix([sample])
    assert result["terminal"] == {} and result["content_fields"] == ["content"]
    assert result["errors"] == {"wrapped_chunk": 1}
    assert "$" not in render_markdown([result])


def test_percentiles_and_stream_dialect():
    assert percentile([], 50) is None
    assert percentile([5.0, 1.0, 3.0], 50) == 3.0 and percentile([1.0, 2.0], 95) == 2.0
    error = {"dialect": "json", "status": 429,
             "request": {"path": "/v1/chat/completions", "stream": True}}
    assert stream_dialect(error) == "openai-chat"
    assert stream_dialect({**error, "request": {"path": "/v1/chat/completions",
                                                "stream": False}}) == "json"
    assert stream_dialect({"dialect": None, "status": None,
                           "request": {"path": "/api/chat"}}) == "ollama-ndjson"
    assert stream_dialect({"dialect": "json", "status": 200, "request": {"stream": True,
                           "path": "/v1/messages"}}) == "json"


# -- canaries ---------------------------------------------------------------------------------
def test_no_canary_in_exported_samples_or_the_matrix(run, tmp_path, capsys):
    export(run, tmp_path, "--include-injected")
    texts = [path.read_text() for path in tmp_path.glob("*.json")]
    texts.append(matrix(capsys, str(tmp_path)))
    texts.append(matrix(capsys, str(tmp_path), "--format", "json"))
    # The records themselves hold the request's tool name but none of the canaries either.
    for text in texts:
        for canary in CANARIES:
            assert canary not in text
    assert "apply_patch" in "".join(texts[:-2])  # a tool the request defined keeps its name


# -- the starter corpus -----------------------------------------------------------------------
def load_generator():
    spec = importlib.util.spec_from_file_location("make_corpus",
                                                  Path(__file__).parent / "make_corpus.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_corpus"] = module  # dataclasses look their module up while building
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    finally:
        del sys.modules["make_corpus"]
    return module


def test_corpus_is_up_to_date():
    assert load_generator().main(["--check"]) == 0, "run `python tests/make_corpus.py`"


def test_corpus_covers_every_dialect_and_ending():
    samples, skipped = load_samples([CORPUS])
    assert not skipped
    seen: dict[str, set[str]] = {}
    for sample in samples:
        assert not sample["injected"]
        seen.setdefault(stream_dialect(sample), set()).add(sample["ending"])
    for dialect in STREAMING:
        assert seen[dialect] == set(SAMPLE_ENDINGS), dialect
    assert {"terminal", "truncated", "http_error"} <= seen["json"]


def fixture_strings(value: object, key: str | None = None) -> set[str]:
    """Strings a fixture holds that are not kind names (ids, text, arguments, signatures).

    Left out: provider error messages (a sample keeps a stream error's scrubbed message, as a
    record does), tool names the request defines, model names, and kind names."""
    from streamtap.diagnostics.record.shapes import ERROR_KEYS, STRUCTURAL_KEYS

    found: set[str] = set()
    if isinstance(value, dict):
        for name, item in value.items():
            found |= fixture_strings(item, name)
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                found.add(name)
    elif isinstance(value, list):
        for item in value:
            found |= fixture_strings(item, key)
    elif isinstance(value, str) and len(value) >= 6 and key not in STRUCTURAL_KEYS | ERROR_KEYS \
            and key not in ("message", "error", "reason", "name", "model", "modelVersion",
                            "provider"):
        found.add(value)
    return found


def test_corpus_holds_nothing_from_the_fixtures_content():
    strings: set[str] = set()
    for path in (REPO / "tests" / "fixtures" / "streams").rglob("*"):
        if path.is_file():
            for line in re.split(rb"\r?\n", path.read_bytes()):
                data = line[5:] if line.startswith(b"data:") else line
                try:
                    strings |= fixture_strings(json.loads(data))
                except ValueError:
                    continue
            try:
                strings |= fixture_strings(json.loads(path.read_bytes()))
            except ValueError:
                pass
    assert any(s.startswith("chatcmpl-") for s in strings)  # the ids are among them
    corpus = "\n".join(path.read_text() for path in CORPUS.glob("*.sample.json"))
    assert "CANARY" not in corpus
    leaked = sorted(s for s in strings if json.dumps(s) in corpus)
    assert leaked == [], leaked
