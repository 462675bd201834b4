"""docs/development.md's Development section: its mutation command runs, verbatim, and prints what
it says."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.readme import section, shell_blocks

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.e2e
def test_the_mutation_command_runs_and_reports_per_module_and_in_total():
    commands = shell_blocks("Development")
    assert len(commands) == 1 and commands[0].startswith(".venv/bin/python bench/mutate.py ")
    assert (REPO / ".venv" / "bin" / "python").exists(), "make the venv as Quick start says"
    # Not under the suite's own coverage: the command measures with coverage itself.
    env = {key: value for key, value in os.environ.items() if not key.startswith("COVERAGE")}
    done = subprocess.run(commands[0], shell=True, cwd=REPO, capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"diagnostics/dialects/stream\.py +\d+ +\d+ +\d+ +\d+ +\d+ +\d+ +\d+%",
                        lines[-2]), lines[-2]
    final = re.fullmatch(r"mutation: (\d+)/(\d+) killed \((\d+)%\) in \d+ s; \d+ equivalent, "
                         r"(\d+) not run", lines[-1])
    assert final, lines[-1]
    killed, judged, _, not_run = map(int, final.groups())
    # A map of the wrong files (the checkout's while the tests run the installed copy) left every
    # mutant "no test reaches it" and still killed a few at import: 4 of 104.
    assert judged > 0 and killed / judged > 0.5, lines[-1]
    for line in lines:
        if line.startswith("  survived "):
            assert re.fullmatch(r"  survived diagnostics/dialects/stream\.py:\d+: .+ -> .+", line)
    assert "not run by CI" in section("Development")


def test_every_listed_equivalent_mutant_exists_and_says_why():
    import tomllib
    import sys

    sys.path.insert(0, str(REPO / "bench"))
    try:
        import mutate
    finally:
        sys.path.pop(0)
    entries = tomllib.loads((REPO / "bench" / "mutation_equivalents.toml").read_text())
    mutants = {}
    for entry in entries.get("equivalent", []):
        if entry["file"] not in mutants:
            mutants[entry["file"]] = mutate.find_mutants((REPO / entry["file"]).read_text())
        found = [m for m in mutants[entry["file"]]
                 if (m.original, m.mutated) == (entry["original"], entry["mutant"])
                 and ".".join(m.scope) == entry.get("scope", ".".join(m.scope))
                 and m.line == entry.get("line", m.line)]
        assert found, f"no such mutant any more: {entry}"
        assert len(entry["reason"]) > 20


def _mutate_module():
    import sys

    sys.path.insert(0, str(REPO / "bench"))
    try:
        import mutate
    finally:
        sys.path.pop(0)
    return mutate


def test_an_empty_line_map_is_an_error_and_never_cached(tmp_path, monkeypatch):
    # Seen: a map made where coverage traced nothing was cached, and every later run read each
    # mutant as "no test reaches it" (4/104 killed).
    mutate = _mutate_module()
    monkeypatch.setattr(mutate, "CACHE_DIR", tmp_path)
    empty = ({"diagnostics/dialects/stream.py": {12: set(), 13: set()}},
             {"tests/unit/test_stream_state.py::test_a": 0.01}, 0)
    monkeypatch.setattr(mutate, "_run_map", lambda paths, tests: empty)
    with pytest.raises(mutate.EmptyMap, match="no line of diagnostics/dialects/stream.py"):
        mutate.map_tests(["diagnostics/dialects/stream.py"], ["tests/unit/test_stream_state.py"])
    assert list(tmp_path.iterdir()) == []


def test_a_cached_map_that_is_empty_or_partial_is_made_again(tmp_path, monkeypatch):
    mutate = _mutate_module()
    monkeypatch.setattr(mutate, "CACHE_DIR", tmp_path)
    paths, tests = ["diagnostics/dialects/stream.py"], ["tests/unit/test_stream_state.py"]
    good = ({paths[0]: {12: {"tests/unit/test_stream_state.py::test_a"}}},
            {"tests/unit/test_stream_state.py::test_a": 0.01}, 0)
    runs = []
    monkeypatch.setattr(mutate, "_run_map", lambda p, t: runs.append(1) or good)
    assert mutate.map_tests(paths, tests)[0] == good[0]
    assert mutate.map_tests(paths, tests)[0] == good[0] and len(runs) == 1  # read back
    (cached,) = tmp_path.iterdir()
    cached.write_text('{"lines": {"diagnostics/dialects/stream.py": {"12": []}}, '
                      '"durations": {"t": 0.1}}')
    assert mutate.map_tests(paths, tests)[0] == good[0] and len(runs) == 2


@pytest.mark.e2e
def test_the_line_map_is_cached_in_the_projects_ignored_folder():
    mutate = _mutate_module()
    assert mutate.CACHE_DIR.is_relative_to(REPO)
    ignored = subprocess.run(["git", "check-ignore", "-q", str(mutate.CACHE_DIR / "x.json")],
                             cwd=REPO)
    assert ignored.returncode == 0
