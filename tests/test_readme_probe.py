"""docs/clients.md's "Probing your client" section, run as written: its three `streamtap probe`
commands verbatim against the Node fetch example (the table it shows must be the grades the
probe prints), and its pytest example in a pytest run of its own."""

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.clients import PROVIDER_ENV, env_without_providers
from tests.readme import code_blocks, shell_blocks

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
BIN = str(Path(sys.executable).parent)  # where `streamtap` is installed
PROBING = "Probing your client"
_ROW = re.compile(r"^([a-z0-9_]+)\s{2,}(ok|raised|recovered|SILENT|HUNG|-)\s", re.M)


def grades(table: str) -> dict[str, str]:
    return dict(_ROW.findall(table))


def test_the_probe_commands_run_as_written_and_print_the_table_readme_shows(tmp_path, node):
    table, pin, check = shell_blocks(PROBING)
    assert table == "streamtap probe -- node examples/probe-fetch-client.mjs"
    (tmp_path / "examples").symlink_to(REPO / "examples")  # README's paths, from a fresh folder

    def run(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env_without_providers(BIN),
                              capture_output=True, text=True, timeout=300)

    done = run(table)
    assert done.returncode == 1, done.stderr  # some grades break their expectation
    shown = grades(code_blocks(PROBING, "text")[0])
    assert len(shown) >= 19 and shown["clean_end_between_events"] == "SILENT"
    assert grades(done.stdout) == shown
    assert "TypeError: terminated" in done.stdout

    done = run(pin)
    assert done.returncode == 1, done.stderr  # the SILENT clean close breaks the catalog's rule
    pinned = json.loads((tmp_path / "fetch-grades.json").read_text())
    assert {row["ending"]: row["grade"] for row in pinned["endings"]} == {
        "reset_mid_tool_args": "raised", "clean_end_between_events": "SILENT"}

    done = run(check)
    assert done.returncode == 0, done.stdout + done.stderr  # the same grades: CI passes
    # ... and the records of every run are in sessions `streamtap ls` reads
    listing = run("streamtap ls").stdout
    assert listing.count("probe-") >= 3


def test_the_pytest_example_grades_the_openai_sdk_over_the_catalog(pytester, monkeypatch):
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    (example,) = code_blocks(PROBING, "python")
    pytester.makepyfile(test_my_client=example)
    result = pytester.runpytest_subprocess("--streamtap-report", "-p", "no:cacheprovider",
                                           "-W", "ignore::DeprecationWarning")
    # the SDK ends quietly on the three truncations without a terminal event and on an error
    # frame of no documented shape, and its read timeout never fires behind keep-alives (every
    # byte resets it); Anthropic's 529 is not for an OpenAI client
    result.assert_outcomes(passed=13, failed=5, skipped=1)
    result.stdout.fnmatch_lines(["*streamtap: how the client handled each ending*",
                                 "half_event_then_clean_end*SILENT*",
                                 "clean_end_between_events*SILENT*",
                                 "all_but_terminal_event*SILENT*",
                                 "provider_error_event*raised*openai.APIError*meets",
                                 "error_frame_unknown_shape*SILENT*",
                                 "stall_behind_heartbeats*HUNG*"])


def test_readmes_excerpt_is_rows_of_the_table_the_probe_printed():
    """README's four rows are the real run's rows, word for word: docs/clients.md's table is the
    one the probe test above checks against a run."""
    excerpt = code_blocks("Probe, repro, stats, metrics", "text", document="README.md")[0]
    table = code_blocks(PROBING, "text")[0].splitlines()
    rows = excerpt.splitlines()
    assert len(rows) == 6 and all(row in table for row in rows), rows
