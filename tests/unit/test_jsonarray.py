"""The streamed JSON array decoder (Gemini without `alt=sse`): one frame per element, string- and
escape-aware, identical whatever the chunk boundaries, sizes adding up to the body."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from streamtap.diagnostics.decode.jsonarray import JsonArrayDecoder
from streamtap.diagnostics.decode.sse import Frame
from tests.support import chunked

BODY = b'[{\n  "a": "x}{\\"]",\n  "b": [1, {"c": "\\\\"}]\n}\n,\r\n{"d": 2}\n]\n'


def decode(data: bytes, sizes="whole", max_line: int = 1 << 20) -> tuple[list, JsonArrayDecoder]:
    decoder = JsonArrayDecoder(max_line)
    frames: list[Frame] = []
    for piece in chunked(data, sizes):
        frames += decoder.feed(piece)
    frames += decoder.close()
    return frames, decoder


def test_one_frame_per_element_with_separators_in_its_size():
    frames, decoder = decode(BODY)
    assert [(f.data, f.size, f.unterminated) for f in frames] == [
        (b'{\n  "a": "x}{\\"]",\n  "b": [1, {"c": "\\\\"}]\n}', 45, False),
        (b'{"d": 2}', 12, False),  # `\n,\r\n` before it belongs to it
    ]
    assert decoder.trailing_bytes == 3  # `\n]\n`
    assert sum(f.size for f in frames) + decoder.trailing_bytes == len(BODY)
    assert [json.loads(f.data) for f in frames] == json.loads(BODY)
    assert decoder.overlong_lines == 0


def test_bytewise_gives_the_same_frames():
    frames, decoder = decode(BODY, "bytewise")
    assert frames == decode(BODY)[0] and decoder.trailing_bytes == 3


def test_an_element_is_framed_by_the_chunk_that_closes_it():
    decoder = JsonArrayDecoder()
    assert [f.data for f in decoder.feed(b'[{"a": 1}')] == [b'{"a": 1}']
    assert decoder.feed(b',\r\n{"b": "}') == []  # the brace is inside a string
    assert decoder.feed(b'\\') == []  # an escape split across chunks...
    assert decoder.feed(b'"x"') == []  # ...so this quote does not end the string
    assert [f.data for f in decoder.feed(b'}]')] == [b'{"b": "}\\"x"}']
    assert decoder.close() == [] and decoder.trailing_bytes == 1


def test_a_chunk_ending_on_a_backslash_inside_a_new_string():
    decoder = JsonArrayDecoder()
    assert decoder.feed(b'[{"a": "x\\') == []  # the string opened in this chunk
    assert decoder.feed(b'"}') == []  # an escaped quote, not the end of the string
    assert [f.data for f in decoder.feed(b'"}]')] == [b'{"a": "x\\"}"}']


def test_an_escaped_backslash_before_a_quote_ends_the_string():
    body = b'[{"a": "\\\\"}, {"b": "\\\\\\""}]'
    for sizes in ("whole", "bytewise", [8, 1, 1, 3]):
        frames, _ = decode(body, sizes)
        assert [json.loads(f.data) for f in frames] == [{"a": "\\"}, {"b": '\\"'}]


def test_an_element_open_at_the_end_is_unterminated():
    cut = BODY[:30]  # inside the first element, inside a string
    for sizes in ("whole", "bytewise"):
        frames, decoder = decode(cut, sizes)
        assert frames == [Frame(cut[1:], 30, unterminated=True)]
        assert decoder.trailing_bytes == 0
    frames, decoder = decode(BODY[:-2])  # complete elements, the `]` missing
    assert [f.unterminated for f in frames] == [False, False] and decoder.trailing_bytes == 1


def test_an_overlong_element_is_dropped_and_its_bytes_ride_on_the_next_frame():
    big = b'{"pad": "' + b"x" * 100 + b'"}'
    body = b'[{"a": 1},\r\n' + big + b',\r\n{"b": 2}]'
    whole, decoder = decode(body, max_line=64)
    assert [f.data for f in whole] == [b'{"a": 1}', b'{"b": 2}']
    assert decoder.overlong_lines == 1
    assert whole[1].size == len(b",\r\n") + len(big) + len(b',\r\n{"b": 2}')
    assert sum(f.size for f in whole) + decoder.trailing_bytes == len(body)
    for sizes in ("bytewise", [5, 50, 7], [200]):
        frames, decoder = decode(body, sizes, max_line=64)
        assert frames == whole and decoder.overlong_lines == 1


def test_an_overlong_element_open_at_the_end_is_unterminated_without_its_bytes():
    body = b'[{"a": 1},{"pad": "' + b"x" * 100
    for sizes in ("whole", "bytewise"):
        frames, decoder = decode(body, sizes, max_line=64)
        assert [(f.data, f.unterminated) for f in frames] == [(b'{"a": 1}', False), (b"", True)]
        assert frames[1].size == len(body) - frames[0].size
        assert decoder.overlong_lines == 1


def test_deep_elements_take_the_slow_path_with_the_same_result():
    deep = {"a": 1}
    for _ in range(12):
        deep = {"k": [deep, "]}"]}
    body = ("[" + json.dumps(deep) + ",\r\n" + json.dumps({"z": "{"}) + "]").encode()
    for sizes in ("whole", "bytewise", [17, 3]):
        frames, _ = decode(body, sizes)
        assert [json.loads(f.data) for f in frames] == [deep, {"z": "{"}]


def test_a_bare_object_or_an_empty_body():
    frames, decoder = decode(b'{"error": {"code": 503}}\n')
    assert [f.data for f in frames] == [b'{"error": {"code": 503}}'] and decoder.trailing_bytes == 1
    assert decode(b"")[0] == [] and decode(b"[]")[1].trailing_bytes == 2
    frames, decoder = decode(b"[\r\n]")
    assert frames == [] and decoder.trailing_bytes == 4


# -- properties: any elements, any formatting, any chunking -------------------------------------
TRICKY_TEXT = st.text(alphabet=st.sampled_from(list('ab{}[]",:\\\n\t é€😀')), max_size=12)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | TRICKY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TRICKY_TEXT, inner, max_size=4),
    max_leaves=12)
ELEMENTS = st.lists(st.dictionaries(TRICKY_TEXT, VALUES, max_size=4), max_size=5)


@settings(max_examples=200, deadline=None)
@given(ELEMENTS, st.sampled_from([None, 2]), st.booleans(),
       st.sampled_from([",", ",\r\n", "\n,\n"]), st.lists(st.integers(1, 64), max_size=80))
def test_any_array_any_chunking(elements, indent, ascii_only, separator, sizes):
    body = ("[" + separator.join(json.dumps(e, indent=indent, ensure_ascii=ascii_only)
                                 for e in elements) + "]\r\n").encode()
    whole, decoder = decode(body)
    assert [json.loads(f.data) for f in whole] == elements
    assert not any(f.unterminated for f in whole)
    assert sum(f.size for f in whole) + decoder.trailing_bytes == len(body)
    assert decode(body, sizes)[0] == whole
    assert decode(body, "bytewise")[0] == whole


@settings(max_examples=100, deadline=None)
@given(ELEMENTS.filter(bool), st.data())
def test_any_cut_gives_complete_elements_then_one_unterminated(elements, data):
    body = ("[" + ",\r\n".join(json.dumps(e) for e in elements) + "]").encode()
    cut = data.draw(st.integers(0, len(body)))
    frames, decoder = decode(body[:cut], data.draw(st.lists(st.integers(1, 16), max_size=60)))
    complete = [f for f in frames if not f.unterminated]
    assert [json.loads(f.data) for f in complete] == elements[:len(complete)]
    assert all(not f.unterminated for f in frames[:-1])
    assert sum(f.size for f in frames) + decoder.trailing_bytes == cut
