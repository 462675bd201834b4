"""README's shell examples, read from the file itself, so tests run them verbatim.

`shell_blocks("Section title")` returns the commands of every ```sh block under that `## ` heading
(a block's lines joined at trailing backslashes, comment lines dropped), in order.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def section(title: str) -> str:
    text = README.read_text()
    parts = re.split(r"^## ", text, flags=re.M)
    for part in parts:
        if part.startswith(title):
            return part
    raise AssertionError(f"README has no section '## {title}'")


def shell_blocks(title: str, language: str = "sh") -> list[str]:
    """Every command in the ```sh blocks of a section, one string per command."""
    commands: list[str] = []
    for block in re.findall(rf"```{language}\n(.*?)\n```", section(title), flags=re.S):
        joined = re.sub(r"\\\n\s*", "", block)
        commands += [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return commands


def code_blocks(title: str, language: str) -> list[str]:
    """The raw text of every ```<language> block of a section (python, js, json, toml...)."""
    return re.findall(rf"```{language}\n(.*?)\n```", section(title), flags=re.S)
