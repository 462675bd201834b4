"""What the client will see (issue 23 item 6). End to end: a real client meets a stream cut short
without its terminal event through streamtap, raises nothing, and the record, the summary,
`show`, `ls --failed` and the report all say that the answer was cut short silently. In the test
process: `client_sees` and the normalized finish reason, where the table decides every evidence
code the rule table can emit, and every ending of every dialect is pinned through the real
Recorder."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.diagnostics.verdict import classify, client_sees as cs, finish_reasons
from streamtap.diagnostics.verdict import finish_reasons as fr
from streamtap.diagnostics.verdict.client_sees import SENTENCES, VALUES
from streamtap.diagnostics.verdict.outward import client_fields
from streamtap.proxy.readout import commands
from tests.fakeprovider import Scenario
from tests.proxyproc import new_session
from tests.readme import section
from tests.streams import chat_text_stream
from tests.support import first_frames, fixture, record_stream
from tests.test_endings import node_read
from tests.unit.dialect_feed import CONTENT_TYPES, PATHS


def streamtap(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "streamtap", *args], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_openai_sdk_meets_a_clean_close_without_done_and_the_record_says_it(fake, proxy, tmp_path):
    prefix = fake.add(Scenario(chat_text_stream(3, done=False)[:-1]))  # no finish, no [DONE]
    session = new_session()
    client = openai.OpenAI(base_url=proxy.url("fake") + prefix + "/v1", api_key="sk-test",
                           default_headers={"x-streamtap-session": session}, max_retries=0,
                           timeout=10)
    chunks = list(client.chat.completions.create(model="gpt-test", messages=[], stream=True))
    # The SDK raised nothing and never saw a finish reason: the silence the record must name.
    assert chunks and all(chunk.choices[0].finish_reason is None for chunk in chunks)
    record = proxy.record(session)
    outcome = record["outcome"]
    assert record["response"]["status"] == 200 and record["downstream"]["ended"] == "complete"
    assert outcome["client_sees"] == "silent_truncation"
    assert outcome["normalized_finish_reason"] == "interrupted"
    assert record["stream"]["finish_reason"] is None  # the provider's own: none was sent
    assert outcome["summary"].endswith(" Most clients end this stream without an error: the "
                                       "answer is cut short silently.")
    trace_dir = str(proxy.trace_dir)
    listed = streamtap("ls", "--failed", "--session", session, "--trace-dir", trace_dir)
    assert record["trace_id"][:8] in listed
    assert "client sees silent_truncation" in listed
    shown = streamtap("show", record["trace_id"], "--trace-dir", trace_dir)
    assert "client sees: silent_truncation  finish reason: interrupted (provider: -)" in shown
    report = tmp_path / "report.html"
    streamtap("report", "--session", session, "--trace-dir", trace_dir, "--out", str(report))
    assert 'data-client-sees="silent_truncation"' in report.read_text()


def test_node_fetch_meets_an_error_event_it_does_not_parse(fake, proxy, node):
    """An error event inside a 200 stream: fetch reads it as bytes and ends without an error."""
    error = json.dumps({"error": {"message": "overloaded", "type": "server_error"}})
    stream = chat_text_stream(2, done=False)[:2] + [f"data: {error}\n\n".encode()]
    prefix = fake.add(Scenario(stream))
    session = new_session()
    proxied = node_read(node, proxy.url("fake") + prefix + "/v1/chat/completions",
                        {"x-streamtap-session": session})
    assert proxied["error"] is None and proxied["status"] == 200
    outcome = proxy.record(session)["outcome"]
    assert (outcome["boundary"], outcome["client_sees"]) == ("provider_error", "in_band_error")
    assert outcome["normalized_finish_reason"] == "error"
    assert outcome["summary"].endswith(" " + SENTENCES["in_band_error"])


def test_ls_failed_lists_a_quiet_failure_even_when_the_verdict_is_ok(tmp_path, capsys):
    """A complete stream whose client was left waiting (`hang`) or a truncation the verdict
    missed still lists under --failed; an ok line that told the client everything does not."""
    folder = tmp_path / "s1"
    folder.mkdir()
    lines = [{"trace_id": f"{n}" * 16, "started_at": f"2026-11-25T12:0{n}:00.000Z",
              "session_id": "s1", "route": "openai", "ok": True, "boundary": "none",
              "phase": "complete", "client_sees": sees}
             for n, sees in ((1, "success"), (2, "hang"), (3, "silent_truncation"), (4, None))]
    (folder / "index.jsonl").write_text(
        "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    assert commands.failed_trace_ids(tmp_path) == ["3" * 16, "2" * 16]
    assert commands.ls(tmp_path, failed=True) == 0
    out = capsys.readouterr().out
    assert "ok, client sees silent_truncation" in out and "ok, client sees hang" in out
    assert "1111111" not in out and "4444444" not in out


def test_readme_record_table_names_every_value():
    table = section("What a trace record holds")
    row = next(line for line in table.splitlines() if line.startswith("| `outcome` |"))
    for word in ("client_sees", "normalized_finish_reason", *VALUES, *finish_reasons.VALUES):
        assert f"`{word}`" in row, word


# -- in the test process: every evidence code and every ending of every dialect -------------------
CODE_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")
# Families classify builds as `upstream_{how}`: the ways an upstream body can end (Ending.upstream)
# that reach a verdict; each member needs a decision like any literal code.
FAMILY_MEMBERS = {"upstream_": ("reset", "truncated", "malformed", "error")}


def _emitted(source: str, names: dict, *, only_returned_pairs: bool) -> tuple[set, set]:
    """(evidence codes, prefixes of codes built with a variable part) in a module's source:
    strings in list displays and `.append()` calls (the rule table's evidence lists), and the
    first item of a returned `(code, sentence)` pair (how helper modules hand codes to it)."""
    codes: set[str] = set()
    prefixes: set[str] = set()

    def take(node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value and set(node.value) <= CODE_CHARS:
                codes.add(node.value)
        elif isinstance(node, ast.IfExp):
            take(node.body)
            take(node.orelse)
        elif isinstance(node, ast.JoinedStr) and isinstance(node.values[0], ast.Constant):
            prefixes.add(node.values[0].value)
        elif isinstance(node, ast.Name) and isinstance(names.get(node.id), str):
            codes.add(names[node.id])  # a constant imported by name (UNKNOWN_SHAPE)

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) \
                and len(node.value.elts) == 2 \
                and isinstance(node.value.elts[1], (ast.JoinedStr, ast.Constant)):
            take(node.value.elts[0])
        elif only_returned_pairs:
            continue
        elif isinstance(node, ast.List):
            for element in node.elts:
                take(element)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "append":
            for arg in node.args:
                take(arg)
    return codes, prefixes


def rule_table_codes() -> tuple[set, set]:
    """Every evidence code the rule table (classify.RULES) can emit: the codes a row names as
    data, the lists classify.py and the modules of the rows' evidence functions build, and the
    verdict modules those import (they hand codes over as `(code, sentence)` pairs)."""
    codes = {code for row in classify.RULES if not callable(row.evidence) for code in row.evidence}
    prefixes: set[str] = set()
    builders = {classify} | {inspect.getmodule(row.evidence) for row in classify.RULES
                             if callable(row.evidence)}
    package = "streamtap.diagnostics.verdict"
    for builder in builders:
        source = Path(builder.__file__).read_text()
        more = _emitted(source, vars(builder), only_returned_pairs=False)
        codes |= more[0]
        prefixes |= more[1]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package):
                for alias in node.names:
                    name = node.module if node.module != package else f"{package}.{alias.name}"
                    module = importlib.import_module(name)
                    more = _emitted(Path(module.__file__).read_text(), vars(module),
                                    only_returned_pairs=True)
                    codes |= more[0]
                    prefixes |= more[1]
    return codes, prefixes


def test_the_parser_finds_codes_of_every_form():
    """A check of the check: literals, conditionals, appends, imported names, families."""
    source = '''
def a(f):
    evidence = ["one_code" if f else "other_code", NAME] + [f"fam_{f}"]
    evidence.append("appended_code")
    return ("paired_code", f"a sentence {f}")
'''
    codes, prefixes = _emitted(source, {"NAME": "imported_code"}, only_returned_pairs=False)
    assert codes == {"one_code", "other_code", "imported_code", "appended_code", "paired_code"}
    assert prefixes == {"fam_"}
    assert _emitted(source, {}, only_returned_pairs=True) == ({"paired_code"}, set())


def test_every_code_the_rule_table_can_emit_has_a_client_sees_decision():
    codes, prefixes = rule_table_codes()
    assert {"clean_close", "terminal_event", "error_frame_unknown_shape"} <= codes  # it reads
    decided = {code for code, _ in cs.BY_EVIDENCE} | cs.NOT_DECIDING
    undecided = sorted(code for code in codes if code not in decided
                       and not any(code.startswith(prefix) for prefix, _ in cs.BY_PREFIX))
    assert undecided == [], (
        f"evidence codes without a client_sees decision: {undecided}; add each to "
        "client_sees.BY_EVIDENCE (it changes what the client sees) or NOT_DECIDING")
    families = {prefix for prefix, _ in cs.BY_PREFIX}
    for prefix in prefixes - families:
        assert prefix in FAMILY_MEMBERS, f"a new evidence family `{prefix}...`: add it to " \
                                         "client_sees.BY_PREFIX or FAMILY_MEMBERS here"
        for member in FAMILY_MEMBERS[prefix]:
            assert prefix + member in decided, prefix + member


def test_the_tables_use_only_the_five_values():
    assert cs.VALUES == ("error", "in_band_error", "silent_truncation", "hang", "success")
    for value in [v for _, v in cs.BY_EVIDENCE] + [v for _, v in cs.BY_PREFIX] + \
            list(cs.BY_BOUNDARY.values()) + [cs.DEFAULT]:
        assert value in cs.VALUES
    assert not {code for code, _ in cs.BY_EVIDENCE} & cs.NOT_DECIDING


@pytest.mark.parametrize("boundary, evidence, sees", [
    # a reset after an error frame reaches the client as a reset
    ("provider_error", ["error_event", "overloaded_error", "upstream_reset"], "error"),
    ("provider_error", ["error_event", "overloaded_error"], "in_band_error"),
    ("provider_error", ["http_429", "rate_limit_error"], "error"),
    # a provider's own error type later in the list is no family code
    ("provider_error", ["wrapped_chunk", "http_error"], "in_band_error"),
    ("provider_error", ["error_frame_unknown_shape", "sse_unknown_field"], "silent_truncation"),
    ("provider_error", ["error_frame_unknown_shape", "InternalError"], "in_band_error"),
    ("provider_close", ["clean_close", "no_terminal_event"], "silent_truncation"),
    ("provider_close", ["clean_close", "no_terminal_event", "finish_reason_seen"], "success"),
    ("protocol", ["stream_requested_json_answered"], "silent_truncation"),
    ("injected", ["injected_drop_terminal"], "silent_truncation"),
    ("injected", ["injected_error_chunk"], "in_band_error"),
    ("injected", ["injected_stall", "client_gave_up"], "hang"),
    ("injected", ["injected_some_new_action"], "error"),
    ("client_abort", ["client_disconnected"], "error"),
    # issue 23 items 1 and 4 (their codes): a client that gave up after a silence hung first;
    # a complete stream whose connection stayed open holds a client that reads to the close
    ("client_abort", ["client_disconnected", "client_timeout"], "hang"),
    ("client_abort", ["client_disconnected", "client_cancel"], "error"),
    ("none", ["terminal_event", "open_after_terminal"], "hang"),
    ("none", ["terminal_event"], "success"),
    ("watchdog", ["watchdog_idle"], "error"),
    ("a_boundary_not_yet_named", [], "error"),
])
def test_judge(boundary, evidence, sees):
    assert cs.judge(boundary, evidence) == sees


# -- every ending of every dialect, through the real Recorder ---------------------------------
COMPLETE = {"openai-chat": "text_complete.sse", "openai-responses": "text_complete.sse",
            "anthropic-messages": "text_complete.sse", "gemini": "text_complete.sse",
            "ollama-ndjson": "chat_complete.ndjson"}
IN_BAND = {"openai-chat": "openai_error_chunk.sse", "openai-responses": "error_flat.sse",
           "anthropic-messages": "overloaded_mid_thinking.sse", "gemini": "error_mid_stream.sse",
           "ollama-ndjson": "chat_error.ndjson"}
PROVIDER_REASON = {"openai-chat": "stop", "openai-responses": "completed",
                   "anthropic-messages": "end_turn", "gemini": "STOP", "ollama-ndjson": "stop"}


def head(dialect: str, data: bytes) -> bytes:
    """The first frame: a stream that had started and not finished."""
    if dialect == "ollama-ndjson":
        return data.split(b"\n")[0] + b"\n"
    return first_frames(data.replace(b"\r\n", b"\n"), 1)  # Gemini's fixture ends lines in CRLF


def ending(dialect: str, name: str) -> dict:
    complete = fixture(dialect, COMPLETE[dialect])
    stream = dict(path=PATHS[dialect], content_type=CONTENT_TYPES.get(dialect,
                                                                       "text/event-stream"))
    cut = head(dialect, complete)
    return {
        "complete": lambda: record_stream(complete, **stream),
        "clean close without the terminal": lambda: record_stream(cut, **stream),
        "reset": lambda: record_stream(cut, upstream="reset", **stream),
        "closed mid-body": lambda: record_stream(cut, upstream="truncated", **stream),
        "error event": lambda: record_stream(fixture(dialect, IN_BAND[dialect]), **stream),
        "http 429": lambda: record_stream(fixture("json", "openai_429_rate_limit.json"),
                                          path=PATHS[dialect], status=429,
                                          content_type="application/json"),
        "client gone": lambda: record_stream(cut, downstream="client_gone", **stream),
        "watchdog": lambda: record_stream(cut, watchdog_fired="idle", **stream),
        "one JSON body for a stream": lambda: record_stream(
            fixture("json", "openai_chat.json"), path=PATHS[dialect],
            content_type="application/json"),
    }[name]()


# (ending, client_sees, normalized finish reason, whether the summary gains a sentence)
ENDINGS = [
    ("complete", "success", "stop", False),
    ("clean close without the terminal", "silent_truncation", "interrupted", True),
    ("reset", "error", "error", False),
    ("closed mid-body", "error", "error", False),
    ("error event", "in_band_error", "error", True),
    ("http 429", "error", "error", False),
    ("client gone", "error", "interrupted", False),
    ("watchdog", "error", "error", False),
    ("one JSON body for a stream", "silent_truncation", "interrupted", True),
]


@pytest.mark.parametrize("dialect", sorted(COMPLETE))
@pytest.mark.parametrize("name, sees, reason, sentence", ENDINGS, ids=[e[0] for e in ENDINGS])
def test_every_ending_of_every_dialect(dialect, name, sees, reason, sentence):
    record = ending(dialect, name)
    outcome = record["outcome"]
    assert (outcome["client_sees"], outcome["normalized_finish_reason"]) == (sees, reason), \
        (outcome["boundary"], outcome["evidence"])
    said = cs.SENTENCES.get(sees)
    assert (said is not None and outcome["summary"].endswith(" " + said)) is sentence
    if name == "complete":  # the provider's own word is kept next to the normalized one
        assert record["stream"]["finish_reason"] == PROVIDER_REASON[dialect]
    # derived again from the verdict alone when a version-1 record without them is read: the same
    older = {key: value for key, value in outcome.items()
             if key not in ("client_sees", "normalized_finish_reason")}
    upgraded = record_from_dict({**record, "schema_version": 1, "outcome": older}).outcome
    assert (upgraded.client_sees, upgraded.normalized_finish_reason) == (sees, reason)


def test_the_silent_truncation_sentence_is_the_issues():
    record = ending("openai-chat", "clean close without the terminal")
    assert record["outcome"]["summary"].endswith(
        "Most clients end this stream without an error: the answer is cut short silently.")


@pytest.mark.parametrize("dialect", sorted(COMPLETE))
def test_a_silent_truncation_is_said_once(dialect):
    """The rule's sentence says where the stream closed, client_sees what the client made of it:
    the rule no longer says "a short answer without any error" before the same news."""
    summary = ending(dialect, "clean close without the terminal")["outcome"]["summary"]
    assert summary.count("short") == 1 and summary.count("error") == 1, summary
    where, told = summary.split(". ", 1)
    assert where.endswith(", without the terminal event, before the model produced any output") \
        or where.endswith(", without the terminal event, while the model was reasoning")
    assert told == cs.SENTENCES["silent_truncation"]


def test_a_whole_answer_missing_only_its_end_marker_is_a_success_for_the_client():
    record = record_stream(fixture("anthropic-messages", "after_finish_cut.sse"),
                           path="/v1/messages")
    outcome = record["outcome"]
    assert (outcome["ok"], outcome["boundary"]) == (False, "provider_close")
    assert (outcome["client_sees"], outcome["normalized_finish_reason"]) == \
        ("success", "tool_calls")
    assert record["stream"]["finish_reason"] == "tool_use"


# -- the finish-reason table --------------------------------------------------------------------
@pytest.mark.parametrize("dialect, reason, called_tools, normalized", [
    ("openai-chat", "function_call", False, "tool_calls"),
    ("openai-chat", "content_filter", False, "content_filter"),
    ("anthropic-messages", "max_tokens", False, "length"),
    ("anthropic-messages", "tool_use", True, "tool_calls"),
    ("anthropic-messages", "refusal", False, "content_filter"),
    ("anthropic-messages", "pause_turn", False, None),  # no counterpart: the provider's stays
    ("anthropic-messages", "end_turn", True, "stop"),  # its own reason says no tool turn
    ("gemini", "SAFETY", False, "content_filter"),
    ("gemini", "STOP", True, "tool_calls"),  # Gemini ends a tool turn with STOP
    ("openai-responses", "max_output_tokens", False, "length"),
    ("openai-responses", "completed", True, "tool_calls"),
    ("ollama-ndjson", "length", False, "length"),
    ("sse", "stop", False, "stop"),  # an unknown dialect keeps a reason already in the vocabulary
    ("sse", "eos", False, None),
    ("openai-chat", None, False, None),
])
def test_finish_reason_table(dialect, reason, called_tools, normalized):
    assert fr.mapped(dialect, reason, called_tools) == normalized


def test_finish_reason_table_covers_every_dialect_with_the_six_words():
    from streamtap.diagnostics.dialects import dialect_class

    for dialect in COMPLETE:
        assert dialect_class(dialect) is not None and dialect in fr.BY_DIALECT
    for table in fr.BY_DIALECT.values():
        assert set(table.values()) <= set(fr.VALUES)
    assert fr.VALUES == ("stop", "length", "tool_calls", "content_filter", "error",
                         "interrupted")


def test_ls_failed_lists_what_the_client_was_not_told():
    assert cs.listed_as_failed({"ok": True, "client_sees": "silent_truncation"})
    assert cs.listed_as_failed({"ok": True, "client_sees": "hang"})
    assert cs.listed_as_failed({"ok": False, "client_sees": "error"})
    assert not cs.listed_as_failed({"ok": True, "client_sees": "success"})
    assert not cs.listed_as_failed({"ok": True})  # an index line written before client_sees


# -- spans: one vocabulary outward (item 7) -----------------------------------------------------
def span_attributes(record: dict) -> dict:
    from streamtap.diagnostics.views.spans import record_to_span

    stamped = {**record, "trace_id": "0123456789abcdef", "started_at": "2026-11-25T12:00:00Z"}
    return record_to_span(record_from_dict(stamped)).attributes


@pytest.mark.parametrize("dialect", sorted(COMPLETE))
@pytest.mark.parametrize("name", [e[0] for e in ENDINGS if e[0] != "complete"])
def test_every_ending_that_did_not_complete_is_an_error_finish_in_its_span(dialect, name):
    from streamtap.diagnostics.views import genai_conventions as sc

    record = ending(dialect, name)
    attributes = span_attributes(record)
    assert attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)
    assert attributes[sc.ST_BOUNDARY] == record["outcome"]["boundary"] != "none"


def test_a_failed_terminal_event_is_an_error_finish_not_the_providers_status():
    """`response.failed` is the Responses stream's terminal event: the stream did end, but
    not complete, so its span says `error`, not `failed`."""
    from streamtap.diagnostics.views import genai_conventions as sc

    record = record_stream(fixture("openai-responses", "failed.sse"), path="/v1/responses")
    assert record["stream"]["terminal"] == "response.failed"
    assert record["stream"]["finish_reason"] == "failed"
    assert span_attributes(record)[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)


@pytest.mark.parametrize("dialect", sorted(COMPLETE))
def test_a_complete_span_gives_the_normalized_reason(dialect):
    from streamtap.diagnostics.views import genai_conventions as sc

    record = ending(dialect, "complete")
    assert span_attributes(record)[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)


@pytest.mark.parametrize("outcome, expected", [
    # complete, then parked (item 4's code): the answer is whole, the client's wait was not
    ({"ok": True, "boundary": "none", "evidence": ["terminal_event", "open_after_terminal"]},
     {"client_sees": "hang", "normalized_finish_reason": "stop"}),
    # a client that gave up after a silence (item 1's code) was cut off, not told of an error
    ({"ok": False, "boundary": "client_abort",
      "evidence": ["client_disconnected", "client_timeout"]},
     {"client_sees": "hang", "normalized_finish_reason": "interrupted"}),
])
def test_client_fields_of_a_hang(outcome, expected):
    assert client_fields(outcome, "openai-chat", "stop", tool_called=False) == expected
