"""The probe's pure half: grades from what a run did, expectations, pinned grades, the client's
last error line, and the catalog table itself."""

import dataclasses

import pytest

from streamtap.diagnostics.probe.catalog import (ALL_DIALECTS, CATALOG_ROWS, GRADES, Catalog,
                                                 CatalogError)
from streamtap.diagnostics.probe.errorline import MAX_LINE, last_error_line
from streamtap.diagnostics.probe.grade import (Attempt, PinError, Run, grade, judge,
                                               pinned_grades)
from streamtap.diagnostics.faults.rules import parse_fault_header

BROKEN, DONE = Attempt(0.0, False), Attempt(0.0, True)
CATALOG = Catalog()


def ending(name):
    return next(row for row in CATALOG_ROWS if row.name == name)


@pytest.mark.parametrize("run, expected", [
    (Run(None, True, 30.0, (BROKEN,)), "HUNG"),
    (Run(None, True, 30.0, (DONE,)), "HUNG"),  # killed is HUNG whatever the wire did
    (Run(1, False, 1.0, (BROKEN,)), "raised"),
    (Run(1, False, 1.0, (DONE,)), "raised"),  # it failed and said so
    (Run(0, False, 1.0, (DONE, DONE)), "ok"),
    (Run(0, False, 1.0, (BROKEN, DONE)), "recovered"),
    (Run(0, False, 1.0, (BROKEN,)), "SILENT"),
    (Run(0, False, 1.0, (BROKEN, BROKEN, BROKEN)), "SILENT"),
    (Run(0, False, 1.0, ()), "SILENT"),  # exit 0 without one completed request
])
def test_grade(run, expected):
    assert grade(run) == expected


def test_a_silent_truncation_breaks_its_expectation_and_a_raise_meets_it():
    row = ending("clean_end_between_events")
    silent = judge(row, Run(0, False, 0.5, (BROKEN,)))
    assert (silent.grade, silent.meets) == ("SILENT", False)
    assert silent.why == "breaks: must not be silent: raise, or retry and finish"
    raised = judge(row, Run(1, False, 0.5, (BROKEN,), "TypeError: terminated"))
    assert (raised.grade, raised.meets) == ("raised", True)
    assert raised.as_dict()["error_line"] == "TypeError: terminated"


def test_a_stall_must_end_before_the_limit():
    verdict = judge(ending("stall_mid_stream"), Run(None, True, 5.0, (BROKEN,)))
    assert (verdict.grade, verdict.meets) == ("HUNG", False)


def test_a_429_must_be_retried_after_retry_after():
    row = ending("http_429_retry_after")
    assert row.expect.retry_wait_s == 1
    once = judge(row, Run(1, False, 0.3, (Attempt(0.0, False),)))
    assert (once.grade, once.meets, once.why) == (
        "raised", False, "breaks: must be retried after retry-after (1 s) (not retried)")
    early = judge(row, Run(1, False, 0.3, (Attempt(0.0, False), Attempt(0.2, False))))
    assert not early.meets and "retried after 0.20 s" in early.why
    waited = judge(row, Run(0, False, 2.0, (Attempt(0.0, False), Attempt(1.05, True))))
    assert (waited.grade, waited.meets) == ("recovered", True)


def test_a_pinned_grade_replaces_the_catalogs_expectation():
    row = ending("clean_end_between_events")
    accepted = judge(row, Run(0, False, 0.5, (BROKEN,)), pinned=("SILENT",))
    assert accepted.meets and accepted.why == "as pinned"
    regressed = judge(row, Run(0, False, 0.5, (BROKEN,)), pinned=("raised",))
    assert not regressed.meets and regressed.why == "pinned raised, got SILENT"


def test_pinned_grades_read_the_json_the_probe_prints_or_a_subset():
    pins = pinned_grades({"probe": "p", "endings": [
        {"ending": "http_500", "grade": "raised", "requests": 3},
        {"ending": "stall_mid_stream", "grade": ["raised", "recovered"]},
        {"ending": "parked_after_terminal", "grade": None, "skipped": "needs ..."}]})
    assert pins == {"http_500": ("raised",), "stall_mid_stream": ("raised", "recovered")}
    with pytest.raises(PinError, match="unknown grade 'silent'"):
        pinned_grades({"endings": [{"ending": "http_500", "grade": "silent"}]})
    with pytest.raises(PinError, match="--format json"):
        pinned_grades([{"ending": "http_500"}])


NODE_CRASH = """\
node:internal/deps/undici/undici:13502
      Error.captureStackTrace(err);
            ^

TypeError: terminated
    at Fetch.onAborted (node:internal/deps/undici/undici:11132:53)
    at Fetch.emit (node:events:518:28) {
  [cause]: SocketError: other side closed
      at Socket.onHttpSocketEnd (node:internal/deps/undici/undici:6359:26) {
    code: 'UND_ERR_SOCKET'
  }
}

Node.js v20.20.2
"""
PY_TRACEBACK = """\
Traceback (most recent call last):
  File "client.py", line 3, in <module>
    raise openai.APIConnectionError(request=None)
openai.APIConnectionError: Connection error.
"""


@pytest.mark.parametrize("stderr, line", [
    (NODE_CRASH, "TypeError: terminated"),
    (PY_TRACEBACK, "openai.APIConnectionError: Connection error."),
    ("warming up\nsomething went wrong\n", "something went wrong"),
    ("", ""),
])
def test_the_last_error_line(stderr, line):
    assert last_error_line(stderr) == line


def test_the_error_line_is_scrubbed_and_short():
    key = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF"
    line = last_error_line(f"openai.AuthenticationError: Incorrect API key provided: {key}\n")
    assert key not in line and line.startswith("openai.AuthenticationError: Incorrect API key")
    assert len(last_error_line("Error: " + "x" * 5000)) == MAX_LINE


def test_every_row_is_made_by_a_rule_that_parses_and_names_known_dialects():
    assert len({row.name for row in CATALOG_ROWS}) == len(CATALOG_ROWS)
    for row in CATALOG_ROWS:
        assert row.dialects and set(row.dialects) <= set(ALL_DIALECTS), row.name
        assert set(row.expect.accept) <= set(GRADES), row.name
        if not row.pending:
            parse_fault_header(row.fault)  # raises FaultError naming the bad key


def test_the_catalog_covers_what_the_issue_lists():
    assert set(CATALOG.names) >= {
        "reset_before_response", "http_500", "http_429_retry_after", "anthropic_529",
        "reset_mid_text", "reset_mid_tool_args", "chunked_cut_no_last_chunk",
        "half_event_then_clean_end", "clean_end_between_events", "all_but_terminal_event",
        "provider_error_event", "wrapped_error_chunk", "error_frame_unknown_shape",
        "stall_before_first_byte", "stall_after_headers", "stall_mid_stream",
        "stall_behind_heartbeats", "parked_after_terminal", "malformed_chunk_size"}


def test_picking_and_skipping():
    picked = CATALOG.pick(["http_500", "reset_mid_text"])
    assert picked.names == ["http_500", "reset_mid_text"]
    with pytest.raises(CatalogError, match="did you mean `http_500`"):
        CATALOG.pick(["http_50"])
    assert CATALOG.skip_reason(ending("anthropic_529"), "openai-chat") == (
        "applies to anthropic-messages, not openai-chat")
    assert CATALOG.skip_reason(ending("anthropic_529"), "anthropic-messages") is None
    waiting = dataclasses.replace(ending("parked_after_terminal"), pending="needs a new action")
    assert CATALOG.skip_reason(waiting, "openai-chat") == "needs a new action"
    assert all(CATALOG.skip_reason(row, "openai-chat") is None for row in CATALOG.endings
               if row.applies_to("openai-chat"))  # every fault action the catalog names exists


def test_the_table_markdown_and_json_forms_say_the_same():
    from streamtap.diagnostics.probe.grade import skipped
    from streamtap.diagnostics.views.probe import (ProbeResult, markdown, report_section,
                                                   text_table)

    result = ProbeResult("probe-1", "openai-chat", (
        judge(ending("reset_mid_text"), Run(1, False, 0.71, (BROKEN,), "TypeError: terminated")),
        judge(ending("clean_end_between_events"), Run(0, False, 0.5, (BROKEN,))),
        skipped(ending("anthropic_529"), "applies to anthropic-messages, not openai-chat")),
        missing_pins=("http_500",))
    assert not result.passed and [v.ending for v in result.broken] == ["clean_end_between_events"]
    table = text_table(result)
    assert table[0].split()[:2] == ["ending", "grade"]
    assert table[2].split() == ["reset_mid_text", "raised", "TypeError:", "terminated", "1",
                                "0.7s", "meets"]
    assert table[-1] == ("2 ending(s) of openai-chat run, 1 broke the expectation; records in "
                         "session probe-1: clean_end_between_events; pinned but not graded in "
                         "this run: http_500")
    md = markdown(result)
    assert md[2] == "| reset_mid_text | raised | TypeError: terminated | 1 | 0.7s | meets |"
    assert md[3].startswith("| clean_end_between_events | SILENT | - | 1 | 0.5s | BREAKS: ")
    assert md[4] == ("| anthropic_529 | - |  |  |  | skipped: applies to anthropic-messages, not "
                     "openai-chat |")
    section = report_section(result.as_dict())
    assert [row["broken"] for row in section["rows"]] == [False, True, False]
    assert section["rows"][0]["cells"] == tuple(md[2].strip("| ").split(" | "))


def test_an_ending_the_client_never_reached_is_said_not_blamed():
    # a client that asks for a whole JSON reply never gets a third text delta to cut after
    unreached = Attempt(0.0, True, "t1", fault_fired=False)
    verdict = judge(ending("clean_end_between_events"), Run(0, False, 0.4, (unreached,)))
    assert (verdict.grade, verdict.meets) == ("ok", True)
    assert verdict.why == "not reached: the fault never fired in the client's requests"
    # --once: the fault fired in the first request only, and that counts
    recovered = judge(ending("reset_mid_text"), Run(0, False, 1.0, (
        Attempt(0.0, False, "t1"), Attempt(0.5, True, "t2", fault_fired=False))))
    assert (recovered.grade, recovered.meets) == ("recovered", True)
