"""The command line a newcomer meets first: version, help on every option, typo hints."""

import argparse
import subprocess
import sys

import pytest

from streamtap import __version__
from streamtap.proxy.cli import build_parser, main
from streamtap.diagnostics.faults.rules import ACTIONS
from streamtap.diagnostics.dialects.events import EVENT_KINDS
from tests.proxyproc import REPO


def streamtap(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamtap", *args], capture_output=True,
                          text=True, timeout=30, cwd=REPO)


def all_parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from all_parsers(child)


@pytest.mark.e2e
def test_version():
    result = streamtap("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"streamtap {__version__}"


@pytest.mark.e2e
def test_no_command_lists_every_command_and_what_it_is_for():
    result = streamtap()
    assert result.returncode == 0
    for name, sub in all_commands():
        line = next(line for line in result.stdout.splitlines() if line.strip().startswith(name))
        assert len(line.split()) > 1, f"`{name}` is listed without saying what it is for"


def all_commands():
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


def test_every_option_has_help_text():
    missing = [f"{parser.prog} {'/'.join(action.option_strings) or action.dest}"
               for parser in all_parsers(build_parser()) for action in parser._actions
               if not action.help and not isinstance(action, argparse._SubParsersAction)]
    assert missing == []


@pytest.mark.e2e
def test_fault_add_help_lists_actions_and_event_kinds():
    text = streamtap("fault", "add", "--help").stdout
    flat = " ".join(text.split())
    for action in ACTIONS:
        assert action in flat
    for kind in EVENT_KINDS:
        assert kind in flat
    assert "--name" in flat and "--replace" in flat


@pytest.mark.parametrize("args, hint", [
    (["fault", "add", "--action", "reset", "--tims", "3"], "did you mean `--times`?"),
    (["fault", "add", "--acton", "reset"], "did you mean `--action`?"),
    (["serve", "--prot", "0"], "did you mean `--port`?"),
    (["samples", "matrix", "--fromat", "md", "samples"], "did you mean `--format`?"),
])
def test_unknown_flag_gets_did_you_mean(args, hint, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    typo = next(arg for arg in args if arg.startswith("--") and arg not in hint
                and arg not in ("--action", "--format"))
    assert f"unknown option `{typo}`; {hint}" in err


def test_abbreviations_and_negative_numbers_are_not_typos(capsys):
    from streamtap.proxy.cli import unknown_option

    parser = build_parser()
    assert unknown_option(parser, ["serve", "--por", "0"]) is None
    assert unknown_option(parser, ["serve", "--port", "-1"]) is None
    assert unknown_option(parser, ["fault", "add", "--action", "reset", "--at",
                                   "event:text_delta:3"]) is None
