"""README's "Reading traces" commands, run verbatim in order in a fresh folder, do what the
section says: the demo records four requests, then ls, show, report and export read them."""

import json
from pathlib import Path

import pytest

from tests.readme import run_verbatim, section, shell_blocks


@pytest.mark.e2e
def test_reading_traces_commands_run_verbatim(tmp_path):
    commands = shell_blocks("Reading traces")
    assert [command.split()[1] for command in commands] == ["demo", "ls", "show", "report",
                                                            "export"]
    demo, ls, show, _, _ = run_verbatim(commands, tmp_path)
    assert "FAIL transport/tool_input" in demo
    rows = ls.splitlines()[1:]
    assert len(rows) == 3 and all("  FAIL " in row for row in rows)
    assert show.startswith("FAIL provider_close/text  openai (or a gateway in between) closed")
    report = (tmp_path / "report.html").read_text()
    assert report.count('<svg class="timeline"') == 4
    har = json.loads((tmp_path / "session.har").read_text())
    assert len(har["log"]["entries"]) == 4 and har["log"]["pages"] == []


def test_reading_traces_shows_the_committed_screenshot():
    text = section("Reading traces")
    assert "](docs/live-page.png)" in text and "python tests/make_screenshot.py" in text
    png = Path(__file__).resolve().parent.parent / "docs" / "live-page.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
