"""The suite's two lanes: a test runs in the test process unless it is marked `e2e`.

A test is marked `e2e` automatically when it asks (directly or through another fixture) for a
fixture that starts a process or a server; a test that starts one itself says so with
`@pytest.mark.e2e` (a whole module with `pytestmark = pytest.mark.e2e`). The fast lane is
`-m "not e2e"`. Outside the e2e lane, starting a process or listening on a socket fails the test
with what to do, so the fast lane cannot quietly grow slow; and `tests/unit/` holds in-process
tests only. tests/conftest.py imports these hooks; tests/README.md is the rule for maintainers.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import pytest

E2E = "e2e"
# Fixtures that start a process or a server: tests/conftest.py's, the plugin's `streamtap` (a
# proxy), `phoenix` (the trace backend), pytester (a pytest run of its own) and pytest-aiohttp's
# test servers.
E2E_FIXTURES = frozenset({
    "proxy", "fake", "node", "blackhole", "pytester", "testdir", "streamtap", "phoenix",
    "aiohttp_client", "aiohttp_server", "aiohttp_raw_server",
})
# The folder of the subjects whose every test runs in the test process.
UNIT_FOLDER = "unit"
HOW_TO = ("ask for the fixture that starts it (tests/lanes.py E2E_FIXTURES) or mark the test "
          "`@pytest.mark.e2e`; see tests/README.md")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{E2E}: starts a process or a server (the proxy subprocess, the fake "
                   "provider, node, a browser, pip, pytester); the fast lane is -m 'not e2e'")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if E2E_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(E2E)


@pytest.fixture(autouse=True)
def in_process_only(request: pytest.FixtureRequest,
                    monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Outside the e2e lane, a process start or a listening socket fails the test saying why."""
    item = request.node
    if item.get_closest_marker(E2E) is not None:
        if item.path.parent.name == UNIT_FOLDER:
            pytest.fail(f"{item.nodeid} is an e2e test in tests/{UNIT_FOLDER}/, which holds "
                        "in-process tests only: git mv its file to tests/ (see tests/README.md)",
                        pytrace=False)
        yield
        return
    name = item.nodeid

    # pytest.fail, not an Exception: a test's own `except Exception` must not swallow it.
    def starts_a_process(*args, **kwargs):
        pytest.fail(f"{name} starts a process but is not an e2e test: {HOW_TO}", pytrace=False)

    def listens(*args, **kwargs):
        pytest.fail(f"{name} listens on a socket but is not an e2e test: {HOW_TO}", pytrace=False)

    # Every way of starting a program (subprocess.run, Popen, asyncio's subprocesses) ends in
    # Popen._execute_child; every server (asyncio, aiohttp, http.server) calls listen().
    monkeypatch.setattr(subprocess.Popen, "_execute_child", starts_a_process)
    monkeypatch.setattr(socket.socket, "listen", listens)
    yield
