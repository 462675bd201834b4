"""The pytest plugin (entry point `pytest11: streamtap`): the `streamtap` fixture, the
`@pytest.mark.streamtap(...)` marker, the `streamtap_ending` fixture (a test run once per ending
of the probe catalog) and its `@pytest.mark.streamtap_probe(...)` marker, `--streamtap-upstream`
and `--streamtap-report`.

This module imports only pytest: streamtap's proxy, aiohttp and the fake provider are imported
when a test first uses the fixture, so a suite that never does pays nothing."""

from __future__ import annotations

import pytest

ENV_INI = "streamtap_env"
_ROWS = pytest.StashKey[list]()
_GRADES = pytest.StashKey[list]()
PROBE_MARKER = "streamtap_probe"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("streamtap", "streamtap: stream failures against your own client")
    group.addoption("--streamtap-upstream", choices=("fake", "real"), default="fake",
                    help="where the `streamtap` fixture's proxy forwards: `fake` (default, a "
                         "local FakeProvider, no network) or `real` (the providers' own APIs, "
                         "for a recording run; the client's API keys are used)")
    group.addoption("--streamtap-report", action="store_true", default=False,
                    help="at the end of the session, print a table of the faults injected and "
                         "how each stream through the `streamtap` fixture ended, and the grade "
                         "of each ending a `streamtap_ending` test ran")
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
    config.addinivalue_line(
        "markers", f"{PROBE_MARKER}(endings=None, dialect=None, once=False, timeout=30): "
                   "options of a test that takes the `streamtap_ending` fixture (run once per "
                   "ending of the probe catalog): which endings, the client's dialect, the "
                   "ending on the first request only, seconds before the client counts as hung")
    config.stash[_ROWS] = []
    config.stash[_GRADES] = []


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test taking `streamtap_ending` runs once per ending of the probe catalog."""
    if "streamtap_ending" not in metafunc.fixturenames:
        return
    from streamtap.diagnostics.probe.catalog import Catalog, CatalogError

    marker = metafunc.definition.get_closest_marker(PROBE_MARKER)
    try:
        catalog = Catalog().pick((marker.kwargs.get("endings") if marker else None) or None)
    except CatalogError as exc:
        raise pytest.UsageError(f"@pytest.mark.{PROBE_MARKER}: {exc}") from None
    metafunc.parametrize("streamtap_ending", catalog.names, indirect=True, ids=catalog.names)


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


@pytest.fixture
def streamtap_ending(request: pytest.FixtureRequest, streamtap):
    """One ending of the probe catalog, armed on the `streamtap` fixture for `run(client)`: the
    test runs once per ending. See `streamtap.proxy.testing.probing`."""
    from streamtap.diagnostics.probe.catalog import Catalog
    from streamtap.proxy.testing.probing import DEFAULT_TIMEOUT_S, EndingCase

    marker = request.node.get_closest_marker(PROBE_MARKER)
    options = dict(marker.kwargs) if marker else {}
    options.pop("endings", None)
    ending = Catalog().pick([request.param]).endings[0]
    case = EndingCase(streamtap, ending, dialect=options.pop("dialect", None),
                      once=options.pop("once", False),
                      timeout_s=options.pop("timeout", DEFAULT_TIMEOUT_S), skip=pytest.skip)
    if options:
        raise pytest.UsageError(f"@pytest.mark.{PROBE_MARKER} has no option "
                                f"{', '.join(map(repr, options))}; it takes endings, dialect, "
                                "once, timeout")
    yield case
    if case.verdict is not None:
        test = request.node.nodeid.rsplit("[", 1)[0]
        request.config.stash[_GRADES].append((test, case.dialect, case.verdict))


def _grade_tables(terminalreporter, grades: list) -> None:
    from streamtap.diagnostics.views.probe import ProbeResult, text_table

    tests = dict.fromkeys(test for test, _, _ in grades)
    for test in tests:
        mine = [(dialect, verdict) for name, dialect, verdict in grades if name == test]
        result = ProbeResult(test, mine[0][0], tuple(verdict for _, verdict in mine))
        terminalreporter.write_line(f"{test} ({result.dialect}):")
        for line in text_table(result)[:-1]:  # the summary names a probe session; tests have none
            terminalreporter.write_line(line)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if not config.getoption("streamtap_report"):
        return
    grades = config.stash.get(_GRADES, [])
    if grades:
        terminalreporter.section("streamtap: how the client handled each ending")
        _grade_tables(terminalreporter, grades)
    rows = config.stash.get(_ROWS, [])
    terminalreporter.section("streamtap: faults injected and how each stream ended")
    if not rows:
        terminalreporter.write_line("no request went through the streamtap fixture")
        return
    from streamtap.proxy.testing.fixture import render_report

    for line in render_report(rows):
        terminalreporter.write_line(line)
