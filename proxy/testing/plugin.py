"""The pytest plugin (entry point `pytest11: streamtap`): the `streamtap` fixture, the
`@pytest.mark.streamtap(...)` marker, `--streamtap-upstream` and `--streamtap-report`.

This module imports only pytest: streamtap's proxy, aiohttp and the fake provider are imported
when a test first uses the fixture, so a suite that never does pays nothing."""

from __future__ import annotations

import pytest

ENV_INI = "streamtap_env"
_ROWS = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("streamtap", "streamtap: stream failures against your own client")
    group.addoption("--streamtap-upstream", choices=("fake", "real"), default="fake",
                    help="where the `streamtap` fixture's proxy forwards: `fake` (default, a "
                         "local FakeProvider, no network) or `real` (the providers' own APIs, "
                         "for a recording run; the client's API keys are used)")
    group.addoption("--streamtap-report", action="store_true", default=False,
                    help="at the end of the session, print a table of the faults injected and "
                         "how each stream through the `streamtap` fixture ended")
    parser.addini(ENV_INI, type="bool", default=True,
                  help="set OPENAI_BASE_URL and ANTHROPIC_BASE_URL to the proxy while the "
                       "`streamtap` fixture is active (default true)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "streamtap(fault=None, streams=(), samples=None, env=None, **options): "
                   "configure the `streamtap` fixture: a fault rule armed before the test "
                   "(the x-streamtap-fault header's string form, a dict, or a list of them), "
                   "scripted streams for the fake provider, a samples folder, whether to set "
                   "OPENAI_BASE_URL/ANTHROPIC_BASE_URL, and Proxy options")
    config.stash[_ROWS] = []


@pytest.fixture
def streamtap(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """A streamtap proxy for this test, forwarding to a fake provider (or, with
    `--streamtap-upstream real`, to the real APIs). See `streamtap.proxy.testing.fixture`."""
    from streamtap.proxy.testing.fixture import StreamtapFixture

    marker = request.node.get_closest_marker("streamtap")
    settings = dict(marker.kwargs) if marker else {}
    if marker and marker.args:
        raise pytest.UsageError("@pytest.mark.streamtap takes keywords only, such as "
                                "fault=\"reset; at=event:tool_input_delta:5\"")
    env = settings.pop("env", None)
    if env is None:
        env = request.config.getini(ENV_INI)
    real = request.config.getoption("streamtap_upstream") == "real"
    fixture = StreamtapFixture(real=real, **settings)
    with fixture:
        if env:
            for name, value in fixture.environment().items():
                monkeypatch.setenv(name, value)
        yield fixture
        request.config.stash[_ROWS].extend(fixture.report_rows(request.node.nodeid))


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if not config.getoption("streamtap_report"):
        return
    rows = config.stash.get(_ROWS, [])
    terminalreporter.section("streamtap: faults injected and how each stream ended")
    if not rows:
        terminalreporter.write_line("no request went through the streamtap fixture")
        return
    from streamtap.proxy.testing.fixture import render_report

    for line in render_report(rows):
        terminalreporter.write_line(line)
