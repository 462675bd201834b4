"""docs/reading.md's "Failure rates" commands, run verbatim in a fresh folder, print the output it
shows: the same counts and rates, the same columns and notes (timings differ run to run, their shape
does not)."""

import re

import pytest

from tests.readme import code_blocks, run_verbatim, section, shell_blocks

TITLE = "Failure rates: streamtap stats"
TIME = re.compile(r"\d+(?:\.\d+)? m?s")


def _shape(text: str) -> list[list[str]]:
    """Each line's cells (split at 2+ spaces), times replaced by `T`."""
    return [re.split(r"\s{2,}", TIME.sub("T", line).strip()) for line in text.splitlines()]


@pytest.mark.e2e
def test_failure_rates_commands_print_what_readme_shows(tmp_path):
    commands = shell_blocks(TITLE)
    assert commands == ["streamtap demo", "streamtap stats --session demo"]
    outputs = run_verbatim(commands, tmp_path)
    (shown,) = code_blocks(TITLE, "text")
    assert _shape(outputs[1]) == _shape(shown + "\n")
    assert "openai         4  1 (25.0%)  1 (25.0%)" in shown  # counts compared as they are


def test_failure_rates_names_the_bench_and_its_figure():
    text = " ".join(section(TITLE).split())
    assert "`python bench/stats_bench.py`" in text
    assert re.search(r"100,000 index lines it takes [\d.]+ s", text)
