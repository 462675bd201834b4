"""Defaults have one source, the dataclasses of proxy/config.py: every default config.example.toml
shows and every default `streamtap serve --help` (and the other commands' help about serve's
options) states is that one, so neither can drift when a default changes."""

import argparse
import re
import tomllib
from dataclasses import fields, is_dataclass, replace
from pathlib import Path

import pytest

from streamtap.proxy.cli import build_parser
from streamtap.proxy.config import Config, default_of, default_proxy_url, load_file

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config.example.toml"
# Tables of config.example.toml that show examples, not defaults: its routes are ones a user might
# add (the built-in ones need no config), its fault rule is commented out.
EXAMPLES_NOT_DEFAULTS = {"routes", "faults"}
# A help text states a default as `(default VALUE` or `(default "VALUE"`.
SHOWN = re.compile(r"\(default \"?([^\s;),\"]+)")


def option_keys(instance: object, prefix: str = "") -> list[str]:
    """Every option's dotted key (`port`, `watchdog.idle_timeout_ms`, `export.otlp.batch_size`)."""
    keys = []
    for item in fields(instance):
        value = getattr(instance, item.name)
        if is_dataclass(value):
            keys += option_keys(value, f"{prefix}{item.name}.")
        else:
            keys.append(prefix + item.name)
    return keys


def shown_in_example(table: dict, prefix: str = "") -> dict[str, object]:
    shown = {}
    for key, value in table.items():
        if not prefix and key in EXAMPLES_NOT_DEFAULTS:
            continue
        if isinstance(value, dict) and key != "headers":
            shown |= shown_in_example(value, f"{prefix}{key}.")
        else:
            shown[prefix + key] = value
    return shown


def as_config_value(value: object) -> object:
    """A TOML value as the dataclass holds it: arrays are tuples, a table of headers pairs."""
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, dict):
        return tuple(value.items())
    return value


def test_config_example_shows_every_option_with_its_default():
    shown = shown_in_example(tomllib.loads(EXAMPLE.read_text()))
    options = [key for key in option_keys(Config()) if key not in EXAMPLES_NOT_DEFAULTS]
    assert sorted(shown) == sorted(options), "config.example.toml should show every option once"
    wrong = {key: (value, default_of(key)) for key, value in shown.items()
             if as_config_value(value) != default_of(key)}
    assert not wrong, f"config.example.toml shows a default that is not the config's: {wrong}"


def test_config_example_loads_as_the_defaults_plus_its_example_routes():
    loaded, defaults = load_file(EXAMPLE), Config()
    assert set(loaded.routes) - set(defaults.routes) == {"local-vllm", "my-gateway"}
    assert {name: loaded.routes[name] for name in defaults.routes} == defaults.routes
    assert replace(loaded, routes=defaults.routes) == defaults


def subcommand(name: str) -> argparse.ArgumentParser:
    commands = next(action for action in build_parser()._actions
                    if isinstance(action, argparse._SubParsersAction))
    return commands.choices[name]


def help_of(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each option's help as --help prints it (%(default)s filled in), by its dest."""
    formatter = parser._get_formatter()
    return {action.dest: formatter._expand_help(action) for action in parser._actions
            if action.help and action.dest != "help"}


def config_key(dest: str) -> str | None:
    for key in option_keys(Config()):
        if key.rsplit(".", 1)[-1] == dest:
            return key
    return None


def test_every_default_serve_help_states_is_the_configs():
    helps = help_of(subcommand("serve"))
    stated = {dest: SHOWN.search(text) for dest, text in helps.items()}
    checked = 0
    for dest, match in stated.items():
        key = config_key(dest)
        if match is None or key is None:
            continue
        assert match.group(1) == str(default_of(key)), f"serve --{dest}: {helps[dest]!r}"
        checked += 1
    # Every option with a default worth stating states it (flags that are off unless given,
    # and options that are empty unless given, need not).
    silent = [dest for dest, match in stated.items()
              if match is None and config_key(dest) is not None
              and default_of(config_key(dest)) not in (False, "", None)]
    assert not silent, f"serve options that do not state their default: {silent}"
    assert checked >= 7


@pytest.mark.parametrize("command", ["ls", "show", "stats", "report", "export", "samples",
                                     "probe", "repro", "demo"])
def test_every_command_that_reads_traces_states_serves_default_trace_dir(command):
    parser = subcommand(command)
    if command == "samples":
        parser = next(action for action in parser._actions
                      if isinstance(action, argparse._SubParsersAction)).choices["export"]
    match = SHOWN.search(help_of(parser)["trace_dir"])
    assert match and match.group(1) == default_of("trace_dir")


@pytest.mark.parametrize("command", ["tail", "fault"])
def test_the_proxy_a_command_talks_to_is_where_serve_listens_by_default(command):
    parser = subcommand(command)
    if command == "fault":
        parser = next(action for action in parser._actions
                      if isinstance(action, argparse._SubParsersAction)).choices["list"]
    assert parser.get_default("proxy") == default_proxy_url() == "http://127.0.0.1:8787"
    assert SHOWN.search(help_of(parser)["proxy"]).group(1) == default_proxy_url()
