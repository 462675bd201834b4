"""`probe --from DIR`'s rows, pure: a repro case becomes a catalog row that answers with its sample
instead of arming a fault rule, graded like any ending; one dialect per run, said when not."""

from __future__ import annotations

import pytest

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.diagnostics.probe.catalog import HUNG, OK, RAISED, RECOVERED, SILENT, Catalog
from streamtap.diagnostics.probe.grade import Attempt, Run, judge
from streamtap.diagnostics.probe.repro_rows import repro_catalog, repro_ending
from streamtap.diagnostics.samples.repro import ReproError, build_repro, read_case
from tests.streams import anthropic_text_stream, chat_text_stream
from tests.support import record_stream

CHAT = "/v1/chat/completions"
BROKEN, DONE = Attempt(0.0, False), Attempt(0.0, True)


def case(record: dict, trace_id: str):
    sample, manifest = build_repro(record_from_dict(record))
    manifest["trace_id"] = trace_id
    return read_case(manifest, sample)


def chat_reset(trace_id: str = "a1" * 16):
    data = b"".join(chat_text_stream(4, done=False)[:4])
    return case(record_stream(data, path=CHAT, upstream="reset", downstream="aborted"), trace_id)


def chat_complete(trace_id: str = "c3" * 16):
    return case(record_stream(b"".join(chat_text_stream(3)), path=CHAT), trace_id)


def anthropic_reset(trace_id: str = "b2" * 16):
    data = b"".join(anthropic_text_stream(3)[:4])
    return case(record_stream(data, path="/v1/messages", upstream="reset", downstream="aborted",
                              provider="anthropic"), trace_id)


def test_a_recorded_failure_is_a_row_that_answers_with_its_sample():
    reset = chat_reset()
    row = repro_ending(reset)
    assert row.name == "repro:" + "a1" * 6  # the trace id's first 12 characters
    assert (row.dialects, row.fault, row.answer) == (("openai-chat",), "", None)
    assert row.sample is reset.sample and row.sample["ending"] == "reset"
    assert row.made_by == "the recorded sample, ending `reset`"
    assert hash(row) == hash(repro_ending(chat_reset()))  # still a row of a table
    assert set(row.expect.accept) == {RAISED, RECOVERED}
    # graded like any ending: silent or hung breaks it, raised or recovered meets it
    for grade_of, run in ((SILENT, Run(0, False, 0.3, (BROKEN,))),
                          (HUNG, Run(None, True, 30.0, (BROKEN,)))):
        verdict = judge(row, run)
        assert (verdict.ending, verdict.grade, verdict.meets) == (row.name, grade_of, False)
        assert verdict.why == "breaks: a recorded failure must neither be silent nor hang"
    assert judge(row, Run(1, False, 0.3, (BROKEN,))).meets
    assert judge(row, Run(0, False, 0.6, (BROKEN, DONE))).grade == RECOVERED


def test_a_repro_of_a_complete_stream_must_complete():
    row = repro_ending(chat_complete())
    assert row.expect.accept == (OK,)
    assert judge(row, Run(0, False, 0.2, (DONE,))).meets
    assert not judge(row, Run(1, False, 0.2, (DONE,))).meets


def test_the_folders_make_a_catalog_of_one_dialect_in_their_order():
    first, second = chat_reset(), chat_complete()
    catalog, dialect = repro_catalog([("one", first), ("two", second)])
    assert dialect == "openai-chat"
    assert catalog.names == ["repro:" + "a1" * 6, "repro:" + "c3" * 6]
    assert catalog.pick(["repro:" + "c3" * 6]).names == ["repro:" + "c3" * 6]
    assert Catalog().skip_reason(catalog.endings[0], dialect) is None
    assert "applies to openai-chat" in Catalog().skip_reason(catalog.endings[0],
                                                              "anthropic-messages")
    assert repro_catalog([("one", first)], "openai-chat")[1] == "openai-chat"


@pytest.mark.parametrize("cases, wanted, says", [
    ([("chat", chat_reset()), ("claude", anthropic_reset())], None,
     "the repro folders are of different dialects (openai-chat: chat; anthropic-messages: "
     "claude); a probe runs one client in one dialect"),
    ([("chat", chat_reset())], "anthropic-messages",
     "--dialect anthropic-messages, but the repro folders are openai-chat: leave --dialect out"),
    ([("here", chat_reset()), ("there", chat_reset())], None,
     "here and there hold the repro of the same trace"),
    ([], None, "--from names no repro folder"),
])
def test_what_cannot_be_probed_together_is_refused_with_what_to_do(cases, wanted, says):
    with pytest.raises(ReproError) as raised:
        repro_catalog(cases, wanted)
    assert says in str(raised.value)
