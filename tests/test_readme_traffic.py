"""docs/record.md's "Dialects and endpoints recognised" and "Stale upstream connections" sections
say what the code does: every endpoint row is matched by the endpoint table, and the numbers are the
code's."""

from __future__ import annotations

import re

from streamtap.diagnostics.dialects import DIALECT_SOURCES, ENDPOINTS, dialect_for_path
from streamtap.diagnostics.dialects.sniff import SNIFF_FRAMES
from streamtap.proxy.serve.upstream import KEEPALIVE_TIMEOUT_S
from tests.readme import section

PLACEHOLDER = re.compile(r"\{[a-z]+\}")


def endpoint_rows() -> list[tuple[list[str], str]]:
    rows = []
    for line in section("Dialects and endpoints recognised").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].startswith("`") and cells[0] != "path ends with":
            rows.append((re.findall(r"`([^`]+)`", cells[0]), cells[1].strip("`")))
    return rows


def test_every_endpoint_readme_lists_is_recognised_under_a_prefix():
    rows = endpoint_rows()
    assert len(rows) == 7
    for endings, dialect in rows:
        for ending in endings:
            path = "/some/gateway" + PLACEHOLDER.sub("x1", ending) + "?api-version=1"
            assert dialect_for_path(path) == dialect, path


def test_readme_lists_every_row_of_the_endpoint_table():
    listed = sum(len(endings) for endings, _ in endpoint_rows())
    assert listed == len(ENDPOINTS)
    assert {dialect for _, dialect in endpoint_rows()} == {row[1] for row in ENDPOINTS}


def test_readme_states_the_sniffing_limit_and_every_dialect_source():
    text = section("Dialects and endpoints recognised")
    assert f"after {SNIFF_FRAMES} data frames" in text
    record_table = section("What a trace record holds")
    for source in DIALECT_SOURCES:
        assert f"`{source}`" in record_table


def test_readme_states_the_pool_idle_time():
    text = section("Stale upstream connections")
    assert f"{KEEPALIVE_TIMEOUT_S:g} s of idleness" in text and "60 s" in text
    assert "`upstream_retry`" in text


def test_readme_names_every_field_of_a_tool_entry():
    from streamtap.diagnostics.dialects.arguments import NOT_JSON_TEXT, TOO_LARGE
    from streamtap.diagnostics.dialects.stream import ToolCall

    record_table = section("What a trace record holds")
    for name in ToolCall(0, None, 0.0).as_dict():
        assert f"`{name}`" in record_table, name
    assert f"`{TOO_LARGE}`" in record_table and f"`{NOT_JSON_TEXT}`" in record_table
