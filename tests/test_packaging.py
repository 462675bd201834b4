"""The installed distribution adds one top-level name, `streamtap`, to a user's site-packages:
`proxy` and `diagnostics` are common module names and taken on the package index, so they must
never be importable at the top level of a user's environment."""

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.e2e
def test_the_wheel_installs_only_the_streamtap_name(tmp_path):
    # Build from a copy: a `build/` folder left in a checkout by an earlier build would leak into
    # the wheel, and the test must not leave one behind either.
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", "node_modules", ".hypothesis"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
                    str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("streamtap-*.whl")

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    before = set(p.name for p in site.iterdir())
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "-q", str(wheel)],
                   check=True, capture_output=True, timeout=300)
    added = set(p.name for p in site.iterdir()) - before

    assert {name for name in added if not name.endswith(".dist-info")} == {"streamtap"}
    assert len([name for name in added if name.endswith(".dist-info")]) == 1
    installed = site / "streamtap"
    assert (installed / "proxy" / "cli" / "__init__.py").is_file()
    assert (installed / "proxy" / "serve" / "body" / "tap.py").is_file()
    assert (installed / "diagnostics" / "dialects" / "openai_chat.py").is_file()
    # The starter corpus ships as package data, so replay and the fake provider work without a
    # checkout.
    assert len(list((installed / "corpus").glob("*.sample.json"))) >= 80
    # ... and nothing that needs a checkout: the corpus generator reads the repo's test fixtures.
    assert {path.name for path in (installed / "corpus").glob("*.py")} == {"__init__.py"}
    # The page and report templates ship as package data too.
    templates = {path.name for path in (installed / "diagnostics" / "views" / "templates").iterdir()}
    assert templates == {"page.html.j2", "trace.html.j2"}
    # ... and the test files `streamtap repro` copies into each repro folder.
    kit = {path.name for path in (installed / "proxy" / "replay" / "repro_kit").iterdir()}
    assert kit - {"__pycache__"} == {"test_repro.py", "repro.test.mjs"}  # pip compiles .py
    assert (installed / "proxy" / "readout" / "routes.py").is_file()
    # The subpackages resolve under the one name (no dependency is needed to find the modules).
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; "
                            "print(u.find_spec('streamtap.proxy.cli') is not None, "
                            "u.find_spec('proxy') is None, u.find_spec('diagnostics') is None)"],
                           check=True, capture_output=True, text=True, cwd=tmp_path)
    assert probe.stdout.split() == ["True", "True", "True"]
    # The pytest plugin is registered through its entry point, and the corpus is found through
    # the package (not a checkout): what a client's test suite gets from `pip install`.
    probe = subprocess.run([str(python), "-c", "\n".join([
        "from importlib.metadata import entry_points",
        "(plugin,) = entry_points(group='pytest11', name='streamtap')",
        "print(plugin.value)",
        "from streamtap.proxy.replay.bundled import bundled_samples_dir",
        "print(len(list(bundled_samples_dir().glob('*.sample.json'))), bundled_samples_dir())",
    ])], check=True, capture_output=True, text=True, cwd=tmp_path)
    entry, corpus = probe.stdout.splitlines()
    assert entry == "streamtap.proxy.testing.plugin"
    count, folder = corpus.split(" ", 1)
    assert int(count) >= 80 and folder == str(installed / "corpus")
    assert (installed / "proxy" / "testing" / "plugin.py").is_file()


@pytest.mark.e2e
def test_python_dash_m_streamtap_runs_the_command_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "streamtap", "--help"], capture_output=True,
                            text=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 0
    assert "serve" in result.stdout and "replay" in result.stdout


def test_the_bundled_corpus_is_found_through_the_package():
    from streamtap.proxy.replay.bundled import bundled_samples_dir

    names = {path.name for path in bundled_samples_dir().glob("*.sample.json")}
    assert "openai__openai-chat__terminal__1.sample.json" in names
    assert {name.split("__")[1] for name in names} >= {
        "openai-chat", "openai-responses", "anthropic-messages", "gemini", "ollama-ndjson"}
