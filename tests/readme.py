"""The shell examples of README.md and docs/*.md, read from the files themselves, so tests run them
verbatim.

`shell_blocks("Section title")` returns the commands of every ```sh block under that `## ` heading
(a block's lines joined at trailing backslashes, comment lines dropped), in order. A heading is
looked for in README.md and every page of docs/, so a section can move between them without its
tests changing; `document=` narrows the search to one file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"


class Section(NamedTuple):
    document: Path
    heading: str
    text: str  # the heading line (without `## `) and everything up to the next `## ` heading


def documents() -> list[Path]:
    """README first, then every page of docs/: the files whose commands tests run."""
    return [README, *sorted((REPO / "docs").glob("*.md"))]


def sections(document: str | None = None) -> list[Section]:
    found = []
    for path in [REPO / document] if document else documents():
        for part in re.split(r"^## ", path.read_text(), flags=re.M)[1:]:
            found.append(Section(path, part.split("\n", 1)[0].strip(), part))
    return found


def section(title: str, document: str | None = None) -> str:
    """The section whose heading is `title`, else the one heading that starts with it."""
    candidates = sections(document)
    found = ([s for s in candidates if s.heading == title]
             or [s for s in candidates if s.heading.startswith(title)])
    where = document or "README.md or docs/*.md"
    if not found:
        raise AssertionError(f"{where} has no section '## {title}'")
    if len(found) > 1:
        named = ", ".join(f"{s.document.relative_to(REPO)}: '## {s.heading}'" for s in found)
        raise AssertionError(f"'{title}' names several sections ({named}): name one in full, "
                             "or pass document=")
    return found[0].text


def shell_blocks(title: str, language: str = "sh", document: str | None = None) -> list[str]:
    """Every command in the ```sh blocks of a section, one string per command."""
    commands: list[str] = []
    for block in code_blocks(title, language, document):
        joined = re.sub(r"\\\n\s*", "", block)
        commands += [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return commands


def code_blocks(title: str, language: str, document: str | None = None) -> list[str]:
    """The raw text of every ```<language> block of a section (python, js, json, toml...)."""
    return re.findall(rf"```{language}\n(.*?)\n```", section(title, document), flags=re.S)


def run_verbatim(commands: list[str], cwd: Path) -> list[str]:
    """Run each command as its document shows it, in a shell in `cwd`, with this streamtap first on
    PATH and no colour; each must succeed. Their stdouts, in order."""
    env = {**os.environ, "NO_COLOR": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    outputs = []
    for command in commands:
        result = subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, f"{command}: {result.stderr}"
        outputs.append(result.stdout)
    return outputs
