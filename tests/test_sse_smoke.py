from diagnostics.sse import SseDecoder


def test_data_lines_dispatch_on_blank_line():
    decoder = SseDecoder()
    frames = decoder.feed(b"event: a\ndata: 1\ndata:2\n\n")
    assert [(f.event, f.data, f.size) for f in frames] == [("a", b"1\n2", 24)]
    assert decoder.close() == []
