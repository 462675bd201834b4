"""README's "Reading traces" commands, run verbatim in order in a fresh folder, do what the
section says: the demo records four requests, then ls, show, report and export read them."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.readme import section, shell_blocks


def test_reading_traces_commands_run_verbatim(tmp_path):
    commands = shell_blocks("Reading traces")
    assert [command.split()[1] for command in commands] == ["demo", "ls", "show", "report",
                                                            "export"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    outputs = []
    for command in commands:
        result = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, f"{command}: {result.stderr}"
        outputs.append(result.stdout)
    demo, ls, show, _, _ = outputs
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
