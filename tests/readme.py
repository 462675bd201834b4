"""README's shell examples, read from the file itself, so tests run them verbatim.

`shell_blocks("Section title")` returns the commands of every ```sh block under that `## ` heading
(a block's lines joined at trailing backslashes, comment lines dropped), in order.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def section(title: str, readme: Path = README) -> str:
    text = readme.read_text()
    parts = re.split(r"^## ", text, flags=re.M)
    for part in parts:
        if part.startswith(title):
            return part
    raise AssertionError(f"{readme.name} has no section '## {title}'")


def shell_blocks(title: str, language: str = "sh", readme: Path = README) -> list[str]:
    """Every command in the ```sh blocks of a section, one string per command (of README.md, or
    of another `readme` such as tests/README.md)."""
    commands: list[str] = []
    for block in re.findall(rf"```{language}\n(.*?)\n```", section(title, readme), flags=re.S):
        joined = re.sub(r"\\\n\s*", "", block)
        commands += [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return commands


def code_blocks(title: str, language: str) -> list[str]:
    """The raw text of every ```<language> block of a section (python, js, json, toml...)."""
    return re.findall(rf"```{language}\n(.*?)\n```", section(title), flags=re.S)


def run_verbatim(commands: list[str], cwd: Path) -> list[str]:
    """Run each command as README shows it, in a shell in `cwd`, with this streamtap first on
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
