"""The fast lane (tests/README.md, tests/lanes.py): its documented command selects the in-process
tests and no e2e one, and a test outside the e2e lane that starts a process or listens on a
socket fails saying what to do, so the lane cannot quietly grow slow."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from tests.proxyproc import REPO
from tests.readme import shell_blocks

# Each test runs pytest: the documented command in a subprocess, or pytester.
pytestmark = pytest.mark.e2e
pytest_plugins = ["pytester"]

# The lanes' hooks, as tests/conftest.py takes them, for a pytester project of its own.
CONFTEST = ("from tests.lanes import in_process_only, pytest_collection_modifyitems, "
            "pytest_configure  # noqa: F401\n")


def project(pytester, conftest: str = CONFTEST) -> None:
    """A pytester project with the lanes' hooks and the suite's asyncio setting."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(conftest)


def test_the_fast_lane_command_collects_the_in_process_tests_and_no_e2e_test():
    [command] = shell_blocks("The fast lane", document="tests/README.md")
    python, *args = shlex.split(command)
    assert python == ".venv/bin/python" and args[:2] == ["-m", "pytest"]
    # Collected, not run: the lane itself is timed by hand (tests/README.md); running it here
    # would add its whole run to the full suite's.
    collected = subprocess.run([sys.executable, *args, "--collect-only", "-p", "no:cacheprovider"],
                               cwd=REPO, capture_output=True, text=True, timeout=300)
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    ids = {line for line in collected.stdout.splitlines() if "::" in line}
    files = {test.split("::")[0] for test in ids}
    assert len(ids) > 1500
    # Every unit file is in the lane, and so are the in-process tests of a mixed subject.
    unit = {f"tests/unit/{path.name}" for path in (REPO / "tests" / "unit").glob("test_*.py")}
    assert unit <= files
    assert "tests/test_fault_rules.py::test_book_unit_rules" in ids
    assert any(test.startswith("tests/test_fault_rules.py::test_each_bad_rule_is_rejected_naming")
               for test in ids)
    # A test on the proxy fixture, one through another fixture (clean_rules asks for the proxy),
    # one through pytester: none is in the lane.
    for e2e in ("tests/test_fault_rules.py::test_two_rules_of_the_same_action_stay_two_rules",
                "tests/test_passthrough.py::", "tests/test_lanes.py::test_a_test_that_starts"):
        assert not any(test.startswith(e2e) for test in ids), e2e
    assert " deselected" in collected.stdout.splitlines()[-1]


def test_a_test_that_starts_a_process_outside_the_e2e_lane_fails_saying_what_to_do(pytester):
    project(pytester)
    pytester.makepyfile(test_spawn="""
        import subprocess, sys
        import pytest

        def test_unmarked():
            subprocess.run([sys.executable, "-c", "pass"], check=True)

        @pytest.mark.e2e
        def test_marked():
            subprocess.run([sys.executable, "-c", "pass"], check=True)
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_unmarked starts a process but is not an e2e test: ask for "
                                 "the fixture that starts it*or mark the test `@pytest.mark.e2e`*"])


def test_a_fixture_that_starts_a_server_puts_its_tests_in_the_e2e_lane(pytester):
    project(pytester, CONFTEST + """
import socket

import pytest


@pytest.fixture
def fake():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield sock
    sock.close()


@pytest.fixture
def through_fake(fake):
    return fake
""")
    pytester.makepyfile(test_server="""
        import socket

        def test_listens_itself():
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                sock.listen(1)

        def test_through_a_fixture(through_fake):
            assert through_fake.getsockname()[1] > 0
    """)
    everything = pytester.runpytest("-p", "no:cacheprovider")
    everything.assert_outcomes(passed=1, failed=1)
    everything.stdout.fnmatch_lines(["*test_listens_itself listens on a socket but is not an e2e "
                                     "test*"])
    fast = pytester.runpytest("-p", "no:cacheprovider", "-m", "not e2e")
    fast.assert_outcomes(failed=1, deselected=1)


def test_an_e2e_test_in_the_unit_folder_fails_naming_the_move(pytester):
    project(pytester)
    pytester.mkdir("unit")
    pytester.path.joinpath("unit", "test_mixed.py").write_text(
        "import pytest\n\n\n@pytest.mark.e2e\ndef test_needs_a_proxy():\n    pass\n\n\n"
        "def test_pure():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_needs_a_proxy is an e2e test in tests/unit/, which holds "
                                 "in-process tests only: git mv its file to tests/*"])
