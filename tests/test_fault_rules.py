"""Fault rules (diagnostics/faults/rules.py) that never surprise. Through a real proxy: unique names,
`times` counting fires, a record that says a rule was armed but never fired, counters in
`fault list`, armed rules in the banner and health, and a `match.route` typo refused with the
closest route. Without a proxy: every validation rule, precedence, `times`, seeds; and the
trigger language of diagnostics/faults/triggers.py with the scanner that finds the cut."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from streamtap.diagnostics.faults.triggers import FrameScanner, TriggerError, parse_trigger
from streamtap.diagnostics.dialects.json_body import JsonBody
from streamtap.diagnostics.dialects.openai_chat import OpenAIChat
from streamtap.proxy.config import Config, ConfigError, from_mapping
from streamtap.diagnostics.faults.rules import (
    FaultBook, FaultError, FaultRule, parse_fault_header, rule_from_mapping)
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


# -- without a proxy: validation, precedence, `times`, seeds, triggers and the cut ----------------
ACTIONS_TEXT = ("reset, truncate, close, drop_terminal, stall, error_chunk, http_error, delay, "
                "throttle, hold, bad_chunk_size")
KEYS_TEXT = ("name, action, at, match, probability, seed, times, status, retry_after, style, "
             "type, code, message, body, duration_ms, then, heartbeat_ms, latency_ms, jitter_ms, "
             "per_frame, bytes_per_s, mid_frame")
TRIGGERS_TEXT = ("request, headers, first_progress, terminal, event:<kind>:<n>, events:<n>, "
                 "bytes:<n>, ms:<n>")


def rejected(data: dict, source: str = "api") -> FaultError:
    with pytest.raises(FaultError) as caught:
        rule_from_mapping(data, source)
    return caught.value


@pytest.mark.parametrize("data, field, message", [
    ("reset", "rule",
     "expected a table/object of rule keys"),
    ({"action": "reset", "acton": "x"}, "acton",
     "unknown key; did you mean `action`?"),
    ({"action": "reset", "zzz": 1}, "zzz",
     f"unknown key; keys: {KEYS_TEXT}"),
    ({}, "action",
     f"expected one of {ACTIONS_TEXT}, got None"),
    ({"action": "rest"}, "action",
     f"expected one of {ACTIONS_TEXT}, got 'rest' (did you mean `reset`?)"),
    ({"action": "reset", "name": "a b"}, "name",
     "use letters, digits, `_`, `.` or `-` (got 'a b')"),
    ({"action": "reset", "name": "n" * 65}, "name",
     "use letters, digits, `_`, `.` or `-` (got '" + "n" * 65 + "')"),
    ({"action": "reset", "name": 5}, "name",
     "use letters, digits, `_`, `.` or `-` (got 5)"),
    ({"action": "reset", "at": 5}, "at",
     "expected a trigger string, got 5"),
    ({"action": "reset", "at": "soon"}, "at",
     f"unknown trigger `soon`; expected one of {TRIGGERS_TEXT}"),
    ({"action": "http_error", "at": "headers"}, "at",
     "http_error answers instead of the upstream, so it fires at `request`"),
    ({"action": "drop_terminal", "at": "first_progress"}, "at",
     "drop_terminal removes the terminal event, so it fires at `terminal`"),
    ({"action": "hold", "at": "first_progress"}, "at",
     "hold keeps the connection open after the terminal event, so it fires at `terminal`"),
    ({"action": "stall", "heartbeat_ms": -5}, "heartbeat_ms",
     "expected a whole number >= 0, got -5"),
    ({"action": "reset", "match": "gpt-*"}, "match",
     "expected a table of KEY = GLOB"),
    ({"action": "reset", "match": {"user": "x"}}, "match.user",
     "match keys are route, path, model, session"),
    ({"action": "reset", "match": {"model": 4}}, "match.model",
     "expected a glob string, got 4"),
    ({"action": "reset", "probability": "often"}, "probability",
     "expected a number from 0 to 1, got 'often'"),
    ({"action": "reset", "probability": None}, "probability",
     "expected a number from 0 to 1, got None"),
    ({"action": "reset", "probability": 1.01}, "probability",
     "expected a number from 0 to 1, got 1.01"),
    ({"action": "reset", "probability": -0.01}, "probability",
     "expected a number from 0 to 1, got -0.01"),
    ({"action": "reset", "seed": "x"}, "seed",
     "expected a whole number >= 0, got 'x'"),
    ({"action": "reset", "seed": -1}, "seed",
     "expected a whole number >= 0, got -1"),
    ({"action": "reset", "times": True}, "times",
     "expected a whole number >= 0, got True"),
    ({"action": "reset", "times": 1.5}, "times",
     "expected a whole number >= 0, got 1.5"),
    ({"action": "stall", "duration_ms": "-5"}, "duration_ms",
     "expected a whole number >= 0, got -5"),
    ({"action": "delay", "latency_ms": "5ms"}, "latency_ms",
     "expected a whole number >= 0, got '5ms'"),
    ({"action": "delay", "jitter_ms": -1}, "jitter_ms",
     "expected a whole number >= 0, got -1"),
    ({"action": "delay", "per_frame": "sometimes"}, "per_frame",
     "expected true or false, got 'sometimes'"),
    ({"action": "reset", "mid_frame": 1}, "mid_frame",
     "expected true or false, got 1"),
    ({"action": "http_error", "status": 399}, "status",
     "expected an HTTP error status 400..599, got 399"),
    ({"action": "http_error", "status": 600}, "status",
     "expected an HTTP error status 400..599, got 600"),
    ({"action": "error_chunk", "style": "Wrapped"}, "style",
     "expected `event` (the dialect's own error) or `wrapped`"),
    ({"action": "error_chunk", "style": None}, "style",
     "expected `event` (the dialect's own error) or `wrapped`"),
    ({"action": "stall", "then": "truncate"}, "then",
     "a stall ends with `close` or `reset`"),
    ({"action": "stall", "then": ["close"]}, "then",
     "a stall ends with `close` or `reset`"),
    ({"action": "throttle"}, "bytes_per_s",
     "throttle needs bytes_per_s > 0"),
    ({"action": "throttle", "bytes_per_s": "0"}, "bytes_per_s",
     "throttle needs bytes_per_s > 0"),
    ({"action": "throttle", "bytes_per_s": -10}, "bytes_per_s",
     "expected a whole number >= 0, got -10"),
    ({"action": "error_chunk", "type": 5}, "type",
     "expected a string, got 5"),
    ({"action": "error_chunk", "message": ["m"]}, "message",
     "expected a string, got ['m']"),
    ({"action": "http_error", "retry_after": 5}, "retry_after",
     "expected a string, got 5"),
    ({"action": "error_chunk", "code": ["x"]}, "code",
     "expected a string or a whole number, got ['x']"),
    ({"action": "error_chunk", "code": True}, "code",
     "expected a string or a whole number, got True"),
    ({"action": "error_chunk", "body": "{}", "type": "t", "message": "m"}, "body",
     "the body is the whole error frame: leave out `type`, `message`"),
    ({"action": "error_chunk", "body": "{}", "style": "wrapped"}, "body",
     "the body is the whole error frame: leave out `style`"),
    ({"action": "error_chunk", "body": 5}, "body",
     "expected JSON text or a table, got 5"),
    ({"action": "error_chunk", "body": "{'code': 1}"}, "body",
     "expected JSON text, such as '{\"code\":\"InternalError\",\"message\":\"...\"}' "
     "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
])
def test_each_bad_rule_is_rejected_naming_its_field(data, field, message):
    error = rejected(data)
    assert (error.field, error.message) == (field, message)
    assert str(error) == f"fault rule `{field}`: {error.message}"


def test_a_valid_rule_is_normalized():
    rule = rule_from_mapping({"action": "error_chunk", "at": " event:text_delta:3 ",
                              "match": {"model": "gpt-*"}, "probability": "0.5", "seed": "7",
                              "times": "2", "style": "wrapped", "type": "server_error",
                              "code": 503, "mid_frame": "yes", "per_frame": "0"}, "api")
    assert (rule.name, rule.action, rule.at, rule.match) == (
        "error_chunk", "error_chunk", "event:text_delta:3", {"model": "gpt-*"})
    assert (rule.probability, rule.seed, rule.times, rule.style, rule.code) == (
        0.5, 7, 2, "wrapped", 503)
    assert (rule.mid_frame, rule.per_frame, rule.source) == (True, False, "api")
    assert rule_from_mapping({"action": "error_chunk", "code": "E1"}, "api").code == "E1"


def test_an_error_body_becomes_one_compact_line_of_json():
    given = '{ "code": "InternalError",\n  "message": "peer closed" }'
    assert rule_from_mapping({"action": "error_chunk", "body": given}, "api").body == (
        '{"code":"InternalError","message":"peer closed"}')
    table = {"error": {"message": "m", "type": "t"}, "detail": "d"}
    assert rule_from_mapping({"action": "error_chunk", "body": table}, "config").body == (
        '{"error":{"message":"m","type":"t"},"detail":"d"}')
    header = parse_fault_header('error_chunk; at=event:text_delta:2; '
                                'body={"code":500,"message":"x"}')
    assert (header.body, header.at) == ('{"code":500,"message":"x"}', "event:text_delta:2")


@pytest.mark.parametrize("value", [True, False])
def test_booleans_pass_as_they_are(value):
    assert rule_from_mapping({"action": "reset", "mid_frame": value}, "api").mid_frame is value


@pytest.mark.parametrize("text", ["true", "TRUE", "1", "yes"])
def test_true_words(text):
    assert rule_from_mapping({"action": "reset", "mid_frame": text}, "api").mid_frame is True


@pytest.mark.parametrize("text", ["false", "0", "No"])
def test_false_words(text):
    assert rule_from_mapping({"action": "reset", "mid_frame": text}, "api").mid_frame is False


@pytest.mark.parametrize("action, at", [("http_error", "request"), ("drop_terminal", "terminal"),
                                        ("delay", "headers"), ("reset", "first_progress"),
                                        ("stall", "first_progress"), ("hold", "terminal")])
def test_default_trigger_of_each_action(action, at):
    assert rule_from_mapping({"action": action}, "api").at == at


def test_heartbeat_ms_from_a_header():
    rule = parse_fault_header("stall; duration_ms=4000; heartbeat_ms=500")
    assert (rule.action, rule.duration_ms, rule.heartbeat_ms) == ("stall", 4000, 500)
    assert parse_fault_header("hold").heartbeat_ms == 0  # silence unless asked


@pytest.mark.parametrize("status", [400, 599])
def test_http_error_status_bounds_are_inclusive(status):
    assert rule_from_mapping({"action": "http_error", "status": status}, "api").status == status


def test_edges_that_are_allowed():
    assert rule_from_mapping({"action": "reset", "probability": 0}, "api").probability == 0.0
    assert rule_from_mapping({"action": "reset", "probability": 1}, "api").probability == 1.0
    assert rule_from_mapping({"action": "reset", "seed": 0}, "api").seed == 0
    assert rule_from_mapping({"action": "reset", "name": "n" * 64}, "api").name == "n" * 64
    assert rule_from_mapping({"action": "reset"}, "api", default_name="fault-3").name == "fault-3"
    assert rule_from_mapping({"action": "throttle", "bytes_per_s": 1}, "api").bytes_per_s == 1


def test_times_defaults_to_no_limit_for_config_and_once_elsewhere():
    assert rule_from_mapping({"action": "reset"}, "config").times == 0
    assert rule_from_mapping({"action": "reset"}, "api").times == 1
    assert rule_from_mapping({"action": "reset"}, "header").times == 1


def test_as_dict_leaves_out_empty_keys_and_bookkeeping():
    rule = rule_from_mapping({"action": "reset", "name": "r"}, "api")
    rule.chosen = 3
    assert rule.as_dict() == {
        "name": "r", "action": "reset", "at": "first_progress", "probability": 1.0, "times": 1,
        "status": 500, "style": "event", "duration_ms": 0, "then": "close", "heartbeat_ms": 0,
        "latency_ms": 0,
        "jitter_ms": 0, "per_frame": False, "bytes_per_s": 0, "mid_frame": False,
        "source": "api"}


# -- the header ---------------------------------------------------------------------------------
def test_fault_header():
    rule = parse_fault_header(" reset ; at=event:tool_input_delta:5; match.model = gpt-* ;"
                              " times=2 ")
    assert (rule.name, rule.action, rule.at, rule.match, rule.times, rule.source) == (
        "header", "reset", "event:tool_input_delta:5", {"model": "gpt-*"}, 2, "header")
    assert parse_fault_header("close").times == 1


@pytest.mark.parametrize("value, field, message", [
    ("", "x-streamtap-fault", "empty; expected `ACTION; key=value; ...`"),
    (" ; ", "x-streamtap-fault", "empty; expected `ACTION; key=value; ...`"),
    ("reset; at", "at", "expected key=value"),
    ("reset; match.colour=red", "match.colour", "match keys are route, path, model, session"),
    ("explode", "action", f"expected one of {ACTIONS_TEXT}, got 'explode'"),
])
def test_bad_fault_headers(value, field, message):
    with pytest.raises(FaultError) as caught:
        parse_fault_header(value)
    assert (caught.value.field, caught.value.message) == (field, message)


@pytest.mark.parametrize("key", ["source", "chosen"])
def test_bookkeeping_fields_are_not_rule_keys(key):
    error = rejected({"action": "reset", key: "x"})
    assert (error.field, error.message.split(";")[0]) == (key, "unknown key")


def test_numbers_and_endings_given_as_text():
    rule = rule_from_mapping({"action": "http_error", "status": "503"}, "api")
    assert rule.status == 503
    stall = rule_from_mapping({"action": "stall", "then": "reset", "duration_ms": "250"}, "api")
    assert (stall.then, stall.duration_ms) == ("reset", 250)
    assert stall.trigger == parse_trigger("first_progress")


# -- the book: which rule a request gets ---------------------------------------------------------
def rule(name: str, source: str, **keys) -> FaultRule:
    return rule_from_mapping({"action": "reset", "name": name, **keys}, source)


def choose(book: FaultBook, header=None, route="r", path="/v1/chat/completions", model="gpt-4o",
           session="s1"):
    """The rule chosen for one request, which then fires (as inject.py counts a fire): `times`
    counts fires, so a rule chosen but never fired would stay armed."""
    chosen = book.choose(header, route, path, model, session)
    if chosen is None:
        return None
    chosen.fired += 1
    return chosen.name


def test_header_then_api_then_config():
    book = FaultBook([rule("conf", "config")])
    book.add(rule("api", "api", times=0))
    header = parse_fault_header("close; name=hdr")
    assert choose(book, header) == "hdr"
    assert choose(book) == "api"
    assert [item["name"] for item in book.listing()] == ["api", "conf"]
    book.remove("api")
    assert choose(book) == "conf"


def test_two_armed_rules_combine_by_match():
    book = FaultBook([rule("chat", "config", match={"path": "*/chat/*"}),
                      rule("claude", "config", match={"model": "claude-*", "route": "anth*"})])
    assert choose(book) == "chat"
    assert choose(book, route="anthropic", path="/v1/messages", model="claude-3") == "claude"
    assert choose(book, route="openai", path="/v1/messages", model="claude-3") is None
    assert choose(book, path="/v1/messages", model=None) is None
    session_rule = FaultBook([rule("only-s2", "api", match={"session": "s2"})])
    assert choose(session_rule) is None and choose(session_rule, session="s2") == "only-s2"


def test_a_rule_that_matches_no_model_needs_a_pattern_that_matches_empty():
    book = FaultBook([rule("any", "config", match={"model": "*"})])
    assert choose(book, model=None) == "any"
    some = FaultBook([rule("some", "config", match={"model": "?*"})])
    assert choose(some, model=None) is None and choose(some, model="m") == "some"


def test_times_above_one_then_the_next_rule():
    book = FaultBook([rule("conf", "config")])
    book.add(rule("thrice", "api", times=3))
    assert [choose(book) for _ in range(5)] == ["thrice"] * 3 + ["conf"] * 2
    assert {item["name"]: item["armed_for"] for item in book.listing()} == {"thrice": 3, "conf": 2}


def test_config_rules_stay_armed():
    book = FaultBook([rule("conf", "config")])
    assert [choose(book) for _ in range(6)] == ["conf"] * 6


def test_a_rule_that_does_not_match_is_not_counted():
    book = FaultBook([rule("once", "api", match={"model": "claude-*"})])
    assert choose(book) is None
    assert choose(book, model="claude-3") == "once"
    assert choose(book, model="claude-3") is None


def test_seeded_probability_repeats_and_follows_its_own_sequence():
    def pattern(seed: int) -> list:
        book = FaultBook([rule("p", "config", probability=0.5, seed=seed)])
        return [choose(book) for _ in range(24)]

    expected_draws = random.Random(7)
    expected = ["p" if expected_draws.random() < 0.5 else None for _ in range(24)]
    assert pattern(7) == pattern(7) == expected
    assert pattern(7) != pattern(8)
    assert {"p", None} == set(expected)


def test_probability_zero_never_fires_and_one_always_does():
    book = FaultBook([rule("never", "config", probability=0.0), rule("always", "config")])
    assert [choose(book) for _ in range(5)] == ["always"] * 5
    assert {item["name"]: item["armed_for"] for item in book.listing()} == {"never": 0, "always": 5}


def test_add_replaces_by_name_and_clear_counts():
    book = FaultBook([rule("x", "config")])
    armed = rule("z", "api")
    assert book.add(armed) is armed
    assert book.remove("z") is True
    with pytest.raises(FaultError, match="already armed"):
        book.add(rule("x", "api", at="terminal"))
    book.add(rule("x", "api", at="terminal"), replace=True)
    assert [(item["name"], item["at"]) for item in book.listing()] == [("x", "terminal")]
    book.add(rule("y", "api"))
    assert book.remove("nope") is False and book.remove("y") is True
    assert book.clear() == 1 and book.listing() == [] and choose(book) is None


# -- triggers ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, kind, event, n, before_body", [
    ("request", "request", None, 0, True),
    (" headers ", "headers", None, 0, True),
    ("first_progress", "first_progress", None, 0, False),
    ("terminal", "terminal", None, 0, False),
    ("event:tool_input_delta:5", "event", "tool_input_delta", 5, False),
    ("event:text_delta:1", "event", "text_delta", 1, False),
    ("events:1", "events", None, 1, False),
    ("bytes:0", "bytes", None, 0, False),
    ("ms:0", "ms", None, 0, False),
])
def test_trigger_parse(text, kind, event, n, before_body):
    trigger = parse_trigger(text)
    assert (trigger.kind, trigger.event, trigger.n, trigger.before_body) == (kind, event, n,
                                                                             before_body)
    assert trigger.text == text.strip()


@pytest.mark.parametrize("text, words", [
    ("event:bogus:1", "unknown event kind `bogus` in `event:bogus:1`; kinds: text_start"),
    ("event:text_delta:0", "`event:text_delta:0`: the count starts at 1"),
    ("events:0", "`events:0`: the number must be positive"),
    ("ms:-1", "`ms:-1`: the number must be positive"),
    ("bytes:-1", "the number must be positive"),
    ("bytes:x", "`bytes:x`: expected a whole number after the colon"),
    ("event:text_delta:x", "expected a whole number"),
    ("event:text_delta", "unknown trigger `event:text_delta`; expected one of request, headers"),
    ("frames:3", "unknown trigger `frames:3`"),
])
def test_bad_triggers(text, words):
    with pytest.raises(TriggerError) as caught:
        parse_trigger(text)
    assert words in str(caught.value)


ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}\n\n'
TEXT = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
STOP = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
DONE = b"data: [DONE]\n\n"
PING = b": ping\n\n"
FRAMES = [ROLE, TEXT, PING, TEXT, STOP, DONE]
ENDS = [sum(len(f) for f in FRAMES[:i + 1]) for i in range(len(FRAMES))]


def scan(at: str, mid_frame: bool = False, frames=FRAMES, step_ms: float = 0.0, dialect=OpenAIChat):
    """Feed the frames one chunk each, `step_ms` apart; the cut and the frames before it."""
    scanner = FrameScanner(dialect, parse_trigger(at), mid_frame)
    cut = None
    for i, frame in enumerate(frames):
        cut = scanner.feed(frame, i * step_ms, i * step_ms)
    return cut, scanner.frames_before, scanner.skip_to


@pytest.mark.parametrize("at, cut, before", [
    ("first_progress", ENDS[1], 2),
    ("event:text_delta:1", ENDS[1], 2),
    ("event:text_delta:2", ENDS[3], 4),
    ("event:finish:1", ENDS[4], 5),
    ("events:1", ENDS[0], 1),
    ("events:2", ENDS[1], 2),
    ("events:3", ENDS[3], 4),  # the keepalive is not a frame of the count
    ("bytes:0", ENDS[0], 1),
    ("bytes:1", ENDS[0], 1),
    (f"bytes:{ENDS[0]}", ENDS[0], 1),
    (f"bytes:{ENDS[0] + 1}", ENDS[1], 2),
    ("event:tool_input_delta:1", None, 0),
    ("events:99", None, 0),
])
def test_cut_on_a_frame_boundary(at, cut, before):
    assert scan(at)[:2] == (cut, before)


def test_terminal_cuts_before_the_terminal_and_skips_it():
    assert scan("terminal") == (ENDS[4], 5, ENDS[5])


@pytest.mark.parametrize("at, cut, before", [
    ("events:2", ENDS[0] + len(TEXT) // 2, 1),
    ("event:text_delta:2", ENDS[2] + len(TEXT) // 2, 3),
    ("bytes:10", 10, 0),
    (f"bytes:{ENDS[0] + 3}", ENDS[0] + 3, 0),
])
def test_mid_frame_cuts(at, cut, before):
    assert scan(at, mid_frame=True)[:2] == (cut, before)


def test_a_mid_frame_cut_of_a_one_byte_frame_still_moves_forward():
    scanner = FrameScanner(OpenAIChat, parse_trigger("events:1"), mid_frame=True)
    assert scanner.feed(b"data: {}\n\n", 0, 0) == max(1, len(b"data: {}\n\n") // 2)


# A comment is a frame of its one line: the blank line after `: ping` opens the next frame.
@pytest.mark.parametrize("at, cut", [("ms:0", 0), ("ms:20", ENDS[1]), ("ms:21", ENDS[2] - 1),
                                     ("ms:999", None)])
def test_ms_cuts_before_the_first_frame_that_arrives_late_enough(at, cut):
    assert scan(at, step_ms=10)[0] == cut


def test_the_cut_stays_once_found_and_bytes_count_across_chunks():
    scanner = FrameScanner(OpenAIChat, parse_trigger("events:1"))
    assert scanner.feed(ROLE[:5], 0, 0) is None
    assert scanner.feed(ROLE[5:] + TEXT, 1, 1) == ENDS[0]
    assert scanner.feed(STOP, 2, 2) == ENDS[0]
    assert (scanner.fed, scanner.frames) == (len(ROLE + TEXT + STOP), 3)


def test_a_body_dialect_only_knows_bytes():
    scanner = FrameScanner(JsonBody, parse_trigger("bytes:5"))
    assert scanner.feed(b"{\"a\"", 0, 0) is None
    assert scanner.feed(b":1}", 1, 1) == 5
    assert scanner.feed(b" ", 2, 2) == 5
    other = FrameScanner(JsonBody, parse_trigger("events:1"))
    assert other.feed(b"{}" * 50, 0, 0) is None
