"""The pytest plugin's probe: a client team's test that takes `streamtap_ending` runs once per
ending of the catalog against their own openai SDK client, fails where the client swallows an
ending, skips endings of another dialect, and `--streamtap-report` prints the grade table."""

import pytest

from tests.clients import PROVIDER_ENV

pytest_plugins = ["pytester"]

CLIENT_TEST = '''
import openai
import pytest


def ask():
    client = openai.OpenAI(max_retries=0, timeout=2.0)
    stream = client.chat.completions.create(
        model="gpt-4o-mini", stream=True, messages=[{"role": "user", "content": "hi"}])
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


@pytest.mark.streamtap_probe(endings=[{endings}], timeout=10)
def test_my_client(streamtap_ending):
    streamtap_ending.run(ask)
'''


@pytest.fixture
def clean_env(monkeypatch):
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


def test_one_test_runs_over_the_whole_catalog(pytester, clean_env):
    from streamtap.diagnostics.probe.catalog import Catalog

    pytester.makepyfile(test_client=CLIENT_TEST.replace("endings=[{endings}], ", ""))
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    names = Catalog().names
    assert len(names) >= 19
    result.stdout.fnmatch_lines([f"test_client.py::test_my_client[[]{name}[]]" for name in names])


def test_each_ending_is_graded_and_a_swallowed_one_fails(pytester, clean_env):
    endings = ["http_500", "reset_mid_text", "clean_end_between_events", "anthropic_529",
               "parked_after_terminal"]
    pytester.makepyfile(test_client=CLIENT_TEST.replace(
        "{endings}", ", ".join(repr(name) for name in endings)))
    result = pytester.runpytest_subprocess("--streamtap-report", "-p", "no:cacheprovider",
                                           "-W", "ignore::DeprecationWarning", "-rfs")
    # the SDK raises on a 500 (no retries here) and on a reset; it ends a stream closed before
    # [DONE] without a word: that test fails; it stops at [DONE] on a connection parked after it
    # (no wait for the close); Anthropic's 529 is not for an OpenAI client
    result.assert_outcomes(passed=3, failed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*clean_end_between_events: the client was graded SILENT (breaks: must not be silent*",
        "FAILED test_client.py::test_my_client[[]clean_end_between_events[]]*"])
    result.stdout.fnmatch_lines(["SKIPPED*applies to anthropic-messages, not openai-chat"])
    result.stdout.fnmatch_lines([
        "*streamtap: how the client handled each ending*",
        "test_client.py::test_my_client (openai-chat):",
        "ending*grade*client's last error line*requests*time*expectation",
        "*",
        "http_500*raised*openai.InternalServerError: Error code: 500*1*meets",
        "reset_mid_text*raised*openai.APIConnectionError: Connection error.*1*meets",
        "clean_end_between_events*SILENT*-*1*BREAKS: must not be silent*",
        "parked_after_terminal*ok*-*1*meets"])


def test_once_lets_a_retry_recover_and_a_misspelt_option_is_named(pytester, clean_env):
    pytester.makepyfile(test_client=CLIENT_TEST.replace("max_retries=0", "max_retries=1").replace(
        "endings=[{endings}], timeout=10", "endings=['http_500'], once=True, timeout=10") + '''

@pytest.mark.streamtap_probe(endings=["http_500"], retries=2)
def test_misspelt(streamtap_ending):
    streamtap_ending.run(ask)
''')
    result = pytester.runpytest_subprocess("--streamtap-report", "-p", "no:cacheprovider",
                                           "-W", "ignore::DeprecationWarning")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*streamtap_probe has no option 'retries'; it takes endings, "
                                 "dialect, once, timeout*"])
    result.stdout.fnmatch_lines(["http_500*recovered*-*2*meets"])
