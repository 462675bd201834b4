"""README's test command finishes green on a machine with Python and Node but no Chromium: the
browser tests skip with one line naming the package to install (and fail under CI, which installs
it). The same holds for the Node tests on a machine without Node."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.programs import found_or_skip
from tests.proxyproc import REPO


def test_a_found_program_is_used():
    assert found_or_skip("/usr/local/bin/chromium", "chromium", "chromium",
                         "the browser tests") == "/usr/local/bin/chromium"


def test_a_missing_program_skips_with_the_package_to_install(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        found_or_skip(None, "chromium", "chromium", "the browser tests")
    assert str(skipped.value) == \
        "the browser tests need `chromium` on the PATH: apt-get install chromium"


@pytest.mark.parametrize("ci", ["true", "1"])
def test_a_missing_program_fails_under_ci(monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception) as failed:
        found_or_skip(None, "node", "nodejs", "the Node tests")
    assert "apt-get install nodejs" in str(failed.value) and "CI is set" in str(failed.value)


def only_node_on_path(folder: Path) -> str:
    """A PATH holding `node` and nothing else (no Chromium): Python runs by its full path."""
    folder.mkdir()
    (folder / "node").symlink_to(shutil.which("node"))
    return str(folder)


def run_pytest(target: str, path: str, ci: str | None) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if name != "CI"}
    env["PATH"] = path
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           target], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to leave it on the PATH")
@pytest.mark.e2e
def test_browser_tests_skip_without_chromium_and_fail_under_ci(tmp_path):
    path = only_node_on_path(tmp_path / "bin")
    result = run_pytest("tests/test_browser.py", path, ci=None)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    browser_file = (REPO / "tests" / "test_browser.py").read_text()
    browser_tests = len(re.findall(r"^(?:async )?def test_", browser_file, re.M))
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) == browser_tests and f"{browser_tests} skipped" in result.stdout
    assert all(line.endswith(
        "the browser tests need `chromium` on the PATH: apt-get install chromium")
        for line in skips)
    under_ci = run_pytest("tests/test_browser.py", path, ci="true")
    assert under_ci.returncode == 1 and f"{browser_tests} errors" in under_ci.stdout
    assert "apt-get install chromium (CI is set" in under_ci.stdout


@pytest.mark.e2e
def test_node_tests_skip_without_node(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    result = run_pytest("tests/test_readme_fake.py::test_the_node_example_is_the_file_and_runs",
                        str(empty), ci=None)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "1 skipped" in result.stdout
    assert "the Node tests need `node` on the PATH: apt-get install nodejs" in result.stdout


def test_readme_quick_start_says_which_tests_need_chromium_and_node():
    from tests.readme import section

    text = " ".join(section("Quick start").split())
    assert "The Node tests need Node 18+ (`node`) and the browser tests (`tests/test_browser.py`) " \
           "need headless Chromium (`chromium`) on the PATH" in text
