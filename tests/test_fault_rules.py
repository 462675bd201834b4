"""Fault rules that never surprise: unique names, `times` counting fires, a record that says a
rule was armed but never fired, counters in `fault list`, armed rules in the banner and health,
and a `match.route` typo refused with the closest route."""

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
import sys

import httpx
import openai
import pytest

from streamtap.proxy.config import Config, ConfigError, from_mapping
from streamtap.diagnostics.faults.rules import FaultBook, FaultError, rule_from_mapping
from streamtap.proxy.serve.run import banner
from tests.fakeprovider import Scenario
from tests.proxyproc import REPO, new_session
from tests.streams import chat_text_stream


def cli(proxy, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamtap", "fault", *args, "--proxy",
                           proxy.url()], capture_output=True, text=True, timeout=30, cwd=REPO)


@pytest.fixture
def clean_rules(proxy):
    httpx.delete(proxy.url("_streamtap/faults"))
    yield
    httpx.delete(proxy.url("_streamtap/faults"))


def test_two_rules_of_the_same_action_stay_two_rules(proxy, clean_rules):
    for _ in range(2):
        added = cli(proxy, "add", "--action", "error_chunk", "--match", "route=fake")
        assert added.returncode == 0, added.stderr
    names = [rule["name"] for rule in json.loads(cli(proxy, "list").stdout)["faults"]]
    assert names == ["error_chunk", "error_chunk-2"]


def test_a_named_rule_is_not_silently_replaced(proxy, clean_rules):
    assert cli(proxy, "add", "--name", "mine", "--action", "reset").returncode == 0
    again = cli(proxy, "add", "--name", "mine", "--action", "close")
    assert again.returncode == 1
    assert "a rule named `mine` is already armed" in again.stderr and "--replace" in again.stderr
    [rule] = json.loads(cli(proxy, "list").stdout)["faults"]
    assert rule["action"] == "reset"
    replaced = cli(proxy, "add", "--name", "mine", "--action", "close", "--replace")
    assert replaced.returncode == 0, replaced.stderr
    [rule] = json.loads(cli(proxy, "list").stdout)["faults"]
    assert rule["action"] == "close"


def test_times_counts_fires_and_an_unreached_trigger_is_said(fake, proxy, clean_rules):
    short = fake.add(Scenario(chat_text_stream(3)))
    long = fake.add(Scenario(chat_text_stream(12)))
    session = new_session()
    added = cli(proxy, "add", "--name", "tenth", "--action", "close",
                "--at", "event:text_delta:10", "--match", f"session={session}")
    assert added.returncode == 0, added.stderr
    client = openai.OpenAI(base_url=proxy.url("fake") + short + "/v1", api_key="sk-test",
                           max_retries=0, default_headers={"x-streamtap-session": session})
    list(client.chat.completions.create(model="gpt-test", messages=[], stream=True))
    [record] = proxy.records(session, 1)
    assert record["outcome"]["ok"] is True and record["fault"]["fired"] is False
    assert ("rule `tenth` was armed for this request but its trigger `event:text_delta:10` "
            "was never reached") in record["outcome"]["summary"]
    assert "fault_armed_not_fired" in record["outcome"]["evidence"]
    [rule] = json.loads(cli(proxy, "list").stdout)["faults"]
    assert (rule["fired"], rule["remaining"], rule["spent"]) == (0, 1, False)

    # still armed: the next request that reaches the 10th delta is the one it fires in
    client = client.with_options(base_url=proxy.url("fake") + long + "/v1")
    list(client.chat.completions.create(model="gpt-test", messages=[], stream=True))
    second = proxy.records(session, 2)[-1]
    assert second["fault"]["fired"] is True and second["outcome"]["boundary"] == "injected"
    [rule] = json.loads(cli(proxy, "list").stdout)["faults"]
    assert (rule["fired"], rule["remaining"], rule["spent"]) == (1, 0, True)
    assert httpx.get(proxy.url("_streamtap/health")).json()["faults_armed"] == []


def test_a_rule_with_one_fire_left_fires_in_one_of_two_concurrent_requests(fake, proxy,
                                                                           clean_rules):
    """Both requests are given the rule when they start (it has a fire left); the first to reach
    the trigger uses it, and the other forwards its stream untouched and says why."""
    prefix = fake.add(Scenario(chat_text_stream(6), delay_s=0.05))
    session = new_session()
    added = cli(proxy, "add", "--name", "once", "--action", "reset", "--times", "1",
                "--at", "event:text_delta:3", "--match", f"session={session}")
    assert added.returncode == 0, added.stderr
    client = openai.OpenAI(base_url=proxy.url("fake") + prefix + "/v1", api_key="sk-test",
                           max_retries=0, default_headers={"x-streamtap-session": session})

    def one_stream() -> str:
        try:
            list(client.chat.completions.create(model="gpt-test", messages=[], stream=True))
            return "complete"
        except (openai.APIError, httpx.HTTPError):
            return "cut"

    with ThreadPoolExecutor(2) as pool:
        outcomes = sorted(pool.map(lambda _: one_stream(), range(2)))
    records = sorted(proxy.records(session, 2), key=lambda r: r["fault"]["fired"])
    assert outcomes == ["complete", "cut"]
    spared, fired = records
    assert fired["fault"]["fired"] is True and fired["outcome"]["boundary"] == "injected"
    assert spared["fault"]["fired"] is False
    assert spared["fault"]["fallback"] == "rule_spent_by_a_concurrent_request"
    assert spared["outcome"]["ok"] is True
    assert ("Fault rule `once` was armed for this request, but another request running at the "
            "same time used its last fire (`times`) first, so it did not fire here."
            ) in spared["outcome"]["summary"]
    [rule] = json.loads(cli(proxy, "list").stdout)["faults"]
    assert (rule["fired"], rule["remaining"], rule["spent"]) == (1, 0, True)


def test_health_lists_armed_rules(proxy, clean_rules):
    assert cli(proxy, "add", "--name", "later", "--action", "stall").returncode == 0
    assert httpx.get(proxy.url("_streamtap/health")).json()["faults_armed"] == ["later"]


def test_a_route_typo_is_refused_with_the_closest_route(proxy, clean_rules):
    result = cli(proxy, "add", "--action", "reset", "--match", "route=opneai")
    assert result.returncode == 1
    assert "did you mean `openai`?" in result.stderr and "match.route" in result.stderr
    assert json.loads(cli(proxy, "list").stdout)["faults"] == []
    glob = cli(proxy, "add", "--action", "reset", "--match", "route=open*")
    assert glob.returncode == 0, glob.stderr


def test_a_route_typo_in_the_config_stops_serve():
    with pytest.raises(ConfigError) as caught:
        from_mapping({"faults": [{"action": "reset", "match": {"route": "anthropc"}}]})
    assert "faults[0].match.route" in str(caught.value)
    assert "did you mean `anthropic`?" in str(caught.value)


def test_the_banner_lists_armed_rules():
    config = from_mapping({"faults": [{"name": "cut", "action": "reset",
                                       "at": "event:tool_input_delta:5",
                                       "match": {"route": "openai"}}]})
    text = banner(config, 8787)
    assert "faults armed" in text
    assert "cut: reset at event:tool_input_delta:5, route=openai" in text
    assert "faults: none armed" in banner(Config(), 8787)


def test_book_unit_rules():
    book = FaultBook(routes=["openai"])
    first = book.add(rule_from_mapping({"action": "reset"}, "api"))
    second = book.add(rule_from_mapping({"action": "reset"}, "api"))
    third = book.add(rule_from_mapping({"action": "reset"}, "api"))
    assert [first.name, second.name, third.name] == ["reset", "reset-2", "reset-3"]
    with pytest.raises(FaultError) as caught:
        book.add(rule_from_mapping({"name": "reset", "action": "close"}, "api"))
    assert caught.value.field == "name"


def test_example_config_arms_no_rule_until_uncommented():
    from streamtap.proxy.config import load_file

    assert load_file(REPO / "config.example.toml").faults == ()
