"""README's Development section: its mutation command runs, verbatim, and prints what it says."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.readme import section, shell_blocks

REPO = Path(__file__).resolve().parent.parent


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
    assert re.fullmatch(r"diagnostics/verdict/stream\.py +\d+ +\d+ +\d+ +\d+ +\d+ +\d+ +\d+%",
                        lines[-2]), lines[-2]
    final = re.fullmatch(r"mutation: (\d+)/(\d+) killed \((\d+)%\) in \d+ s; \d+ equivalent, "
                         r"(\d+) not run", lines[-1])
    assert final, lines[-1]
    killed, judged, _, not_run = map(int, final.groups())
    assert judged > 0 and killed > 0
    for line in lines:
        if line.startswith("  survived "):
            assert re.fullmatch(r"  survived diagnostics/verdict/stream\.py:\d+: .+ -> .+", line)
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
