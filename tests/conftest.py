import shutil
import socket

import pytest

from tests.fakeprovider import FakeProvider
# The fast lane and its guard (hooks and an autouse fixture, found here by name).
from tests.lanes import in_process_only, pytest_collection_modifyitems, pytest_configure  # noqa: F401
from tests.programs import found_or_skip
from tests.proxyproc import ProxyProcess

# A client team's example suite: run by tests/test_pytest_plugin.py with pytester, not collected.
collect_ignore = ["plugin_example"]


@pytest.fixture(scope="session")
def fake():
    provider = FakeProvider().start()
    yield provider
    provider.stop()


@pytest.fixture(scope="module")
def proxy(fake, tmp_path_factory):
    """A streamtap subprocess with a `fake` route to the fake provider (and the defaults)."""
    process = ProxyProcess(tmp_path_factory.mktemp("proxy"), {"fake": fake.url})
    yield process
    process.stop()


@pytest.fixture(scope="session")
def node():
    return found_or_skip(shutil.which("node"), "node", "nodejs", "the Node tests")


@pytest.fixture(scope="module")
def blackhole():
    """An upstream that accepts connections (the kernel's backlog) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()
