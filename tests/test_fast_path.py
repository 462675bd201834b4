"""aiohttp's private hooks (proxy/connection/aiohttp_hooks.py): all there on the pinned aiohttp,
and when one is gone the proxy forwards on aiohttp's public path and says `fast_path: off (...)`
in its banner and its health endpoint, never silently."""

from __future__ import annotations

import json
import urllib.request

import aiohttp
import pytest

from streamtap.proxy.connection import aiohttp_hooks
from tests.clients import RawClient
from tests.fakeprovider import Scenario
from tests.proxyproc import ProxyProcess, new_session
from tests.streams import chat_text_stream

pytestmark = pytest.mark.e2e

# Loaded by the proxy subprocess (first on PYTHONPATH): an aiohttp whose TCPConnector no longer
# names its protocol class in `_factory`, as a future release may build its protocols.
MOVED_FACTORY = '''
import aiohttp

_init = aiohttp.TCPConnector.__init__


def __init__(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    factory = self._factory
    self._factory = lambda: factory()


aiohttp.TCPConnector.__init__ = __init__
'''


def health(proxy) -> dict:
    with urllib.request.urlopen(proxy.url("_streamtap/health"), timeout=5) as answer:
        return json.load(answer)


@pytest.fixture
def hooked_proxy(fake, tmp_path):
    process = ProxyProcess(tmp_path, {"fake": fake.url}, ready="fast_path:")
    yield process
    process.stop()


@pytest.fixture
def hookless_proxy(fake, tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(MOVED_FACTORY)
    monkeypatch.setenv("PYTHONPATH", str(site))
    process = ProxyProcess(tmp_path, {"fake": fake.url}, ready="fast_path:")
    yield process
    process.stop()


def test_every_hook_is_there_on_the_pinned_aiohttp(hooked_proxy):
    """If this fails after an aiohttp upgrade, aiohttp_hooks.py names what moved: bring it (and
    the pin in pyproject.toml) up to date."""
    assert aiohttp_hooks.check().missing == []
    assert "fast_path: on" in hooked_proxy.banner.splitlines()
    assert health(hooked_proxy)["fast_path"] == "on"


@pytest.mark.parametrize("content_length", [False, True], ids=["chunked", "content-length"])
def test_without_a_hook_the_stream_is_forwarded_on_aiohttps_path_and_the_proxy_says_so(
        fake, hookless_proxy, content_length):
    proxy = hookless_proxy
    said = [line for line in proxy.banner.splitlines() if line.startswith("fast_path:")]
    assert said == ["fast_path: off (body relay: TCPConnector._factory no longer names "
                    f"ResponseHandler; aiohttp {aiohttp.__version__}, see docs/development.md)"]
    assert health(proxy)["fast_path"] == said[0].removeprefix("fast_path: ")
    stream = chat_text_stream(200)
    prefix = fake.add(Scenario(stream, delay_s=0.001, content_length=content_length))
    session = new_session()
    client = RawClient(proxy.port)
    try:
        client.request(f"/fake{prefix}/v1/chat/completions", session)
        status, headers = client.head()
        body = b"".join(client.body(headers))
    finally:
        client.close()
    assert status == 200 and body == b"".join(stream)
    record = proxy.record(session)
    assert record["downstream"]["ended"] == "complete"
    assert record["stream"]["bytes"] == record["downstream"]["bytes"] == len(body)
    assert record["stream"]["terminal"] == "[DONE]"
    assert record["outcome"]["boundary"] == "none"

