"""README's quick start is a contract: CI runs exactly its test command."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def quick_start_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_quick_start_has_a_serve_and_a_test_command():
    serve, test = quick_start_commands()[:2]
    assert "pip install ." in serve and serve.endswith("streamtap serve")
    assert "pip install '.[test]'" in test and "pytest" in test


def test_ci_runs_the_readme_test_command():
    test_command = quick_start_commands()[1]
    assert test_command in (REPO / ".ci" / "run").read_text()


def test_example_config_loads_and_documents_every_option():
    from dataclasses import fields

    from streamtap.proxy.config import Config, Watchdog, load_file

    config = load_file(REPO / "config.example.toml")
    assert config.routes["my-gateway"].dialect == "openai-chat"
    text = (REPO / "config.example.toml").read_text()
    for option in [f.name for f in fields(Config)] + [f.name for f in fields(Watchdog)]:
        # `#[[faults]]`: the example rule is commented out, so it arms nothing
        assert re.search(rf"^#?\[{{0,2}}{option}\]{{0,2}}( =|$)", text, re.M), f"{option} is not documented"


def test_example_config_documents_every_fault_key():
    from streamtap.proxy.faults.rules import _RULE_KEYS

    text = (REPO / "config.example.toml").read_text()
    for key in _RULE_KEYS:
        assert re.search(rf"^#{key} =", text, re.M), f"fault key {key} is not documented"


def test_example_fault_rule_arms_once_uncommented(tmp_path):
    from streamtap.proxy.config import load_file

    text = (REPO / "config.example.toml").read_text()
    assert load_file(REPO / "config.example.toml").faults == ()
    uncommented = tmp_path / "armed.toml"
    uncommented.write_text(re.sub(r"^#(\[\[faults\]\]|\w+ =)", r"\1", text, flags=re.M))
    [rule] = load_file(uncommented).faults
    assert (rule.name, rule.action, rule.at) == ("reset-mid-tool-call", "reset",
                                                 "event:tool_input_delta:5")
