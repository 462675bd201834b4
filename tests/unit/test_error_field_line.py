"""Issue 27: an SSE `error:` field line is an in-band error too. A GPUStack server streamed 444 KB
of an answer, then its error on an `error:` line (a field WHATWG ignores, so no client sees an
event), then closed without `[DONE]`. The record must say what the client could not see."""

from __future__ import annotations

import pytest

from tests.streams import ERROR_FIELD_LINE, chat_then_error_field
from tests.support import record_stream

PATH = "/v1/chat/completions"


def record_of(chunks: list[bytes], sizes="whole") -> dict:
    return record_stream(b"".join(chunks), path=PATH, chunks=sizes)


@pytest.mark.parametrize("sizes", ["whole", [4096] * 200, "line_split"])
def test_a_long_answer_then_an_error_field_line_is_a_provider_error(sizes):
    chunks = chat_then_error_field()
    body = b"".join(chunks)
    assert 444_000 <= len(body) < 445_000
    if sizes == "line_split":  # the error line arrives in two chunks, its JSON cut in half
        cut = len(body) - len(ERROR_FIELD_LINE) // 2
        sizes = [cut]
    record = record_of(chunks, sizes)
    outcome, stream = record["outcome"], record["stream"]
    assert (outcome["boundary"], outcome["phase"], outcome["ok"]) == ("provider_error", "text",
                                                                      False)
    assert outcome["evidence"] == ["error_frame_unknown_shape", "server_error",
                                   "sse_unknown_field"]
    assert "on an SSE `error:` line, a field clients ignore" in outcome["summary"]
    assert stream["errors"] == [{"shape": "error_frame_unknown_shape", "t_ms": 2.0,
                                 "type": "server_error", "code": "500",
                                 "message": "failed to decode the upstream response",
                                 "field": "error"}]
    assert stream["unknown_fields"] == {"error": 1}
    # Evidence, not dispatch: the line is no frame, and the text deltas are all there is.
    assert stream["frame_count"] == len(chunks) - 1
    assert stream["event_counts"]["text_delta"] == len(chunks) - 2
    assert stream["terminal"] is None and stream["bytes"] == len(body)


def test_the_same_line_with_no_line_end_is_still_read():
    chunks = chat_then_error_field(20_000)
    chunks[-1] = ERROR_FIELD_LINE.rstrip(b"\n")
    record = record_of(chunks)
    assert record["outcome"]["boundary"] == "provider_error"
    assert record["outcome"]["evidence"] == ["error_frame_unknown_shape", "server_error",
                                             "sse_unknown_field", "unterminated_frame"]
    assert record["stream"]["unknown_fields"] == {"error": 1}


def test_an_unknown_field_that_is_no_error_is_counted_and_changes_no_verdict():
    chunks = chat_then_error_field(2_000)[:-1]
    chunks.insert(2, b"x-trace: abc\n")  # a field line inside an event: ignored by clients
    chunks.append(b'status: {"phase":"generating"}\n\ndata: [DONE]\n\n')
    record = record_of(chunks)
    assert record["stream"]["unknown_fields"] == {"x-trace": 1, "status": 1}
    assert record["stream"]["errors"] == []
    assert record["outcome"]["boundary"] == "none"


def test_field_names_that_could_be_words_or_keys_are_not_kept():
    """A raw text line (no colon) and a key-like name are counted, never named."""
    key = "sk-abcdefghijklmnopqrstuvwxyz012"
    chunks = [b"hello there\n", f"{key}: x\n".encode(), b"\n", b"data: [DONE]\n\n"]
    record = record_of(chunks)
    assert record["stream"]["unknown_fields"] == {"<other>": 2}
