"""The pytest plugin, used the way a client team would: their own retry loop around the openai
SDK and the anthropic SDK, tested with the `streamtap` fixture and marker in a pytest run of
their own (pytester), offline. And a suite that does not use the plugin is not changed by it."""

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).parent / "plugin_example"


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_the_client_teams_suite_reproduces_each_failure(pytester, clean_env):
    for name in ("client.py", "test_client_streams.py"):
        pytester.makepyfile(**{name[:-3]: (EXAMPLE / name).read_text()})
    result = pytester.runpytest_subprocess("--streamtap-report", "-p", "no:cacheprovider",
                                           "-W", "ignore::DeprecationWarning")
    # four behaviours handled, and the naive client's mishandling is caught by its test
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*_ test_the_naive_client_is_caught _*",
                                 "E * AssertionError: the tool call's arguments were cut short",
                                 "FAILED test_client_streams.py::test_the_naive_client_is_caught*"])
    # the report: one row per stream, with the fault injected and how the stream ended
    result.stdout.fnmatch_lines([
        "*streamtap: faults injected and how each stream ended*",
        "test*request*fault injected*client stream*boundary/phase",
        "*test_a_reset_mid_tool_call_is_retried*openai /v1/chat/completions*"
        "reset at event:tool_input_delta:5*aborted*injected/tool_input",
        "*test_a_reset_mid_tool_call_is_retried*openai /v1/chat/completions*-*none/complete",
    ])
    result.stdout.fnmatch_lines(["*test_an_overloaded_529*anthropic /v1/messages*"
                                 "http_error at request*injected/before_response"])


TRIVIAL_SUITE = {
    "conftest": "import pytest\n\n@pytest.fixture\ndef number():\n    return 3\n",
    "test_trivial": (
        "import sys\n\nimport pytest\n\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\n"
        "def test_numbers(n, number):\n    assert n < number\n\n\n"
        "def test_streamtap_stays_unimported():\n"
        "    heavy = [name for name in sys.modules if name.startswith(('streamtap.proxy.serve',"
        " 'streamtap.proxy.testing.api', 'streamtap.proxy.testing.fake', 'structlog'))]\n"
        "    assert heavy == []\n"
    ),
}


def test_a_suite_that_does_not_use_it_is_collected_and_run_the_same(pytester):
    pytester.makepyfile(**TRIVIAL_SUITE)
    with_plugin = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    without = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider",
                                            "-p", "no:streamtap")
    items = [line for line in with_plugin.outlines if "::" in line]
    assert items == [line for line in without.outlines if "::" in line]
    assert len(items) == 3
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    run.assert_outcomes(passed=3)  # and nothing heavy was imported while the suite ran
    # the plugin is there (its options exist) only when not turned off
    assert "--streamtap-upstream" in pytester.runpytest_subprocess("--help").stdout.str()
    assert "--streamtap-upstream" not in pytester.runpytest_subprocess(
        "--help", "-p", "no:streamtap").stdout.str()


def test_environment_real_upstream_and_assert_break(pytester, clean_env):
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_env="""
import os

import httpx
import pytest

from streamtap import FakeProvider


def test_base_urls_point_at_the_proxy(streamtap):
    assert os.environ["OPENAI_BASE_URL"] == streamtap.url("openai") + "/v1"
    assert os.environ["ANTHROPIC_BASE_URL"] == streamtap.url("anthropic")
    assert os.environ["OPENAI_API_KEY"] == "sk-streamtap-fake"


@pytest.mark.streamtap(env=False)
def test_env_opt_out(streamtap):
    assert "OPENAI_BASE_URL" not in os.environ


def test_env_is_restored_after_the_fixture():
    assert "OPENAI_BASE_URL" not in os.environ


@pytest.mark.streamtap(fault="reset; at=event:text_delta:3")
def test_assert_break_quotes_the_summary(streamtap):
    with pytest.raises(httpx.HTTPError):
        with httpx.stream("POST", streamtap.url("openai") + "/v1/chat/completions",
                          json={"stream": True, "messages": []}) as response:
            response.read()
    streamtap.assert_break(boundary="injected", phase="text")
    with pytest.raises(AssertionError) as raised:
        streamtap.assert_break(boundary="transport")
    assert "boundary 'injected', not 'transport'" in str(raised.value)
    assert "streamtap injected reset after the 3rd text_delta" in str(raised.value)


@pytest.mark.streamtap(streams=[FakeProvider.stream("anthropic-messages", text="scripted hi",
                                                    ending="clean_close")])
def test_scripted_streams_from_the_marker(streamtap):
    response = httpx.post(streamtap.url("anthropic") + "/v1/messages", json={"stream": True})
    assert b'"text":"scripted "' in response.content
    streamtap.assert_break(boundary="provider_close", phase="text")
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=5)

    pytester.makepyfile(test_real="""
def test_real_upstream_uses_the_provider_routes(streamtap):
    assert streamtap.fake is None
    assert streamtap.proxy.config.routes["openai"].url == "https://api.openai.com"
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_real.py",
                                           "--streamtap-upstream", "real")
    result.assert_outcomes(passed=1)
    pytester.makeini("[pytest]\nstreamtap_env = false\n")
    pytester.makepyfile(test_ini="""
import os

def test_ini_opt_out(streamtap):
    assert "OPENAI_BASE_URL" not in os.environ
""")
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_ini.py").assert_outcomes(
        passed=1)
