"""A repro's manifest and case, pure: where a recorded stream broke (frame index, byte offset,
phase), what a trace cannot become a repro, and a folder's files read back or refused with what to
do."""

from __future__ import annotations

import pytest

from streamtap.diagnostics.record.schema import record_from_dict
from streamtap.diagnostics.samples.repro import (REPRO_VERSION, ReproError, break_point,
                                                 build_repro, read_case)
from tests.streams import chat_text_stream, chat_tool_stream
from tests.support import record_stream

CHAT = "/v1/chat/completions"


def reset_mid_text() -> dict:
    data = b"".join(chat_text_stream(4, done=False)[:4])
    return record_stream(data, path=CHAT, chunks=(40, 200), upstream="reset",
                         downstream="aborted", t_step=5.0)


def truncated_mid_arguments() -> dict:
    frames = chat_tool_stream(5, finish=False)
    data = b"".join(frames[:3]) + frames[3][:30]
    return record_stream(data, path=CHAT, upstream="truncated", downstream="aborted")


def test_a_reset_between_frames_breaks_where_the_next_frame_would_start():
    record = reset_mid_text()
    point = break_point(record_from_dict(record))
    assert point.frames == 4 and point.frame_index == 4 and not point.unterminated
    assert point.byte_offset == len(b"".join(chat_text_stream(4, done=False)[:4]))


def test_a_frame_cut_half_way_is_the_frame_that_broke():
    record = truncated_mid_arguments()
    point = break_point(record_from_dict(record))
    assert point.frames == 4 and point.frame_index == 3 and point.unterminated
    frames = chat_tool_stream(5, finish=False)
    assert point.byte_offset == len(b"".join(frames[:3])) + 30


def test_dropped_frames_count_from_the_stream_not_the_kept_list():
    record = reset_mid_text()
    record["frames"] = record["frames"][:1] + record["frames"][-1:]
    record["frames_dropped"] = 2
    assert break_point(record_from_dict(record)) == break_point(record_from_dict(reset_mid_text()))


def test_an_http_error_breaks_before_the_stream():
    record = record_stream(b'{"error":{"type":"server_error"}}', path=CHAT,
                           content_type="application/json", status=500)
    assert break_point(record_from_dict(record)).frames == 0 and break_point(record_from_dict(record)).byte_offset == 0


def test_the_manifest_says_where_and_how_it_broke():
    sample, manifest = build_repro(record_from_dict(truncated_mid_arguments()))
    assert manifest["repro_version"] == REPRO_VERSION
    assert (manifest["dialect"], manifest["ending"], manifest["phase"]) == (
        "openai-chat", "truncated", "tool_input")
    assert (manifest["frames"], manifest["frame_index"]) == (4, 3)
    assert manifest["verdict"]["boundary"] == "transport"
    assert "upstream_truncated" in manifest["verdict"]["evidence"]
    assert "summary" not in manifest["verdict"]  # words, not tokens: it can name a tool
    assert manifest["bytes_exact"] and manifest["notes"] == []
    assert sample["ending"] == "truncated" and manifest["sample"] == "repro.sample.json"


def test_a_case_reads_back_what_the_manifest_says():
    sample, manifest = build_repro(record_from_dict(reset_mid_text()))
    case = read_case(manifest, sample)
    assert case.point == break_point(record_from_dict(reset_mid_text()))
    assert (case.dialect, case.ending, case.phase, case.status) == (
        "openai-chat", "reset", "text", 200)
    assert case.request_path == CHAT and case.streams and case.sample is sample


def test_a_stream_that_did_not_fail_says_so():
    data = b"".join(chat_text_stream(3))
    _, manifest = build_repro(record_from_dict(record_stream(data, path=CHAT)))
    assert manifest["ending"] == "terminal"
    assert any("did not fail" in note for note in manifest["notes"])


def test_a_request_streamtap_answered_itself_is_refused():
    record = reset_mid_text()
    record["response"] = None
    record["outcome"]["boundary"] = "proxy"
    with pytest.raises(ReproError, match="answered by streamtap itself.*ls --failed"):
        build_repro(record_from_dict(record))


def test_a_stream_of_no_known_dialect_is_refused():
    record = record_stream(b"hello", path="/v1/other", content_type="text/plain")
    with pytest.raises(ReproError, match="no dialect streamtap knows"):
        build_repro(record_from_dict(record))


@pytest.mark.parametrize("change, message", [
    (lambda m, s: m.pop("repro_version"), "not a streamtap repro manifest"),
    (lambda m, s: m.update(repro_version=REPRO_VERSION + 1), "newer than this streamtap"),
    (lambda m, s: m.pop("byte_offset"), "lacks byte_offset"),
    (lambda m, s: m.update(ending="clean_close"), "come from different repros"),
    (lambda m, s: s.pop("frames"), "not a streamtap sample"),
])
def test_a_broken_folder_is_refused_with_what_to_do(change, message):
    sample, manifest = build_repro(record_from_dict(reset_mid_text()))
    change(manifest, sample)
    with pytest.raises(ReproError, match=message):
        read_case(manifest, sample)
