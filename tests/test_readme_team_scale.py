"""docs/otlp-and-metrics.md's "Team scale" section: its config lines load, and its commands run
verbatim (the screenshot command runs in tests/test_phoenix_e2e.py, next to the Phoenix it
needs)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from streamtap.proxy.config import from_mapping
from tests.otlpsink import OtlpSink
from tests.readme import code_blocks, shell_blocks
from tests.test_lifecycle import read_lines
from tests.support import port_free
from tests.test_otlp_backfill import trace_dir_with_records

TITLE = "Team scale"
REPO = Path(__file__).resolve().parent.parent
SCREENSHOT = "python -m tests.phoenix_screenshot docs/phoenix-spans.png"


def shell_env() -> dict[str, str]:
    """The project's venv first on PATH, so `streamtap` and `python` are the ones under test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def command(prefix: str) -> str:
    found = [line for line in shell_blocks(TITLE) if line.startswith(prefix)]
    assert len(found) == 1, f"README's {TITLE} section should show one `{prefix}` command"
    return found[0]


def test_the_section_shows_exactly_these_commands():
    assert [line.split(" --")[0] for line in shell_blocks(TITLE)] == [
        "streamtap serve", "streamtap export", "python bench/otlp_bench.py",
        "python bench/otlp_bench.py", SCREENSHOT]


def test_every_config_block_loads_and_names_its_backend():
    urls = []
    for block in code_blocks(TITLE, "toml"):
        config = from_mapping(tomllib.loads(block))
        urls.append(config.export.otlp.url)
    assert urls == ["http://127.0.0.1:6006/v1/traces", "http://127.0.0.1:4318/v1/traces",
                    "https://cloud.langfuse.com/api/public/otel/v1/traces",
                    "https://otlp-gateway-prod-eu-west-2.grafana.net/otlp/v1/traces"]
    (collector,) = code_blocks(TITLE, "yaml")
    assert "endpoint: 127.0.0.1:4318" in collector and "exporters: [otlp/jaeger, otlp/tempo]" \
        in collector




@pytest.mark.e2e
def test_serve_with_export_runs_verbatim(tmp_path):
    if not port_free(8787):
        pytest.skip("port 8787 (the command's default) is in use on this machine")
    env = shell_env()
    argv = shlex.split(command("streamtap serve"))
    argv[0] = shutil.which(argv[0], path=env["PATH"])  # as the shell would find it
    process = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        banner = read_lines(process.stdout, "otlp:", timeout=30)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    assert "listening on http://127.0.0.1:8787" in banner
    assert "otlp: every record also goes as a span to http://127.0.0.1:6006/v1/traces" in banner
    assert process.returncode == 0


@pytest.mark.e2e
def test_backfill_runs_verbatim(tmp_path):
    if not port_free(6006):
        pytest.skip("port 6006 (the command's Phoenix port) is in use on this machine")
    trace_dir = trace_dir_with_records(tmp_path)
    trace_dir.rename(tmp_path / "streamtap-traces")
    sink = OtlpSink(6006).start()
    try:
        result = subprocess.run(command("streamtap export"), shell=True, cwd=tmp_path,
                                env=shell_env(), capture_output=True, text=True, timeout=120)
    finally:
        sink.stop()
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("exported 4 of 4 record(s) as spans; 0 dropped")
    assert len(sink.spans()) == 4


@pytest.mark.e2e
def test_the_bench_commands_run_verbatim_and_print_their_figures():
    for line in [c for c in shell_blocks(TITLE) if c.startswith("python bench/otlp_bench.py")]:
        result = subprocess.run(line, shell=True, cwd=REPO, env=shell_env(),
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        figures = json.loads(result.stdout.strip().splitlines()[-1])
        assert figures["exported"] == figures["records"] == 500 and figures["dropped"] == 0
        assert figures["spans_per_s"] > 0 and figures["cpu_ms_per_span"] > 0
