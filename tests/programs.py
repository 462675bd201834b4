"""Programs some end-to-end tests drive besides Python: Node (its built-in fetch, README's Node
example) and headless Chromium (the live page and the report). Without one on the PATH those tests
skip with a one-line reason naming the Debian package to install, so README's test command
finishes green on a machine with Python alone. Under CI (`CI` set, as CI services and .ci/run do)
a missing program fails them instead: CI installs both, and a skip there would hide the tests."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def found_or_skip(path: str | None, program: str, package: str, tests: str) -> str:
    """`path` when the program was found; else skip `tests` (fail them under CI), saying which
    Debian package provides `program`."""
    if path is not None:
        return path
    reason = f"{tests} need `{program}` on the PATH: apt-get install {package}"
    if in_ci():
        pytest.fail(f"{reason} (CI is set: .ci/run installs it, so it must be there)",
                    pytrace=False)
    pytest.skip(reason)
