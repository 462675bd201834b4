"""`streamtap ls` and `streamtap show`: golden output for a record of every boundary, trace-id
prefixes, colour only on a terminal, JSON listing, clear errors, and `serve` never importing the
rendering libraries."""

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamtap.proxy.readout import commands
from tests.make_golden import GOLDEN, render_all
from tests.tracefixtures import build


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    trace_dir = tmp_path_factory.mktemp("traces")
    build(trace_dir)
    return trace_dir


def streamtap(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamtap", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


def test_views_match_the_golden_files(tmp_path):
    """Regenerate with `python tests/make_golden.py` and read the diff before committing."""
    views = render_all(tmp_path)
    assert sorted(views) == sorted(path.name for path in GOLDEN.glob("*.txt"))
    for name, text in views.items():
        assert text == (GOLDEN / name).read_text(), f"{name} differs from its golden file"


def test_every_boundary_has_a_golden_show():
    boundaries = {path.stem.split("_", 2)[2] for path in GOLDEN.glob("show_*.txt")}
    assert boundaries >= {"none", "transport", "provider_close", "provider_error",
                          "client_abort", "watchdog", "injected", "proxy"}


@pytest.mark.e2e
def test_show_starts_with_the_verdict_and_names_the_open_tool_call(traces):
    out = streamtap("show", "22c0", "--trace-dir", str(traces)).stdout
    first = out.splitlines()[0]
    assert first.startswith("FAIL transport/tool_input  The connection to openai was reset")
    assert "#0 apply_patch  4 chunks" in out and "INCOMPLETE" in out
    assert "longest silence 901 ms (320 ms to 1221 ms), right before the end" in out
    assert "\x1b[" not in out  # a pipe gets plain text


@pytest.mark.e2e
def test_show_last_failed_and_by_file(traces):
    out = streamtap("show", "--last", "--failed", "--trace-dir", str(traces)).stdout
    assert out.startswith("FAIL proxy/before_response")
    record_file = next((traces / "alpha").glob("*-11c0ffee00000001.json"))
    out = streamtap("show", str(record_file)).stdout
    assert out.startswith("ok  The openai stream completed normally")


@pytest.mark.e2e
def test_ambiguous_or_unknown_prefix_says_what_to_do(traces):
    (traces / "delta").mkdir()
    line = json.loads((traces / "alpha" / "index.jsonl").read_text().splitlines()[0])
    line["trace_id"] = "11c0ffee99999999"
    (traces / "delta" / "index.jsonl").write_text(json.dumps(line) + "\n")
    result = streamtap("show", "11c0", "--trace-dir", str(traces))
    assert result.returncode == 2
    assert "matches 2 traces" in result.stderr and "give more characters" in result.stderr
    result = streamtap("show", "ffff", "--trace-dir", str(traces))
    assert result.returncode == 2 and "streamtap ls" in result.stderr
    result = streamtap("ls", "--trace-dir", str(traces / "nope"))
    assert result.returncode == 2 and "--trace-dir" in result.stderr
    result = streamtap("ls", "--since", "yesterday", "--trace-dir", str(traces))
    assert result.returncode == 2 and "30m, 1h, 2d" in result.stderr


@pytest.mark.e2e
def test_broken_index_lines_are_skipped_not_fatal(tmp_path):
    build(tmp_path)
    with open(tmp_path / "beta" / "index.jsonl", "a") as index:
        index.write('{"trace_id": "half-writ')
    result = streamtap("ls", "--trace-dir", str(tmp_path), "--format", "json")
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 9
    assert "skipped 1 unreadable index line" in result.stderr


def test_ls_json_is_newest_first_and_filters(traces):
    out = io.StringIO()
    commands.ls(traces, session="alpha", failed=True, fmt="json", out=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["trace_id"][:2] for line in lines] == ["33", "22"]
    assert all(line["ok"] is False and line["file"].endswith(".json") for line in lines)


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_on_a_terminal_unless_no_color(traces, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = FakeTty()
    commands.show(traces, "22c0", out=out)
    assert "\x1b[" in out.getvalue() and "apply_patch" in out.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    out = FakeTty()
    commands.show(traces, "22c0", out=out)
    assert "\x1b[" not in out.getvalue()
    assert out.getvalue() == (GOLDEN / "show_22_transport.txt").read_text()


@pytest.mark.e2e
def test_serve_does_not_import_the_rendering_libraries():
    code = ("import sys, streamtap.proxy.cli, streamtap.proxy.serve.run, streamtap.proxy.serve.app;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'jinja2')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_terminal_escapes_from_the_network_are_not_printed(tmp_path):
    build(tmp_path)
    index = tmp_path / "beta" / "index.jsonl"
    lines = index.read_text().splitlines()
    line = json.loads(lines[0])
    line["model"] = "evil\x1b[2Jmodel"
    index.write_text("\n".join([json.dumps(line), *lines[1:]]) + "\n")
    for out in (io.StringIO(), FakeTty()):
        commands.ls(tmp_path, out=out)
        assert "\x1b[2J" not in out.getvalue() and "evil?[2Jmodel" in out.getvalue()


def test_index_lines_from_before_they_named_session_and_file_still_list_and_show(tmp_path):
    records = build(tmp_path)
    index = tmp_path / "alpha" / "index.jsonl"
    old = []
    for raw in index.read_text().splitlines():
        line = json.loads(raw)
        del line["session_id"], line["file"], line["provider"], line["message_id"], line["fault"]
        old.append(json.dumps(line))
    index.write_text("\n".join(old) + "\n")
    out = io.StringIO()
    commands.ls(tmp_path, session="alpha", out=out)
    def cells(text: str) -> list[list[str]]:  # widths follow the rows shown
        return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()]

    assert cells(out.getvalue()) == [row for row in cells((GOLDEN / "ls.txt").read_text())
                                     if row[0] == "TIME" or row[2] == "alpha"]
    out = io.StringIO()
    assert commands.show(tmp_path, records[1]["trace_id"][:6], out=out) == 0
    assert out.getvalue() == (GOLDEN / "show_22_transport.txt").read_text()
